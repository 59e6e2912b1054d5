"""End to end through kubectl: partitionable devices (KEP-4815) and shared capacity
(KEP-5075) served by the DRA driver shim from a cluster file, for extended resources (the
special claim), claim templates and user claims, and counters and capacity given back when
pods go.

One node `mig-0`: GPU `gpu-0` with 4 units of memory, which the whole GPU consumes entirely
and each of its three `1g` partitions 2 of (so two partitions fit at a time), and a shared
`vgpu-0` with 10 units of bandwidth, each share consuming its request rounded up to a
multiple of 2 from 4, by default 4.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from drasim.common import cluster_file
from drasim.common.api import core_v1, resource_v1
from drasim.common.client import ApiClient
from drasim.controllers.server import ControllerManager
from drasim.kubelet.run import KubeletProcess
from drasim.scheduler.server import Scheduler
from tests.http.conftest import Cluster
from tests.kubelet.waiting import wait_for, wait_for_event

NODE = "mig-0"
DRIVER = "gpu.example.com"

CLUSTER = """\
apiVersion: drasim.io/v1alpha1
kind: Cluster
deviceClasses:
  - apiVersion: resource.k8s.io/v1
    kind: DeviceClass
    metadata: {name: mig-1g.example.com}
    spec:
      selectors:
        - cel: {expression: "device.attributes['gpu.example.com'].profile == '1g'"}
      extendedResourceName: example.com/mig-1g
  - apiVersion: resource.k8s.io/v1
    kind: DeviceClass
    metadata: {name: gpu.example.com}
    spec:
      selectors:
        - cel: {expression: "device.attributes['gpu.example.com'].profile == 'whole'"}
  - apiVersion: resource.k8s.io/v1
    kind: DeviceClass
    metadata: {name: vgpu.example.com}
    spec:
      selectors:
        - cel: {expression: "device.driver == 'gpu.example.com' && device.allowMultipleAllocations"}
      extendedResourceName: example.com/vgpu
profiles:
  - name: mig
    cpu: "16"
    memory: 64Gi
    devices:
      - name: gpu
        driver: gpu.example.com
        count: 1
        attributes: {profile: whole}
        counters: {memory: "4"}
        partitions:
          - name: 1g
            count: 3
            counters: {memory: "2"}
            attributes: {profile: 1g}
      - name: vgpu
        driver: gpu.example.com
        count: 1
        attributes: {profile: shared}
        capacity: {bandwidth: "10"}
        allowMultipleAllocations: true
        requestPolicy:
          bandwidth: {default: "4", validRange: {min: "4", step: "2"}}
pools:
  - name: mig
    count: 1
    profile: mig
    devices:
      gpu: {exposure: dra}
      vgpu: {exposure: dra}
"""

POD = """\
apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  containers:
  - name: c
    image: registry.k8s.io/pause:3.10
    resources: {{limits: {{{resource}: "1"}}}}
"""

TEMPLATE_POD = """\
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: bandwidth-5}
spec:
  spec:
    devices:
      requests:
      - name: vgpu
        exactly:
          deviceClassName: vgpu.example.com
          capacity: {requests: {bandwidth: "5"}}
---
apiVersion: v1
kind: Pod
metadata: {name: templated}
spec:
  resourceClaims:
  - {name: vgpu, resourceClaimTemplateName: bandwidth-5}
  containers:
  - name: c
    image: registry.k8s.io/pause:3.10
    resources: {claims: [{name: vgpu}]}
"""

WHOLE_CLAIM = """\
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: whole-gpu}
spec:
  devices:
    requests:
    - {name: gpu, exactly: {deviceClassName: gpu.example.com}}
---
apiVersion: v1
kind: Pod
metadata: {name: whole}
spec:
  resourceClaims:
  - {name: gpu, resourceClaimName: whole-gpu}
  containers:
  - name: c
    image: registry.k8s.io/pause:3.10
    resources: {claims: [{name: gpu}]}
