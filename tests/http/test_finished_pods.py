"""Pods that finish, end to end through kubectl with the scheduler, the controllers and a
kubelet running: a pod whose container runs for a while and exits 0 ends Succeeded and
gives its GPU back, whether a device plugin, the special claim of KEP-5004 or a template's
claim served it, so a pod waiting for that GPU schedules; OnFailure restarts count;
init containers complete first; the cluster file's podDefaults apply by namespace and
selector."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from drasim.common import cluster_file, codec
from drasim.common.api import core_v1
from drasim.controllers.server import ControllerManager
from drasim.kubelet.backoff import CrashLoopBackOff
from drasim.kubelet.run import KubeletProcess
from tests.http.conftest import Cluster
from tests.http.whole_cluster import WITH_GPU_CLASS
from tests.scheduler.e2e.conftest import ClusterWatch, control_plane

CLUSTER = (
    WITH_GPU_CLASS
    + """\
profiles:
  - name: one-gpu
    cpu: "8"
    memory: 32Gi
    devices:
      - {name: gpu, driver: gpu.example.com, count: 1}
pools:
  - name: dra
    profile: one-gpu
    devices: {gpu: {exposure: dra, extendedResourceName: example.com/gpu}}
  - name: dp
    profile: one-gpu
    devices: {gpu: {exposure: device-plugin, extendedResourceName: example.com/gpu}}
podDefaults:
  - namespace: batch
    selector: {matchLabels: {kind: short}}
    runFor: 300ms
  - namespace: batch
    runFor: 300ms
    exitCode: 4
