"""Device taints end to end through kubectl, on the KEP-5004 example cluster with the
scheduler, the controllers and the kubelets running (what kube-scheduler and
kube-controller-manager v1.37.2 do on the same steps): a NoSchedule taint keeps new pods
off the devices (a user claim, a template's claim and the special claim of
`example.com/gpu: 1` alike) until its DeviceTaintRule goes; a NoExecute taint, in a
ResourceSlice or from a DeviceTaintRule, evicts the pods using the device after their
`tolerationSeconds`, with upstream's Event, pod condition and rule status; and a claim
with admin access reaches its container as `DRA_ADMIN_ACCESS=true`."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest

from drasim.common import cluster_file, tables
from drasim.common.api import core_v1, resource_v1
from drasim.controllers.server import ControllerManager
from drasim.kubelet.run import KubeletProcess
from tests.http.conftest import Cluster
from tests.kubelet import waiting
from tests.scheduler.e2e.conftest import ClusterWatch, control_plane

DRA_NODE = "dra-gpu-0"
DRIVER = "gpu.example.com"
CLASS = """\
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu.example.com}
spec:
  selectors: [{cel: {expression: "device.driver == 'gpu.example.com'"}}]
  extendedResourceName: example.com/gpu
"""
# Pods that each get one GPU of the DRA node: through a claim of their own, a template's
# claim, or the special claim of an extended resource.
WITH_CLAIM = """\
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {{name: {name}}}
spec:
  devices:
    requests:
    - name: gpu
      exactly:
        deviceClassName: gpu.example.com
        tolerations: {tolerations}
---
apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  resourceClaims: [{{name: gpu, resourceClaimName: {name}}}]
  containers:
  - name: c
    image: registry.k8s.io/pause:3.10
    resources: {{claims: [{{name: gpu}}]}}
"""
WITH_TEMPLATE = """\
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: one-gpu}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly: {deviceClassName: gpu.example.com}
---
apiVersion: v1
kind: Pod
metadata: {name: with-template}
spec:
  resourceClaims: [{name: gpu, resourceClaimTemplateName: one-gpu}]
  containers:
  - name: c
    image: registry.k8s.io/pause:3.10
    resources: {claims: [{name: gpu}]}
"""
WITH_GPU = """\
apiVersion: v1
kind: Pod
metadata: {name: with-gpu}
spec:
  nodeSelector: {kubernetes.io/hostname: dra-gpu-0}
  containers:
  - name: c
    image: registry.k8s.io/pause:3.10
    resources: {limits: {example.com/gpu: 1}}
"""
RULE = """\
apiVersion: resource.k8s.io/v1
kind: DeviceTaintRule
metadata: {{name: {name}}}
spec:
  deviceSelector: {selector}
  taint: {{key: example.com/broken, effect: {effect}}}