"""


@pytest.fixture
async def mig_node(cluster: Cluster, tmp_path: Path) -> AsyncIterator[None]:
    path = tmp_path / "cluster.yaml"
    path.write_text(CLUSTER)
    nodes = cluster_file.load(path)
    bus = cluster.api.bus
    for cls in nodes.spec.device_classes:
        await cluster.api.create(cls)
    scheduler = Scheduler(ApiClient(bus, actor="system:kube-scheduler"))
    controllers = ControllerManager(bus)
    kubelet = KubeletProcess(api=cluster.api, nodes=nodes.nodes, state_dir=tmp_path / "nodes")
    await kubelet.start()
    await scheduler.start()
    await controllers.start()
    try:
        yield
    finally:
        await controllers.stop()
        await scheduler.stop()
        for informer in scheduler.informers:
            await informer.stop()
        await kubelet.stop()


def _running(pod: core_v1.Pod | None) -> bool:
    return pod is not None and pod.status.phase == "Running"


async def _running_pod(api: ApiClient, name: str) -> core_v1.Pod:
    pod = await wait_for(api, core_v1.Pod, name, _running, namespace="default")
    assert pod is not None
    return pod


async def _results(
    api: ApiClient, pod: core_v1.Pod
) -> list[resource_v1.DeviceRequestAllocationResult]:
    """The allocation of the pod's special claim."""
    status = pod.status.extended_resource_claim_status
    assert status is not None
    claim = await api.get(
        resource_v1.ResourceClaim, status.resource_claim_name, namespace="default"
    )
    assert claim.status.allocation is not None
    return claim.status.allocation.devices.results


async def test_slices_publish_counters_partitions_and_shared_capacity(
    cluster: Cluster, kubectl, mig_node: None
) -> None:
    """The driver publishes the counter set in a slice of its own, the devices consuming
    it in another of the same pool, and the shared device with its request policy."""
    await wait_for(
        cluster.api,
        resource_v1.ResourceSlice,
        f"{NODE}-{DRIVER}-counters",
        lambda s: s is not None,
    )
    got = await kubectl(
        "get",
        "resourceslices",
        "-o",
        "jsonpath={range .items[*]}{.metadata.name} {.spec.pool.resourceSliceCount}"
        " {.spec.sharedCounters[*].name} {.spec.devices[*].name}{'\\n'}{end}",
    )
    assert got.stdout.splitlines() == [
        f"{NODE}-{DRIVER}-0 2  gpu-0 gpu-0-1g-0 gpu-0-1g-1 gpu-0-1g-2 vgpu-0",
        f"{NODE}-{DRIVER}-counters 2 gpu-0-counters ",
    ]
    policy = await kubectl(
        "get",
        "resourceslice",
        f"{NODE}-{DRIVER}-0",
        "-o",
        "jsonpath={.spec.devices[4].capacity.bandwidth.requestPolicy}",
    )
    assert policy.stdout == '{"default":"4","validRange":{"min":"4","step":"2"}}'


