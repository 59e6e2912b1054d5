"""dra-example-driver's gpu profile against what the real driver publishes and gives
containers, written by hand from its source (internal/profiles/gpu/gpu.go,
cmd/dra-example-kubeletplugin/state.go and cdi.go, api/example.com/resource/gpu/v1alpha1)
at kubernetes-sigs/dra-example-driver@31914ce."""

from __future__ import annotations

import re
from typing import Any

import pytest

from drasim.common import codec
from drasim.common.api import resource_v1
from drasim.common.driver_profiles import PrepareError, PrepareRequest
from drasim.common.driver_profiles.dra_example_driver import ExampleGpuProfile, GpuOptions
from drasim.scheduler.plugins.dynamic_resources import cel_env

UUID = re.compile(r"gpu-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
CLAIM_UID = "5f0b5b2c-0000-4000-8000-000000000001"


def profile(**options: Any) -> ExampleGpuProfile:
    return ExampleGpuProfile(codec.convert(options, GpuOptions))


def published(p: ExampleGpuProfile, node: str = "node-0") -> list[dict[str, Any]]:
    """The devices as JSON, each uuid checked for its form and then left out."""
    devices: list[dict[str, Any]] = codec.to_builtins(p.node_devices(node).devices)
    for device in devices:
        assert UUID.fullmatch(device["attributes"].pop("uuid")["string"])
    return devices


def attrs(index: int, **more: dict[str, Any]) -> dict[str, Any]:
    return {
        "index": {"int": index},
        "model": {"string": "LATEST-GPU-MODEL"},
        "driverVersion": {"version": "1.0.0"},
        **more,
    }


def capacity(memory: str, compute: str) -> dict[str, Any]:
    return {"memory": {"value": memory}, "compute": {"value": compute}}


def shared_capacity(memory: str, compute: str) -> dict[str, Any]:
    """gpu.go memoryCapacity/computeCapacity with allowMultipleAllocations."""
    return {
        "memory": {
            "value": memory,
            "requestPolicy": {
                "default": memory,
                "validRange": {"min": "1Gi", "max": memory, "step": "1Gi"},
            },
        },
        "compute": {
            "value": compute,
            "requestPolicy": {
                "default": compute,
                "validRange": {"min": "1", "max": compute, "step": "1"},
            },
        },
    }


def consumes(gpu: int, memory: str, compute: str) -> list[dict[str, Any]]:
    return [{"counterSet": f"gpu-{gpu}-counters", "counters": capacity(memory, compute)}]


def test_whole_gpus_as_the_driver_publishes_them() -> None:
    assert published(profile(numDevices=2)) == [
        {
            "name": f"gpu-{i}",
            "attributes": attrs(i),
            "capacity": capacity("80Gi", "100"),
            "allowMultipleAllocations": False,
        }
        for i in range(2)
    ]
    assert profile(numDevices=2).node_devices("node-0").counter_sets == []


def test_partitions_the_full_device_and_counter_sets() -> None:
    p = profile(numDevices=2, gpuPartitions=2)
    want = []
    for i in range(2):
        for j in range(2):
            want.append(
                {
                    "name": f"gpu-{i}-partition-{j}",
                    "attributes": attrs(i, partition={"int": j}, partitionable={"bool": True}),
                    "capacity": capacity("40Gi", "50"),
                    "consumesCounters": consumes(i, "40Gi", "50"),
                    "allowMultipleAllocations": False,
                }
            )
        want.append(
            {
                "name": f"gpu-{i}-full",
                "attributes": attrs(i, partitionable={"bool": True}, full={"bool": True}),
                "capacity": capacity("80Gi", "100"),
                "consumesCounters": consumes(i, "80Gi", "100"),
                "allowMultipleAllocations": False,
            }
        )
    assert published(p) == want
    found = p.node_devices("node-0")
    assert codec.to_builtins(found.counter_sets) == [
        {"name": f"gpu-{i}-counters", "counters": capacity("80Gi", "100")} for i in range(2)
    ]
    # A partition is usable while its GPU (the full device) is.
    assert found.parents == {
        "gpu-0-partition-0": "gpu-0-full",
        "gpu-0-partition-1": "gpu-0-full",
        "gpu-1-partition-0": "gpu-1-full",
        "gpu-1-partition-1": "gpu-1-full",
    }


def test_partition_sizes_divide_as_integers() -> None:
    """80Gi / 3 in bytes and 100 / 3, truncated, as resource.NewQuantity gets them."""
    devices = published(profile(numDevices=1, gpuPartitions=3))
    assert devices[0]["capacity"] == capacity("28633115306", "33")


def test_multiple_allocations_attach_request_policies() -> None:
    whole = published(profile(numDevices=1, gpuAllowMultipleAllocations=True))
    assert whole[0]["capacity"] == shared_capacity("80Gi", "100")
    assert whole[0]["allowMultipleAllocations"] is True
    parts = published(profile(numDevices=1, gpuPartitions=2, gpuAllowMultipleAllocations=True))
    assert [d["capacity"] for d in parts] == [
        shared_capacity("40Gi", "50"),
        shared_capacity("40Gi", "50"),
        shared_capacity("80Gi", "100"),
    ]


def test_binding_conditions_on_every_device() -> None:
    for device in published(profile(numDevices=1, gpuPartitions=1, bindingConditions=True)):
        assert device["bindingConditions"] == ["BindingConditions"]
        assert device["bindingFailureConditions"] == ["BindingFailureConditions"]
    assert profile(bindingConditions=True).drivers() == [
        {
            "name": "gpu.example.com",
            "attachment": {"afterSeconds": 0, "reason": "Ready", "message": "Device is ready"},
        }
    ]
    assert profile().drivers() == []
    assert profile(gpuDeviceStatus=True).drivers() == [
        {
            "name": "gpu.example.com",
            "deviceStatus": {
                "attributes": ["uuid", "model", "driverVersion"],
                "readyCondition": False,
            },
        }
    ]


def test_uuids_are_stable_per_node_and_distinct() -> None:
    p = profile(numDevices=4, gpuPartitions=1)

    def uuids(node: str) -> list[str]:
        return [d.attributes["uuid"].string_value or "" for d in p.node_devices(node).devices]

    assert uuids("node-0") == uuids("node-0")
    first = uuids("node-0")
    assert len(set(first)) == 4  # a partition carries its GPU's uuid
    assert first[0] == first[1]  # gpu-0-partition-0, gpu-0-full
    assert set(first).isdisjoint(uuids("node-1"))


def test_the_charts_device_class() -> None:
    (plain,) = profile().device_classes()
    assert codec.to_builtins(plain) == {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": "gpu.example.com"},
        "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.example.com'"}}]},
    }
    (mapped,) = profile(deviceClass={"extendedResourceName": "example.com/gpu"}).device_classes()
    assert mapped.spec.extended_resource_name == "example.com/gpu"
    (renamed,) = profile(driverName="gpu.acme.io").device_classes()
    assert renamed.metadata.name == "gpu.acme.io"


