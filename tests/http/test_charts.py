"""`helm template` output of real charts applies with kubectl, as on a real cluster, and
its workloads run on nodes: a chart of our own with every kind an application ships (its
CRDs first, as helm installs them), and kubernetes-sigs/dra-example-driver's chart, whose
DaemonSet runs the driver on each node. The rendered output is committed beside the
charts (tests/charts/README.md says how it was rendered); where a `helm` binary is on PATH
our chart is rendered again and must match, so the fixture never goes stale."""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from drasim.common.api import batch_v1, core_v1
from tests.http.whole_cluster import WITH_GPU_CLASS, WholeCluster, open_whole_cluster, ready

CHARTS = Path(__file__).parents[1] / "charts"
APP_BUNDLE = CHARTS / "app-bundle"
HELM = shutil.which("helm")
# What `kubectl apply` of the rendered bundle prints, in helm's install order.
APP_BUNDLE_CREATED = [
    "namespace/gpu-team created",
    "poddisruptionbudget.policy/gpu-app created",
    "serviceaccount/gpu-app-runner created",
    "secret/gpu-app-credentials created",
    "configmap/gpu-app-config created",
    "persistentvolumeclaim/gpu-app-results created",
    "role.rbac.authorization.k8s.io/gpu-app-reader created",
    "rolebinding.rbac.authorization.k8s.io/gpu-app-reader created",
    "service/gpu-app created",
    "service/gpu-app-headless created",
    "service/gpu-app-store created",
    "daemonset.apps/gpu-app-gpu-monitor created",
    "deployment.apps/gpu-app created",
    "statefulset.apps/gpu-app-store created",
    "job.batch/gpu-app-benchmark created",
    "cronjob.batch/gpu-app-report created",
    "gpubenchmark.bench.example.com/gpu-app-nightly created",
    "resourceclaimtemplate.resource.k8s.io/gpu-app-gpu created",
]


