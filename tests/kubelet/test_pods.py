"""Pods bound to emulated nodes run with exactly their devices (upstream
`pkg/kubelet/cm/dra/manager.go` and its `manager_test.go`; `test/e2e/dra/dra.go`)."""

from __future__ import annotations

import asyncio

from drasim.apistore.faults import FaultPlan, FaultRule
from drasim.common import container_devices
from drasim.common.api import core_v1, resource_v1
from drasim.common.client import ApiClient
from drasim.kubelet.run import KubeletProcess
from tests.builders import make_pod
from tests.kubelet.conftest import DP_NODE, DRA_NODE, MIXED_NODE
from tests.kubelet.scheduling import reserve, schedule_with_dra
from tests.kubelet.waiting import wait_for, wait_for_event


def running(pod: core_v1.Pod | None) -> bool:
    return pod is not None and pod.status.phase == "Running"


def devices_of(pod: core_v1.Pod) -> dict[str, container_devices.ContainerDevices]:
    return container_devices.decode_container_devices(
        pod.metadata.annotations[container_devices.CONTAINER_DEVICES_ANNOTATION]
    )


def resource_status(pod: core_v1.Pod) -> dict[str, dict[str, list[str]]]:
    """Container → allocatedResourcesStatus name → device ids."""
    statuses = [*pod.status.init_container_statuses, *pod.status.container_statuses]
    return {
        s.name: {r.name: [h.resource_id for h in r.resources] for r in s.allocated_resources_status}
        for s in statuses
    }


async def test_a_pod_bound_to_a_device_plugin_node_runs_with_device_ids(
    api: ApiClient, kubelet: KubeletProcess
) -> None:
    pod = make_pod("dp-pod").limits({"example.com/gpu": "2"}).node(DP_NODE).obj()
    await api.create(pod)

    pod = await wait_for(api, core_v1.Pod, "dp-pod", running, namespace="default")
    assert pod is not None
    assert pod.status.extended_resource_claim_status is None  # as upstream's e2e asserts
    assert resource_status(pod) == {"con0": {"example.com/gpu": ["gpu-0", "gpu-1"]}}
    con0 = devices_of(pod)["con0"]
    assert con0.cdi_devices == ["example.com/gpu=gpu-0", "example.com/gpu=gpu-1"]
    assert con0.env == {"EXAMPLE_COM_GPU_VISIBLE_DEVICES": "gpu-0,gpu-1"}
    status = pod.status.container_statuses[0]
    assert status.ready and status.state.running is not None
    assert pod.status.pod_ip and pod.status.host_ip


async def test_a_pod_that_does_not_fit_is_rejected_and_deleting_frees_devices(
    api: ApiClient, kubelet: KubeletProcess
) -> None:
    for name in ("first", "second"):
        await api.create(make_pod(name).limits({"example.com/gpu": "1"}).node(DP_NODE).obj())
        await wait_for(api, core_v1.Pod, name, running, namespace="default")
    await api.create(make_pod("third").limits({"example.com/gpu": "1"}).node(DP_NODE).obj())

    third = await wait_for(
        api, core_v1.Pod, "third", lambda p: p is not None and p.status.phase == "Failed"
    )
    assert third is not None
    assert third.status.reason == "OutOfexample.com/gpu"
    assert third.status.message == (
        "Node didn't have enough resource: example.com/gpu, requested: 1, used: 2, capacity: 2"
    )
    assert (await wait_for_event(api, pod="third", reason="OutOfexample.com/gpu")).startswith(
        "Node didn't have enough resource"
    )

    first = await api.get(core_v1.Pod, "first", namespace="default")
    await api.delete(core_v1.Pod, "first", namespace="default")
    await wait_for(api, core_v1.Pod, "first", lambda p: p is None, namespace="default")
    await api.create(make_pod("fourth").limits({"example.com/gpu": "1"}).node(DP_NODE).obj())
    fourth = await wait_for(api, core_v1.Pod, "fourth", running, namespace="default")
    assert fourth is not None
    assert resource_status(fourth)["con0"] == resource_status(first)["con0"]  # freed, reused


