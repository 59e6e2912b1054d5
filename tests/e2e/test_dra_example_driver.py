"""dra-example-driver's own demos (demo/examples/, copied unchanged into
tests/e2e/dra_example_driver/) on `drasim up` clusters whose pools play the driver with the
Helm values each README installs it with; kubectl applies them and reads what the READMEs
read: `kubectl logs ... | grep GPU_DEVICE` (the containers run `export`), pod phases,
claims. Each cluster file is started once for the module."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import UpCluster

EXAMPLES = Path(__file__).parent / "dra_example_driver"
WAIT = "--timeout=90s"


def cluster_file(count: int, **values: Any) -> str:
    options = ", ".join(f"{k}: {json.dumps(v)}" for k, v in values.items())
    return (
        "apiVersion: drasim.io/v1alpha1\nkind: Cluster\npools:\n"
        f"  - {{name: node, count: {count}, profile: dra-example-driver,\n"
        f"     devices: {{gpu: {{exposure: dra, {options}}}}}}}\n"
    )


# `helm install` as the READMEs say, one cluster each.
DEFAULT = cluster_file(2, numDevices=8, deviceClass={"extendedResourceName": "example.com/gpu"})
PARTITIONS = cluster_file(1, numDevices=2, gpuPartitions=4, bindingConditions=True)
SHARED = cluster_file(1, numDevices=1, gpuAllowMultipleAllocations=True)
SHARED_PARTITIONS = cluster_file(1, numDevices=1, gpuPartitions=4, gpuAllowMultipleAllocations=True)
# The taint demos' DeviceTaintRules are resource.k8s.io/v1beta2.
TAINTS = cluster_file(1, numDevices=3).replace(
    "pools:", 'runtimeConfig: {resource.k8s.io/v1beta2: "true"}\npools:'
)
TAINT_EXAMPLES = EXAMPLES / "device-taints-tolerations"

DECLARE = re.compile(r'declare -x (?P<name>[A-Za-z_][A-Za-z0-9_]*)="(?P<value>.*)"')


def apply(cluster: UpCluster, example: str, *pods: str) -> str:
    """`kubectl apply -f <example>.yaml`, then wait for its pods to be Ready; its namespace."""
    cluster.kubectl("apply", "-f", str(EXAMPLES / f"{example}.yaml"))
    for pod in pods:
        cluster.kubectl("wait", "--for=condition=Ready", f"pod/{pod}", "-n", example, WAIT)
    return example


def env(cluster: UpCluster, namespace: str, pod: str, container: str) -> dict[str, str]:
    """What the container's `export` printed, from `kubectl logs`."""
    log = cluster.kubectl("logs", "-n", namespace, pod, "-c", container).stdout
    found = {}
    for line in log.splitlines():
        match = DECLARE.fullmatch(line)
        if match:
            found[match["name"]] = match["value"]
    return found


def gpu_devices(cluster: UpCluster, namespace: str, pod: str, container: str) -> dict[str, str]:
    """The `GPU_DEVICE_<n>=<device>` lines the READMEs' `grep GPU_DEVICE` shows."""
    return {
        name: value
        for name, value in env(cluster, namespace, pod, container).items()
        if name.startswith("GPU_DEVICE_") and value.startswith("gpu-")
    }


def claims(cluster: UpCluster, namespace: str) -> dict[str, dict[str, Any]]:
    """The namespace's ResourceClaims by the pod owning them (or their own name)."""
    listed = json.loads(
        cluster.kubectl("get", "resourceclaims", "-n", namespace, "-o", "json").stdout
    )
    found = {}
    for claim in listed["items"]:
        owners = claim["metadata"].get("ownerReferences") or [{"name": claim["metadata"]["name"]}]
        found[owners[0]["name"]] = claim
    return found


def node_of(cluster: UpCluster, namespace: str, pod: str) -> str:
    jsonpath = "jsonpath={.spec.nodeName}"
    return cluster.kubectl("get", "pod", pod, "-n", namespace, "-o", jsonpath).stdout


@pytest.fixture
def default(up_clusters: dict[str, UpCluster]) -> UpCluster:
    return up_clusters[DEFAULT]


