"""The device-plugin shim: capacity, Allocate and health (upstream's device plugin API)."""

from __future__ import annotations

from pathlib import Path

import pytest

from drasim.drivers.device_plugin import DevicePlugin
from drasim.drivers.errors import PermanentError
from drasim.drivers.probe import EmulatedProbe


def make_plugin(probe: EmulatedProbe, path: Path | None = None) -> tuple[DevicePlugin, list[int]]:
    changes: list[int] = []
    plugin = DevicePlugin(
        resource_name="example.com/gpu",
        group="gpu",
        probe=probe,
        on_health_change=lambda: changes.append(1),
        checkpoint_path=path,
    )
    return plugin, changes


def test_allocate_gives_ids_env_and_cdi_devices_once_per_container(gpu2: EmulatedProbe) -> None:
    plugin, _ = make_plugin(gpu2)
    assert (plugin.capacity, plugin.allocatable) == (2, 2)
    response = plugin.allocate("pod-a", "con0", 1)
    assert response.device_ids == ["gpu-0"]
    assert response.envs == {"EXAMPLE_COM_GPU_VISIBLE_DEVICES": "gpu-0"}
    assert response.cdi_device_ids == ["example.com/gpu=gpu-0"]
    assert plugin.allocate("pod-a", "con0", 1) == response  # asked again: the same devices
    assert plugin.allocate("pod-b", "con0", 1).device_ids == ["gpu-1"]
    assert plugin.in_use() == {"gpu-0": "pod-a", "gpu-1": "pod-b"}
    with pytest.raises(PermanentError, match="Requested: 1, Available: 0, which is unexpected"):
        plugin.allocate("pod-c", "con0", 1)
    plugin.release("pod-a")
    assert plugin.allocate("pod-c", "con0", 1).device_ids == ["gpu-0"]


def test_an_unhealthy_device_lowers_allocatable_and_is_never_handed_out(
    gpu2: EmulatedProbe,
) -> None:
    plugin, changes = make_plugin(gpu2)
    gpu2.set_health("gpu-0", healthy=False)
    assert changes == [1]
    assert (plugin.capacity, plugin.allocatable) == (2, 1)
    assert plugin.allocate("pod-a", "con0", 1).device_ids == ["gpu-1"]
    with pytest.raises(PermanentError):
        plugin.allocate("pod-b", "con0", 1)
    gpu2.set_health("gpu-0", healthy=False)  # no change, no report
    assert changes == [1]


async def test_allocations_survive_a_restart_through_the_checkpoint(
    gpu2: EmulatedProbe, tmp_path: Path
) -> None:
    path = tmp_path / "device-plugins" / "example.com_gpu.json"
    plugin, _ = make_plugin(gpu2, path)
    given = plugin.allocate("pod-a", "con0", 1)
    assert not path.exists()  # Allocate records; the kubelet saves before the pod starts
    await plugin.save()

    restarted, _ = make_plugin(gpu2, path)
    assert restarted.allocated("pod-a") == {"con0": given}
    assert restarted.allocate("pod-b", "con0", 1).device_ids == ["gpu-1"]


def test_a_vendor_plugin_hands_out_its_own_ids_in_its_own_variable(gpu2: EmulatedProbe) -> None:
    """NVIDIA's plugin: devices by UUID in NVIDIA_VISIBLE_DEVICES, no CDI ids, and only the
    devices listed under its resource."""
    plugin = DevicePlugin(
        resource_name="nvidia.com/gpu",
        group="gpu",
        probe=gpu2,
        on_health_change=lambda: None,
        ids={"gpu-1": "GPU-1111"},
        env_name="NVIDIA_VISIBLE_DEVICES",
    )
    assert [d.name for d in plugin.devices()] == ["gpu-1"]
    response = plugin.allocate("pod-a", "con0", 1)
    assert response.device_ids == ["GPU-1111"]
    assert response.envs == {"NVIDIA_VISIBLE_DEVICES": "GPU-1111"}
    assert response.cdi_device_ids == []
    assert plugin.in_use() == {"GPU-1111": "pod-a"}
    gpu2.set_health("gpu-1", healthy=False)
    assert plugin.allocatable == 0