@pytest.mark.parametrize("partitions", [0, 2])
def test_the_device_class_selects_exactly_the_drivers_devices(partitions: int) -> None:
    p = profile(numDevices=2, gpuPartitions=partitions)
    (device_class,) = p.device_classes()
    selectors = [
        cel_env.compile_selector(s.cel.expression) for s in device_class.spec.selectors if s.cel
    ]
    others = [
        resource_v1.Device(
            name="gpu-0",
            attributes={"model": resource_v1.DeviceAttribute(string_value="LATEST-GPU-MODEL")},
        )
    ]

    def selected(driver: str, devices: list[resource_v1.Device]) -> list[str]:
        return [
            d.name
            for d in devices
            if all(cel_env.DeviceVariables(driver, d).matches(s) for s in selectors)
        ]

    mine = p.node_devices("node-0").devices
    assert selected("gpu.example.com", mine) == [d.name for d in mine]
    assert len(mine) == 2 * (partitions + 1 if partitions else 1)
    assert selected("nvidia.com", others) == []


# -- NodePrepareResources -----------------------------------------------------------------------


def gpu_config(**sharing: Any) -> dict[str, Any]:
    return {
        "apiVersion": "gpu.resource.example.com/v1alpha1",
        "kind": "GpuConfig",
        "sharing": sharing,
    }