def test_slices_and_device_class_as_the_chart_installs_them(default: UpCluster) -> None:
    slices = json.loads(default.kubectl("get", "resourceslices", "-o", "json").stdout)["items"]
    assert sorted(s["spec"]["nodeName"] for s in slices) == ["node-0", "node-1"]
    for s in slices:
        assert [d["name"] for d in s["spec"]["devices"]] == [f"gpu-{i}" for i in range(8)]
        assert s["spec"]["pool"]["name"] == s["spec"]["nodeName"]
    device_class = json.loads(
        default.kubectl("get", "deviceclass", "gpu.example.com", "-o", "json").stdout
    )
    assert device_class["spec"] == {
        "selectors": [{"cel": {"expression": "device.driver == 'gpu.example.com'"}}],
        "extendedResourceName": "example.com/gpu",
    }


def test_basic_resourceclaimtemplate_gives_each_pod_its_own_gpu(default: UpCluster) -> None:
    ns = apply(default, "basic-resourceclaimtemplate", "pod0", "pod1")
    got = []
    for pod in ("pod0", "pod1"):
        (device,) = gpu_devices(default, ns, pod, "ctr0").values()
        got.append((node_of(default, ns, pod), device))
    assert got[0] != got[1]


def test_a_claim_shared_across_containers_is_one_gpu(default: UpCluster) -> None:
    ns = apply(default, "basic-shared-claim-across-containers", "pod0")
    ctr0 = gpu_devices(default, ns, "pod0", "ctr0")
    assert len(ctr0) == 1
    assert gpu_devices(default, ns, "pod0", "ctr1") == ctr0


def test_a_claim_shared_across_pods_is_one_gpu(default: UpCluster) -> None:
    ns = apply(default, "basic-shared-claim-across-pods", "pod0", "pod1")
    pod0 = gpu_devices(default, ns, "pod0", "ctr0")
    assert len(pod0) == 1
    assert gpu_devices(default, ns, "pod1", "ctr0") == pod0
    assert node_of(default, ns, "pod0") == node_of(default, ns, "pod1")


def test_multiple_requests_give_one_container_two_gpus(default: UpCluster) -> None:
    ns = apply(default, "basic-multiple-requests", "pod0")
    got = gpu_devices(default, ns, "pod0", "ctr0")
    assert len(set(got.values())) == 2
    for name, device in got.items():
        assert name == "GPU_DEVICE_" + device.removeprefix("gpu-")


def test_opaque_config_time_slices_one_gpu_and_partitions_the_other(default: UpCluster) -> None:
    ns = apply(default, "basic-resourceclaim-opaque-config", "pod0")
    ts = [env(default, ns, "pod0", c) for c in ("ts-ctr0", "ts-ctr1")]
    sp = [env(default, ns, "pod0", c) for c in ("sp-ctr0", "sp-ctr1")]
    ts_gpu = next(v for k, v in ts[0].items() if re.fullmatch(r"GPU_DEVICE_\d+", k))
    sp_gpu = next(v for k, v in sp[0].items() if re.fullmatch(r"GPU_DEVICE_\d+", k))
    assert ts_gpu != sp_gpu
    t, s = ts_gpu.removeprefix("gpu-"), sp_gpu.removeprefix("gpu-")
    for got in ts:
        assert got[f"GPU_DEVICE_{t}"] == ts_gpu
        assert got[f"GPU_DEVICE_{t}_SHARING_STRATEGY"] == "TimeSlicing"
        assert got[f"GPU_DEVICE_{t}_TIMESLICE_INTERVAL"] == "Long"
    for got in sp:
        assert got[f"GPU_DEVICE_{s}"] == sp_gpu
        assert got[f"GPU_DEVICE_{s}_SHARING_STRATEGY"] == "SpacePartitioning"
        assert got[f"GPU_DEVICE_{s}_PARTITION_COUNT"] == "10"


def test_cel_selector_picks_a_matching_gpu(default: UpCluster) -> None:
    ns = apply(default, "cel-selector", "pod0")
    assert len(gpu_devices(default, ns, "pod0", "ctr0")) == 1


def test_prioritized_alternatives_fall_back_and_prefer(default: UpCluster) -> None:
    ns = apply(default, "prioritized-alternatives", "pod0", "pod1")
    devices = [gpu_devices(default, ns, pod, "ctr0") for pod in ("pod0", "pod1")]
    assert [len(d) for d in devices] == [1, 1]
    by_pod = claims(default, ns)
    requests = {
        pod: [r["request"] for r in claim["status"]["allocation"]["devices"]["results"]]
        for pod, claim in by_pod.items()
    }
    assert requests == {"pod0": ["gpu/older-gpu"], "pod1": ["gpu/latest-gpu"]}


