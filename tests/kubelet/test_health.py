"""`drasim node fault`: an unhealthy device is never handed out (issue item 5)."""

from __future__ import annotations

from drasim.common.api import core_v1, resource_v1
from drasim.common.client import ApiClient
from drasim.kubelet import control
from drasim.kubelet.run import KubeletProcess
from tests.builders import make_pod
from tests.kubelet.conftest import DP_NODE, DRA_NODE
from tests.kubelet.scheduling import schedule_with_dra
from tests.kubelet.test_pods import resource_status, running
from tests.kubelet.waiting import wait_for, wait_for_event


async def fault(api: ApiClient, node: str, device: str, *, healthy: bool) -> str:
    reply = await control.send(
        api.bus, node, control.SetDeviceHealth(device=device, healthy=healthy)
    )
    assert reply.ok, reply.message
    return reply.message


async def test_an_unhealthy_dra_device_leaves_the_slice_and_is_never_prepared(
    api: ApiClient, kubelet: KubeletProcess
) -> None:
    message = await fault(api, DRA_NODE, "gpu-2", healthy=False)
    assert message == f"node/{DRA_NODE}: device gpu.example.com/gpu-2 is unhealthy"
    (pool,) = [
        s for s in (await api.list(resource_v1.ResourceSlice))[0] if s.spec.node_name == DRA_NODE
    ]
    assert pool.spec.pool.generation == 2
    assert "gpu-2" not in [d.name for d in pool.spec.devices]
    assert len(pool.spec.devices) == 7

    # A stale allocation naming the device anyway: the driver refuses it.
    await schedule_with_dra(
        api, make_pod("stale").limits({"example.com/gpu": "1"}).obj(), DRA_NODE,
        mappings=[("con0", "example.com/gpu", "container-0-request-0")],
        results=[("container-0-request-0", "gpu-2")],
    )  # fmt: skip
    message = await wait_for_event(api, pod="stale", reason="FailedPrepareDynamicResources")
    assert message.endswith(f"device gpu.example.com/{DRA_NODE}/gpu-2 is unhealthy")

    await fault(api, DRA_NODE, "gpu.example.com/gpu-2", healthy=True)
    assert await wait_for(api, core_v1.Pod, "stale", running, namespace="default")
    (pool,) = [
        s for s in (await api.list(resource_v1.ResourceSlice))[0] if s.spec.node_name == DRA_NODE
    ]
    assert pool.spec.pool.generation == 3 and len(pool.spec.devices) == 8


async def test_an_unhealthy_device_plugin_device_lowers_allocatable(
    api: ApiClient, kubelet: KubeletProcess
) -> None:
    await fault(api, DP_NODE, "gpu-0", healthy=False)
    node = await api.get(core_v1.Node, DP_NODE)
    assert str(node.status.capacity["example.com/gpu"]) == "2"
    assert str(node.status.allocatable["example.com/gpu"]) == "1"

    await api.create(make_pod("a").limits({"example.com/gpu": "1"}).node(DP_NODE).obj())
    a = await wait_for(api, core_v1.Pod, "a", running, namespace="default")
    assert a is not None
    assert resource_status(a)["con0"] == {"example.com/gpu": ["gpu-1"]}
    await api.create(make_pod("b").limits({"example.com/gpu": "1"}).node(DP_NODE).obj())
    b = await wait_for(
        api, core_v1.Pod, "b", lambda p: p is not None and p.status.phase == "Failed"
    )
    assert b is not None and b.status.reason == "OutOfexample.com/gpu"


async def test_the_pod_status_reports_the_health_of_its_devices(
    api: ApiClient, kubelet: KubeletProcess
) -> None:
    await api.create(make_pod("p").limits({"example.com/gpu": "1"}).node(DP_NODE).obj())
    await wait_for(api, core_v1.Pod, "p", running, namespace="default")
    await fault(api, DP_NODE, "gpu-0", healthy=False)

    def gpu0_unhealthy(pod: core_v1.Pod | None) -> bool:
        assert pod is not None
        (status,) = pod.status.container_statuses[0].allocated_resources_status
        return status.resources[0].health == "Unhealthy"

    assert await wait_for(api, core_v1.Pod, "p", gpu0_unhealthy, namespace="default")


async def test_a_fault_on_an_unknown_device_is_refused(
    api: ApiClient, kubelet: KubeletProcess
) -> None:
    reply = await control.send(
        api.bus, DP_NODE, control.SetDeviceHealth(device="gpu-9", healthy=False)
    )
    assert not reply.ok
    assert reply.message.startswith("device gpu-9 does not exist (devices: gpu.example.com/gpu-0")
