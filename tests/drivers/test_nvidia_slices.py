"""The DRA driver shim publishing an NVIDIA pool as the driver splits it
(`generateSplitResourceSlices` in cmd/gpu-kubelet-plugin/driver.go): with DynamicMIG, the
counter sets in one slice and each GPU's devices in one of their own."""

from __future__ import annotations

from pathlib import Path

from drasim.common import cluster_file
from drasim.drivers import dra_driver
from drasim.drivers.probe import EmulatedProbe

CLUSTER = """\
apiVersion: drasim.io/v1alpha1
kind: Cluster
pools:
  - name: h100
    profile: nvidia-dgx-h100
    devices:
      gpu: {exposure: dra, featureGates: {DynamicMIG: true}}
"""


def test_dynamic_mig_publishes_a_slice_per_gpu_and_one_for_the_counters(tmp_path: Path) -> None:
    (tmp_path / "cluster.yaml").write_text(CLUSTER)
    (node,) = cluster_file.load(tmp_path / "cluster.yaml").nodes
    probe = EmulatedProbe.of(node)
    published = dra_driver.pool_devices(node.name, "gpu.nvidia.com", probe.devices())
    assert list(published) == [f"h100-0-gpu.nvidia.com-{i}" for i in range(8)]
    for i, devices in enumerate(published.values()):
        assert len(devices) == 26 and {d.name.split("-")[1] for d in devices} == {str(i)}
    counters = dra_driver.pool_counter_sets(node.name, "gpu.nvidia.com", probe.devices())
    (sets,) = counters.values()
    assert [s.name for s in sets] == [f"gpu-{i}-counter-set" for i in range(8)]
    # A GPU that fails takes its slice's devices and its counter set out with it.
    probe.set_health("gpu-2", healthy=False)
    published = dra_driver.pool_devices(node.name, "gpu.nvidia.com", probe.devices())
    assert len(published) == 7
    assert all(not d.name.startswith("gpu-2") for ds in published.values() for d in ds)
