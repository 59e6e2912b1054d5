"""The NVIDIA GPU driver profiles against what the real driver publishes, written by hand
from kubernetes-sigs/dra-driver-nvidia-gpu@9593204 (fixtures/nvidia-*.yaml say which files),
and the DeviceClasses its chart installs against the devices they must select."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from drasim.common import codec
from drasim.common.api import meta_v1, resource_v1, validation
from drasim.common.driver_profiles import nvidia_gpu
from drasim.scheduler.plugins.dynamic_resources import cel_env

FIXTURES = Path(__file__).parent / "fixtures"
POOL = resource_v1.ResourcePool(name="node-0", generation=1, resource_slice_count=1)
PROFILES = {p.name: p for p in nvidia_gpu.PROFILES}
# What differs between two GPUs of one server besides the minor in the device name.
PER_GPU = {
    "uuid",
    "parentUUID",
    "resource.kubernetes.io/pciBusID",
    "resource.kubernetes.io/pcieRoot",
    "resource.kubernetes.io/numaNode",
}


def profile(name: str, **options: Any) -> nvidia_gpu.NvidiaGpuProfile:
    cls = PROFILES[name]
    return cls(codec.convert(options, cls.Options))


def fixture(name: str) -> dict[str, Any]:
    return yaml.safe_load((FIXTURES / name).read_text())


def published(p: nvidia_gpu.NvidiaGpuProfile, node: str) -> dict[str, dict[str, Any]]:
    return {d["name"]: d for d in codec.to_builtins(p.node_devices(node).devices)}


def shape(device: dict[str, Any], minor: int) -> dict[str, Any]:
    """A device with the minor taken out of its name and its per-GPU attributes left out."""
    attrs = {k: v for k, v in device["attributes"].items() if k not in PER_GPU}
    name = re.sub(rf"^gpu-{minor}\b", "gpu-N", device["name"])
    consumed = [
        {**c, "counterSet": c["counterSet"].replace(f"gpu-{minor}-", "gpu-N-")}
        for c in device.get("consumesCounters", [])
    ]
    return {**device, "name": name, "attributes": attrs, "consumesCounters": consumed}


def test_t4_server_publishes_one_device_per_gpu_with_the_drivers_attributes() -> None:
    want = fixture("nvidia-t4.yaml")
    got = profile("nvidia-t4").node_devices(want["node"])
    assert codec.to_builtins(got.devices) == want["devices"]
    assert got.counter_sets == []


def test_static_mig_publishes_the_mig_devices_mig_parted_created() -> None:
    want = fixture("nvidia-dgx-a100-40gb-half-balanced.yaml")
    got = published(profile("nvidia-dgx-a100-40gb", **want["options"]), want["node"])
    for device in want["devices"]:
        assert got[device["name"]] == device
    # GPUs 1-3 hold the same MIG devices as GPU 0, GPUs 5-7 a full GPU as GPU 4; the GPUs
    # in MIG mode publish no full GPU.
    for first, others in ((0, (1, 2, 3)), (4, (5, 6, 7))):
        mine = [shape(d, first) for n, d in got.items() if re.match(rf"gpu-{first}\b", n)]
        for minor in others:
            theirs = [shape(d, minor) for n, d in got.items() if re.match(rf"gpu-{minor}\b", n)]
            assert theirs == mine
    assert "gpu-0" not in got and len(got) == 4 * 4 + 4
    uuids = [d["attributes"]["uuid"]["string"] for d in got.values()]
    assert len(set(uuids)) == len(uuids)


def test_dynamic_mig_publishes_every_placement_sharing_the_gpus_counters() -> None:
    want = fixture("nvidia-dgx-h100-dynamic-mig.yaml")
    got = profile("nvidia-dgx-h100", **want["options"]).node_devices(want["node"])
    devices = {d["name"]: d for d in codec.to_builtins(got.devices)}
    assert [n for n in devices if re.match(r"gpu-0\b", n)] == want["gpu0Names"]
    for device in want["devices"]:
        assert devices[device["name"]] == device
    sets = codec.to_builtins(got.counter_sets)
    assert [s["name"] for s in sets] == [f"gpu-{i}-counter-set" for i in range(8)]
    assert sets[0] == want["counterSet"]
    gpu0 = [shape(d, 0) for n, d in devices.items() if re.match(r"gpu-0\b", n)]
    for minor in range(1, 8):
        mine = [shape(d, minor) for n, d in devices.items() if re.match(rf"gpu-{minor}\b", n)]
        assert mine == gpu0
    # A partition's health follows its GPU's; each GPU's devices go in a slice of their own.
    assert got.parents["gpu-3-mig-7g80gb-0-0"] == "gpu-3"
    assert got.slices["gpu-3-mig-7g80gb-0-0"] == got.slices["gpu-3"] == 3
    assert sorted(set(got.slices.values())) == list(range(8))


def test_dynamic_mig_on_ampere_needs_mig_mode_and_then_offers_no_full_gpu() -> None:
    off = profile("nvidia-dgx-a100-80gb", featureGates={"DynamicMIG": True})
    assert [d.name for d in off.node_devices("n").devices] == [f"gpu-{i}" for i in range(8)]
    mig_mode = [{"devices": "all", "mig-enabled": True}]
    on = profile("nvidia-dgx-a100-80gb", featureGates={"DynamicMIG": True}, migConfig=mig_mode)
    got = on.node_devices("n")
    assert not any(re.fullmatch(r"gpu-\d", d.name) for d in got.devices)
    assert len(got.devices) == 8 * 25 and len(got.counter_sets) == 8
    assert got.parents == {}


@pytest.mark.parametrize("name", sorted(PROFILES))
@pytest.mark.parametrize("dynamic_mig", [False, True], ids=["static", "dynamic-mig"])
def test_every_profile_publishes_slices_the_api_accepts(name: str, dynamic_mig: bool) -> None:
    got = profile(name, featureGates={"DynamicMIG": dynamic_mig}).node_devices("node-0")
    assert len(got.devices) >= PROFILES[name].server.gpu_count
    slices = [
        resource_v1.ResourceSlice(
            metadata=meta_v1.ObjectMeta(name=f"node-0-gpu.nvidia.com-{i}"),
            spec=resource_v1.ResourceSliceSpec(
                driver="gpu.nvidia.com",
                node_name="node-0",
                pool=POOL,
                devices=got.devices[i : i + 64],
            ),
        )
        for i in range(0, len(got.devices), 64)
    ]
    if got.counter_sets:
        slices.append(
            resource_v1.ResourceSlice(
                metadata=meta_v1.ObjectMeta(name="node-0-gpu.nvidia.com-counters"),
                spec=resource_v1.ResourceSliceSpec(
                    driver="gpu.nvidia.com",
                    node_name="node-0",
                    pool=POOL,
                    shared_counters=got.counter_sets,
                ),
            )
        )
    for resource_slice in slices:
        assert [e.message for e in validation.validate(resource_slice)] == []


def test_the_chart_installs_its_device_classes_on_resource_v1() -> None:
    classes = codec.to_builtins(profile("nvidia-t4").device_classes())
    by_name = {c["metadata"]["name"]: c["spec"] for c in classes}
    assert list(by_name) == [
        "compute-domain-daemon.nvidia.com",
        "compute-domain-default-channel.nvidia.com",
        "gpu.nvidia.com",
        "mig.nvidia.com",
        "vfio.gpu.nvidia.com",
    ]
    assert by_name["gpu.nvidia.com"] == {
        "selectors": [
            {
                "cel": {
                    "expression": "device.driver == 'gpu.nvidia.com' && "
                    "device.attributes['gpu.nvidia.com'].type == 'gpu'"
                }
            }
        ],
        "extendedResourceName": "nvidia.com/gpu",
    }
    assert "extendedResourceName" not in by_name["mig.nvidia.com"]
    for c in profile("nvidia-t4").device_classes():
        assert [e.message for e in validation.validate(c)] == []
    no_domains = profile("nvidia-t4", resources={"computeDomains": {"enabled": False}})
    assert [c.metadata.name for c in no_domains.device_classes()][0] == "gpu.nvidia.com"
    no_gpus = profile("nvidia-t4", resources={"gpus": {"enabled": False}})
    assert "gpu.nvidia.com" not in [c.metadata.name for c in no_gpus.device_classes()]


def selected(
    device_class: resource_v1.DeviceClass,
    devices: list[resource_v1.Device],
    driver: str = nvidia_gpu.DRIVER,
) -> list[str]:
    selectors = [
        cel_env.compile_selector(s.cel.expression) for s in device_class.spec.selectors if s.cel
    ]
    return [
        d.name
        for d in devices
        if all(cel_env.DeviceVariables(driver, d).matches(s) for s in selectors)
    ]


@pytest.mark.parametrize(
    ("server", "options"),
    [
        ("nvidia-dgx-h100", {}),
        ("nvidia-dgx-h100", {"featureGates": {"DynamicMIG": True}}),
        ("nvidia-dgx-a100-40gb", fixture("nvidia-dgx-a100-40gb-half-balanced.yaml")["options"]),
        ("nvidia-l40s", {}),
    ],
    ids=["full-gpus", "dynamic-mig", "static-mig", "no-mig-hardware"],
)
def test_each_device_class_selects_exactly_its_devices(server: str, options: dict) -> None:
    p = profile(server, **options)
    devices = p.node_devices("node-0").devices
    gpus = [d.name for d in devices if re.fullmatch(r"gpu-\d+", d.name)]
    migs = [d.name for d in devices if "-mig-" in d.name]
    classes = {c.metadata.name: c for c in p.device_classes()}
    assert selected(classes["gpu.nvidia.com"], devices) == gpus
    assert selected(classes["mig.nvidia.com"], devices) == migs
    assert selected(classes["vfio.gpu.nvidia.com"], devices) == []
    assert selected(classes["compute-domain-daemon.nvidia.com"], devices) == []
    assert gpus or migs
    # The same devices published by another driver are no class's.
    assert all(selected(c, devices, driver="gpu.example.com") == [] for c in classes.values())


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (
            {"devices": "all", "mig-enabled": True, "mig-devices": {"1g.11gb": 1}},
            "field migConfig[0].mig-devices[1g.11gb]: "
            "NVIDIA H100 80GB HBM3 has no MIG profile 1g.11gb (profiles: 1g.10gb, 1g.10gb+me, "
            "1g.20gb, 2g.20gb, 3g.40gb, 4g.40gb, 7g.80gb)",
        ),
        (
            {"devices": [0], "mig-enabled": True, "mig-devices": {"7g.80gb": 1, "1g.10gb": 1}},
            "field migConfig[0].mig-devices: the MIG devices do not fit on GPU 0",
        ),
        (
            {"devices": [8], "mig-enabled": True},
            "field migConfig[0].devices: no GPU 8 (GPUs 0-7)",
        ),
    ],
    ids=["unknown-profile", "does-not-fit", "no-such-gpu"],
)
def test_a_mig_config_mig_parted_would_refuse_is_refused(config: dict, message: str) -> None:
    p = profile("nvidia-dgx-h100", migConfig=[config])
    assert [f"field {f}: {m}" for f, m in p.options.check()] == [message]


def test_unknown_feature_gates_are_refused_as_the_driver_refuses_them() -> None:
    p = profile("nvidia-t4", featureGates={"DynamicMig": True})
    assert list(p.options.check()) == [
        ("featureGates[DynamicMig]", "unrecognized feature gate: DynamicMig")
    ]


HALF_MIG = [{"devices": [0, 1], "mig-enabled": True, "mig-devices": {"1g.10gb": 7}}]


@pytest.mark.parametrize(
    ("strategy", "resources"),
    [
        ("none", {"nvidia.com/gpu": 8}),
        ("mixed", {"nvidia.com/gpu": 6, "nvidia.com/mig-1g.10gb": 14}),
    ],
)
def test_nvidias_device_plugin_names_resources_by_its_mig_strategy(
    strategy: str, resources: dict[str, int]
) -> None:
    """k8s-device-plugin: GPUs and MIG devices by UUID in NVIDIA_VISIBLE_DEVICES."""
    p = profile("nvidia-dgx-h100", migConfig=HALF_MIG, migStrategy=strategy)
    view = p.device_plugin("node-0")
    assert view.env == "NVIDIA_VISIBLE_DEVICES"
    assert {name: len(devices) for name, devices in view.resources.items()} == resources
    gpus = view.resources["nvidia.com/gpu"]
    assert gpus["gpu-7"] == p.gpu_uuid("node-0", 7)
    if strategy == "mixed":
        migs = view.resources["nvidia.com/mig-1g.10gb"]
        assert all(re.fullmatch(r"gpu-[01]-mig-1g10gb-19-[0-6]", n) for n in migs)
        assert all(uuid.startswith("MIG-") for uuid in migs.values())


def test_single_strategy_lists_mig_devices_as_gpus_and_needs_one_profile_everywhere() -> None:
    every = [{"devices": "all", "mig-enabled": True, "mig-devices": {"3g.40gb": 2}}]
    p = profile("nvidia-dgx-h100", migConfig=every, migStrategy="single")
    (devices,) = p.device_plugin("n").resources.values()
    assert len(devices) == 16 and all("-mig-3g40gb-9-" in n for n in devices)
    half = profile("nvidia-dgx-h100", migConfig=HALF_MIG, migStrategy="single")
    assert list(half.options.check()) == [
        (
            "migStrategy",
            "single needs every GPU in MIG mode with devices of one profile (found 1g.10gb)",
        )
    ]
