"""Controllers against a real in-process apistore (`server`, `api` from tests/conftest.py);
the `manager` fixture runs them all.

Tests await the cluster's state through `Changes.until`, which re-checks a condition on
every event the controller manager's informers deliver, so nothing sleeps or polls.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any, TypeVar

import pytest

from drasim.common import codec, errors
from drasim.common.api import core_v1
from drasim.common.bus.client import Bus
from drasim.common.client import ApiClient
from drasim.common.informer import Informer
from drasim.controllers import ControllerManager

T = TypeVar("T")

TIMEOUT = 10.0


class Changes:
    """Wakes its waiters on every event of the given informers.

    Its handlers come after the controllers' (added later), so a condition checked here
    sees what the controllers have already queued for the same event.
    """

    def __init__(self, *informers: Informer[Any]) -> None:
        self._changed = asyncio.Event()
        for informer in informers:
            informer.add_handlers(
                on_add=self._poke, on_update=lambda _old, new: self._poke(new), on_delete=self._poke
            )

    def _poke(self, _obj: Any) -> None:
        self._changed.set()

    async def until(self, condition: Callable[[], T], timeout: float = TIMEOUT) -> T:
        """The first truthy value of `condition()`, re-checked after each event."""
        async with asyncio.timeout(timeout):
            while not (result := condition()):
                self._changed.clear()
                await self._changed.wait()
        return result


class FakeKubelet:
    """Marks every new pod Running and Ready, and finishes graceful deletions of bound pods
    (the kubelet's grace-period-0 delete), as the real one would."""

    def __init__(self, api: ApiClient, pods: Informer[core_v1.Pod]) -> None:
        self.api = api
        self._tasks: set[asyncio.Task[None]] = set()
        pods.add_handlers(on_add=self._on_pod, on_update=lambda _old, new: self._on_pod(new))

    def _on_pod(self, pod: core_v1.Pod) -> None:
        if pod.metadata.deletion_timestamp is not None and pod.spec.node_name:
            self._spawn(self._finish_deletion(pod))
        elif pod.metadata.deletion_timestamp is None and pod.status.phase == "Pending":
            self._spawn(run_pod(self.api, pod))

    def _spawn(self, coroutine: Any) -> None:
        task = asyncio.create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _finish_deletion(self, pod: core_v1.Pod) -> None:
        with contextlib.suppress(errors.NotFound):
            await self.api.delete(
                core_v1.Pod,
                pod.metadata.name,
                namespace=pod.metadata.namespace,
                grace_period_seconds=0,
                uid=pod.metadata.uid,
            )

    async def stop(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


async def run_pod(api: ApiClient, pod: core_v1.Pod, *, phase: str = "Running") -> core_v1.Pod:
    """What a kubelet reports for a started pod: the phase, and Ready while it runs."""
    conditions = [codec.to_builtins(c) for c in pod.status.conditions if c.type != "Ready"]
    conditions.append({"type": "Ready", "status": "True" if phase == "Running" else "False"})
    with contextlib.suppress(errors.NotFound):
        return await api.patch(
            core_v1.Pod,
            pod.metadata.name,
            {"status": {"phase": phase, "conditions": conditions}},
            namespace=pod.metadata.namespace,
            subresource="status",
        )
    return pod


@contextlib.asynccontextmanager
async def running_controllers(fresh: Any, **options: Any) -> AsyncIterator[ControllerManager]:
    """A controller manager on the test's bus (`ControllerManager`'s `options`), started
    with its caches synced."""
    controllers_bus = await Bus.connect(fresh.nats_url, prefix=fresh.prefix, name="controllers")
    manager = ControllerManager(controllers_bus, **options)
    try:
        await asyncio.wait_for(manager.start(), TIMEOUT)
        yield manager
    finally:
        await manager.stop()
        await controllers_bus.close()


@pytest.fixture
async def manager(server, fresh) -> AsyncIterator[ControllerManager]:
    async with running_controllers(fresh) as manager:
        yield manager


@pytest.fixture
def changes(manager: ControllerManager) -> Changes:
    return Changes(*manager.informers)


@pytest.fixture
async def kubelet(api, manager: ControllerManager) -> AsyncIterator[FakeKubelet]:
    fake = FakeKubelet(api, manager.pods)
    yield fake
    await fake.stop()


@pytest.fixture
async def seen(api: ApiClient) -> AsyncIterator[Informer[core_v1.Event]]:
    """Every Event written, as a watch sees them."""
    informer = Informer(api, core_v1.Event)
    informer.start()
    try:
        await informer.wait_synced(TIMEOUT)
        yield informer
    finally:
        await informer.stop()


@pytest.fixture
def watch(manager: ControllerManager, seen: Informer[core_v1.Event]) -> Changes:
    """Wakes on changes to the controllers' objects and to Events."""
    return Changes(*manager.informers, seen)


def about(seen: Informer[core_v1.Event], kind: str, name: str, reason: str) -> list[core_v1.Event]:
    return sorted(
        (
            e
            for e in seen.list()
            if (e.involved_object.kind, e.involved_object.name, e.reason) == (kind, name, reason)
        ),
        key=lambda e: (e.metadata.creation_timestamp or "", e.metadata.name),
    )