"""


@pytest.fixture
async def dra(kubectl, cluster: Cluster, tmp_path: Path) -> AsyncIterator[ClusterWatch]:
    """The example cluster's kubelets, a scheduler and the controllers (a rule's status
    updated every 0.2 s rather than 10 s); a watch of pods, Events and claims."""
    await kubectl("apply", "-f", "-", input=CLASS)
    kubelet = KubeletProcess(
        api=cluster.api, nodes=cluster_file.load().nodes, state_dir=tmp_path / "nodes"
    )
    controllers = ControllerManager(cluster.api.bus, device_taint_rule_status_period=0.2)
    async with control_plane(cluster.api, kubelet, controllers) as watch:
        watch.deletions = Deletions(watch)  # type: ignore[attr-defined]
        yield watch


def claim_of(watch: ClusterWatch, pod: core_v1.Pod) -> resource_v1.ResourceClaim:
    """The pod's one claim: its own, its template's or its special claim."""
    names = [c.resource_claim_name for c in pod.spec.resource_claims if c.resource_claim_name]
    names += [s.resource_claim_name for s in pod.status.resource_claim_statuses]
    if pod.status.extended_resource_claim_status is not None:
        names.append(pod.status.extended_resource_claim_status.resource_claim_name)
    (name,) = names
    claim = watch.claims.get(name, "default")
    assert claim is not None and claim.status.allocation is not None
    return claim


def device_of(watch: ClusterWatch, pod: str) -> str:
    (result,) = claim_of(watch, watch.pod(pod)).status.allocation.devices.results
    assert (result.driver, result.pool) == (DRIVER, DRA_NODE)
    return result.device


class Deletions:
    """Each pod as first seen being deleted (or as removed): by the time a test looks, the
    kubelet may have finished it off."""

    def __init__(self, watch: ClusterWatch) -> None:
        self.pods: dict[str, core_v1.Pod] = {}
        watch.pods.add_handlers(
            on_update=lambda _old, new: (
                self._seen(new) if new.metadata.deletion_timestamp else None
            ),
            on_delete=self._seen,
        )

    def _seen(self, pod: core_v1.Pod) -> None:
        self.pods.setdefault(pod.metadata.name, pod)

    def evicted(self, name: str) -> core_v1.PodCondition | None:
        """The DisruptionTarget condition of the pod as it was being deleted."""
        pod = self.pods.get(name)
        conditions = pod.status.conditions if pod is not None else []
        return next((c for c in conditions if c.type == "DisruptionTarget"), None)


async def running(watch: ClusterWatch, *names: str) -> None:
    for name in names:
        await watch.wait_for(
            lambda n=name: (p := watch.pods.get(n, "default")) and p.status.phase == "Running"
        )


async def test_a_no_schedule_taint_keeps_new_pods_off_until_its_rule_goes(
    kubectl, dra: ClusterWatch
) -> None:
    selector = json.dumps({"driver": DRIVER, "pool": DRA_NODE})
    rule = RULE.format(name="maintenance", selector=selector, effect="NoSchedule")
    await kubectl("apply", "-f", "-", input=rule)
    tolerant = [{"key": "example.com/broken", "operator": "Exists", "effect": "NoSchedule"}]
    manifests = [
        WITH_CLAIM.format(name="with-claim", tolerations="[]"),
        WITH_TEMPLATE,
        WITH_GPU,
        WITH_CLAIM.format(name="tolerant", tolerations=json.dumps(tolerant)),
    ]
    await kubectl("apply", "-f", "-", input="---\n".join(manifests))

    assert await dra.bound("tolerant") == DRA_NODE
    for name in ("with-claim", "with-template", "with-gpu"):
        await dra.unschedulable(name)
    failed = {
        name: dra.events_of(name, "FailedScheduling")[0].message
        for name in ("with-claim", "with-gpu")
    }
    assert failed == {
        "with-claim": "0/2 nodes are available: 2 cannot allocate all claims. preemption: 0/2 "
        "nodes are available: 2 Preemption is not helpful for scheduling.",
        "with-gpu": "0/2 nodes are available: 1 cannot allocate all claims, 1 node(s) didn't "
        "match Pod's node affinity/selector. preemption: 0/2 nodes are available: 2 Preemption "
        "is not helpful for scheduling.",
    }

    # Deleting the rule wakes them: its taint is gone from every device.
    await kubectl("delete", "devicetaintrule", "maintenance")
    for name in ("with-claim", "with-template", "with-gpu"):
        assert await dra.bound(name) == DRA_NODE
    devices = {device_of(dra, n) for n in ("with-claim", "with-template", "with-gpu", "tolerant")}
    assert len(devices) == 4


async def test_a_no_execute_taint_in_a_slice_evicts_after_the_toleration_seconds(
    kubectl, dra: ClusterWatch
) -> None:
    patient = [{"key": "example.com/broken", "operator": "Exists", "effect": "NoExecute",
                "tolerationSeconds": 2}]  # fmt: skip
    immune = [{"operator": "Exists", "effect": "NoExecute"}]
    # Tolerating the key for every effect lets a pod schedule, but only a NoExecute
    # toleration delays eviction (upstream's `claimEvictionTime`).
    schedules_only = [{"key": "example.com/broken", "operator": "Exists"}]
    manifests = [
        WITH_CLAIM.format(name="victim", tolerations="[]"),
        WITH_CLAIM.format(name="patient", tolerations=json.dumps(patient)),
        WITH_CLAIM.format(name="immune", tolerations=json.dumps(immune)),
        WITH_CLAIM.format(name="schedules-only", tolerations=json.dumps(schedules_only)),
    ]
    names = ["victim", "patient", "immune", "schedules-only"]
    await kubectl("apply", "-f", "-", input="---\n".join(manifests))
    await running(dra, *names)
    tainted = {device_of(dra, n) for n in names}

    # The driver's slice gets a NoExecute taint on the devices of all four.
    (slice_name,) = (await kubectl("get", "resourceslices", "-o", "name")).stdout.split()
    slice_ = json.loads((await kubectl("get", slice_name, "-o", "json")).stdout)
    for device in slice_["spec"]["devices"]:
        if device["name"] in tainted:
            device["taints"] = [{"key": "example.com/broken", "effect": "NoExecute"}]
    await kubectl("replace", "-f", "-", input=json.dumps(slice_))
    stored = json.loads((await kubectl("get", slice_name, "-o", "json")).stdout)
    time_added = next(
        t["timeAdded"] for d in stored["spec"]["devices"] for t in d.get("taints", [])
    )

    for name in ("victim", "schedules-only", "patient"):
        condition = await dra.wait_for(lambda n=name: dra.deletions.evicted(n))
        assert (condition.status, condition.reason, condition.message) == (
            "True",
            "DeletionByDeviceTaintManager",
            "Device Taint manager: deleting due to NoExecute taint",
        )
    (event,) = dra.events_of("victim", "DeviceTaintManagerEviction")
    assert (event.type, event.message, event.source.component) == (
        "Normal",
        "Marking for deletion",
        "device-taint-eviction-controller",
    )
    # The patient pod went no earlier than its 2 s after the taint was added.
    deleted_at = tables.parse_time(dra.deletions.pods["patient"].metadata.deletion_timestamp)
    assert deleted_at >= tables.parse_time(time_added) + timedelta(seconds=2)
    assert "immune" not in dra.deletions.pods
    assert not dra.events_of("immune", "DeviceTaintManagerEviction")


async def test_a_no_execute_rule_evicts_the_pods_of_the_devices_it_selects(
    kubectl, cluster: Cluster, dra: ClusterWatch
) -> None:
    manifests = [WITH_GPU, WITH_TEMPLATE, WITH_CLAIM.format(name="bystander", tolerations="[]")]
    await kubectl("apply", "-f", "-", input="---\n".join(manifests))
    await running(dra, "with-gpu", "with-template", "bystander")
    special_device = device_of(dra, "with-gpu")
    claims = [claim_of(dra, dra.pod(name)).metadata.name for name in ("with-gpu", "with-template")]
    rules = [
        RULE.format(
            name=f"broken-{device}",
            selector=json.dumps({"driver": DRIVER, "pool": DRA_NODE, "device": device}),
            effect="NoExecute",
        )
        for device in (special_device, device_of(dra, "with-template"))
    ]
    await kubectl("apply", "-f", "-", input="---\n".join(rules))

    for name in ("with-gpu", "with-template"):
        await dra.wait_for(lambda n=name: dra.deletions.evicted(n))
    assert "bystander" not in dra.deletions.pods
    # The special claim and the template's claim go with their pods: nothing holds the
    # tainted devices any more.
    for name in claims:
        await dra.wait_for(lambda n=name: dra.claims.get(n, "default") is None)
    holders = {
        r.device
        for c in dra.claims.list()
        if c.status.allocation
        for r in c.status.allocation.devices.results
    }
    assert holders == {device_of(dra, "bystander")}

    # Each rule's status tells what it did, as kube-controller-manager's says it.
    rule = f"broken-{special_device}"
    await waiting.wait_for(
        cluster.api,
        resource_v1.DeviceTaintRule,
        rule,
        lambda r: r is not None and [c.reason for c in r.status.conditions] == ["Completed"],
        timeout=60,  # the controller's status pass queues behind evictions on a busy machine
    )
    out = await kubectl("get", "devicetaintrule", rule, "-o", "jsonpath={.status.conditions[0]}")
    condition = json.loads(out.stdout)
    assert {k: v for k, v in condition.items() if k != "lastTransitionTime"} == {
        "type": "EvictionInProgress",
        "status": "False",
        "reason": "Completed",
        "message": "1 pod evicted since starting the controller.",
        "observedGeneration": 1,
    }


async def test_a_rule_with_no_effect_says_what_it_would_do(
    kubectl, cluster: Cluster, dra: ClusterWatch
) -> None:
    """The `None` effect evicts nothing; the status counts what NoExecute would evict (the
    message as kube-controller-manager v1.37.2 words it)."""
    await kubectl("apply", "-f", "-", input="---\n".join([WITH_GPU, WITH_TEMPLATE]))
    await running(dra, "with-gpu", "with-template")
    selector = json.dumps({"driver": DRIVER, "pool": DRA_NODE})
    await kubectl(
        "apply", "-f", "-", input=RULE.format(name="dry-run", selector=selector, effect="None")
    )
    rule = await waiting.wait_for(
        cluster.api,
        resource_v1.DeviceTaintRule,
        "dry-run",
        lambda r: r is not None and bool(r.status.conditions),
    )
    (condition,) = rule.status.conditions
    assert (condition.reason, condition.status, condition.message) == (
        "NoEffect",
        "False",
        "8 published devices selected. 2 allocated devices selected. 2 pods would be evicted "
        "in 1 namespace if the effect was NoExecute. This information will not be updated "
        "again. Recreate the DeviceTaintRule to trigger an update.",
    )
    assert not dra.deletions.pods


async def test_admin_access_reaches_the_container(kubectl, dra: ClusterWatch) -> None:
    """A claim with admin access to all of the node's GPUs gets them, the one a running
    pod's special claim holds among them, taking nothing from it: another pod still gets a
    GPU meanwhile. The monitor's container is told; its pod gone, its claim is deallocated
    and the other claims keep their devices."""
    await kubectl("apply", "-f", "-", input=WITH_GPU)
    await running(dra, "with-gpu")
    in_use = device_of(dra, "with-gpu")
    await kubectl("create", "namespace", "admins")
    await kubectl("label", "namespace", "admins", "resource.kubernetes.io/admin-access=true")
    manifest = WITH_CLAIM.format(name="monitor", tolerations="[]").replace(
        "deviceClassName: gpu.example.com",
        "deviceClassName: gpu.example.com\n        adminAccess: true\n        allocationMode: All",
    )
    await kubectl("apply", "-n", "admins", "-f", "-", input=manifest)
    await dra.wait_for(
        lambda: (p := dra.pods.get("monitor", "admins")) and p.status.phase == "Running"
    )
    log = (await kubectl("logs", "-n", "admins", "monitor")).stdout
    assert "DRA_ADMIN_ACCESS=true" in log
    monitor = dra.claims.get("monitor", "admins")
    assert monitor is not None and monitor.status.allocation is not None
    results = monitor.status.allocation.devices.results
    assert len(results) == 8 and all(r.admin_access for r in results)
    assert in_use in {r.device for r in results}

    await kubectl("apply", "-f", "-", input=WITH_CLAIM.format(name="with-claim", tolerations="[]"))
    await running(dra, "with-claim")
    assert device_of(dra, "with-claim") != in_use
    await kubectl("delete", "pod", "-n", "admins", "monitor", "--wait=true")
    await dra.wait_for(
        lambda: (
            (c := dra.claims.get("monitor", "admins")) is not None and c.status.allocation is None
        )
    )
    assert device_of(dra, "with-gpu") == in_use


async def test_admin_access_through_a_claim_template(kubectl, dra: ClusterWatch) -> None:
    """A template's claim with admin access gets all of the node's GPUs, the special claim's
    among them, without taking any; its container is told, and the claim goes with its pod
    while the special claim keeps its device."""
    await kubectl("apply", "-f", "-", input=WITH_GPU)
    await running(dra, "with-gpu")
    in_use = device_of(dra, "with-gpu")
    await kubectl("create", "namespace", "admins")
    await kubectl("label", "namespace", "admins", "resource.kubernetes.io/admin-access=true")
    manifest = (
        WITH_TEMPLATE.replace("exactly: {deviceClassName: gpu.example.com}", ADMIN_ALL)
        .replace("name: one-gpu", "name: all-gpus")
        .replace("resourceClaimTemplateName: one-gpu", "resourceClaimTemplateName: all-gpus")
        .replace("name: with-template", "name: monitor")
    )
    await kubectl("apply", "-n", "admins", "-f", "-", input=manifest)
    monitor = await dra.wait_for(
        lambda: (p := dra.pods.get("monitor", "admins")) and p.status.phase == "Running" and p
    )
    ((status),) = monitor.status.resource_claim_statuses
    claim = dra.claims.get(status.resource_claim_name, "admins")
    assert claim is not None and claim.status.allocation is not None
    results = claim.status.allocation.devices.results
    assert len(results) == 8 and all(r.admin_access for r in results)
    assert in_use in {r.device for r in results}
    log = (await kubectl("logs", "-n", "admins", "monitor")).stdout
    assert "DRA_ADMIN_ACCESS=true" in log

    await kubectl("apply", "-f", "-", input=WITH_CLAIM.format(name="with-claim", tolerations="[]"))
    await running(dra, "with-claim")
    assert device_of(dra, "with-claim") != in_use
    await kubectl("delete", "pod", "-n", "admins", "monitor", "--wait=true")
    await dra.wait_for(lambda: dra.claims.get(status.resource_claim_name, "admins") is None)
    assert device_of(dra, "with-gpu") == in_use


ADMIN_ALL = "exactly: {deviceClassName: gpu.example.com, adminAccess: true, allocationMode: All}"
