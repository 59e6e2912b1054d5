"""The scheduler against a real apistore: pods land on nodes that fit, an unschedulable pod
is told why and lands once a node that fits appears, and device-plugin extended resources
fill up. Nodes are created directly as objects (no kubelets)."""

from __future__ import annotations

import asyncio
import time

from drasim.common.api import core_v1
from drasim.common.client import ApiClient
from tests.scheduler.e2e.conftest import ClusterWatch, StartScheduler
from tests.scheduler.wrappers import make_node, make_pod

GPU = "example.com/gpu"


async def test_pods_are_bound_to_nodes_that_fit(
    api: ApiClient, watch: ClusterWatch, start_scheduler: StartScheduler
) -> None:
    await api.create(make_node("small").capacity({"cpu": "1", "memory": "1Gi"}).obj())
    await api.create(make_node("big").capacity({"cpu": "4", "memory": "8Gi"}).obj())
    await start_scheduler()
    await api.create(make_pod("p").req({"cpu": "2"}).obj())
    assert await watch.bound("p") == "big"
    [event] = await watch.wait_for(lambda: watch.events_of("p", "Scheduled"))
    assert (event.type, event.message, event.reporting_component) == (
        "Normal",
        "Successfully assigned default/p to big",
        "default-scheduler",
    )
    assert (event.action, event.count, event.source.component) == (
        "Binding",
        1,
        "default-scheduler",
    )
    assert event.event_time is not None and event.first_timestamp == event.last_timestamp
    assert event.involved_object.resource_version
    assert watch.pod("p").status.conditions[0].type == "PodScheduled"


async def test_node_selector(
    api: ApiClient, watch: ClusterWatch, start_scheduler: StartScheduler
) -> None:
    for zone in "abc":
        await api.create(make_node(f"node-{zone}").label("zone", zone).obj())
    await start_scheduler()
    await api.create(make_pod("p").node_selector({"zone": "b"}).obj())
    assert await watch.bound("p") == "node-b"


async def test_pods_of_other_schedulers_are_left_alone(
    api: ApiClient, watch: ClusterWatch, start_scheduler: StartScheduler
) -> None:
    await api.create(make_node("worker").obj())
    await start_scheduler()
    other = make_pod("other").obj()
    other.spec.scheduler_name = "my-scheduler"
    await api.create(other)
    await api.create(make_pod("mine").obj())
    await watch.bound("mine")
    assert not watch.pod("other").spec.node_name
    assert not watch.events_of("other", "FailedScheduling")


async def test_unschedulable_pod_is_told_why_and_lands_on_a_new_node(
    api: ApiClient, watch: ClusterWatch, start_scheduler: StartScheduler
) -> None:
    await api.create(make_node("small").capacity({"cpu": "1"}).label("zone", "a").obj())
    await api.create(make_node("elsewhere").capacity({"cpu": "4"}).label("zone", "b").obj())
    await start_scheduler()
    await api.create(make_pod("p").req({"cpu": "2"}).node_selector({"zone": "a"}).obj())

    message = (
        "0/2 nodes are available: 1 Insufficient cpu, "
        "1 node(s) didn't match Pod's node affinity/selector. "
        "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
    )
    condition = await watch.unschedulable("p")
    assert (condition.reason, condition.message) == ("Unschedulable", message)
    [event] = await watch.wait_for(lambda: watch.events_of("p", "FailedScheduling"))
    assert (event.type, event.message, event.reporting_component) == (
        "Warning",
        message,
        "default-scheduler",
    )
    assert event.involved_object.uid == watch.pod("p").metadata.uid

    # The NodeAdd event requeues the pod; no timer does (the periodic flush is 5 minutes).
    await api.create(make_node("large").capacity({"cpu": "8"}).label("zone", "a").obj())
    assert await watch.bound("p") == "large"


async def test_device_plugin_resources_fill_up_and_free(
    api: ApiClient, watch: ClusterWatch, start_scheduler: StartScheduler
) -> None:
    await api.create(make_node("gpu-node").capacity({GPU: "2"}).obj())
    await start_scheduler()
    for name in ("gpu-0", "gpu-1", "gpu-2"):
        await api.create(make_pod(name).limits({GPU: "1"}).obj())
    bound = {name: await watch.bound(name) for name in ("gpu-0", "gpu-1")}
    assert bound == {"gpu-0": "gpu-node", "gpu-1": "gpu-node"}
    condition = await watch.unschedulable("gpu-2")
    assert condition.message == (
        "0/1 nodes are available: 1 Insufficient example.com/gpu. "
        "preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."
    )

    await api.delete(core_v1.Pod, "gpu-0", namespace="default", grace_period_seconds=0)
    assert await watch.bound("gpu-2") == "gpu-node"


async def test_many_pods_are_bound_while_binding_runs_concurrently(
    api: ApiClient, watch: ClusterWatch, start_scheduler: StartScheduler
) -> None:
    nodes, pods = 20, 200
    for i in range(nodes):
        await api.create(make_node(f"node-{i}").capacity({"cpu": "10", "memory": "16Gi"}).obj())
    scheduler = await start_scheduler()
    started = time.perf_counter()
    await asyncio.gather(
        *(api.create(make_pod(f"p-{i}").req({"cpu": "1"}).obj()) for i in range(pods))
    )
    peak_bindings = 0

    def all_bound() -> bool:
        nonlocal peak_bindings
        peak_bindings = max(peak_bindings, len(scheduler.binding_tasks))
        return sum(1 for p in watch.pods.list() if p.spec.node_name) == pods

    await watch.wait_for(all_bound, timeout=30)
    elapsed = time.perf_counter() - started
    print(f"\n{pods} pods bound in {elapsed:.2f}s: {pods / elapsed:.0f} pods/s")

    per_node: dict[str, int] = {}
    for pod in watch.pods.list():
        per_node[pod.spec.node_name] = per_node.get(pod.spec.node_name, 0) + 1
    assert sorted(per_node.values()) == [10] * nodes  # least allocated spreads them evenly
    assert peak_bindings > 1  # the next cycles did not wait for a binding to finish
    assert scheduler.queue.pending_pods()[1] == "activeQ:0; backoffQ:0; unschedulablePods:0"