async def test_containers_get_their_own_dra_and_device_plugin_devices(
    api: ApiClient, kubelet: KubeletProcess
) -> None:
    """Init container and two containers; DRA-backed explicit and implicit names beside a
    device-plugin name (requests named as upstream's `createResourceRequestAndMappings`
    names them: index in init+regular containers,
    then the container's sorted request names)."""
    implicit = "deviceclass.resource.kubernetes.io/gpu.example.com"
    pod = (
        make_pod("mixed")
        .init_container("init-con0", limits={"example.com/gpu": "1"})
        .container("con0", limits={"example.com/gpu": "1", "example.com/fpga": "1"})
        .container("con1", limits={implicit: "2"})
        .obj()
    )
    pod, claim = await schedule_with_dra(
        api,
        pod,
        MIXED_NODE,
        mappings=[
            ("init-con0", "example.com/gpu", "container-0-request-0"),
            ("con0", "example.com/gpu", "container-1-request-1"),
            ("con1", implicit, "container-2-request-0"),
        ],
        results=[
            ("container-0-request-0", "gpu-0"),
            ("container-1-request-1", "gpu-1"),
            ("container-2-request-0", "gpu-2"),
            ("container-2-request-0", "gpu-3"),
        ],
    )

    pod = await wait_for(api, core_v1.Pod, "mixed", running, namespace="default")
    assert pod is not None
    uid = claim.metadata.uid
    name = claim.metadata.name
    devices = devices_of(pod)
    assert devices["init-con0"].cdi_devices == [f"gpu.example.com/gpu={uid}-gpu-0"]
    assert devices["init-con0"].env == {"container_0_request_0": "true"}
    assert devices["con0"].cdi_devices == [
        "example.com/fpga=fpga-0",
        f"gpu.example.com/gpu={uid}-gpu-1",
    ]
    assert devices["con0"].env == {
        "EXAMPLE_COM_FPGA_VISIBLE_DEVICES": "fpga-0",
        "container_1_request_1": "true",
    }
    assert devices["con1"].cdi_devices == [
        f"gpu.example.com/gpu={uid}-gpu-2",
        f"gpu.example.com/gpu={uid}-gpu-3",
    ]
    assert devices["con1"].env == {"container_2_request_0": "true"}
    assert resource_status(pod) == {
        "init-con0": {
            f"claim:{name}/container-0-request-0": [f"gpu.example.com/{MIXED_NODE}/gpu-0"]
        },
        "con0": {
            "example.com/fpga": ["fpga-0"],
            f"claim:{name}/container-1-request-1": [f"gpu.example.com/{MIXED_NODE}/gpu-1"],
        },
        "con1": {
            f"claim:{name}/container-2-request-0": [
                f"gpu.example.com/{MIXED_NODE}/gpu-2",
                f"gpu.example.com/{MIXED_NODE}/gpu-3",
            ]
        },
    }
    init = pod.status.init_container_statuses[0]
    assert init.state.terminated is not None and init.state.terminated.reason == "Completed"


async def test_two_mappings_for_one_resource_give_the_devices_of_both_requests(
    api: ApiClient, kubelet: KubeletProcess
) -> None:
    """A container with two mappings for one resource gets the devices of both requests
    (upstream `TestGetResources`)."""
    pod = make_pod("f3").limits({"example.com/gpu": "2"}).obj()
    pod, claim = await schedule_with_dra(
        api,
        pod,
        DRA_NODE,
        mappings=[
            ("con0", "example.com/gpu", "container-0-request-0"),
            ("con0", "example.com/gpu", "container-0-request-1"),
        ],
        results=[("container-0-request-0", "gpu-4"), ("container-0-request-1", "gpu-5")],
    )

    pod = await wait_for(api, core_v1.Pod, "f3", running, namespace="default")
    assert pod is not None
    uid = claim.metadata.uid
    assert devices_of(pod)["con0"].cdi_devices == [
        f"gpu.example.com/gpu={uid}-gpu-4",
        f"gpu.example.com/gpu={uid}-gpu-5",
    ]
    assert devices_of(pod)["con0"].env == {
        "container_0_request_0": "true",
        "container_0_request_1": "true",
    }


async def test_a_claim_not_reserved_for_the_pod_is_not_prepared(
    api: ApiClient, kubelet: KubeletProcess
) -> None:
    """Prepare fails until the pod is in the claim's reservedFor (upstream
    `prepareResources`: "is not allowed to use ResourceClaim")."""
    pod = make_pod("f4").limits({"example.com/gpu": "1"}).obj()
    pod, claim = await schedule_with_dra(
        api,
        pod,
        DRA_NODE,
        mappings=[("con0", "example.com/gpu", "container-0-request-0")],
        results=[("container-0-request-0", "gpu-0")],
        reserved=False,
    )

    message = await wait_for_event(api, pod="f4", reason="FailedPrepareDynamicResources")
    assert message == (
        "Failed to prepare dynamic resources: prepare dynamic resources: "
        f"pod f4 ({pod.metadata.uid}) is not allowed to use ResourceClaim "
        f"{claim.metadata.name} ({claim.metadata.uid})"
    )
    assert (await api.get(core_v1.Pod, "f4", namespace="default")).status.phase == "Pending"
    assert kubelet.agents[DRA_NODE].drivers["gpu.example.com"].prepare_count == 0

    await reserve(api, claim, pod)
    assert await wait_for(api, core_v1.Pod, "f4", running, namespace="default")