async def _helm(*args: str) -> str:
    assert HELM is not None
    process = await asyncio.create_subprocess_exec(
        HELM, *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 0, err.decode()
    return out.decode()


@pytest.mark.skipif(HELM is None, reason="helm is not installed on this machine")
async def test_the_committed_rendering_is_what_helm_renders():
    assert (
        await _helm("template", "gpu-app", str(APP_BUNDLE))
        == (CHARTS / "app-bundle.rendered.yaml").read_text()
    )
    assert (
        await _helm("show", "crds", str(APP_BUNDLE))
        == (CHARTS / "app-bundle.crds.yaml").read_text()
    )


async def test_the_app_bundle_applies_and_reapplies_unchanged(kubectl):
    crds = await kubectl("apply", "-f", str(CHARTS / "app-bundle.crds.yaml"))
    assert crds.stdout.strip() == (
        "customresourcedefinition.apiextensions.k8s.io/gpubenchmarks.bench.example.com created"
    )
    await kubectl("wait", "--for=condition=Established", "--timeout=10s",
                  "crd/gpubenchmarks.bench.example.com")  # fmt: skip
    rendered = str(CHARTS / "app-bundle.rendered.yaml")
    applied = await kubectl("apply", "-f", rendered)
    assert applied.stdout.splitlines() == APP_BUNDLE_CREATED
    listed = await kubectl("get", "gb,svc,pvc", "-n", "gpu-team", "-o", "json")
    items = {(i["kind"], i["metadata"]["name"]): i for i in json.loads(listed.stdout)["items"]}
    assert items[("GPUBenchmark", "gpu-app-nightly")]["spec"] == {"model": "A100", "gpus": 1}
    assert items[("Service", "gpu-app-headless")]["spec"]["clusterIP"] == "None"
    assert items[("PersistentVolumeClaim", "gpu-app-results")]["status"]["phase"] == "Bound"
    # `helm upgrade` of the same values changes nothing: neither does applying it again.
    diff = await kubectl("diff", "-f", rendered, check=False)
    assert diff.returncode == 0, diff.stdout
    again = await kubectl("apply", "--server-side", "-f", rendered)
    assert again.stdout.splitlines() == [
        line.replace(" created", " serverside-applied") for line in APP_BUNDLE_CREATED
    ]


# The nodes the bundle runs on: GPUs through DRA, GPUs through a device plugin on a node
# tainted for GPU workloads only, and a node without GPUs. The GPU nodes carry the label the
# bundle's monitoring DaemonSet selects.
BUNDLE_CLUSTER = (
    WITH_GPU_CLASS
    + """\
pools:
  - name: dra-gpu
    profile: gpu-8
    labels: {example.com/gpu.present: "true"}
    devices: {gpu: {exposure: dra, extendedResourceName: example.com/gpu}}
  - name: dp-gpu
    profile: gpu-2
    labels: {example.com/gpu.present: "true"}
    taints: [{key: example.com/gpu, value: present, effect: NoSchedule}]
    devices: {gpu: {exposure: device-plugin, extendedResourceName: example.com/gpu}}
  - name: cpu
    profile: cpu-only
"""
)


def _complete(job: batch_v1.Job | None) -> bool:
    return job is not None and any(
        c.type == "Complete" and c.status == "True" for c in job.status.conditions
    )


@pytest.fixture
async def bundle_cluster(cluster: Any, fresh: Any, tmp_path: Path) -> AsyncIterator[WholeCluster]:
    async with open_whole_cluster(cluster, fresh, tmp_path, BUNDLE_CLUSTER) as whole:
        await whole.start()
        yield whole


async def test_every_workload_of_the_app_bundle_does_its_thing(kubectl, bundle_cluster):
    """On a cluster with nodes: the Deployment rolls out on GPUs, the DaemonSet runs one
    pod on each GPU node (the tainted one too, as it tolerates the taint), the StatefulSet
    makes its pods one at a time, each Ready before the next, the GPU benchmark Job
    completes, and the CronJob makes a Job once its time comes (on the controller's clock,
    moved by the test)."""
    whole = bundle_cluster
    manager = whole.manager
    now = datetime.now(UTC)
    manager.cron_job.clock = lambda: now
    store_order: list[tuple[str, str]] = []

    def on_store_pod(pod: core_v1.Pod) -> None:
        name = pod.metadata.name
        if pod.metadata.labels.get("app") != "gpu-app-store":
            return
        for step, happened in (("created", True), ("ready", ready(pod))):
            if happened and (step, name) not in store_order:
                store_order.append((step, name))

    manager.pods.add_handlers(on_add=on_store_pod, on_update=lambda _old, new: on_store_pod(new))
    await kubectl("apply", "-f", str(CHARTS / "app-bundle.crds.yaml"))
    await kubectl("wait", "--for=condition=Established", "--timeout=10s",
                  "crd/gpubenchmarks.bench.example.com")  # fmt: skip
    applied = await kubectl("apply", "-f", str(CHARTS / "app-bundle.rendered.yaml"))
    assert applied.stdout.splitlines() == APP_BUNDLE_CREATED

    for workload in ("deployment/gpu-app", "daemonset/gpu-app-gpu-monitor",
                     "statefulset/gpu-app-store"):  # fmt: skip
        await kubectl("rollout", "status", "-n", "gpu-team", workload, "--timeout=18s")
    monitors = whole.pods("gpu-team", app="gpu-app-gpu-monitor").values()
    assert sorted(p.spec.node_name for p in monitors) == ["dp-gpu-0", "dra-gpu-0"]
    assert all(ready(p) for p in monitors)
    servers = whole.pods("gpu-team", app="gpu-app").values()
    assert [p.spec.node_name for p in servers] == ["dra-gpu-0"] * 2  # the untainted GPUs
    store = [f"gpu-app-store-{i}" for i in range(3)]
    assert store_order == [(step, n) for n in store for step in ("created", "ready")]
    claims = await kubectl("get", "pvc", "-n", "gpu-team", "-o", "name")
    assert {f"persistentvolumeclaim/data-{n}" for n in store} <= set(claims.stdout.split())

    # The benchmark's pods each ran on a GPU for a second and exited 0.
    await whole.changes.until(lambda: _complete(manager.jobs.get("gpu-app-benchmark", "gpu-team")),
                              timeout=30)  # fmt: skip
    waited = await kubectl("wait", "-n", "gpu-team", "--for=condition=complete",
                           "job/gpu-app-benchmark", "--timeout=10s")  # fmt: skip
    assert waited.stdout.strip() == "job.batch/gpu-app-benchmark condition met"
    benchmark = whole.pods("gpu-team", app="gpu-app-benchmark").values()
    assert len(benchmark) == 2 and all(p.status.phase == "Succeeded" for p in benchmark)
    special_claims = set()
    for pod in benchmark:
        assert pod.spec.node_name == "dra-gpu-0"
        devices = json.loads(pod.metadata.annotations["drasim.io/container-devices"])
        assert len(devices["benchmark"]["cdiDevices"]) == 1, devices
        special_claims.add(pod.status.extended_resource_claim_status.resource_claim_name)
    # ... and gave the GPUs back: their special claims are deallocated, then deleted (as
    # upstream's ResourceClaim controller deletes a finished pod's claims).
    await whole.changes.until(
        lambda: all(
            (c := manager.resource_claims.get(name, "gpu-team")) is None
            or c.status.allocation is None
            for name in special_claims
        ),
        timeout=30,
    )

    # The report is due at 03:00: a day later, the CronJob makes its Job, which completes.
    assert not [j for j in manager.jobs.cache.values() if "gpu-app-report" in j.metadata.name]
    now += timedelta(days=1)
    manager.cron_job.queue.add(("gpu-team", "gpu-app-report"))
    due = now.replace(hour=3, minute=0, second=0, microsecond=0)
    due -= timedelta(days=1) if due > now else timedelta()
    name = f"gpu-app-report-{int(due.timestamp()) // 60}"
    await whole.changes.until(lambda: _complete(manager.jobs.get(name, "gpu-team")), timeout=30)
    cron_jobs = await kubectl("get", "cronjob", "-n", "gpu-team", "-o", "json")
    (cron_job,) = json.loads(cron_jobs.stdout)["items"]
    assert datetime.fromisoformat(cron_job["status"]["lastScheduleTime"]) == due


# Nodes whose GPUs the example driver would publish, and a control-plane node whose taint
# the driver's DaemonSet does not tolerate (the chart renders no tolerations).
DRIVER_CLUSTER = """\
apiVersion: drasim.io/v1alpha1
kind: Cluster
pools:
  - name: gpu
    count: 3
    profile: gpu-8
    devices: {gpu: {exposure: dra}}
  - name: control-plane
    profile: cpu-only
    taints: [{key: node-role.kubernetes.io/control-plane, effect: NoSchedule}]
"""
DRIVER_POD_LABELS = {"app.kubernetes.io/name": "dra-example-driver",
                     "app.kubernetes.io/component": "kubeletplugin"}  # fmt: skip
GPU_POD = """\
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: one-gpu}
spec:
  spec:
    devices:
      requests: [{name: gpu, exactly: {deviceClassName: gpu.example.com}}]
---
apiVersion: v1
kind: Pod
metadata: {name: trainer}
spec:
  resourceClaims: [{name: gpu, resourceClaimTemplateName: one-gpu}]
  containers:
  - name: train
    image: registry.k8s.io/pause:3.10
    resources: {claims: [{name: gpu}]}
"""


@pytest.fixture
async def driver_cluster(cluster: Any, fresh: Any, tmp_path: Path) -> AsyncIterator[WholeCluster]:
    async with open_whole_cluster(cluster, fresh, tmp_path, DRIVER_CLUSTER) as whole:
        await whole.start("gpu-0", "gpu-1", "control-plane-0")
        yield whole


async def test_the_dra_example_driver_runs_one_pod_per_node(kubectl, driver_cluster):
    """kubernetes-sigs/dra-example-driver's chart as `helm template` renders it: its
    ServiceAccount, RBAC, metrics Service, DaemonSet, DeviceClass and ResourceSlice
    admission policy apply; the kubelet plugin runs once on every node it tolerates, Ready,
    and follows nodes joining and leaving; its DeviceClass selects the nodes' GPUs."""
    whole = driver_cluster
    await kubectl("create", "namespace", "dra-example-driver")
    rendered = str(CHARTS / "dra-example-driver.rendered.yaml")
    applied = await kubectl("apply", "-f", rendered)
    assert applied.stdout.splitlines() == [
        "serviceaccount/dra-example-driver-service-account created",
        "clusterrole.rbac.authorization.k8s.io/dra-example-driver-role created",
        "clusterrolebinding.rbac.authorization.k8s.io/dra-example-driver-role-binding created",
        "service/dra-example-driver-kubeletplugin-metrics created",
        "daemonset.apps/dra-example-driver-kubeletplugin created",
        "deviceclass.resource.k8s.io/gpu.example.com created",
        "validatingadmissionpolicy.admissionregistration.k8s.io/"
        "resourceslices-policy-dra-example-driver created",
        "validatingadmissionpolicybinding.admissionregistration.k8s.io/"
        "resourceslices-policy-dra-example-driver created",
    ]
    diff = await kubectl("diff", "-f", rendered, check=False)
    assert diff.returncode == 0, diff.stdout

    def plugins() -> dict[str, core_v1.Pod]:
        pods = whole.pods("dra-example-driver", **DRIVER_POD_LABELS).values()
        return {p.spec.node_name: p for p in pods}

    def ready_on(*nodes: str) -> bool:
        found = plugins()
        return sorted(found) == sorted(nodes) and all(ready(p) for p in found.values())

    daemon_set = "daemonset/dra-example-driver-kubeletplugin"
    status = ("rollout", "status", "-n", "dra-example-driver", daemon_set, "--timeout=18s")
    rolled = await kubectl(*status)
    assert rolled.stdout.strip().endswith(
        'daemon set "dra-example-driver-kubeletplugin" successfully rolled out'
    )
    assert ready_on("gpu-0", "gpu-1")  # not on the tainted control-plane node
    pod = plugins()["gpu-0"]
    assert (pod.spec.priority_class_name, pod.spec.priority) == ("system-node-critical", 2000001000)
    assert pod.spec.service_account_name == "dra-example-driver-service-account"

    await whole.start("gpu-2")  # a node joins
    await whole.changes.until(lambda: ready_on("gpu-0", "gpu-1", "gpu-2"), timeout=30)
    await kubectl(*status)
    await whole.stop("gpu-1")  # a node leaves: its kubelet gone, then its Node
    await kubectl("delete", "node", "gpu-1")
    await whole.changes.until(lambda: ready_on("gpu-0", "gpu-2"), timeout=30)
    table = await kubectl("get", "-n", "dra-example-driver", daemon_set)
    assert table.stdout.splitlines()[1].split()[1:6] == ["2", "2", "2", "2", "2"]

    # The chart's DeviceClass selects the GPUs: a pod's claim gets one.
    await kubectl("apply", "-f", "-", input=GPU_POD)
    await whole.changes.until(
        lambda: (p := whole.pods("default").get("trainer")) is not None and ready(p), timeout=30
    )
    claims = await kubectl("get", "resourceclaims", "-o", "json")
    (claim,) = json.loads(claims.stdout)["items"]
    (result,) = claim["status"]["allocation"]["devices"]["results"]
    trainer = whole.pods("default")["trainer"]
    assert (result["driver"], result["pool"]) == ("gpu.example.com", trainer.spec.node_name)
