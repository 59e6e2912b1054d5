"""The NVIDIA DRA driver's quickstart demo (demo/specs/quickstart/, see nvidia_specs/README.md)
applied unchanged with kubectl to the node its README prepares: a DGX A100 (40GB) after
`nvidia-mig-parted apply -f mig-parted-config.yaml -c half-balanced`, with the chart's
TimeSlicingSettings and MPSSupport gates on for gpu-test5. Each test applies one example,
checks what its comments say each container gets, and deletes it, as the README does.

What a container got is read from the pod's `drasim.io/container-devices` annotation (the
CDI devices and environment the runtime gave it) and from `kubectl logs`.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from tests.e2e.conftest import UpCluster

SPECS = Path(__file__).parent / "nvidia_specs" / "quickstart"
NODE = "a100-0"


def cluster_file() -> str:
    """The README's node: the half-balanced entries of the demo's own mig-parted config."""
    config = yaml.safe_load((SPECS / "mig-parted-config.yaml").read_text())
    pool = {
        "name": "a100",
        "profile": "nvidia-dgx-a100-40gb",
        # GPU nodes carry the taint every demo pod tolerates.
        "taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}],
        "devices": {
            "gpu": {
                "exposure": "dra",
                "featureGates": {"TimeSlicingSettings": True, "MPSSupport": True},
                "migConfig": config["mig-configs"]["half-balanced"],
            }
        },
    }
    return yaml.safe_dump({"apiVersion": "drasim.io/v1alpha1", "kind": "Cluster", "pools": [pool]})


@pytest.fixture(scope="module")
def up(up_clusters: dict[str, UpCluster]) -> UpCluster:
    return up_clusters[cluster_file()]


def apply(up: UpCluster, example: str) -> None:
    """`kubectl apply --filename=<example>.yaml`, deleted again when the test ends."""
    applied = up.kubectl("apply", f"--filename={SPECS / 'v1' / example}.yaml")
    assert applied.stdout.startswith(f"namespace/{example} created"), applied.stdout


def delete(up: UpCluster, example: str) -> None:
    up.kubectl("delete", f"--filename={SPECS / 'v1' / example}.yaml", "--wait=true")


def running(up: UpCluster, namespace: str, count: int) -> list[dict]:
    """Wait until `count` pods of `namespace` are Ready; the pods."""
    up.kubectl("wait", "--for=condition=Ready", "pod", "--all", "-n", namespace, "--timeout=120s")
    pods = json.loads(up.kubectl("get", "pods", "-n", namespace, "-o", "json").stdout)["items"]
    assert len(pods) == count
    assert {p["spec"]["nodeName"] for p in pods} == {NODE}
    return pods


def given(pod: dict) -> dict[str, dict]:
    """Container → the CDI devices and environment the runtime gave it."""
    return json.loads(pod["metadata"]["annotations"]["drasim.io/container-devices"])


def devices(cdi_ids: list[str], claim_uid: str) -> list[str]:
    """The driver's devices behind claim-scoped CDI ids `k8s.gpu.nvidia.com/claim=<uid>-<dev>`."""
    prefix = f"k8s.gpu.nvidia.com/claim={claim_uid}-"
    assert all(i.startswith(prefix) for i in cdi_ids), cdi_ids
    return [i.removeprefix(prefix) for i in cdi_ids]


def claim_uid(up: UpCluster, namespace: str, pod: dict, name: str) -> str:
    """The UID of the pod's claim `name`: one it names, or the one made from its template."""
    named = {c["name"]: c.get("resourceClaimName") for c in pod["spec"]["resourceClaims"]}
    made = {
        s["name"]: s["resourceClaimName"] for s in pod["status"].get("resourceClaimStatuses", [])
    }
    claim = named[name] or made[name]
    return up.kubectl(
        "get", "resourceclaim", claim, "-n", namespace, "-o", "jsonpath={.metadata.uid}"
    ).stdout


def test_gpu_test1_two_pods_each_get_a_distinct_gpu(up: UpCluster) -> None:
    """ "Two pods, one container each; each container asking for 1 distinct GPU"."""
    apply(up, "gpu-test1")
    try:
        pods = running(up, "gpu-test1", 2)
        got = []
        for pod in pods:
            ctr = given(pod)["ctr"]
            got += devices(ctr["cdiDevices"], claim_uid(up, "gpu-test1", pod, "gpu"))
            assert ctr["env"] == {"NVIDIA_VISIBLE_DEVICES": "void"}
        # GPUs 0-3 are in MIG mode: only 4-7 are whole GPUs.
        assert len(set(got)) == 2 and set(got) <= {"gpu-4", "gpu-5", "gpu-6", "gpu-7"}
        logs = up.kubectl("logs", "-n", "gpu-test1", "-l", "app=pod").stdout
        assert logs.count("k8s.gpu.nvidia.com/claim=") == 2, logs
    finally:
        delete(up, "gpu-test1")


