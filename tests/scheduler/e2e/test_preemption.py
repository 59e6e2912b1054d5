"""DefaultPreemption against the apistore: a pod of higher priority that fits nowhere evicts
pods of lower priority from a device-plugin node, is nominated to it and lands there once
they are gone; devices DRA allocated are never freed by preemption (as upstream)."""

from __future__ import annotations

from drasim.common.api import core_v1, scheduling_v1
from drasim.common.api.meta_v1 import ObjectMeta
from drasim.common.client import ApiClient
from tests.scheduler.e2e.conftest import ClusterWatch, StartScheduler
from tests.scheduler.e2e.test_extended_resources import GPU, create_kep_cluster
from tests.scheduler.wrappers import make_pod


async def priority_classes(api: ApiClient) -> None:
    for name, value, policy in (("low", 10, None), ("high", 1000, None), ("polite", 1000, "Never")):
        await api.create(
            scheduling_v1.PriorityClass(
                metadata=ObjectMeta(name=name), value=value, preemption_policy=policy
            )
        )


def gpu_pod(name: str, priority_class: str) -> core_v1.Pod:
    pod = make_pod(name).limits({GPU: "1"}).obj()
    pod.spec.priority_class_name = priority_class
    return pod


async def test_a_higher_priority_pod_preempts_on_the_device_plugin_node(
    api: ApiClient, watch: ClusterWatch, start_scheduler: StartScheduler
) -> None:
    await create_kep_cluster(api, dra_devices=1, dp_gpus=1)
    await priority_classes(api)
    scheduler = await start_scheduler()
    for name in ("low-a", "low-b"):
        await api.create(gpu_pod(name, "low"))
        await watch.bound(name)
    on_dp = next(n for n in ("low-a", "low-b") if watch.pod(n).spec.node_name == "dp-node")
    on_dra = next(n for n in ("low-a", "low-b") if n != on_dp)

    await api.create(gpu_pod("urgent", "high"))
    # The victim: marked, then deleted (it terminates until its kubelet confirms).
    victim = await watch.wait_for(lambda: (p := watch.pod(on_dp)).metadata.deletion_timestamp and p)
    [target] = [c for c in victim.status.conditions if c.type == "DisruptionTarget"]
    assert (target.status, target.reason) == ("True", "PreemptionByScheduler")
    urgent = await watch.wait_for(
        lambda: (p := watch.pod("urgent")).status.nominated_node_name and p
    )
    assert urgent.status.nominated_node_name == "dp-node"
    [preempted] = await watch.wait_for(lambda: watch.events_of(on_dp, "Preempted"))
    assert preempted.message == f"Preempted by pod {urgent.metadata.uid} on node dp-node"
    # The pod on the DRA node keeps its device: preemption cannot free DRA allocations.
    assert not watch.pod(on_dra).metadata.deletion_timestamp
    assert scheduler.metrics.preemption_victims.count(()) == 1
    assert scheduler.metrics.preemption_attempts.value(()) >= 1

    # A pod of lower priority waiting too does not get the room kept for the preemptor.
    await api.create(gpu_pod("low-c", "low"))
    await watch.unschedulable("low-c")
    # The kubelet confirms the victim's end: the preemptor lands where it was nominated.
    await api.delete(core_v1.Pod, on_dp, namespace="default", grace_period_seconds=0)
    assert await watch.bound("urgent") == "dp-node"
    assert not watch.pod("low-c").spec.node_name
    # Binding spent the nomination.
    assert not watch.pod("urgent").status.nominated_node_name


async def test_no_preemption_for_a_never_policy_or_among_equals(
    api: ApiClient, watch: ClusterWatch, start_scheduler: StartScheduler
) -> None:
    await create_kep_cluster(api, dra_devices=1, dp_gpus=1)
    await priority_classes(api)
    await start_scheduler()
    for name in ("high-a", "high-b"):
        await api.create(gpu_pod(name, "high"))
        await watch.bound(name)

    await api.create(gpu_pod("polite", "polite"))
    condition = await watch.unschedulable("polite")
    # DynamicResources' PostFilter adds no reason of its own (upstream 1.37).
    assert condition.message.endswith(
        "cannot allocate all claims. preemption: not eligible due to preemptionPolicy=Never."
    )
    await api.create(gpu_pod("peer", "high"))
    condition = await watch.unschedulable("peer")
    assert condition.message.endswith(
        "preemption: 0/2 nodes are available: 1 No preemption victims found for incoming pod, "
        "1 Preemption is not helpful for scheduling."
    )
    assert not any(watch.pod(n).metadata.deletion_timestamp for n in ("high-a", "high-b"))
