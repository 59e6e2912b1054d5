"""Which class serves an extended resource name when several declare it (upstream
`extendedresourcecache.go` since kubernetes#141110),
seen in a running scheduler: the newest class wins, and renaming or deleting it hands the
name to the next best class, whose devices a waiting pod then gets."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime

from drasim.common.api import resource_v1
from drasim.common.client import ApiClient
from tests.scheduler.e2e.conftest import ClusterWatch, StartScheduler
from tests.scheduler.e2e.test_extended_resources import (
    GPU,
    NODE_RESOURCES,
    device_class,
    requests_of,
    resource_slice,
    special_claim,
)
from tests.scheduler.wrappers import make_node, make_pod

OLD_DRIVER = "old.example.com"
NEW_DRIVER = "new.example.com"


async def create_newer(
    api: ApiClient, older: resource_v1.DeviceClass, cls: resource_v1.DeviceClass
) -> resource_v1.DeviceClass:
    """Create `cls` with a creation time later than `older`'s. Timestamps have whole
    seconds, and at equal times the smaller name would win instead."""
    created = datetime.strptime(older.metadata.creation_timestamp or "", "%Y-%m-%dT%H:%M:%SZ")
    await asyncio.sleep(max(0.0, created.replace(tzinfo=UTC).timestamp() + 1 - time.time()))
    newer = await api.create(cls)
    assert (newer.metadata.creation_timestamp or "") > (older.metadata.creation_timestamp or "")
    return newer


async def test_class_conflict_newer_class_wins(
    api: ApiClient, watch: ClusterWatch, start_scheduler: StartScheduler
) -> None:
    older = await api.create(device_class("gpu-a", GPU))
    await create_newer(api, older, device_class("gpu-b", GPU))
    await api.create(make_node("dra-node").capacity(NODE_RESOURCES).obj())
    await api.create(resource_slice("dra-node", 2, driver="gpu.example.com"))
    await start_scheduler()
    await api.create(make_pod("p").limits({GPU: "1"}).obj())
    claim = await special_claim(watch, "p")
    assert requests_of(claim) == [("container-0-request-0", "gpu-b", "ExactCount", 1)]


async def migration_cluster(api: ApiClient) -> resource_v1.DeviceClass:
    """`gpu-old` and the newer `gpu-new` both declare example.com/gpu; only gpu-old's
    driver has devices. The newer class wins the name, so pods asking for it wait."""
    older = await api.create(device_class("gpu-old", GPU, driver=OLD_DRIVER))
    newer = await create_newer(api, older, device_class("gpu-new", GPU, driver=NEW_DRIVER))
    await api.create(make_node("dra-node").capacity(NODE_RESOURCES).obj())
    await api.create(resource_slice("dra-node", 2, driver=OLD_DRIVER))
    return newer


async def test_renaming_the_winner_promotes_the_next_class_and_requeues(
    api: ApiClient, watch: ClusterWatch, start_scheduler: StartScheduler
) -> None:
    newer = await migration_cluster(api)
    await start_scheduler()
    await api.create(make_pod("waiting").limits({GPU: "1"}).obj())
    condition = await watch.unschedulable("waiting")
    assert "cannot allocate all claims" in condition.message

    # The DeviceClass update is the event that requeues the pod (DynamicResources
    # registers DeviceClass Add|Update); the name now resolves to gpu-old.
    newer.spec.extended_resource_name = "example.com/other-gpu"
    await api.update(newer)
    claim = await special_claim(watch, "waiting")
    assert requests_of(claim) == [("container-0-request-0", "gpu-old", "ExactCount", 1)]
    assert watch.pod("waiting").spec.node_name == "dra-node"


async def test_deleting_the_winner_promotes_the_next_class(
    api: ApiClient, watch: ClusterWatch, start_scheduler: StartScheduler
) -> None:
    newer = await migration_cluster(api)
    await start_scheduler()
    await api.create(make_pod("waiting").limits({GPU: "1"}).obj())
    await watch.unschedulable("waiting")

    # Upstream registers no DeviceClass Delete event: the pod waits for its next attempt
    # (another event, or the unschedulable pods' periodic flush). A new ResourceSlice is
    # such an event; the attempt it brings must see gpu-old promoted.
    await api.delete(resource_v1.DeviceClass, newer.metadata.name)
    await api.create(resource_slice("dra-node", 1, driver="unrelated.example.com"))
    claim = await special_claim(watch, "waiting")
    assert requests_of(claim) == [("container-0-request-0", "gpu-old", "ExactCount", 1)]


async def test_deleting_a_losing_class_keeps_the_winner(
    api: ApiClient, watch: ClusterWatch, start_scheduler: StartScheduler
) -> None:
    older = await api.create(device_class("gpu-old", GPU, driver=OLD_DRIVER))
    await create_newer(api, older, device_class("gpu-new", GPU, driver=NEW_DRIVER))
    await api.create(make_node("dra-node").capacity(NODE_RESOURCES).obj())
    await api.create(resource_slice("dra-node", 2, driver=NEW_DRIVER))
    await start_scheduler()
    await api.delete(resource_v1.DeviceClass, "gpu-old")
    await api.create(make_pod("p").limits({GPU: "1"}).obj())
    claim = await special_claim(watch, "p")
    assert requests_of(claim) == [("container-0-request-0", "gpu-new", "ExactCount", 1)]
