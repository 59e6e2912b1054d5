"""Every service's /metrics after real work: pods scheduled onto a DRA node and Running, one
pod that fits nowhere. The apistore, scheduler, controllers and kubelet run in the test's
event loop over real NATS and Postgres, each serving its registry on a free port, and each
endpoint is scraped over HTTP."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from drasim.apistore.server import ApiServer
from drasim.common import cluster_file, codec, metrics
from drasim.common.api import core_v1, resource_v1
from drasim.common.bus.client import Bus
from drasim.common.client import ApiClient
from drasim.common.informer import Informer
from drasim.controllers.server import ControllerManager
from drasim.kubelet.run import KubeletProcess
from drasim.scheduler import schedule_one
from drasim.scheduler.server import Scheduler
from tests.builders import KEP_DEVICE_CLASS_YAML, make_pod
from tests.kubelet.waiting import wait_for, wait_for_all
from tests.metrics.scraping import Changes, scrape

# One node whose 8 GPUs a DRA driver serves as `example.com/gpu`.
CLUSTER = """
apiVersion: drasim.io/v1alpha1
kind: Cluster
pools:
  - name: dra
    profile: gpu-8
    devices: {gpu: {exposure: dra, extendedResourceName: example.com/gpu}}
"""
NODE = "dra-0"


@dataclass
class Cluster:
    scheduler: Scheduler
    controllers: ControllerManager
    kubelet: KubeletProcess
    events: Informer[core_v1.Event]
    urls: dict[str, str]


@pytest.fixture
async def cluster(
    server: ApiServer, api: ApiClient, bus: Bus, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Cluster]:
    # Time the plugins of every attempt, not a 10 % sample, so that a few pods show them.
    monkeypatch.setattr(schedule_one, "PLUGIN_METRICS_SAMPLE_PERCENT", 100)
    await api.create(codec.convert(yaml.safe_load(KEP_DEVICE_CLASS_YAML), resource_v1.DeviceClass))
    path = tmp_path / "cluster.yaml"
    path.write_text(CLUSTER)
    kubelet = KubeletProcess(
        api=ApiClient(bus, actor="kubelet"), nodes=cluster_file.load(path).nodes
    )
    scheduler = Scheduler(ApiClient(bus, actor="system:kube-scheduler"))
    controllers = ControllerManager(bus)
    events = Informer(api, core_v1.Event)
    await kubelet.start()
    await scheduler.start()
    await controllers.start()
    events.start()
    await events.wait_synced()
    assert server.metrics is not None
    endpoints = {
        "apistore": await metrics.serve(
            0, registry=server.metrics.registry, refresh=server.metrics.refresh
        ),
        "scheduler": await metrics.serve(0, registry=scheduler.metrics.registry),
        "controllers": await metrics.serve(0, registry=controllers.metrics.registry),
        "kubelet": await metrics.serve(0, registry=kubelet.metrics.registry),
    }
    try:
        yield Cluster(
            scheduler, controllers, kubelet, events, {n: e.url for n, e in endpoints.items()}
        )
    finally:
        for endpoint in endpoints.values():
            await endpoint.stop()
        await events.stop()
        await controllers.stop()
        await scheduler.stop()
        await kubelet.stop()


def gpu_pod(name: str, gpus: str) -> core_v1.Pod:
    return make_pod(name).limits({"example.com/gpu": gpus}).obj()


def running(names: set[str]):
    def check(pods: list[core_v1.Pod]) -> bool:
        return {p.metadata.name for p in pods if p.status.phase == "Running"} >= names

    return check


def unschedulable(pod: core_v1.Pod | None) -> bool:
    return pod is not None and any(
        c.type == "PodScheduled" and c.status == "False" for c in pod.status.conditions
    )


async def test_each_service_reports_the_work_done(api: ApiClient, cluster: Cluster) -> None:
    for name in ("gpu-a", "gpu-b"):
        await api.create(gpu_pod(name, "1"))
    pods = await wait_for_all(api, core_v1.Pod, running({"gpu-a", "gpu-b"}), namespace="default")
    assert {p.spec.node_name for p in pods} == {NODE}
    await api.create(gpu_pod("too-big", "9"))  # the node has 8
    await wait_for(api, core_v1.Pod, "too-big", unschedulable, namespace="default")
    gated = gpu_pod("gated", "1")
    gated.spec.scheduling_gates = [core_v1.PodSchedulingGate(name="example.com/wait")]
    await api.create(gated)

    # Each failed attempt ends with a FailedScheduling event, after the pod is requeued.
    scheduler = cluster.scheduler
    await Changes(cluster.events, scheduler.pod_informer).until(
        lambda: (
            scheduler.queue.pending_pods_by_queue()
            == {"active": 0, "backoff": 0, "unschedulable": 1, "gated": 1}
        )
    )
    got = await scrape(cluster.urls["scheduler"])
    profile = {"profile": "default-scheduler"}
    assert got.value("scheduler_schedule_attempts_total", result="scheduled", **profile) == 2
    assert got.value("scheduler_schedule_attempts_total", result="unschedulable", **profile) >= 1
    assert got.value("scheduler_pending_pods", queue="unschedulable") == 1
    assert got.value("scheduler_pending_pods", queue="active") == 0
    assert got.value("scheduler_pending_pods", queue="backoff") == 0
    assert got.value("scheduler_pending_pods", queue="gated") == 1
    assert got.total("scheduler_pod_scheduling_sli_duration_seconds_count") == 2
    assert got.value("scheduler_pod_scheduling_attempts_count") == 2
    prebind = {"plugin": "DynamicResources", "extension_point": "PreBind", "status": "Success"}
    assert got.value("scheduler_plugin_execution_duration_seconds_count", **prebind) >= 2
    fit = {"plugin": "NodeResourcesFit", "extension_point": "Filter", "status": "Success"}
    assert got.value("scheduler_plugin_execution_duration_seconds_count", **fit) >= 2
    # Each pod's special claim, created by DynamicResources in PreBind.
    creates = {"admin_access": "false", "owner_api_group": "", "owner_api_kind": "Pod"}
    name = "dynamic_resource_allocation_resourceclaim_creates_total"
    assert got.value(name, status="success", **creates) == 2
    assert got.all(name, status="failure") == []

    # Both pods got a special claim, allocated; the controllers count them from their cache.
    gauge = cluster.controllers.resource_claim.gauge
    await Changes(cluster.controllers.resource_claims).until(
        lambda: gauge.value(allocated=True, source="extended_resource") == 2
    )
    got = await scrape(cluster.urls["controllers"])
    special = {"allocated": "true", "admin_access": "false", "source": "extended_resource"}
    assert got.value("dynamic_resource_allocation_resource_claims", **special) == 2
    assert got.all("dynamic_resource_allocation_resource_claims", allocated="false") == []

    got = await scrape(cluster.urls["apistore"])
    create_pod = {
        "verb": "POST",
        "group": "",
        "version": "v1",
        "resource": "pods",
        "subresource": "",
        "scope": "resource",
        "component": "nats",
    }
    assert got.value("apiserver_request_total", code="201", **create_pod) == 4
    assert got.value("apiserver_request_duration_seconds_count", **create_pod) == 4
    assert got.value("apiserver_request_duration_seconds_sum", **create_pod) > 0
    binding = {**create_pod, "subresource": "binding"}
    assert got.value("apiserver_request_total", code="201", **binding) == 2
    claims = {"group": "resource.k8s.io", "resource": "resourceclaims", "verb": "POST"}
    assert got.value("apiserver_request_total", code="201", component="nats", **claims) == 2

    got = await scrape(cluster.urls["kubelet"])
    prepare = {"operation_name": "PrepareResources", "is_error": "false"}
    assert got.value("dra_operations_duration_seconds_count", **prepare) >= 2
    # Each driver call, named as upstream's plugin client names the gRPC method.
    grpc = {
        "driver_name": "gpu.example.com",
        "method_name": "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodePrepareResources",
        "grpc_status_code": "OK",
    }
    assert got.value("dra_grpc_operations_duration_seconds_count", **grpc) >= 2
    assert got.value("dra_grpc_operations_duration_seconds_bucket", le="0.1", **grpc) is not None
    assert got.value("drasim_kubelet_nodes") == 1
    assert got.value("kubelet_node_name", node=NODE) == 1
    assert got.value("process_cpu_seconds_total") is not None  # the process collector


async def test_a_deleted_pod_is_unprepared(api: ApiClient, cluster: Cluster) -> None:
    await api.create(gpu_pod("short-lived", "1"))
    await wait_for_all(api, core_v1.Pod, running({"short-lived"}), namespace="default")
    await api.delete(core_v1.Pod, "short-lived", namespace="default")
    await wait_for(api, core_v1.Pod, "short-lived", lambda pod: pod is None, namespace="default")

    got = await scrape(cluster.urls["kubelet"])
    unprepare = {"operation_name": "UnprepareResources", "is_error": "false"}
    assert got.value("dra_operations_duration_seconds_count", **unprepare) >= 1
    unprepared = "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodeUnprepareResources"
    assert got.total("dra_grpc_operations_duration_seconds_count", method_name=unprepared) >= 1