def claim(
    results: list[dict[str, Any]], configs: list[dict[str, Any]] | None = None
) -> resource_v1.ResourceClaim:
    return codec.convert(
        {
            "metadata": {"name": "c", "namespace": "default", "uid": CLAIM_UID},
            "spec": {"devices": {"requests": [{"name": r["request"]} for r in results]}},
            "status": {
                "allocation": {
                    "devices": {
                        "results": [
                            {"driver": "gpu.example.com", "pool": "node-0", **r} for r in results
                        ],
                        "config": configs or [],
                    }
                }
            },
        },
        resource_v1.ResourceClaim,
    )


def prepare(p: ExampleGpuProfile, c: resource_v1.ResourceClaim) -> dict[str, dict[str, str]]:
    """Per device: the environment its container gets (its CDI ids' edits together)."""
    assert c.status.allocation is not None
    request = PrepareRequest(node="node-0", claim=c, results=c.status.allocation.devices.results)
    done = p.prepare(request)
    found = {}
    for device in done.devices:
        env: dict[str, str] = {}
        for cdi_id in device.cdi_device_ids:
            env.update(done.cdi_edits[cdi_id])
        found[device.result.device] = env
    return found


def opaque(parameters: dict[str, Any], source: str = "FromClaim", *requests: str) -> dict:
    return {
        "source": source,
        "requests": list(requests),
        "opaque": {"driver": "gpu.example.com", "parameters": parameters},
    }


def test_default_config_time_slices_and_names_the_device() -> None:
    got = prepare(profile(), claim([{"request": "gpu", "device": "gpu-3"}]))
    assert got == {
        "gpu-3": {
            "KUBERNETES_NODE_NAME": "node-0",
            "DRA_RESOURCE_DRIVER_NAME": "gpu.example.com",
            "GPU_DEVICE_GPU_3_RESOURCE_CLAIM": CLAIM_UID,
            "DRA_ADMIN_ACCESS": "false",
            "GPU_DEVICE_3": "gpu-3",
            "GPU_DEVICE_3_SHARING_STRATEGY": "TimeSlicing",
            "GPU_DEVICE_3_TIMESLICE_INTERVAL": "Default",
        }
    }


def test_cdi_ids_as_the_driver_names_them() -> None:
    c = claim([{"request": "gpu", "device": "gpu-1", "shareID": "abc"}])
    assert c.status.allocation is not None
    done = profile(gpuAllowMultipleAllocations=True).prepare(
        PrepareRequest(node="node-0", claim=c, results=c.status.allocation.devices.results)
    )
    assert done.devices[0].cdi_device_ids == [
        "k8s.gpu.example.com/gpu=common",
        f"k8s.gpu.example.com/gpu={CLAIM_UID}-gpu-1-abc",
    ]


def test_claim_config_overrides_class_config_per_request() -> None:
    configs = [
        opaque(gpu_config(strategy="SpacePartitioning"), "FromClass", "a", "b"),
        opaque(
            gpu_config(strategy="TimeSlicing", timeSlicingConfig={"interval": "Long"}),
            "FromClaim",
            "b",
        ),
    ]
    got = prepare(
        profile(numDevices=4),
        claim([{"request": "a", "device": "gpu-0"}, {"request": "b", "device": "gpu-1"}], configs),
    )
    assert got["gpu-0"]["GPU_DEVICE_0_SHARING_STRATEGY"] == "SpacePartitioning"
    assert got["gpu-0"]["GPU_DEVICE_0_PARTITION_COUNT"] == "1"  # Normalize's default
    assert got["gpu-1"]["GPU_DEVICE_1_SHARING_STRATEGY"] == "TimeSlicing"
    assert got["gpu-1"]["GPU_DEVICE_1_TIMESLICE_INTERVAL"] == "Long"
    assert "GPU_DEVICE_1_PARTITION_COUNT" not in got["gpu-1"]


