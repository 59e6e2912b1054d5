"""The official Kubernetes Python client driving every workload kind on a whole cluster
(scheduler, controllers, kubelet emulators): the issue's GPU Job of 10 completions, 3 at a
time, completing and giving its devices back; a Deployment, DaemonSet and StatefulSet
reaching what they ask (the StatefulSet scaled through its scale subresource); a CronJob
making its Job and being suspended; and the core kinds charts ship besides. The client's
calls block, so they run in threads while the cluster serves in the test's loop."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client, config, watch

from drasim.common.api import apps_v1, core_v1
from tests.controllers.test_job import JOB
from tests.http.conftest import Cluster
from tests.http.test_workload_kinds import STATEFUL_SET
from tests.http.test_workload_rollouts import DAEMON_SET
from tests.http.whole_cluster import WITH_GPU_CLASS, WholeCluster, open_whole_cluster

# KEP-5004's example cluster (GPUs through DRA, GPUs through a device plugin) and a node
# without GPUs.
GPU_CLUSTER = (
    WITH_GPU_CLASS
    + """\
pools:
  - name: dra-gpu
    profile: gpu-8
    devices: {gpu: {exposure: dra, extendedResourceName: example.com/gpu}}
  - name: dp-gpu
    profile: gpu-2
    devices: {gpu: {exposure: device-plugin, extendedResourceName: example.com/gpu}}
  - name: cpu
    profile: cpu-only