def test_an_init_container_and_a_container_share_the_gpu(default: UpCluster) -> None:
    ns = apply(default, "initcontainer-shared-gpu", "pod0")
    init0 = gpu_devices(default, ns, "pod0", "init0")
    assert len(init0) == 1
    assert gpu_devices(default, ns, "pod0", "ctr0") == init0


def test_extended_resource_requests_by_implicit_and_chart_name(default: UpCluster) -> None:
    ns = apply(default, "extended-resource-request", "pod0", "pod1")
    for pod, name in (
        ("pod0", "deviceclass.resource.kubernetes.io/gpu.example.com"),
        ("pod1", "example.com/gpu"),
    ):
        assert len(gpu_devices(default, ns, pod, "ctr0")) == 1
        status = json.loads(
            default.kubectl(
                "get", "pod", pod, "-n", ns, "-o", "jsonpath={.status.extendedResourceClaimStatus}"
            ).stdout
        )
        assert [m["resourceName"] for m in status["requestMappings"]] == [name]
        assert status["resourceClaimName"].startswith(f"{pod}-extended-resources-")


def test_admin_access_sees_every_gpu_of_the_node(default: UpCluster) -> None:
    ns = apply(default, "admin-access", "pod0")
    got = env(default, ns, "pod0", "ctr0")
    assert got["DRA_ADMIN_ACCESS"] == "true"
    devices = {v for k, v in got.items() if re.fullmatch(r"GPU_DEVICE_\d+", k)}
    assert devices == {f"gpu-{i}" for i in range(8)}


def test_partitionable_devices_give_two_partitions(up_clusters: dict[str, UpCluster]) -> None:
    cluster = up_clusters[PARTITIONS]
    slices = json.loads(cluster.kubectl("get", "resourceslices", "-o", "json").stdout)["items"]
    # One slice for the shared counters and one for the partition devices.
    assert sorted(bool(s["spec"].get("sharedCounters")) for s in slices) == [False, True]
    ns = apply(cluster, "partitionable-devices", "pod0")
    got = gpu_devices(cluster, ns, "pod0", "ctr0")
    assert len(got) == 2
    assert all(re.fullmatch(r"gpu-\d-partition-\d", d) for d in got.values())


def test_binding_conditions_are_satisfied_by_the_controller(
    up_clusters: dict[str, UpCluster],
) -> None:
    cluster = up_clusters[PARTITIONS]
    ns = apply(cluster, "binding-conditions", "pod0")
    table = cluster.kubectl("get", "resourceclaim", "-n", ns).stdout.splitlines()
    assert table[0].split() == ["NAME", "STATE", "AGE"]
    assert table[1].split()[1] == "allocated,reserved"
    (claim,) = claims(cluster, ns).values()
    (result,) = claim["status"]["allocation"]["devices"]["results"]
    assert result["bindingConditions"] == ["BindingConditions"]
    assert result["bindingFailureConditions"] == ["BindingFailureConditions"]
    (device,) = claim["status"]["devices"]
    assert device["device"] == result["device"]
    assert [(c["type"], c["status"], c["reason"]) for c in device["conditions"]] == [
        ("BindingConditions", "True", "Ready")
    ]


def test_pods_share_one_gpu_each_with_its_capacity(up_clusters: dict[str, UpCluster]) -> None:
    cluster = up_clusters[SHARED]
    ns = apply(cluster, "gpu-allow-multiple-allocations", "pod0", "pod1")
    for pod in ("pod0", "pod1"):
        got = env(cluster, ns, pod, "ctr0")
        assert got["GPU_DEVICE_0"] == "gpu-0"
        assert (got["GPU_DEVICE_0_MEMORY"], got["GPU_DEVICE_0_COMPUTE"]) == ("16Gi", "20")