async def test_extended_resource_on_partitions_leaves_the_third_pod_pending(
    cluster: Cluster, kubectl, mig_node: None
) -> None:
    """Three pods ask `example.com/mig-1g: 1`; three partitions exist but their GPU's
    memory holds two. The third waits until a running one is deleted and its counters are
    given back; meanwhile the whole GPU cannot be had."""
    for name in ("a", "b", "c"):
        await kubectl(
            "apply", "-f", "-", input=POD.format(name=name, resource="example.com/mig-1g")
        )
    a = await _running_pod(cluster.api, "a")
    b = await _running_pod(cluster.api, "b")
    message = await wait_for_event(cluster.api, pod="c", reason="FailedScheduling")
    assert "cannot allocate all claims" in message
    pending = await kubectl("get", "pod", "c", "-o", "jsonpath={.status.phase}")
    assert pending.stdout == "Pending"
    devices = {r.device for p in (a, b) for r in await _results(cluster.api, p)}
    assert devices == {"gpu-0-1g-0", "gpu-0-1g-1"}

    await kubectl("apply", "-f", "-", input=WHOLE_CLAIM)
    await wait_for_event(cluster.api, pod="whole", reason="FailedScheduling")

    deleted = await kubectl("delete", "pod", "a", "--wait=true")
    assert deleted.stdout.strip() == 'pod "a" deleted'
    c = await _running_pod(cluster.api, "c")
    (result,) = await _results(cluster.api, c)
    assert result.device in {"gpu-0-1g-0", "gpu-0-1g-2"} - {
        r.device for r in await _results(cluster.api, b)
    }

    for name in ("b", "c"):
        await kubectl("delete", "pod", name, "--wait=true")
    whole = await _running_pod(cluster.api, "whole")
    claim = await cluster.api.get(resource_v1.ResourceClaim, "whole-gpu", namespace="default")
    assert claim.status.allocation is not None
    assert [r.device for r in claim.status.allocation.devices.results] == ["gpu-0"]
    assert whole.spec.node_name == NODE


async def test_shares_of_a_device_from_templates_and_extended_resources(
    cluster: Cluster, kubectl, mig_node: None
) -> None:
    """A claim template asking 5 units of bandwidth gets a share of 6 (rounded to the
    step); a pod asking `example.com/vgpu: 1` gets the default 4; another finds 0 left of
    what it needs and waits until the template's pod goes."""
    await kubectl("apply", "-f", "-", input=TEMPLATE_POD)
    templated = await _running_pod(cluster.api, "templated")
    (claim_status,) = templated.status.resource_claim_statuses
    claim = await cluster.api.get(
        resource_v1.ResourceClaim, claim_status.resource_claim_name, namespace="default"
    )
    assert claim.status.allocation is not None
    (share,) = claim.status.allocation.devices.results
    assert (share.device, str(share.consumed_capacity["bandwidth"])) == ("vgpu-0", "6")
    assert share.share_id

    await kubectl("apply", "-f", "-", input=POD.format(name="v1", resource="example.com/vgpu"))
    v1 = await _running_pod(cluster.api, "v1")
    (second,) = await _results(cluster.api, v1)
    assert (second.device, str(second.consumed_capacity["bandwidth"])) == ("vgpu-0", "4")
    assert second.share_id not in (None, share.share_id)

    await kubectl("apply", "-f", "-", input=POD.format(name="v2", resource="example.com/vgpu"))
    await wait_for_event(cluster.api, pod="v2", reason="FailedScheduling")
    await kubectl("delete", "pod", "templated", "--wait=true")
    v2 = await _running_pod(cluster.api, "v2")
    (third,) = await _results(cluster.api, v2)
    assert third.device == "vgpu-0"

    # Each share was prepared on its own: its own CDI device, named after its share.
    logs = await kubectl("logs", "v2")
    assert third.share_id is not None and third.share_id in logs.stdout


PARTITION_TEMPLATE = """\
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: one-1g}
spec:
  spec:
    devices:
      requests:
      - {name: mig, exactly: {deviceClassName: mig-1g.example.com}}
"""
TEMPLATE_PARTITION_POD = """\
apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  resourceClaims:
  - {{name: mig, resourceClaimTemplateName: one-1g}}
  containers:
  - name: c
    image: registry.k8s.io/pause:3.10
    resources: {{claims: [{{name: mig}}]}}
"""
WIDE_CLAIM = """\
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: wide}
spec:
  devices:
    requests:
    - name: vgpu
      exactly:
        deviceClassName: vgpu.example.com
        capacity: {requests: {bandwidth: "8"}}
---
apiVersion: v1
kind: Pod
metadata: {name: wide}
spec:
  resourceClaims:
  - {name: vgpu, resourceClaimName: wide}
  containers:
  - name: c
    image: registry.k8s.io/pause:3.10
    resources: {claims: [{name: vgpu}]}
"""


