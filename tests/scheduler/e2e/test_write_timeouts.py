"""PreBind and Bind writes that the apistore applied but answered too late for the
scheduler's client: the outcome is unknown to the scheduler, and it must still converge
with one special claim per pod and no device allocated twice. The apistore's fault plan
holds back the answer to the chosen write (`delay_reply_seconds`)."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from drasim.apistore.faults import FaultPlan, FaultRule
from drasim.common.api import resource_v1
from drasim.common.bus.client import Bus
from drasim.common.client import ApiClient
from drasim.scheduler.server import Scheduler
from tests import builders
from tests.scheduler.e2e.conftest import TIMEOUT, ClusterWatch
from tests.scheduler.e2e.test_extended_resources import (
    GPU,
    allocated_devices,
    create_kep_cluster,
    special_claim,
)
from tests.scheduler.wrappers import make_pod

CLIENT_TIMEOUT = 1.0  # the scheduler's; the held-back answers come after 2.5 s


@pytest.fixture
async def impatient_scheduler(bus: Bus) -> AsyncIterator[Callable[[], Awaitable[Scheduler]]]:
    started: list[Scheduler] = []

    async def start() -> Scheduler:
        api = ApiClient(bus, actor="system:kube-scheduler", timeout=CLIENT_TIMEOUT)
        sched = Scheduler(api, rng=random.Random(0))
        started.append(sched)
        await sched.start(timeout=TIMEOUT)
        return sched

    yield start
    for sched in started:
        await sched.stop()


def hold_back(server: object, resource: str, verb: str, subresource: str = "") -> FaultRule:
    rule = FaultRule(resource=resource, verb=verb, subresource=subresource, delay_reply_seconds=2.5)
    server.core.fault_plan = FaultPlan(rules=[rule])  # type: ignore[attr-defined]
    return rule


@pytest.mark.parametrize(
    ("resource", "verb", "subresource"),
    [
        ("resourceclaims", "create", ""),
        ("resourceclaims", "update", ""),  # the finalizer
        ("resourceclaims", "update", "status"),  # allocation and reservedFor
        ("pods", "patch", "status"),  # extendedResourceClaimStatus
        ("pods", "bind", ""),
    ],
)
async def test_a_write_answered_too_late_converges(
    server: object,
    api: ApiClient,
    watch: ClusterWatch,
    impatient_scheduler: Callable[[], Awaitable[Scheduler]],
    resource: str,
    verb: str,
    subresource: str,
) -> None:
    await create_kep_cluster(api, dra_devices=2, dp_gpus=0)
    rule = hold_back(server, resource, verb, subresource)
    sched = await impatient_scheduler()
    names = ["p0", "p1"]
    for name in names:
        await api.create(make_pod(name).limits({GPU: "1"}).obj())
    for name in names:
        await special_claim(watch, name)
    assert rule.seen >= 1  # the held-back write happened

    # Let every binding cycle (and the Unreserve of a failed one) finish, then make sure
    # the watch has seen every claim event written so far: a claim created after them.
    while sched.binding_tasks:
        await asyncio.gather(*sched.binding_tasks, return_exceptions=True)
    barrier = await api.create(builders.make_claim("barrier"))
    await watch.wait_for(lambda: watch.claims.get("barrier", "default") is not None)
    await api.delete(resource_v1.ResourceClaim, barrier.metadata.name, namespace="default")

    special = [c for c in watch.claims.list() if c.metadata.name != "barrier"]
    assert len(special) == 2  # one per pod: a late create's claim is removed as a leftover
    by_name = {c.metadata.name: c for c in special}
    for name in names:
        pod = watch.pod(name)
        assert pod.spec.node_name == "dra-node"
        status = pod.status.extended_resource_claim_status
        assert status is not None
        claim = by_name[status.resource_claim_name]  # the claim the pod names exists
        assert claim.status.allocation is not None
        assert [r.uid for r in claim.status.reserved_for] == [pod.metadata.uid]
    devices = allocated_devices(watch)
    assert len(devices) == len(set(devices)) == 2