"""
)
DEPLOYMENT = {
    "metadata": {"name": "web"},
    "spec": {
        "replicas": 2,
        "selector": {"matchLabels": {"app": "web"}},
        "template": {
            "metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "web", "image": "registry.k8s.io/pause:3.10"}]},
        },
    },
}
CRON_JOB = {
    "metadata": {"name": "report"},
    "spec": {
        "schedule": "0 3 * * *",
        "jobTemplate": {
            "spec": {
                "template": {
                    "metadata": {"annotations": {"drasim.io/run-for": "1s"}},
                    "spec": {
                        "restartPolicy": "OnFailure",
                        "containers": [{"name": "r", "image": "registry.k8s.io/pause:3.10"}],
                    },
                }
            }
        },
    },
}


@pytest.fixture
def api_client(cluster: Cluster) -> Iterator[client.ApiClient]:
    with config.new_client_from_config(config_file=str(cluster.kubeconfig)) as api:
        yield api


@pytest.fixture
async def gpu_cluster(cluster: Any, fresh: Any, tmp_path: Path) -> AsyncIterator[WholeCluster]:
    async with open_whole_cluster(cluster, fresh, tmp_path, GPU_CLUSTER) as whole:
        await whole.start()
        yield whole


def _gpu_job(name: str) -> dict[str, Any]:
    """tests/controllers' Job of 10 completions, 3 at a time, each pod asking one GPU (a
    quantity the client sends as a string)."""
    job = yaml.safe_load(JOB.replace("name: bench", f"name: {name}"))
    job["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"] = {
        "example.com/gpu": "1"
    }
    return job


def _complete(job: Any) -> bool:
    return any(c.type == "Complete" and c.status == "True" for c in job.status.conditions or [])


async def test_a_gpu_job_of_ten_completes_three_at_a_time_and_frees_its_devices(
    api_client, gpu_cluster
):
    whole = gpu_cluster
    batch = client.BatchV1Api(api_client)
    most_running = 0

    def count_running(_pod: core_v1.Pod) -> None:
        nonlocal most_running
        running = [p for p in whole.pods("default", **{"job-name": "bench"}).values()
                   if p.status.phase == "Running"]  # fmt: skip
        most_running = max(most_running, len(running))

    whole.manager.pods.add_handlers(on_add=count_running, on_update=lambda _o, n: count_running(n))
    job = _gpu_job("bench")
    job["spec"]["template"]["metadata"] = {"annotations": {"drasim.io/run-for": "1s"}}
    await asyncio.to_thread(batch.create_namespaced_job, "default", job)

    def until_complete() -> Any:
        stream = watch.Watch()
        for event in stream.stream(batch.list_namespaced_job, "default", timeout_seconds=90):
            if _complete(event["object"]):
                stream.stop()
                return event["object"]
        return None

    done = await asyncio.wait_for(asyncio.to_thread(until_complete), 100)
    assert done is not None and (done.status.succeeded, done.status.failed) == (10, None)
    assert 1 <= most_running <= 3
    core = client.CoreV1Api(api_client)
    pods = await asyncio.to_thread(
        core.list_namespaced_pod, "default", label_selector="batch.kubernetes.io/job-name=bench"
    )
    assert len(pods.items) == 10 and {p.status.phase for p in pods.items} == {"Succeeded"}
    nodes = {p.spec.node_name for p in pods.items}
    assert nodes <= {"dra-gpu-0", "dp-gpu-0"}
    # Every GPU is free again: the special claims are deallocated (then deleted with their
    # finished pods), the device plugin's GPUs no longer counted against its node.
    await whole.changes.until(
        lambda: all(c.status.allocation is None for c in whole.manager.resource_claims.list()),
        timeout=30,
    )
    resource = client.ResourceV1Api(api_client)
    claims = await asyncio.to_thread(resource.list_namespaced_resource_claim, "default")
    assert all(c.status is None or c.status.allocation is None for c in claims.items)
    again = _gpu_job("again")
    again["spec"].update(completions=10, parallelism=10)  # all 10 GPUs at once
    await asyncio.to_thread(batch.create_namespaced_job, "default", again)
    await whole.changes.until(
        lambda: len([p for p in whole.pods("default", **{"job-name": "again"}).values()
                     if p.status.phase == "Running"]) == 10,
        timeout=30,
    )  # fmt: skip


async def test_deployment_daemon_set_and_stateful_set_reach_what_they_ask(api_client, gpu_cluster):
    whole = gpu_cluster
    apps = client.AppsV1Api(api_client)
    await asyncio.to_thread(apps.create_namespaced_deployment, "default", DEPLOYMENT)
    await asyncio.to_thread(
        apps.create_namespaced_daemon_set, "default", yaml.safe_load(DAEMON_SET)
    )
    await asyncio.to_thread(
        apps.create_namespaced_stateful_set, "default", yaml.safe_load(STATEFUL_SET)
    )
    scale = {"spec": {"replicas": 3}}
    await asyncio.to_thread(apps.patch_namespaced_stateful_set_scale, "db", "default", scale)

    def settled() -> bool:
        deployment = whole.manager.deployments.get("web", "default")
        daemon_set = whole.manager.daemon_sets.get("driver", "default")
        stateful_set = whole.manager.stateful_sets.get("db", "default")
        return (
            isinstance(deployment, apps_v1.Deployment)
            and deployment.status.available_replicas == 2
            and daemon_set is not None
            and daemon_set.status.number_ready == 3
            and stateful_set is not None
            and stateful_set.status.ready_replicas == 3
        )

    await whole.changes.until(settled, timeout=40)
    deployment = await asyncio.to_thread(apps.read_namespaced_deployment_status, "web", "default")
    assert (deployment.status.ready_replicas, deployment.status.updated_replicas) == (2, 2)
    daemon_set = await asyncio.to_thread(apps.read_namespaced_daemon_set, "driver", "default")
    status = daemon_set.status
    assert (status.desired_number_scheduled, status.number_ready, status.number_available) == (
        3,
        3,
        3,
    )
    read_scale = await asyncio.to_thread(apps.read_namespaced_stateful_set_scale, "db", "default")
    assert (read_scale.spec.replicas, read_scale.status.replicas) == (3, 3)
    core = client.CoreV1Api(api_client)
    pods = await asyncio.to_thread(core.list_namespaced_pod, "default", label_selector="app=db")
    assert sorted(p.metadata.name for p in pods.items) == ["db-0", "db-1", "db-2"]
    drivers = await asyncio.to_thread(
        core.list_namespaced_pod, "default", label_selector="app=driver"
    )
    assert sorted(p.spec.node_name for p in drivers.items) == ["cpu-0", "dp-gpu-0", "dra-gpu-0"]


async def test_a_cron_job_makes_its_job_and_is_suspended(api_client, gpu_cluster):
    """On the CronJob controller's clock, moved a day on by the test."""
    whole = gpu_cluster
    now = datetime.now(UTC)
    whole.manager.cron_job.clock = lambda: now
    batch = client.BatchV1Api(api_client)
    await asyncio.to_thread(batch.create_namespaced_cron_job, "default", CRON_JOB)
    now += timedelta(days=1)
    whole.manager.cron_job.queue.add(("default", "report"))
    due = now.replace(hour=3, minute=0, second=0, microsecond=0)
    due -= timedelta(days=1) if due > now else timedelta()
    name = f"report-{int(due.timestamp()) // 60}"
    await whole.changes.until(lambda: whole.manager.jobs.get(name, "default"), timeout=20)
    job = await asyncio.to_thread(batch.read_namespaced_job, name, "default")
    (owner,) = job.metadata.owner_references
    assert (owner.kind, owner.name, owner.controller) == ("CronJob", "report", True)
    suspended = await asyncio.to_thread(
        batch.patch_namespaced_cron_job, "report", "default", {"spec": {"suspend": True}}
    )
    assert suspended.spec.suspend is True
    cron_job = await asyncio.to_thread(batch.read_namespaced_cron_job_status, "report", "default")
    assert cron_job.status.last_schedule_time == due


async def test_secrets_service_accounts_and_endpoints(api_client):
    core = client.CoreV1Api(api_client)
    secret = {"metadata": {"name": "creds"}, "stringData": {"token": "t0k"}, "type": "Opaque"}
    await asyncio.to_thread(core.create_namespaced_secret, "default", secret)
    stored = await asyncio.to_thread(core.read_namespaced_secret, "creds", "default")
    assert stored.data == {"token": base64.b64encode(b"t0k").decode()}
    assert stored.string_data is None
    account = {"metadata": {"name": "runner"}, "automountServiceAccountToken": False}
    await asyncio.to_thread(core.create_namespaced_service_account, "default", account)
    accounts = await asyncio.to_thread(core.list_namespaced_service_account, "default")
    assert "runner" in {a.metadata.name for a in accounts.items}
    endpoints = {
        "metadata": {"name": "web"},
        "subsets": [{"addresses": [{"ip": "10.244.0.5"}], "ports": [{"port": 8080}]}],
    }
    await asyncio.to_thread(core.create_namespaced_endpoints, "default", endpoints)
    read = await asyncio.to_thread(core.read_namespaced_endpoints, "web", "default")
    (subset,) = read.subsets
    assert [a.ip for a in subset.addresses] == ["10.244.0.5"]
    assert [(p.port, p.protocol) for p in subset.ports] == [(8080, "TCP")]