def test_admin_access_partitions_and_consumed_capacity() -> None:
    got = prepare(
        profile(numDevices=1, gpuPartitions=2, gpuAllowMultipleAllocations=True),
        claim(
            [
                {
                    "request": "gpu",
                    "device": "gpu-0-partition-1",
                    "adminAccess": True,
                    "shareID": "s1",
                    "consumedCapacity": {"memory": "10Gi", "compute": "25"},
                }
            ]
        ),
    )
    env = got["gpu-0-partition-1"]
    assert env["DRA_ADMIN_ACCESS"] == "true"
    assert env["GPU_DEVICE_0_PARTITION_1"] == "gpu-0-partition-1"
    assert env["GPU_DEVICE_GPU_0_PARTITION_1_RESOURCE_CLAIM"] == CLAIM_UID
    assert env["GPU_DEVICE_0_PARTITION_1_MEMORY"] == "10Gi"
    assert env["GPU_DEVICE_0_PARTITION_1_COMPUTE"] == "25"


def test_other_drivers_configs_are_skipped() -> None:
    other = {"source": "FromClaim", "opaque": {"driver": "nic.example.com", "parameters": {"x": 1}}}
    got = prepare(profile(), claim([{"request": "gpu", "device": "gpu-0"}], [other]))
    assert got["gpu-0"]["GPU_DEVICE_0_SHARING_STRATEGY"] == "TimeSlicing"


PREFIX = f"error preparing devices for claim {CLAIM_UID}: prepare failed: "
BAD_CONFIGS = [
    (
        gpu_config(strategy="Foo"),
        "error applying config: error validating GPU config: unknown GPU sharing strategy: Foo",
    ),
    (
        gpu_config(strategy="TimeSlicing", timeSlicingConfig={"interval": "Forever"}),
        "error applying config: error validating GPU config: unknown time-slice interval: Forever",
    ),
    (
        gpu_config(strategy="SpacePartitioning", spacePartitioningConfig={"partitionCount": -1}),
        "error applying config: error validating GPU config: invalid partition count: -1",
    ),
    (
        gpu_config(strategy="TimeSlicing", spacePartitioningConfig={"partitionCount": 2}),
        "error applying config: unable to get time slicing config for device gpu-0: "
        "cannot use SpacePartitioningConfig with the 'TimeSlicing' strategy",
    ),
    (
        gpu_config(strategy="SpacePartitioning", spacePartitioningConfig={"partitionCount": "2"}),
        "error getting opaque device configs: error decoding config parameters: json: cannot "
        "unmarshal string into Go struct field GpuConfig.sharing.spacePartitioningConfig"
        ".partitionCount of type int",
    ),
    (
        {"apiVersion": "gpu.resource.example.com/v1alpha1", "kind": "NetConfig"},
        "error getting opaque device configs: error decoding config parameters: "
        'no kind "NetConfig" is registered for version "gpu.resource.example.com/v1alpha1"',
    ),
]


@pytest.mark.parametrize(("parameters", "error"), BAD_CONFIGS, ids=[e for _, e in BAD_CONFIGS])
def test_invalid_opaque_config_fails_with_the_drivers_message(
    parameters: dict[str, Any], error: str
) -> None:
    c = claim([{"request": "gpu", "device": "gpu-0"}], [opaque(parameters)])
    with pytest.raises(PrepareError) as failed:
        prepare(profile(), c)
    assert str(failed.value) == PREFIX + error


def test_a_device_the_driver_does_not_publish_is_refused() -> None:
    with pytest.raises(PrepareError, match="requested device is not allocatable: gpu-9"):
        prepare(profile(numDevices=2), claim([{"request": "gpu", "device": "gpu-9"}]))