def _cannot_allocate(pod: core_v1.Pod | None) -> bool:
    return pod is not None and any(
        c.type == "PodScheduled" and "cannot allocate all claims" in c.message
        for c in pod.status.conditions
    )


async def _template_claim(api: ApiClient, pod: core_v1.Pod) -> resource_v1.ResourceClaim:
    (status,) = pod.status.resource_claim_statuses
    assert status.resource_claim_name is not None
    return await api.get(resource_v1.ResourceClaim, status.resource_claim_name, namespace="default")


async def test_template_claims_on_partitions_give_their_counters_back(
    cluster: Cluster, kubectl, mig_node: None
) -> None:
    """A template's claim and the special claim each take a partition of the GPU, which
    leaves its memory spent: the second templated pod waits; once the first goes, its
    claim is deleted with it and the counters it consumed are given back."""
    await kubectl("apply", "-f", "-", input=PARTITION_TEMPLATE)
    await kubectl("apply", "-f", "-", input=TEMPLATE_PARTITION_POD.format(name="t1"))
    t1 = await _running_pod(cluster.api, "t1")
    first = await _template_claim(cluster.api, t1)
    assert first.status.allocation is not None
    (taken,) = first.status.allocation.devices.results
    assert taken.device.startswith("gpu-0-1g-")
    await kubectl("apply", "-f", "-", input=POD.format(name="x", resource="example.com/mig-1g"))
    x = await _running_pod(cluster.api, "x")
    (special,) = await _results(cluster.api, x)
    assert special.device.startswith("gpu-0-1g-") and special.device != taken.device

    await kubectl("apply", "-f", "-", input=TEMPLATE_PARTITION_POD.format(name="t2"))
    # (Its first attempt may come before the claim controller made its claim.)
    await wait_for(cluster.api, core_v1.Pod, "t2", _cannot_allocate, namespace="default")
    await kubectl("delete", "pod", "t1", "--wait=true")
    gone = await wait_for(
        cluster.api,
        resource_v1.ResourceClaim,
        first.metadata.name,
        lambda c: c is None,
        namespace="default",
    )
    assert gone is None
    t2 = await _running_pod(cluster.api, "t2")
    second = await _template_claim(cluster.api, t2)
    assert second.status.allocation is not None
    (result,) = second.status.allocation.devices.results
    assert result.device.startswith("gpu-0-1g-") and result.device != special.device


async def test_a_user_claims_share_is_given_back_when_its_pod_goes(
    cluster: Cluster, kubectl, mig_node: None
) -> None:
    """A user's claim asks 8 of the shared device's 10 units of bandwidth: a pod asking
    `example.com/vgpu: 1` (4 by default) waits; deleting the claim's pod deallocates the
    claim (the controller: nobody uses it) and its share, and the waiting pod gets one."""
    await kubectl("apply", "-f", "-", input=WIDE_CLAIM)
    await _running_pod(cluster.api, "wide")
    claim = await cluster.api.get(resource_v1.ResourceClaim, "wide", namespace="default")
    assert claim.status.allocation is not None
    (share,) = claim.status.allocation.devices.results
    assert (share.device, str(share.consumed_capacity["bandwidth"])) == ("vgpu-0", "8")

    await kubectl("apply", "-f", "-", input=POD.format(name="v1", resource="example.com/vgpu"))
    await wait_for_event(cluster.api, pod="v1", reason="FailedScheduling")
    await kubectl("delete", "pod", "wide", "--wait=true")
    released = await wait_for(
        cluster.api,
        resource_v1.ResourceClaim,
        "wide",
        lambda c: c is not None and c.status.allocation is None,
        namespace="default",
    )
    assert released is not None and not released.status.reserved_for
    v1 = await _running_pod(cluster.api, "v1")
    (got,) = await _results(cluster.api, v1)
    assert (got.device, str(got.consumed_capacity["bandwidth"])) == ("vgpu-0", "4")
    shown = await kubectl("get", "resourceclaim", "wide", "-o", "jsonpath={.status}")
    assert shown.stdout in ("", "{}")