async def test_deleting_a_dra_pod_unprepares_and_frees_its_devices(
    api: ApiClient, kubelet: KubeletProcess
) -> None:
    mapping = [("con0", "example.com/gpu", "container-0-request-0")]
    result = [("container-0-request-0", "gpu-7")]
    pod, claim = await schedule_with_dra(
        api, make_pod("one").limits({"example.com/gpu": "1"}).obj(), DRA_NODE,
        mappings=mapping, results=result,
    )  # fmt: skip
    await wait_for(api, core_v1.Pod, "one", running, namespace="default")
    driver = kubelet.agents[DRA_NODE].drivers["gpu.example.com"]
    assert set(driver.prepared_devices()) == {"gpu-7"}

    await api.delete(core_v1.Pod, "one", namespace="default")
    await wait_for(api, core_v1.Pod, "one", lambda p: p is None, namespace="default")
    assert driver.prepared_devices() == {}
    assert kubelet.agents[DRA_NODE].dra.claims == {}
    # The special claim goes with its pod (the ResourceClaim controller removes the
    # finalizer; here the test plays it), and the device serves the next pod.
    await api.patch(
        resource_v1.ResourceClaim, claim.metadata.name, {"metadata": {"finalizers": None}},
        namespace="default",
    )  # fmt: skip
    await wait_for(
        api, resource_v1.ResourceClaim, claim.metadata.name, lambda c: c is None,
        namespace="default",
    )  # fmt: skip
    pod, claim = await schedule_with_dra(
        api, make_pod("two").limits({"example.com/gpu": "1"}).obj(), DRA_NODE,
        mappings=mapping, results=result,
    )  # fmt: skip
    two = await wait_for(api, core_v1.Pod, "two", running, namespace="default")
    assert two is not None
    assert devices_of(two)["con0"].cdi_devices == [
        f"gpu.example.com/gpu={claim.metadata.uid}-gpu-7"
    ]
    assert driver.prepare_count == 2


async def test_pods_deleted_together_unprepare_each_claim_once(
    api: ApiClient, kubelet: KubeletProcess
) -> None:
    """Deletions handled concurrently on one node must not unprepare each other's claims
    (once a second call found the first's claim still prepared and unprepared it too)."""
    driver = kubelet.agents[DRA_NODE].drivers["gpu.example.com"]
    unprepared: list[str] = []
    original = driver.node_unprepare_resources

    async def counting(request):  # type: ignore[no-untyped-def]
        unprepared.extend(claim.uid for claim in request.claims)
        return await original(request)

    driver.node_unprepare_resources = counting  # type: ignore[method-assign]
    claims = []
    names = [f"pod-{i}" for i in range(4)]
    for i, name in enumerate(names):
        _, claim = await schedule_with_dra(
            api, make_pod(name).limits({"example.com/gpu": "1"}).obj(), DRA_NODE,
            mappings=[("con0", "example.com/gpu", "container-0-request-0")],
            results=[("container-0-request-0", f"gpu-{i}")],
        )  # fmt: skip
        claims.append(claim.metadata.uid)
    for name in names:
        await wait_for(api, core_v1.Pod, name, running, namespace="default")

    await asyncio.gather(*(api.delete(core_v1.Pod, n, namespace="default") for n in names))
    for name in names:
        await wait_for(api, core_v1.Pod, name, lambda p: p is None, namespace="default")
    assert driver.prepared_devices() == {}
    assert sorted(unprepared) == sorted(claims)
    assert kubelet.agents[DRA_NODE].dra.claims == {}


async def test_a_failed_running_status_write_is_made_again(
    api: ApiClient, server, kubelet: KubeletProcess
) -> None:
    """The kubelet's write of the Running status fails once, after its devices annotation
    went through: the echo of that annotation must not be taken for the kubelet's own
    finished work, or the pod stays Pending."""
    server.core.fault_plan = FaultPlan(
        rules=[FaultRule(resource="pods", verb="patch", subresource="status", code=503)]
    )
    await api.create(make_pod("p").limits({"example.com/gpu": "1"}).node(DP_NODE).obj())
    pod = await wait_for(api, core_v1.Pod, "p", running, namespace="default")
    assert pod is not None
    assert server.core.fault_plan.rules[0].seen >= 2  # the failed write, then the one that ran
    assert resource_status(pod) == {"con0": {"example.com/gpu": ["gpu-0"]}}


async def test_a_sync_failing_after_a_lost_status_write_is_made_again(
    api: ApiClient, server, kubelet: KubeletProcess, monkeypatch
) -> None:
    """The Running status write fails after the devices annotation went through; then the
    retry fails earlier (here saving the device plugin's checkpoint). Neither the retry's
    value nor the annotation's echo is finished work: the pod must still start."""
    server.core.fault_plan = FaultPlan(
        rules=[FaultRule(resource="pods", verb="patch", subresource="status", code=503)]
    )
    plugin = kubelet.agents[DP_NODE].plugins["example.com/gpu"]
    real_save = plugin.save
    saves = 0

    async def save_failing_the_second_time() -> None:
        nonlocal saves
        saves += 1
        if saves == 2:
            raise OSError("disk full")
        await real_save()

    monkeypatch.setattr(plugin, "save", save_failing_the_second_time)
    await api.create(make_pod("p").limits({"example.com/gpu": "1"}).node(DP_NODE).obj())
    pod = await wait_for(api, core_v1.Pod, "p", running, namespace="default")
    assert pod is not None
    assert saves >= 3  # the first sync, the retry that failed, the one that ran
    assert resource_status(pod) == {"con0": {"example.com/gpu": ["gpu-0"]}}
