"""A scheduler running in the test's event loop beside the root conftest's apistore, and
`ClusterWatch`, which lets a test await what the cluster shows (a pod bound, a condition,
an event) instead of polling for it."""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import pytest

from drasim.common.api import core_v1, resource_v1
from drasim.common.bus.client import Bus
from drasim.common.client import ApiClient
from drasim.common.informer import Informer
from drasim.controllers.server import ControllerManager
from drasim.kubelet.run import KubeletProcess
from drasim.scheduler.server import Scheduler

T = TypeVar("T")

TIMEOUT = 10.0


class ClusterWatch:
    """Informers on pods, events and ResourceClaims; `wait_for` re-checks its predicate
    after every change they see."""

    def __init__(self, api: ApiClient) -> None:
        self._changed = asyncio.Event()
        self.pods = self._informer(api, core_v1.Pod)
        self.events = self._informer(api, core_v1.Event)
        self.claims = self._informer(api, resource_v1.ResourceClaim)

    def _informer(self, api: ApiClient, type_: type[Any]) -> Informer[Any]:
        return Informer(
            api,
            type_,
            on_add=lambda _: self._notify(),
            on_update=lambda _old, _new: self._notify(),
            on_delete=lambda _: self._notify(),
        )

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def start(self) -> None:
        for informer in (self.pods, self.events, self.claims):
            informer.start()
            await informer.wait_synced(TIMEOUT)

    async def stop(self) -> None:
        for informer in (self.pods, self.events, self.claims):
            await informer.stop()

    async def wait_for(self, predicate: Callable[[], T], timeout: float = TIMEOUT) -> T:
        """The first truthy value of `predicate`, evaluated now and after each change."""
        async with asyncio.timeout(timeout):
            while not (result := predicate()):
                await self._changed.wait()
            return result

    def pod(self, name: str, namespace: str = "default") -> core_v1.Pod:
        pod = self.pods.get(name, namespace)
        assert pod is not None, f"pod {namespace}/{name} not seen"
        return pod

    async def bound(self, name: str, namespace: str = "default") -> str:
        """Wait until the pod is bound; its node."""
        return await self.wait_for(
            lambda: (p := self.pods.get(name, namespace)) is not None and p.spec.node_name
        )

    async def unschedulable(self, name: str, namespace: str = "default") -> core_v1.PodCondition:
        """Wait for the pod's PodScheduled=False condition."""

        def condition() -> core_v1.PodCondition | None:
            pod = self.pods.get(name, namespace)
            for cond in pod.status.conditions if pod is not None else []:
                if cond.type == "PodScheduled" and cond.status == "False":
                    return cond
            return None

        return await self.wait_for(condition)

    def events_of(self, name: str, reason: str) -> list[core_v1.Event]:
        return [
            e for e in self.events.list() if e.involved_object.name == name and e.reason == reason
        ]

    def special_claims(self, pod: core_v1.Pod) -> list[resource_v1.ResourceClaim]:
        """Claims controlled by the pod, as its special claim is."""
        return [
            c
            for c in self.claims.list()
            if (ref := c.metadata.controller_ref()) is not None and ref.uid == pod.metadata.uid
        ]


@contextlib.asynccontextmanager
async def control_plane(
    api: ApiClient, kubelet: KubeletProcess, controllers: ControllerManager
) -> AsyncIterator[ClusterWatch]:
    """`kubelet`, a scheduler and `controllers` running beside the apistore `api` talks to,
    and a watch of what they do; all stopped on leaving."""
    scheduler = Scheduler(ApiClient(api.bus, actor="system:kube-scheduler"), rng=random.Random(0))
    watch = ClusterWatch(api)
    await kubelet.start()
    try:
        await scheduler.start(timeout=15)
        await controllers.start()
        await watch.start()
        yield watch
    finally:
        await watch.stop()
        await controllers.stop()
        await scheduler.stop()
        await kubelet.stop()


@pytest.fixture
async def watch(api: ApiClient) -> AsyncIterator[ClusterWatch]:
    w = ClusterWatch(api)
    await w.start()
    yield w
    await w.stop()


StartScheduler = Callable[[], Awaitable[Scheduler]]


@pytest.fixture
async def start_scheduler(api: ApiClient, bus: Bus) -> AsyncIterator[StartScheduler]:
    """Start a scheduler once the test has created what it should find on start; every
    scheduler started is stopped at the end."""
    started: list[Scheduler] = []

    async def start() -> Scheduler:
        sched = Scheduler(ApiClient(bus, actor="system:kube-scheduler"), rng=random.Random(0))
        started.append(sched)
        await sched.start(timeout=TIMEOUT)
        return sched

    yield start
    for sched in started:
        await sched.stop()
