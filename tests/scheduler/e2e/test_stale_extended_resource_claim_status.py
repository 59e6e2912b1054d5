"""A pod whose binding failed after PreBind had named its special claim in
`status.extendedResourceClaimStatus`, and which then lands on a device-plugin node: that
claim is gone (Unreserve or PostFilter deleted it), so the status must not name it when the
pod binds, or the kubelet retries "ResourceClaim not found" forever (issue #15, defect 2).
KEP-5004's example cluster with its kubelets: the DRA node takes the first attempt, the
device-plugin node the next."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from drasim.apistore.faults import FaultPlan, FaultRule
from drasim.apistore.server import ApiServer
from drasim.cli import demo
from drasim.common import cluster_file
from drasim.common.api import core_v1
from drasim.common.client import ApiClient
from drasim.kubelet.run import KubeletProcess
from drasim.scheduler.server import Scheduler
from tests.scheduler.e2e.conftest import ClusterWatch, StartScheduler
from tests.scheduler.wrappers import make_pod

DRA_NODE, DP_NODE = "dra-gpu-0", "dp-gpu-0"
GPU = "example.com/gpu"


@pytest.fixture
async def kubelet(api: ApiClient, tmp_path: Path) -> AsyncIterator[KubeletProcess]:
    """The KEP example's nodes and DeviceClass; the device-plugin node starts cordoned,
    so that the first attempt of a pod goes to the DRA node."""
    cluster = cluster_file.load()
    for device_class in cluster.spec.device_classes:
        await api.create(device_class)
    kubelet = KubeletProcess(api=api, nodes=cluster.nodes, state_dir=tmp_path / "nodes")
    await kubelet.start()
    await cordon(api, DP_NODE, True)
    yield kubelet
    await kubelet.stop()


async def cordon(api: ApiClient, node: str, unschedulable: bool) -> None:
    await api.patch(core_v1.Node, node, {"spec": {"unschedulable": unschedulable}})


async def move_to_the_device_plugin_node(api: ApiClient) -> None:
    """From now on only the device-plugin node fits."""
    await cordon(api, DRA_NODE, True)
    await cordon(api, DP_NODE, False)


async def runs_with_the_device_plugin(watch: ClusterWatch, name: str) -> None:
    """The pod runs on the device-plugin node with its GPU from the device plugin, its
    status naming no claim, and the kubelet never failed to prepare its resources."""

    def settled() -> bool:
        pod = watch.pods.get(name, "default")
        running = pod is not None and pod.status.phase == "Running"
        return running or bool(watch.events_of(name, "FailedPrepareDynamicResources"))

    await watch.wait_for(settled)
    assert [e.message for e in watch.events_of(name, "FailedPrepareDynamicResources")] == []
    pod = watch.pod(name)
    assert (pod.spec.node_name, pod.status.phase) == (DP_NODE, "Running")
    assert pod.status.extended_resource_claim_status is None
    assert demo.describe_devices(pod)[0].endswith("devices from a device plugin")
    assert watch.special_claims(pod) == []


async def test_binding_write_fails_then_the_pod_binds_to_a_device_plugin_node(
    server: ApiServer,
    api: ApiClient,
    kubelet: KubeletProcess,
    watch: ClusterWatch,
    start_scheduler: StartScheduler,
) -> None:
    rule = FaultRule(resource="pods", verb="bind", code=500)
    server.core.fault_plan = FaultPlan(rules=[rule])
    sched: Scheduler = await start_scheduler()
    # Before the failing bind answers, only the device-plugin node is left, and the
    # scheduler knows it: the retry (after a backoff) goes there.
    [binder] = sched.framework.bind_plugins
    bind = binder.bind
    dra_node_cordoned = asyncio.Event()

    def on_node_update(_old: core_v1.Node, new: core_v1.Node) -> None:
        if new.metadata.name == DRA_NODE and new.spec.unschedulable:
            dra_node_cordoned.set()

    sched.node_informer.add_handlers(on_update=on_node_update)

    async def bind_after_moving(*args: Any) -> Any:
        if rule.seen == 0:
            await move_to_the_device_plugin_node(api)
            await dra_node_cordoned.wait()
        return await bind(*args)

    binder.bind = bind_after_moving  # type: ignore[method-assign]

    await api.create(make_pod("p").limits({GPU: "1"}).obj())

    await runs_with_the_device_plugin(watch, "p")
    assert rule.seen == 2  # the binding to the DRA node failed, the next one did not


async def test_scheduler_killed_mid_binding_then_the_pod_binds_to_a_device_plugin_node(
    api: ApiClient,
    kubelet: KubeletProcess,
    watch: ClusterWatch,
    start_scheduler: StartScheduler,
) -> None:
    first = await start_scheduler()
    [binder] = first.framework.bind_plugins
    never = asyncio.Event()

    async def bind_never(*args: Any) -> None:
        await never.wait()  # the process dies before it binds

    binder.bind = bind_never  # type: ignore[method-assign]
    await api.create(make_pod("p").limits({GPU: "1"}).obj())
    status = await watch.wait_for(
        lambda: (p := watch.pods.get("p", "default")) and p.status.extended_resource_claim_status
    )
    assert watch.claims.get(status.resource_claim_name, "default") is not None
    await first.stop()  # cancels the binding: no Unreserve runs, as after kill -9
    await move_to_the_device_plugin_node(api)

    await start_scheduler()

    # PostFilter deletes the claim the pod's status names, then the pod goes elsewhere.
    await runs_with_the_device_plugin(watch, "p")
    assert watch.claims.get(status.resource_claim_name, "default") is None


async def test_a_failed_deletion_of_a_leftover_claim_is_tried_again_after_backoff(
    server: ApiServer,
    api: ApiClient,
    kubelet: KubeletProcess,
    watch: ClusterWatch,
    start_scheduler: StartScheduler,
) -> None:
    """As above, but PostFilter's deletion of the leftover claim fails (the apistore went
    away): no event will come of a deletion that did not happen, so the pod must be tried
    again after a backoff rather than wait among the unschedulable pods."""
    first = await start_scheduler()
    [binder] = first.framework.bind_plugins
    never = asyncio.Event()

    async def bind_never(*args: Any) -> None:
        await never.wait()

    binder.bind = bind_never  # type: ignore[method-assign]
    await api.create(make_pod("p").limits({GPU: "1"}).obj())
    status = await watch.wait_for(
        lambda: (p := watch.pods.get("p", "default")) and p.status.extended_resource_claim_status
    )
    await first.stop()
    await move_to_the_device_plugin_node(api)
    # PostFilter first removes the claim's finalizer: that write fails once.
    rule = FaultRule(resource="resourceclaims", verb="update", code=503)
    server.core.fault_plan = FaultPlan(rules=[rule])

    await start_scheduler()

    await runs_with_the_device_plugin(watch, "p")
    assert rule.seen >= 2  # the failed removal, then the one that went through
    assert watch.claims.get(status.resource_claim_name, "default") is None