def test_pods_share_one_partition_each_with_its_capacity(
    up_clusters: dict[str, UpCluster],
) -> None:
    cluster = up_clusters[SHARED_PARTITIONS]
    ns = apply(cluster, "gpu-allow-multiple-allocations-partitionable", "pod0", "pod1")
    got = [env(cluster, ns, pod, "ctr0") for pod in ("pod0", "pod1")]
    assert got[0]["GPU_DEVICE_0_PARTITION_0"] == "gpu-0-partition-0"
    assert got[1]["GPU_DEVICE_0_PARTITION_0"] == "gpu-0-partition-0"
    for g in got:
        assert (g["GPU_DEVICE_0_PARTITION_0_MEMORY"], g["GPU_DEVICE_0_PARTITION_0_COMPUTE"]) == (
            "8Gi",
            "10",
        )


def test_device_taint_examples(up_clusters: dict[str, UpCluster]) -> None:
    """device-taints-tolerations, one example after the other (they share a namespace and
    a rule name), as Kubernetes 1.37 treats them: a device tainted NoSchedule or NoExecute
    is not allocated to a claim that does not tolerate the taint, so the pods the READMEs
    show scheduled and then evicted stay Pending instead (upstream's allocator refuses
    such devices since the scheduler honours NoExecute at allocation)."""
    cluster = up_clusters[TAINTS]
    ns = "basic-resourceclaimtemplate"

    def run(example: str, manifest: str, *pods: str) -> None:
        cluster.kubectl("apply", "-f", str(TAINT_EXAMPLES / example / manifest))
        for pod in pods:
            cluster.kubectl("wait", "--for=condition=Ready", f"pod/{pod}", "-n", ns, WAIT)

    def unschedulable(pod: str) -> None:
        """The pod stays Pending: no device its claim tolerates."""
        condition = '{.status.conditions[?(@.type=="PodScheduled")].message}'
        message = (
            "0/1 nodes are available: 1 cannot allocate all claims. preemption: 0/1 nodes are "
            "available: 1 Preemption is not helpful for scheduling."
        )
        cluster.kubectl(
            "wait", f"--for=jsonpath={condition}={message}", f"pod/{pod}", "-n", ns, WAIT
        )
        jsonpath = "jsonpath={.status.phase}"
        assert cluster.kubectl("get", "pod", pod, "-n", ns, "-o", jsonpath).stdout == "Pending"

    noexecute = "device-taint-pod-noexecute"
    run(noexecute, "1-basic-resourceclaimtemplate.yaml")
    run(noexecute, "2-pod-to-be-evicted.yaml", "pod-to-be-evicted")
    run(noexecute, "3-device-taint-rule.yaml")
    cluster.kubectl("wait", "--for=delete", "pod/pod-to-be-evicted", "-n", ns, WAIT)
    events = cluster.kubectl("get", "events", "-n", ns).stdout
    assert "DeviceTaintManagerEviction" in events and "Marking for deletion" in events
    run(noexecute, "4-pod-no-execute.yaml")
    unschedulable("pod-no-execute")
    cluster.kubectl("delete", "-f", str(TAINT_EXAMPLES / noexecute / "3-device-taint-rule.yaml"))
    cluster.kubectl("wait", "--for=condition=Ready", "pod/pod-no-execute", "-n", ns, WAIT)

    noschedule = "device-taint-pod-noschedule"
    run(noschedule, "2-pod-keeps-running.yaml", "pod-keeps-running")
    run(noschedule, "3-device-taint-rule.yaml")
    # The example's pod manifest has no apiVersion: kubectl refuses it, on any cluster.
    refused = cluster.kubectl(
        "apply", "-f", str(TAINT_EXAMPLES / noschedule / "4-pod-not-scheduled.yaml"), check=False
    )
    assert refused.returncode == 1
    assert "error validating data: apiVersion not set" in refused.stderr
    for pod in ("pod-keeps-running", "pod-no-execute"):  # NoSchedule evicts nobody
        cluster.kubectl("wait", "--for=condition=Ready", f"pod/{pod}", "-n", ns, WAIT)

    toleration = "device-taint-pod-toleration"
    run(toleration, "1-device-taint-rule.yaml")  # the rule, now NoExecute: evicts the two
    for pod in ("pod-keeps-running", "pod-no-execute"):
        cluster.kubectl("wait", "--for=delete", f"pod/{pod}", "-n", ns, WAIT)
    run(toleration, "2-basic-resourceclaimtemplate.yaml", "pod-with-toleration")
    unschedulable("pod-without-toleration")
