"""Nodes register with what their profiles and exposures say (issue items 1–4)."""

from __future__ import annotations

from drasim.common.api import coordination_v1, core_v1, resource_v1
from drasim.common.client import ApiClient
from drasim.kubelet.run import KubeletProcess
from tests.kubelet.conftest import DP_NODE, DRA_NODE, MIXED_NODE, StartKubelet


async def test_nodes_register_with_capacity_slices_and_lease(
    api: ApiClient, kubelet: KubeletProcess
) -> None:
    dra = await api.get(core_v1.Node, DRA_NODE)
    assert str(dra.status.capacity["cpu"]) == "96"
    assert "example.com/gpu" not in dra.status.capacity  # DRA devices are not node capacity
    assert dra.metadata.labels["exposure.drasim.io/gpu"] == "dra"
    assert dra.metadata.labels["drasim.io/pool"] == "dra"
    assert [c.type for c in dra.status.conditions if c.status == "True"] == ["Ready"]

    dp = await api.get(core_v1.Node, DP_NODE)
    assert str(dp.status.capacity["example.com/gpu"]) == "2"
    assert str(dp.status.allocatable["example.com/gpu"]) == "2"
    assert dp.metadata.labels["exposure.drasim.io/gpu"] == "device-plugin"

    mixed = await api.get(core_v1.Node, MIXED_NODE)
    assert str(mixed.status.allocatable["example.com/fpga"]) == "2"
    assert "example.com/gpu" not in mixed.status.allocatable

    slices, _ = await api.list(resource_v1.ResourceSlice)
    by_node = {(s.spec.node_name, s.spec.driver): s for s in slices}
    assert set(by_node) == {(DRA_NODE, "gpu.example.com"), (MIXED_NODE, "gpu.example.com")}
    dra_slice = by_node[(DRA_NODE, "gpu.example.com")]
    assert dra_slice.spec.pool.name == DRA_NODE
    assert dra_slice.spec.pool.generation == 1
    assert dra_slice.spec.pool.resource_slice_count == 1
    assert [d.name for d in dra_slice.spec.devices] == [f"gpu-{i}" for i in range(8)]
    gpu3 = dra_slice.spec.devices[3]
    assert gpu3.attributes["type"].string_value == "gpu"
    assert gpu3.attributes["index"].int_value == 3
    assert gpu3.attributes["driverVersion"].version_value == "1.0.0"
    assert str(gpu3.capacity["memory"].value) == "80Gi"
    assert [ref.name for ref in dra_slice.metadata.owner_references] == [DRA_NODE]

    lease = await api.get(coordination_v1.Lease, DRA_NODE, namespace="kube-node-lease")
    assert lease.spec.holder_identity == DRA_NODE
    assert lease.spec.lease_duration_seconds == 40


async def test_a_kubelet_process_with_an_empty_shard_starts_and_stops(
    start_kubelet: StartKubelet,
) -> None:
    kubelet = await start_kubelet("no-such-node")
    assert kubelet.agents == {}
