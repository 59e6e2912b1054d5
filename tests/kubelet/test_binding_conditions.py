"""End to end: a cluster file whose node-local GPUs have binding conditions and whose
driver attaches them (`drivers[].attachment`) and reports device status
(`drivers[].deviceStatus`), with the kubelet, scheduler and controllers in-process. A pod
asking `example.com/gpu: 1` waits in PreBind until the driver's controller has attached
its device, then runs; its special claim then shows the driver's device status; with
`outcome: Failed` the allocation is given up and retried, and the pod never binds."""

from __future__ import annotations

from drasim.common import codec
from drasim.common.api import core_v1, resource_v1
from drasim.common.client import ApiClient
from tests import builders
from tests.http.whole_cluster import WITH_GPU_CLASS
from tests.kubelet.conftest import RunClusterFile
from tests.kubelet.waiting import wait_for, wait_for_event

CLUSTER = (
    WITH_GPU_CLASS
    + """\
profiles:
  - name: fabric-gpu
    cpu: "8"
    memory: 32Gi
    devices:
      - name: gpu
        driver: gpu.example.com
        count: 2
        bindingConditions: [gpu.example.com/attached]
        bindingFailureConditions: [gpu.example.com/attach-failed]
        bindsToNode: true
pools:
  - name: fabric
    profile: fabric-gpu
drivers:
  - name: gpu.example.com
    attachment: {afterSeconds: 0.2, outcome: OUTCOME}
    deviceStatus: {networkData: true, data: {fabric: rack-1}}
"""
)


def _running(pod: core_v1.Pod | None) -> bool:
    return pod is not None and pod.status.phase == "Running"


async def test_pod_runs_once_its_device_is_attached_and_shows_device_status(
    api: ApiClient, run_cluster_file: RunClusterFile
) -> None:
    await run_cluster_file(CLUSTER.replace("OUTCOME", "Attached"))
    pod = builders.make_pod("trainer").limits({"example.com/gpu": "1"}).obj()
    await api.create(pod)
    message = await wait_for_event(api, pod="trainer", reason="BindingConditionsPending")
    assert message == "waiting for binding conditions for device on node fabric-0"
    running = await wait_for(api, core_v1.Pod, "trainer", _running, namespace="default")
    assert running is not None and running.spec.node_name == "fabric-0"
    status = running.status.extended_resource_claim_status
    assert status is not None

    def reported(claim: resource_v1.ResourceClaim | None) -> bool:
        return claim is not None and any(
            c.type == "Ready" for d in claim.status.devices for c in d.conditions
        )

    claim = await wait_for(
        api,
        resource_v1.ResourceClaim,
        status.resource_claim_name,
        reported,
        namespace="default",
    )
    assert claim is not None and claim.status.allocation is not None
    (result,) = claim.status.allocation.devices.results
    (device,) = claim.status.devices
    assert (device.driver, device.pool, device.device) == (
        result.driver,
        result.pool,
        result.device,
    )
    conditions = {c.type: (c.status, c.reason) for c in device.conditions}
    assert conditions == {
        "gpu.example.com/attached": ("True", "Attached"),
        "Ready": ("True", "Prepared"),
    }
    assert device.data == {"fabric": "rack-1"}
    assert device.network_data is not None
    assert device.network_data.interface_name == "net1"
    assert device.network_data.ips == ["10.1.0.2/24"]


async def test_failed_attachment_gives_the_allocation_up(
    api: ApiClient, run_cluster_file: RunClusterFile
) -> None:
    await run_cluster_file(CLUSTER.replace("OUTCOME", "Failed"))
    pod = builders.make_pod("trainer").limits({"example.com/gpu": "1"}).obj()
    await api.create(pod)
    message = await wait_for_event(api, pod="trainer", reason="FailedScheduling")
    assert message.startswith(
        'running PreBind plugin "DynamicResources": device binding failed: claim=trainer-'
    )
    assert message.endswith(', reason=AttachFailed, message="attach failed by gpu.example.com"')
    current = await api.get(core_v1.Pod, "trainer", namespace="default")
    assert not current.spec.node_name


TEMPLATE = {
    "metadata": {"name": "one-gpu", "namespace": "default"},
    "spec": {"spec": {"devices": {"requests": [
        {"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}
    ]}}},
}  # fmt: skip
TEMPLATED_POD = {
    "metadata": {"name": "templated", "namespace": "default"},
    "spec": {
        "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
        "containers": [
            {"name": "app", "image": "pause", "resources": {"claims": [{"name": "gpu"}]}}
        ],
    },
}


async def test_a_template_claim_is_attached_reported_and_goes_with_its_pod(
    api: ApiClient, run_cluster_file: RunClusterFile
) -> None:
    """The claim the controller makes from a template waits for the attachment as the
    special claim does; the driver reports its device's status there once the pod runs;
    the pod deleted, the claim goes, with its status."""
    await run_cluster_file(CLUSTER.replace("OUTCOME", "Attached"))
    await api.create(codec.convert(TEMPLATE, resource_v1.ResourceClaimTemplate))
    await api.create(codec.convert(TEMPLATED_POD, core_v1.Pod))
    message = await wait_for_event(api, pod="templated", reason="BindingConditionsPending")
    assert message == "waiting for binding conditions for device on node fabric-0"
    running = await wait_for(api, core_v1.Pod, "templated", _running, namespace="default")
    assert running is not None
    (status,) = running.status.resource_claim_statuses
    name = status.resource_claim_name
    assert name is not None and name.startswith("templated-gpu-")

    def reported(claim: resource_v1.ResourceClaim | None) -> bool:
        return claim is not None and any(
            c.type == "Ready" for d in claim.status.devices for c in d.conditions
        )

    claim = await wait_for(api, resource_v1.ResourceClaim, name, reported, namespace="default")
    assert claim is not None
    (device,) = claim.status.devices
    assert {c.type: c.status for c in device.conditions} == {
        "gpu.example.com/attached": "True",
        "Ready": "True",
    }
    assert device.network_data is not None and device.network_data.interface_name == "net1"

    await api.delete(core_v1.Pod, "templated", namespace="default")
    gone = await wait_for(
        api, resource_v1.ResourceClaim, name, lambda c: c is None, namespace="default"
    )
    assert gone is None
