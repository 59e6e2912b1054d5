"""End to end: KEP-5004's example on its example cluster, with the scheduler and the
controllers in-process (as upstream's `test/e2e/dra/dra.go`; issue tests "KEP example",
"deleting pods", "migrating
a pool keeps every pod of the other pool running")."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from drasim.cli import demo, node
from drasim.common import cluster_file
from drasim.common.api import apps_v1, core_v1, resource_v1
from drasim.common.bus.client import Bus
from drasim.common.client import ApiClient
from drasim.controllers.server import ControllerManager
from drasim.kubelet.run import KubeletProcess
from drasim.scheduler.server import Scheduler
from tests.kubelet.waiting import wait_for_all

DRA_NODE, DP_NODE = "dra-gpu-0", "dp-gpu-0"


@pytest.fixture
async def kep_cluster(api: ApiClient, bus: Bus) -> AsyncIterator[KubeletProcess]:
    scheduler = Scheduler(ApiClient(bus, actor="system:kube-scheduler"))
    controllers = ControllerManager(bus)
    kubelet = KubeletProcess(api=api, nodes=cluster_file.load().nodes)
    await kubelet.start()
    await scheduler.start()
    await controllers.start()
    yield kubelet
    await controllers.stop()
    await scheduler.stop()
    for informer in scheduler.informers:
        await informer.stop()
    await kubelet.stop()


def all_running(count: int):
    def check(pods: list[core_v1.Pod]) -> bool:
        demo_pods = [p for p in pods if p.metadata.labels.get("app") == "demo"]
        return len(demo_pods) == count and all(p.status.phase == "Running" for p in demo_pods)

    return check


def devices(pod: core_v1.Pod) -> list[str]:
    (status,) = pod.status.container_statuses
    return [h.resource_id for r in status.allocated_resources_status for h in r.resources]


async def test_the_kep_example_runs_on_both_kinds_of_node(
    api: ApiClient, kep_cluster: KubeletProcess
) -> None:
    assert await demo.apply_demo(api) == [
        "deviceclass.resource.k8s.io/gpu.example.com created",
        "deployment.apps/demo created",
    ]
    pods = await wait_for_all(api, core_v1.Pod, all_running(10), namespace="default")

    on_dra = [p for p in pods if p.spec.node_name == DRA_NODE]
    on_dp = [p for p in pods if p.spec.node_name == DP_NODE]
    assert (len(on_dra), len(on_dp)) == (8, 2)
    for pod in on_dp:
        assert pod.status.extended_resource_claim_status is None
        assert describe_source(pod) == "devices from a device plugin"
    assert sorted(d for p in on_dp for d in devices(p)) == ["gpu-0", "gpu-1"]
    for pod in on_dra:
        claim_name = pod.status.extended_resource_claim_status.resource_claim_name
        assert describe_source(pod) == f"devices from DRA (special claim {claim_name})"
        claim = await api.get(resource_v1.ResourceClaim, claim_name, namespace="default")
        (result,) = claim.status.allocation.devices.results
        assert devices(pod) == [f"gpu.example.com/{DRA_NODE}/{result.device}"]
    assert sorted(d for p in on_dra for d in devices(p)) == [
        f"gpu.example.com/{DRA_NODE}/gpu-{i}" for i in range(8)
    ]
    lines = demo.describe_devices(on_dp[0])
    assert lines[1] == f"  container demo: example.com/gpu={devices(on_dp[0])[0]}"
    shown: list[str] = []
    await demo.follow(api, out=shown.append, until=10)  # what `drasim demo` prints
    assert len(shown) == 20 and sum(line.startswith("pod default/demo-") for line in shown) == 10

    # Scaling down deletes pods: their devices are unprepared or released, their special
    # claims removed.
    await api.patch(apps_v1.Deployment, "demo", {"spec": {"replicas": 2}}, namespace="default")
    pods = await wait_for_all(api, core_v1.Pod, all_running(2), namespace="default")
    kept = {
        p.status.extended_resource_claim_status.resource_claim_name
        for p in pods
        if p.status.extended_resource_claim_status is not None
    }
    await wait_for_all(
        api,
        resource_v1.ResourceClaim,
        lambda claims: {c.metadata.name for c in claims} == kept,
        namespace="default",
    )
    driver = kep_cluster.agents[DRA_NODE].drivers["gpu.example.com"]
    assert len(driver.prepared_devices()) == len(kept)
    plugin = kep_cluster.agents[DP_NODE].plugins["example.com/gpu"]
    assert len(plugin.in_use()) == 2 - len(kept)


def describe_source(pod: core_v1.Pod) -> str:
    return demo.describe_devices(pod)[0].split(": ", 1)[1]


async def test_migrating_the_device_plugin_pool_keeps_the_dra_pool_running(
    api: ApiClient, kep_cluster: KubeletProcess
) -> None:
    await demo.apply_demo(api)
    pods = await wait_for_all(api, core_v1.Pod, all_running(10), namespace="default")
    dra_pods = {p.metadata.uid: p for p in pods if p.spec.node_name == DRA_NODE}
    lines: list[str] = []

    await node.migrate(api, "dp-gpu", to="dra", out=lines.append)

    assert lines[0] == f"node/{DP_NODE} cordoned"
    assert lines[-2:] == [
        f"node/{DP_NODE}: gpu is now exposed through dra",
        f"node/{DP_NODE} uncordoned",
    ]
    assert sum(line.startswith(f"node/{DP_NODE}: evicting pod") for line in lines) == 2
    dp_node = await api.get(core_v1.Node, DP_NODE)
    assert "example.com/gpu" not in dp_node.status.allocatable
    assert not dp_node.spec.unschedulable
    # The evicted pods come back through DRA on the migrated node; the others never moved.
    pods = await wait_for_all(api, core_v1.Pod, all_running(10), namespace="default")
    for pod in pods:
        if pod.spec.node_name == DRA_NODE:
            assert pod.metadata.uid in dra_pods
            assert (
                pod.status.container_statuses
                == dra_pods[pod.metadata.uid].status.container_statuses
            )
    moved = [p for p in pods if p.spec.node_name == DP_NODE]
    assert len(moved) == 2
    assert all(p.status.extended_resource_claim_status is not None for p in moved)
