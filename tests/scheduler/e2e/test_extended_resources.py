"""KEP-5004 end to end: pods asking for an extended resource land on device-plugin nodes and
on DRA nodes, and a DRA-served pod gets exactly one special ResourceClaim; its failure
paths converge (upstream `extendeddynamicresources.go`, the map at its top). Nodes,
ResourceSlices and DeviceClasses are created
directly as objects; no kubelet or claim controller runs, so where one would act (removing
a deleted pod's claim finalizer) the test does it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from drasim.common import codec
from drasim.common.api import core_v1, meta_v1, resource_v1
from drasim.common.client import ApiClient
from drasim.scheduler.server import Scheduler
from tests import builders
from tests.scheduler.e2e.conftest import ClusterWatch, StartScheduler
from tests.scheduler.wrappers import make_node, make_pod

DRIVER = "gpu.example.com"
GPU = "example.com/gpu"
IMPLICIT_GPU = "deviceclass.resource.kubernetes.io/gpu.example.com"
ANNOTATION = "resource.kubernetes.io/extended-resource-claim"
FINALIZER = "resource.kubernetes.io/delete-protection"
NODE_RESOURCES = {"cpu": "8", "memory": "32Gi"}


def device_class(
    name: str, extended_resource_name: str | None, driver: str = DRIVER
) -> resource_v1.DeviceClass:
    spec: dict[str, Any] = {"selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}]}
    if extended_resource_name is not None:
        spec["extendedResourceName"] = extended_resource_name
    return codec.convert({"metadata": {"name": name}, "spec": spec}, resource_v1.DeviceClass)


def resource_slice(node: str, devices: int, driver: str = DRIVER) -> resource_v1.ResourceSlice:
    return codec.convert(
        {
            "metadata": {"name": f"{node}-{driver}"},
            "spec": {
                "driver": driver,
                "nodeName": node,
                "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                "devices": [{"name": f"gpu-{i}"} for i in range(devices)],
            },
        },
        resource_v1.ResourceSlice,
    )


async def create_kep_cluster(api: ApiClient, *, dra_devices: int = 8, dp_gpus: int = 2) -> None:
    """The KEP's motivating cluster: a DRA node publishing GPUs of driver gpu.example.com,
    a class mapping them to example.com/gpu, and a device-plugin node advertising
    example.com/gpu in its allocatable."""
    await api.create(device_class(DRIVER, GPU))
    await api.create(make_node("dra-node").capacity(NODE_RESOURCES).obj())
    await api.create(resource_slice("dra-node", dra_devices))
    if dp_gpus:
        await api.create(make_node("dp-node").capacity({**NODE_RESOURCES, GPU: str(dp_gpus)}).obj())


async def special_claim(watch: ClusterWatch, pod_name: str) -> resource_v1.ResourceClaim:
    """Wait until the pod is bound and its only special claim is reserved for it."""

    def ready() -> resource_v1.ResourceClaim | None:
        pod = watch.pods.get(pod_name, "default")
        if pod is None or not pod.spec.node_name:
            return None
        claims = watch.special_claims(pod)
        if len(claims) == 1 and claims[0].status.reserved_for:
            return claims[0]
        return None

    return await watch.wait_for(ready)


def requests_of(claim: resource_v1.ResourceClaim) -> list[tuple[str, str, str, int]]:
    return [
        (r.name, r.exactly.device_class_name, r.exactly.allocation_mode, r.exactly.count)
        for r in claim.spec.devices.requests
        if r.exactly is not None
    ]


def mappings_of(pod: core_v1.Pod) -> list[tuple[str, str, str]]:
    status = pod.status.extended_resource_claim_status
    assert status is not None
    return [(m.container_name, m.resource_name, m.request_name) for m in status.request_mappings]


def allocated_devices(watch: ClusterWatch) -> list[tuple[str, str, str]]:
    return [
        (r.driver, r.pool, r.device)
        for claim in watch.claims.list()
        if claim.status.allocation is not None
        for r in claim.status.allocation.devices.results
    ]


def leftover_claim(pod: core_v1.Pod, name: str) -> resource_v1.ResourceClaim:
    """A special claim as an earlier attempt of this pod would have left it."""
    return codec.convert(
        {
            "metadata": {
                "name": name,
                "namespace": "default",
                "annotations": {ANNOTATION: "true"},
                "ownerReferences": [
                    {
                        "apiVersion": "v1",
                        "kind": "Pod",
                        "name": pod.metadata.name,
                        "uid": pod.metadata.uid,
                        "controller": True,
                    }
                ],
                "finalizers": [FINALIZER],
            },
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": "container-0-request-0",
                            "exactly": {
                                "deviceClassName": DRIVER,
                                "allocationMode": "ExactCount",
                                "count": 1,
                            },
                        }
                    ]
                }
            },
        },
        resource_v1.ResourceClaim,
    )


async def test_kep_motivating_example(
    api: ApiClient, watch: ClusterWatch, start_scheduler: StartScheduler
) -> None:
    await create_kep_cluster(api)
    await start_scheduler()
    names = [f"gpu-pod-{i}" for i in range(10)]
    await asyncio.gather(*(api.create(make_pod(n).limits({GPU: "1"}).obj()) for n in names))
    nodes = {n: await watch.bound(n) for n in names}
    assert sorted(nodes.values()).count("dp-node") == 2
    assert sorted(nodes.values()).count("dra-node") == 8

    for name, node in nodes.items():
        pod = watch.pod(name)
        if node == "dp-node":
            assert watch.special_claims(pod) == []
            assert pod.status.extended_resource_claim_status is None
            continue
        claim = await special_claim(watch, name)
        pod = watch.pod(name)
        meta = claim.metadata
        assert meta.generate_name == f"{name}-extended-resources-"
        assert meta.name.startswith(meta.generate_name)
        assert meta.annotations == {ANNOTATION: "true"}
        assert meta.owner_references == [
            meta_v1.OwnerReference(
                api_version="v1", kind="Pod", name=name, uid=pod.metadata.uid, controller=True
            )
        ]
        assert meta.finalizers == [FINALIZER]
        assert requests_of(claim) == [("container-0-request-0", DRIVER, "ExactCount", 1)]
        allocation = claim.status.allocation
        assert allocation is not None
        [result] = allocation.devices.results
        assert (result.request, result.driver, result.pool) == (
            "container-0-request-0",
            DRIVER,
            "dra-node",
        )
        assert claim.status.reserved_for == [
            resource_v1.ResourceClaimConsumerReference(
                resource="pods", name=name, uid=pod.metadata.uid
            )
        ]
        assert pod.status.extended_resource_claim_status == (
            core_v1.PodExtendedResourceClaimStatus(
                request_mappings=[
                    core_v1.ContainerExtendedResourceRequest(
                        container_name="con0",
                        resource_name=GPU,
                        request_name="container-0-request-0",
                    )
                ],
                resource_claim_name=meta.name,
            )
        )
    devices = allocated_devices(watch)
    assert len(devices) == len(set(devices)) == 8


async def test_implicit_extended_resource_name(
    api: ApiClient, watch: ClusterWatch, start_scheduler: StartScheduler
) -> None:
    await create_kep_cluster(api)
    await start_scheduler()
    await api.create(make_pod("implicit").limits({IMPLICIT_GPU: "2"}).obj())
    # The device-plugin node does not advertise the implicit name: only DRA serves it.
    assert await watch.bound("implicit") == "dra-node"
    claim = await special_claim(watch, "implicit")
    assert requests_of(claim) == [("container-0-request-0", DRIVER, "ExactCount", 2)]
    assert mappings_of(watch.pod("implicit")) == [("con0", IMPLICIT_GPU, "container-0-request-0")]


async def test_mixed_pod_device_plugin_and_dra_names(
    api: ApiClient, watch: ClusterWatch, start_scheduler: StartScheduler
) -> None:
    fpga = "example.com/fpga"
    await api.create(device_class(DRIVER, GPU))
    await api.create(device_class("fpga.example.com", fpga, driver="fpga.example.com"))
    await api.create(make_node("mixed").capacity({**NODE_RESOURCES, GPU: "1"}).obj())
    await api.create(resource_slice("mixed", 1, driver="fpga.example.com"))
    await start_scheduler()
    await api.create(make_pod("p").limits({GPU: "1", fpga: "1"}).obj())
    claim = await special_claim(watch, "p")
    # example.com/gpu is the device plugin's on this node: only the FPGA is in the claim,
    # indexed among the container's sorted request names (gpu, fpga → fpga is 0, gpu 1).
    assert requests_of(claim) == [("container-0-request-0", "fpga.example.com", "ExactCount", 1)]
    assert mappings_of(watch.pod("p")) == [("con0", fpga, "container-0-request-0")]


async def test_init_container_reuses_the_regular_containers_device(
    api: ApiClient, watch: ClusterWatch, start_scheduler: StartScheduler
) -> None:
    await create_kep_cluster(api, dp_gpus=0)
    await start_scheduler()
    pod = (
        builders.make_pod("p")
        .init_container("init-con0", limits={GPU: "2"})
        .container("con0", limits={GPU: "1"})
    )
    await api.create(pod.obj())
    claim = await special_claim(watch, "p")
    # The init container (index 0) runs before con0 (index 1): it reuses con0's device
    # and gets one more of its own (upstream `createResourceRequestAndMappings`).
    assert requests_of(claim) == [
        ("container-0-request-0", DRIVER, "ExactCount", 1),
        ("container-1-request-0", DRIVER, "ExactCount", 1),
    ]
    assert mappings_of(watch.pod("p")) == [
        ("con0", GPU, "container-1-request-0"),
        ("init-con0", GPU, "container-1-request-0"),
        ("init-con0", GPU, "container-0-request-0"),
    ]


async def test_full_cluster_leaves_a_pod_unschedulable_until_capacity_frees(
    api: ApiClient, watch: ClusterWatch, start_scheduler: StartScheduler
) -> None:
    await create_kep_cluster(api, dra_devices=2, dp_gpus=1)
    await start_scheduler()
    for i in range(3):
        await api.create(make_pod(f"p{i}").limits({GPU: "1"}).obj())
        await watch.bound(f"p{i}")
    await api.create(make_pod("waiting").limits({GPU: "1"}).obj())
    condition = await watch.unschedulable("waiting")
    assert (condition.reason, condition.message) == (
        "Unschedulable",
        "0/2 nodes are available: 1 Insufficient example.com/gpu, "
        "1 cannot allocate all claims. preemption: 0/2 nodes are "
        "available: 1 No preemption victims found for incoming pod, "
        "1 Preemption is not helpful for scheduling.",
    )

    # A DRA pod goes; the claim controller would then drop the finalizer of its claim.
    dra_pod = next(f"p{i}" for i in range(3) if watch.pod(f"p{i}").spec.node_name == "dra-node")
    claim = await special_claim(watch, dra_pod)
    await api.delete(core_v1.Pod, dra_pod, namespace="default", grace_period_seconds=0)
    terminating = await watch.wait_for(
        lambda: (
            (c := watch.claims.get(claim.metadata.name, "default")) is not None
            and c.metadata.deletion_timestamp is not None
            and c
        )
    )
    terminating.metadata.finalizers = []
    await api.update(terminating)

    assert await watch.bound("waiting") == "dra-node"
    devices = allocated_devices(watch)
    assert len(devices) == len(set(devices)) == 2


async def test_scheduler_killed_mid_binding_converges(
    api: ApiClient, watch: ClusterWatch, start_scheduler: StartScheduler
) -> None:
    await create_kep_cluster(api, dp_gpus=0)
    first = await start_scheduler()
    [binder] = first.framework.bind_plugins
    never = asyncio.Event()

    async def bind_never(*args: Any) -> None:
        await never.wait()  # the process dies before it binds

    binder.bind = bind_never  # type: ignore[method-assign]
    names = ["p0", "p1", "p2"]
    for name in names:
        await api.create(make_pod(name).limits({GPU: "1"}).obj())
    await watch.wait_for(
        lambda: all(watch.pod(n).status.extended_resource_claim_status for n in names)
    )
    leftovers = {c.metadata.name for c in watch.claims.list()}
    assert len(leftovers) == 3
    await first.stop()  # cancels the bindings: no Unreserve runs, as after kill -9

    await start_scheduler()
    for name in names:
        claim = await special_claim(watch, name)
        assert claim.metadata.name not in leftovers
        assert mappings_of(watch.pod(name)) == [("con0", GPU, "container-0-request-0")]
        status = watch.pod(name).status.extended_resource_claim_status
        assert status is not None and status.resource_claim_name == claim.metadata.name
    await watch.wait_for(lambda: len(watch.claims.list()) == 3)  # no orphan claim
    devices = allocated_devices(watch)
    assert len(devices) == len(set(devices)) == 3


async def test_leftover_special_claim_is_deleted_then_replaced(
    api: ApiClient, watch: ClusterWatch, start_scheduler: StartScheduler
) -> None:
    await create_kep_cluster(api, dp_gpus=0)
    pod = await api.create(make_pod("p").limits({GPU: "1"}).obj())
    await api.create(leftover_claim(pod, "p-extended-resources-old"))
    await start_scheduler()

    [event] = await watch.wait_for(lambda: watch.events_of("p", "FailedScheduling"))
    assert event.message == (
        "0/1 nodes are available: 1 cannot schedule extended resource claim. "
        "deletion of ResourceClaim completed, preemption: 0/1 nodes are available: "
        "1 Preemption is not helpful for scheduling."
    )
    claim = await special_claim(watch, "p")
    assert claim.metadata.name != "p-extended-resources-old"
    assert watch.claims.get("p-extended-resources-old", "default") is None


async def test_duplicate_special_claims_are_removed_one_per_cycle(
    api: ApiClient, watch: ClusterWatch, start_scheduler: StartScheduler
) -> None:
    await create_kep_cluster(api, dp_gpus=0)
    pod = await api.create(make_pod("p").limits({GPU: "1"}).obj())
    for suffix in ("first", "second"):
        await api.create(leftover_claim(pod, f"p-extended-resources-{suffix}"))
    await start_scheduler()

    await watch.wait_for(lambda: watch.events_of("p", "FailedScheduling"))
    await watch.wait_for(lambda: watch.claims.get("p-extended-resources-first", "default") is None)
    assert watch.claims.get("p-extended-resources-second", "default") is not None

    claim = await special_claim(watch, "p")
    assert claim.metadata.name not in ("p-extended-resources-first", "p-extended-resources-second")
    # Both cycles failed with the same message: one Event counts the two of them.
    [deletions] = await watch.wait_for(
        lambda: [
            e
            for e in watch.events_of("p", "FailedScheduling")
            if "deletion of ResourceClaim completed" in e.message and e.count == 2
        ]
    )
    assert len(watch.events_of("p", "FailedScheduling")) == 1
    assert deletions.last_timestamp >= deletions.first_timestamp


async def test_more_than_32_devices_is_an_error(
    api: ApiClient, watch: ClusterWatch, start_scheduler: StartScheduler
) -> None:
    await create_kep_cluster(api)
    scheduler: Scheduler = await start_scheduler()
    await api.create(make_pod("huge").limits({GPU: "33"}).obj())
    condition = await watch.unschedulable("huge")
    assert condition.reason == "SchedulerError"
    assert condition.message.startswith('running "DynamicResources" filter plugin: ')
    assert condition.message.endswith(
        "number of requested devices 33 exceeds the claim limit of 32"
    )
    [event] = await watch.wait_for(lambda: watch.events_of("huge", "FailedScheduling"))
    assert event.message == condition.message
    # An error is retried after backoff, not parked as unschedulable.
    assert "unschedulablePods:0" in scheduler.queue.pending_pods()[1]
    # The retry fails the same way: the same Event counts it.
    [event] = await watch.wait_for(
        lambda: [e for e in watch.events_of("huge", "FailedScheduling") if e.count >= 2]
    )
    assert len(watch.events_of("huge", "FailedScheduling")) == 1
    assert watch.special_claims(watch.pod("huge")) == []


@pytest.mark.parametrize("quantity", ["1e19", "9223372036854775808", "1e999"])
async def test_a_count_past_int64_is_an_error_not_zero(
    api: ApiClient, watch: ClusterWatch, start_scheduler: StartScheduler, quantity: str
) -> None:
    """A whole number of devices past int64 is valid (as upstream), but must not read as no
    request: it saturates at int64 max, more than a claim may hold (issue #15, item 8)."""
    await create_kep_cluster(api, dp_gpus=0)
    await start_scheduler()
    await api.create(make_pod("huge").limits({GPU: quantity}).obj())
    condition = await watch.unschedulable("huge")
    assert condition.reason == "SchedulerError"
    assert condition.message.endswith(
        f"number of requested devices {2**63 - 1} exceeds the claim limit of 32"
    )
    assert not watch.pod("huge").spec.node_name
    assert watch.special_claims(watch.pod("huge")) == []
