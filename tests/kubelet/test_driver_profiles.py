"""A pool naming a driver profile (`profile: dra-example-driver`) end to end, in-process:
the cluster file's options, the slices the driver shim publishes, the chart's DeviceClass,
what a pod's containers get, the driver's error on the pod's event, the chart's
BindingConditions controller, and a device fault taking a partition's GPU out."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from drasim.common import cluster_file, codec, container_devices
from drasim.common.api import core_v1, resource_v1
from drasim.common.client import ApiClient
from drasim.drivers import dra_driver
from drasim.drivers.probe import EmulatedProbe
from tests import builders
from tests.kubelet.conftest import RunClusterFile
from tests.kubelet.waiting import wait_for, wait_for_all, wait_for_event

HEAD = "apiVersion: drasim.io/v1alpha1\nkind: Cluster\n"


def cluster_text(**options: Any) -> str:
    entry = ", ".join(f"{k}: {codec.encode(v).decode()}" for k, v in options.items())
    return HEAD + (
        "pools:\n  - name: node\n    profile: dra-example-driver\n"
        f"    devices:\n      gpu: {{exposure: dra, {entry}}}\n"
    )


def load(tmp_path: Path, text: str) -> cluster_file.Cluster:
    path = tmp_path / "cluster.yaml"
    path.write_text(text)
    return cluster_file.load(path)


def test_the_issues_cluster_file_loads(tmp_path: Path) -> None:
    cluster = load(
        tmp_path,
        cluster_text(
            numDevices=8,
            gpuPartitions=0,
            gpuAllowMultipleAllocations=False,
            bindingConditions=False,
            gpuDeviceStatus=False,
        ),
    )
    (node,) = cluster.nodes
    assert node.profile.name == "dra-example-driver"
    assert node.exposure("gpu").exposure == "dra"
    assert [c.metadata.name for c in cluster.device_classes()] == ["gpu.example.com"]
    names = [d.name for d in EmulatedProbe.of(node).devices()]
    assert names == [f"gpu-{i}" for i in range(8)]


@pytest.mark.parametrize(
    ("options", "error"),
    [
        (
            {"numDevice": 8},
            "field pools[0].devices[gpu]: Object contains unknown field `numDevice`",
        ),
        ({"numDevices": "8"}, "field pools[0].devices[gpu].numDevices: Expected `int`, got `str`"),
        ({"gpuPartitions": -1}, "field pools[0].devices[gpu].gpuPartitions: must be greater than"),
        (
            {"deviceClass": {"extendedResourceName": "gpu"}, "exposure": "device-plugin"},
            "field pools[0].devices[gpu].extendedResourceName: must be a valid extended resource",
        ),
    ],
)
def test_bad_driver_options_name_file_and_field(
    tmp_path: Path, options: dict[str, Any], error: str
) -> None:
    with pytest.raises(cluster_file.ClusterFileError) as refused:
        load(tmp_path, cluster_text(**options))
    assert str(refused.value).startswith(f"{tmp_path / 'cluster.yaml'}: ")
    assert error in str(refused.value)


def test_a_class_the_file_defines_wins_over_the_charts(tmp_path: Path) -> None:
    text = cluster_text(deviceClass={"extendedResourceName": "example.com/gpu"}).replace(
        "pools:",
        "deviceClasses:\n  - metadata: {name: gpu.example.com}\n"
        "    spec: {selectors: [{cel: {expression: 'true'}}]}\npools:",
    )
    (device_class,) = load(tmp_path, text).device_classes()
    assert device_class.spec.extended_resource_name is None


def test_partitions_publish_a_counter_slice_beside_the_devices(tmp_path: Path) -> None:
    (node,) = load(tmp_path, cluster_text(numDevices=2, gpuPartitions=2)).nodes
    probe = EmulatedProbe.of(node)
    devices = probe.devices()
    assert list(dra_driver.pool_devices("node-0", "gpu.example.com", devices)) == [
        "node-0-gpu.example.com-0"
    ]
    counters = dra_driver.pool_counter_sets("node-0", "gpu.example.com", devices)
    assert [s.name for s in counters["node-0-gpu.example.com-counters"]] == [
        "gpu-0-counters",
        "gpu-1-counters",
    ]
    # A GPU that fails takes its partitions and its counter set out with it.
    probe.set_health("gpu-0-full", healthy=False)
    published = dra_driver.pool_devices("node-0", "gpu.example.com", devices)
    assert [d.name for d in published["node-0-gpu.example.com-0"]] == [
        "gpu-1-partition-0",
        "gpu-1-partition-1",
        "gpu-1-full",
    ]
    counters = dra_driver.pool_counter_sets("node-0", "gpu.example.com", devices)
    assert [s.name for s in counters["node-0-gpu.example.com-counters"]] == ["gpu-1-counters"]


async def create_claim_and_pod(
    api: ApiClient, name: str, config: list[dict[str, Any]] | None = None
) -> None:
    """A claim `name` for one gpu.example.com device (with `config`), and a pod `name`
    whose container `ctr0` uses it."""
    request = {"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}
    claim = {
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"devices": {"requests": [request], "config": config or []}},
    }
    await api.create(codec.convert(claim, resource_v1.ResourceClaim))
    pod = builders.make_pod(name).container("ctr0", claims=[{"name": "gpu"}])
    await api.create(pod.claim("gpu", claim_name=name).obj())


def _running(pod: core_v1.Pod | None) -> bool:
    return pod is not None and pod.status.phase == "Running"


def _gpu_config(strategy: str) -> dict[str, Any]:
    return {
        "driver": "gpu.example.com",
        "parameters": {
            "apiVersion": "gpu.resource.example.com/v1alpha1",
            "kind": "GpuConfig",
            "sharing": {"strategy": strategy},
        },
    }


async def test_pods_get_the_drivers_env_and_its_errors(
    api: ApiClient, run_cluster_file: RunClusterFile
) -> None:
    await run_cluster_file(cluster_text(numDevices=2))
    slices = await wait_for_all(api, resource_v1.ResourceSlice, lambda s: len(s) == 1)
    assert [d.name for d in slices[0].spec.devices] == ["gpu-0", "gpu-1"]
    classes, _ = await api.list(resource_v1.DeviceClass)
    assert [c.metadata.name for c in classes] == ["gpu.example.com"]
    for name, strategy in (("good", "SpacePartitioning"), ("bad", "Foo")):
        await create_claim_and_pod(
            api, name, [{"requests": ["gpu"], "opaque": _gpu_config(strategy)}]
        )

    good = await wait_for(api, core_v1.Pod, "good", _running, namespace="default")
    assert good is not None
    given = container_devices.decode_container_devices(
        good.metadata.annotations[container_devices.CONTAINER_DEVICES_ANNOTATION]
    )["ctr0"]
    allocated = await api.get(resource_v1.ResourceClaim, "good", namespace="default")
    uid = allocated.metadata.uid
    assert allocated.status.allocation is not None
    (result,) = allocated.status.allocation.devices.results
    device = result.device
    n = device.removeprefix("gpu-")
    assert given.cdi_devices == [
        "k8s.gpu.example.com/gpu=common",
        f"k8s.gpu.example.com/gpu={uid}-{device}",
    ]
    assert given.env == {
        "KUBERNETES_NODE_NAME": "node-0",
        "DRA_RESOURCE_DRIVER_NAME": "gpu.example.com",
        f"GPU_DEVICE_GPU_{n}_RESOURCE_CLAIM": uid,
        "DRA_ADMIN_ACCESS": "false",
        f"GPU_DEVICE_{n}": device,
        f"GPU_DEVICE_{n}_SHARING_STRATEGY": "SpacePartitioning",
        f"GPU_DEVICE_{n}_PARTITION_COUNT": "1",
    }

    bad = await api.get(resource_v1.ResourceClaim, "bad", namespace="default")
    message = await wait_for_event(api, pod="bad", reason="FailedPrepareDynamicResources")
    assert message == (
        "Failed to prepare dynamic resources: prepare dynamic resources: "
        "NodePrepareResources failed for ResourceClaim "
        f"bad: error preparing devices for claim {bad.metadata.uid}: prepare failed: error "
        "applying config: error validating GPU config: unknown GPU sharing strategy: Foo"
    )


async def test_binding_conditions_are_set_by_the_charts_controller(
    api: ApiClient, run_cluster_file: RunClusterFile
) -> None:
    await run_cluster_file(cluster_text(numDevices=1, bindingConditions=True))
    await create_claim_and_pod(api, "attach")
    assert await wait_for(api, core_v1.Pod, "attach", _running, namespace="default")
    claim = await api.get(resource_v1.ResourceClaim, "attach", namespace="default")
    (status,) = claim.status.devices
    (condition,) = status.conditions
    assert (status.device, condition.type, condition.status) == (
        "gpu-0",
        "BindingConditions",
        "True",
    )
    assert (condition.reason, condition.message) == ("Ready", "Device is ready")


async def test_gpu_device_status_reports_the_devices_attributes(
    api: ApiClient, run_cluster_file: RunClusterFile
) -> None:
    """gpuDeviceStatus: the prepared device's uuid, model and driverVersion in the claim's
    status.devices[].data, as the driver's BuildDeviceStatus writes them (no conditions)."""
    await run_cluster_file(cluster_text(numDevices=1, gpuDeviceStatus=True))
    (published,) = await wait_for_all(api, resource_v1.ResourceSlice, lambda s: len(s) == 1)
    await create_claim_and_pod(api, "status")

    def reported(claim: resource_v1.ResourceClaim | None) -> bool:
        return claim is not None and bool(claim.status.devices)

    claim = await wait_for(api, resource_v1.ResourceClaim, "status", reported, namespace="default")
    assert claim is not None
    (status,) = claim.status.devices
    (device,) = published.spec.devices
    assert (status.driver, status.pool, status.device, status.conditions) == (
        "gpu.example.com",
        "node-0",
        "gpu-0",
        [],
    )
    assert status.data == {
        "uuid": {"string": device.attributes["uuid"].string_value},
        "model": {"string": "LATEST-GPU-MODEL"},
        "driverVersion": {"version": "1.0.0"},
    }