"""
)

DRA_NODE, DP_NODE = "dra-0", "dp-0"


def gpu_pod(name: str, node: str, annotations: dict[str, str], namespace: str = "default") -> str:
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "annotations": annotations},
            "spec": {
                "restartPolicy": "Never",
                "nodeSelector": {"kubernetes.io/hostname": node},
                "containers": [
                    {
                        "name": "app",
                        "image": "registry.k8s.io/pause:3.10",
                        "resources": {"limits": {"example.com/gpu": "1"}},
                    }
                ],
            },
        }
    )


@pytest.fixture
async def gpu_cluster(cluster: Cluster, tmp_path: Path) -> AsyncIterator[ClusterWatch]:
    path = tmp_path / "cluster.yaml"
    path.write_text(CLUSTER)
    spec = cluster_file.load(path)
    api = cluster.api
    for device_class in spec.spec.device_classes:
        await api.create(device_class)
    await api.create(codec.convert({"metadata": {"name": "batch"}}, core_v1.Namespace))
    kubelet = KubeletProcess(
        api=api,
        nodes=spec.nodes,
        pod_defaults=spec.spec.pod_defaults,
        crash_loop_backoff=CrashLoopBackOff(initial=0.2, maximum=1.0),
    )
    async with control_plane(api, kubelet, ControllerManager(api.bus)) as watch:
        yield watch


def phase(watch: ClusterWatch, name: str, namespace: str = "default") -> str:
    pod = watch.pods.get(name, namespace)
    return pod.status.phase if pod is not None else ""


async def status_column(kubectl, name: str, namespace: str = "default") -> list[str]:
    table = (await kubectl("get", "pod", name, "-n", namespace)).stdout.splitlines()
    return table[1].split()


@pytest.mark.parametrize("node", [DRA_NODE, DP_NODE])
async def test_a_finished_pod_frees_its_gpu_for_the_waiting_pod(
    kubectl, gpu_cluster: ClusterWatch, node: str
) -> None:
    watch = gpu_cluster
    await kubectl("apply", "-f", "-", input=gpu_pod("first", node, {"drasim.io/run-for": "1s"}))
    await watch.wait_for(lambda: phase(watch, "first") == "Running")
    special = watch.pod("first").status.extended_resource_claim_status
    assert (special is not None) == (node == DRA_NODE)
    await kubectl("apply", "-f", "-", input=gpu_pod("second", node, {}))
    await watch.unschedulable("second")  # the node's only GPU is taken

    await watch.wait_for(lambda: phase(watch, "second") == "Running", timeout=15)
    assert phase(watch, "first") == "Succeeded"
    assert watch.pod("second").spec.node_name == node
    cells = await status_column(kubectl, "first")
    assert cells[:4] == ["first", "0/1", "Completed", "0"]
    exit_code = await kubectl(
        "get", "pod", "first", "-o",
        "jsonpath={.status.containerStatuses[0].state.terminated.exitCode}",
    )  # fmt: skip
    assert exit_code.stdout == "0"
    if special is not None:
        # The controller deallocated and deleted the special claim of the pod that ended.
        await watch.wait_for(lambda: watch.claims.get(special.resource_claim_name) is None)
    logs = await kubectl("logs", "first")
    assert logs.stdout.startswith("drasim: emulated container app of pod default/first")


async def test_a_template_claim_is_released_when_its_pod_ends(
    kubectl, gpu_cluster: ClusterWatch
) -> None:
    watch = gpu_cluster
    template = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "one-gpu", "namespace": "default"},
        "spec": {
            "spec": {"devices": {"requests": [
                {"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}
            ]}}
        },
    }  # fmt: skip
    await kubectl("apply", "-f", "-", input=json.dumps(template))

    def pod(name: str, annotations: dict[str, str]) -> str:
        doc = json.loads(gpu_pod(name, DRA_NODE, annotations))
        app = doc["spec"]["containers"][0]
        app["resources"] = {"claims": [{"name": "gpu"}]}
        doc["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]
        return json.dumps(doc)

    await kubectl("apply", "-f", "-", input=pod("job-a", {"drasim.io/run-for": "1s"}))
    await watch.wait_for(lambda: phase(watch, "job-a") == "Running")
    [claim_status] = watch.pod("job-a").status.resource_claim_statuses
    await kubectl("apply", "-f", "-", input=pod("job-b", {}))
    await watch.wait_for(lambda: phase(watch, "job-b") == "Running", timeout=15)
    assert phase(watch, "job-a") == "Succeeded"
    await watch.wait_for(lambda: watch.claims.get(claim_status.resource_claim_name) is None)


async def test_on_failure_restarts_are_counted(kubectl, gpu_cluster: ClusterWatch) -> None:
    watch = gpu_cluster
    doc = json.loads(
        gpu_pod("flaky", DP_NODE, {"drasim.io/run-for": "100ms", "drasim.io/exit-code": "1"})
    )
    doc["spec"]["restartPolicy"] = "OnFailure"
    await kubectl("apply", "-f", "-", input=json.dumps(doc))

    def restarts() -> int:
        pod = watch.pods.get("flaky", "default")
        statuses = pod.status.container_statuses if pod is not None else []
        return statuses[0].restart_count if statuses else 0

    await watch.wait_for(lambda: restarts() >= 2, timeout=15)
    name, _, status, count, *_ = await status_column(kubectl, "flaky")
    assert name == "flaky"
    assert status in ("CrashLoopBackOff", "Running")
    assert int(count) >= 2
    last = await kubectl(
        "get", "pod", "flaky", "-o",
        "jsonpath={.status.containerStatuses[0].lastState.terminated.exitCode}",
    )  # fmt: skip
    assert last.stdout == "1"
    assert phase(watch, "flaky") == "Running"
    [backoff] = await watch.wait_for(lambda: watch.events_of("flaky", "BackOff"))
    uid = watch.pod("flaky").metadata.uid
    assert backoff.type == "Warning"
    assert (
        backoff.message == f"Back-off restarting failed container app in pod flaky_default({uid})"
    )
    previous = await kubectl("logs", "flaky", "--previous")
    assert previous.stdout.splitlines()[-1].startswith("drasim: exited with code 1 (Error) at ")


async def test_init_containers_complete_first(kubectl, gpu_cluster: ClusterWatch) -> None:
    watch = gpu_cluster
    doc = json.loads(
        gpu_pod(
            "staged",
            DP_NODE,
            {"run-for.drasim.io/setup": "2s", "drasim.io/run-for": "300ms"},
        )
    )
    doc["spec"]["initContainers"] = [{"name": "setup", "image": "registry.k8s.io/pause:3.10"}]
    await kubectl("apply", "-f", "-", input=json.dumps(doc))

    def setup_running() -> bool:
        pod = watch.pods.get("staged", "default")
        return bool(pod and pod.status.init_container_statuses) and (
            pod.status.init_container_statuses[0].state.running is not None
        )

    await watch.wait_for(setup_running)
    assert (await status_column(kubectl, "staged"))[2] == "Init:0/1"
    await watch.wait_for(lambda: phase(watch, "staged") == "Succeeded", timeout=15)
    pod = watch.pod("staged")
    setup = pod.status.init_container_statuses[0].state.terminated
    app = pod.status.container_statuses[0].state.terminated
    assert setup is not None and app is not None
    assert (setup.reason, app.reason) == ("Completed", "Completed")
    assert setup.finished_at <= app.started_at


async def test_cluster_file_defaults_apply_by_namespace_and_selector(
    kubectl, gpu_cluster: ClusterWatch
) -> None:
    watch = gpu_cluster
    short = json.loads(gpu_pod("short", DP_NODE, {}, namespace="batch"))
    short["metadata"]["labels"] = {"kind": "short"}
    del short["spec"]["containers"][0]["resources"]
    other = json.loads(gpu_pod("other", DP_NODE, {}, namespace="batch"))
    del other["spec"]["containers"][0]["resources"]
    forever = json.loads(gpu_pod("forever", DP_NODE, {}))
    del forever["spec"]["containers"][0]["resources"]
    # The pod's own annotations win over the defaults.
    own = json.loads(gpu_pod("own", DP_NODE, {"drasim.io/exit-code": "0"}, namespace="batch"))
    del own["spec"]["containers"][0]["resources"]
    for doc in (short, other, forever, own):
        await kubectl("apply", "-f", "-", input=json.dumps(doc))
    await watch.wait_for(lambda: phase(watch, "short", "batch") == "Succeeded")
    await watch.wait_for(lambda: phase(watch, "other", "batch") == "Failed")
    terminated = watch.pod("other", "batch").status.container_statuses[0].state.terminated
    assert terminated is not None and terminated.exit_code == 4
    assert (await status_column(kubectl, "other", "batch"))[2] == "Error"
    assert phase(watch, "forever") == "Running"
    # Its run-for from the defaults, its exit code its own.
    await watch.wait_for(lambda: phase(watch, "own", "batch") == "Succeeded")


async def test_an_unreadable_run_annotation_is_refused(kubectl, cluster: Cluster) -> None:
    refused = await kubectl(
        "apply", "-f", "-", input=gpu_pod("bad", DP_NODE, {"drasim.io/run-for": "30"}), check=False
    )
    assert refused.returncode == 1
    assert (
        'The Pod "bad" is invalid: metadata.annotations[drasim.io/run-for]: Invalid value: '
        '"30": time: missing unit in duration "30"'
    ) in refused.stderr