def test_gpu_test2_two_containers_share_one_gpu(up: UpCluster) -> None:
    """ "One pod, two containers; each asking for shared access to a single GPU"."""
    apply(up, "gpu-test2")
    try:
        (pod,) = running(up, "gpu-test2", 1)
        uid = claim_uid(up, "gpu-test2", pod, "shared-gpu")
        ctrs = given(pod)
        assert devices(ctrs["ctr0"]["cdiDevices"], uid) == devices(ctrs["ctr1"]["cdiDevices"], uid)
        assert len(ctrs["ctr0"]["cdiDevices"]) == 1
    finally:
        delete(up, "gpu-test2")


def test_gpu_test3_two_pods_share_a_global_claim(up: UpCluster) -> None:
    """ "One shared, global claim providing access to a GPU; two pods, each asking for access
    to the shared GPU"."""
    apply(up, "gpu-test3")
    try:
        pods = running(up, "gpu-test3", 2)
        uid = claim_uid(up, "gpu-test3", pods[0], "shared-gpu")
        got = {tuple(devices(given(p)["ctr"]["cdiDevices"], uid)) for p in pods}
        assert len(got) == 1 and len(next(iter(got))) == 1
        reserved = up.kubectl(
            "get", "resourceclaim", "single-gpu", "-n", "gpu-test3",
            "-o", "jsonpath={.status.reservedFor[*].name}",
        )  # fmt: skip
        assert sorted(reserved.stdout.split()) == ["pod1", "pod2"]
    finally:
        delete(up, "gpu-test3")


def test_gpu_test4_four_pods_each_get_four_mig_devices_of_one_gpu(up: UpCluster) -> None:
    """ "One pod, 4 containers; each asking for a different MIG device on a shared
    mig-enabled GPU; run as deployment with 4 replicas": the four half-balanced GPUs."""
    apply(up, "gpu-test4")
    try:
        pods = running(up, "gpu-test4", 4)
        parents = set()
        for pod in pods:
            uid = claim_uid(up, "gpu-test4", pod, "mig-devices")
            ctrs = given(pod)
            got = {c: devices(ctrs[c]["cdiDevices"], uid) for c in ("ctr0", "ctr1", "ctr2", "ctr3")}
            names = [d for ds in got.values() for d in ds]
            (parent,) = {re.match(r"gpu-(\d+)-mig-", d).group(1) for d in names}  # type: ignore[union-attr]
            parents.add(parent)
            profiles = sorted(re.sub(r"gpu-\d+-mig-(\w+)-\d+-\d+", r"\1", d) for d in names)
            assert profiles == ["1g5gb", "1g5gb", "2g10gb", "3g20gb"]
            assert len(set(names)) == 4
        assert parents == {"0", "1", "2", "3"}
    finally:
        delete(up, "gpu-test4")


def test_gpu_test5_time_slicing_and_mps_containers(up: UpCluster) -> None:
    """Two containers time-slice one GPU, two share another through MPS, whose pipe
    directory they get."""
    apply(up, "gpu-test5")
    try:
        (pod,) = running(up, "gpu-test5", 1)
        uid = claim_uid(up, "gpu-test5", pod, "shared-gpus")
        ctrs = given(pod)
        ts = {tuple(devices(ctrs[c]["cdiDevices"], uid)) for c in ("ts-ctr0", "ts-ctr1")}
        mps = {tuple(devices(ctrs[c]["cdiDevices"], uid)) for c in ("mps-ctr0", "mps-ctr1")}
        assert len(ts) == len(mps) == 1 and ts != mps
        for c in ("mps-ctr0", "mps-ctr1"):
            assert ctrs[c]["env"]["CUDA_MPS_PIPE_DIRECTORY"] == "/tmp/nvidia-mps"
        assert "CUDA_MPS_PIPE_DIRECTORY" not in ctrs["ts-ctr0"]["env"]
    finally:
        delete(up, "gpu-test5")


def test_gpu_test6_selects_on_an_attribute_the_driver_no_longer_publishes(up: UpCluster) -> None:
    """gpu-test6's selector reads `index`, which the driver no longer publishes: on an A100
    the lookup fails, and its pods stay Pending as on a real cluster, the scheduler's event
    naming the missing key."""
    apply(up, "gpu-test6")
    try:
        up.kubectl(
            "wait", "--for=jsonpath={.reason}=FailedScheduling", "event", "-n", "gpu-test6",
            "--field-selector", "involvedObject.kind=Pod", "--timeout=120s",
        )  # fmt: skip
        found = json.loads(up.kubectl("get", "events", "-n", "gpu-test6", "-o", "json").stdout)
        messages = [e["message"] for e in found["items"] if e["reason"] == "FailedScheduling"]
        assert any("no such key: index" in m for m in messages), messages
        phases = up.kubectl("get", "pods", "-n", "gpu-test6", "-o", "jsonpath={..phase}")
        assert set(phases.stdout.split()) == {"Pending"}
    finally:
        delete(up, "gpu-test6")
