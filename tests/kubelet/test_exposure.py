"""Switching a node's device group between a device plugin and DRA (KEP-5004's gradual
transition, its "Motivation" and "Proposal"): never both at once, never under a running pod."""

from __future__ import annotations

from drasim.common.api import core_v1, resource_v1
from drasim.common.client import ApiClient
from drasim.kubelet import control
from tests.builders import make_pod
from tests.kubelet.conftest import DP_NODE, StartKubelet
from tests.kubelet.test_pods import running
from tests.kubelet.waiting import wait_for


async def switch(api: ApiClient, node: str, exposure: str) -> control.ControlReply:
    return await control.send(
        api.bus,
        node,
        control.SetExposure(group="gpu", exposure=exposure),  # type: ignore[arg-type]
    )


async def slices_of(api: ApiClient, node: str) -> list[resource_v1.ResourceSlice]:
    return [s for s in (await api.list(resource_v1.ResourceSlice))[0] if s.spec.node_name == node]


async def test_a_device_plugin_node_moves_to_dra_once_its_pods_are_gone_and_back(
    api: ApiClient, start_kubelet: StartKubelet
) -> None:
    await start_kubelet()
    await api.create(make_pod("user").limits({"example.com/gpu": "1"}).node(DP_NODE).obj())
    await wait_for(api, core_v1.Pod, "user", running, namespace="default")

    refused = await switch(api, DP_NODE, "dra")
    assert not refused.ok
    assert refused.message == f"node/{DP_NODE}: pods still use gpu devices"
    assert refused.pods == ["default/user"]

    await api.delete(core_v1.Pod, "user", namespace="default")
    await wait_for(api, core_v1.Pod, "user", lambda p: p is None, namespace="default")
    switched = await switch(api, DP_NODE, "dra")
    assert switched.ok, switched.message
    node = await api.get(core_v1.Node, DP_NODE)
    assert "example.com/gpu" not in node.status.capacity
    assert node.metadata.labels["exposure.drasim.io/gpu"] == "dra"
    (pool,) = await slices_of(api, DP_NODE)
    assert [d.name for d in pool.spec.devices] == ["gpu-0", "gpu-1"]

    back = await switch(api, DP_NODE, "device-plugin")
    assert back.ok, back.message
    node = await api.get(core_v1.Node, DP_NODE)
    assert str(node.status.allocatable["example.com/gpu"]) == "2"
    assert await slices_of(api, DP_NODE) == []


async def test_a_restarted_kubelet_keeps_the_exposure_a_migration_chose(
    api: ApiClient, start_kubelet: StartKubelet
) -> None:
    first = await start_kubelet(DP_NODE)
    assert (await switch(api, DP_NODE, "dra")).ok
    await first.stop()

    await start_kubelet(DP_NODE)
    node = await api.get(core_v1.Node, DP_NODE)
    assert node.metadata.labels["exposure.drasim.io/gpu"] == "dra"
    assert "example.com/gpu" not in node.status.allocatable
    (pool,) = await slices_of(api, DP_NODE)
    assert pool.spec.pool.generation == 1  # the same slice, adopted, not written again
