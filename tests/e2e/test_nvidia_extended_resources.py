"""The NVIDIA DRA driver's KEP-5004 demo (demo/specs/extended-resources/, see
nvidia_specs/README.md) applied unchanged with kubectl: pods ask `nvidia.com/gpu: 1` and
`nvidia.com/mig-1g.12gb: 1` in their limits, with no resourceClaims, and the scheduler
makes the claim the specs' comments show.

The nodes are those the specs name: a DGX H100 for the full GPU (the chart's gpu.nvidia.com
class maps `nvidia.com/gpu`), and the 2×GH200 node of mig-1g-12gb.yaml's comment with
seven 1g.12gb MIG devices on each GPU (its mig-partition.yaml). A third, a DGX H100 with
the DynamicMIG gate, serves MIG devices made at allocation time.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.e2e.conftest import UpCluster

SPECS = Path(__file__).parent / "nvidia_specs" / "extended-resources"

CLUSTER = """\
apiVersion: drasim.io/v1alpha1
kind: Cluster
pools:
  - name: h100
    profile: nvidia-dgx-h100
    taints: [{key: nvidia.com/gpu, effect: NoSchedule}]
    devices:
      gpu: {exposure: dra}
  - name: h100-dynamic
    profile: nvidia-dgx-h100
    devices:
      gpu: {exposure: dra, featureGates: {DynamicMIG: true}}
  - name: gh200
    profile: nvidia-gh200-2
    taints: [{key: nvidia.com/gpu, effect: NoSchedule}]
    devices:
      gpu:
        exposure: dra
        migConfig: [{devices: [0, 1], mig-enabled: true, mig-devices: {"1g.12gb": 7}}]
"""


@pytest.fixture(scope="module")
def up(up_clusters: dict[str, UpCluster]) -> UpCluster:
    return up_clusters[CLUSTER]


def get(up: UpCluster, *args: str) -> dict:
    return json.loads(up.kubectl("get", *args, "-o", "json").stdout)


def special_claim(up: UpCluster, namespace: str, pod: str) -> tuple[dict, dict]:
    """Wait for the pod to run; the pod and the claim the scheduler made for it."""
    up.kubectl("wait", "--for=condition=Ready", f"pod/{pod}", "-n", namespace, "--timeout=120s")
    obj = get(up, "pod", pod, "-n", namespace)
    name = obj["status"]["extendedResourceClaimStatus"]["resourceClaimName"]
    return obj, get(up, "resourceclaim", name, "-n", namespace)


def test_gpu_full_is_served_by_the_charts_device_class(up: UpCluster) -> None:
    up.kubectl("apply", "-f", str(SPECS / "gpu-full.yaml"))
    try:
        pod, claim = special_claim(up, "extended-resource-gpu-full", "gpu-full-pod")
        # The pod status and claim as the spec's trailing comments show them.
        status = pod["status"]["extendedResourceClaimStatus"]
        assert status["requestMappings"] == [
            {
                "containerName": "cuda-container",
                "requestName": "container-0-request-0",
                "resourceName": "nvidia.com/gpu",
            }
        ]
        assert status["resourceClaimName"].startswith("gpu-full-pod-extended-resources-")
        meta = claim["metadata"]
        assert meta["annotations"] == {"resource.kubernetes.io/extended-resource-claim": "true"}
        assert meta["generateName"] == "gpu-full-pod-extended-resources-"
        (owner,) = meta["ownerReferences"]
        assert (owner["kind"], owner["name"], owner["controller"]) == ("Pod", "gpu-full-pod", True)
        assert claim["spec"]["devices"]["requests"] == [
            {
                "name": "container-0-request-0",
                "exactly": {
                    "allocationMode": "ExactCount",
                    "count": 1,
                    "deviceClassName": "gpu.nvidia.com",
                },
            }
        ]
        (result,) = claim["status"]["allocation"]["devices"]["results"]
        assert result["driver"] == "gpu.nvidia.com"
        assert result["pool"] in ("h100-0", "h100-dynamic-0")
        assert re.fullmatch(r"gpu-[0-7]", result["device"])
        assert result["request"] == "container-0-request-0"
        given = json.loads(pod["metadata"]["annotations"]["drasim.io/container-devices"])
        uid = claim["metadata"]["uid"]
        assert given["cuda-container"]["cdiDevices"] == [
            f"k8s.gpu.nvidia.com/claim={uid}-{result['device']}"
        ]
    finally:
        up.kubectl("delete", "-f", str(SPECS / "gpu-full.yaml"), "--wait=true")


def test_mig_1g_12gb_is_served_by_the_specs_own_device_class(up: UpCluster) -> None:
    up.kubectl("apply", "-f", str(SPECS / "mig-1g-12gb.yaml"))
    try:
        pod, claim = special_claim(up, "extended-resource-mig-1g12gb", "mig-1g12gb-pod")
        status = pod["status"]["extendedResourceClaimStatus"]
        assert status["requestMappings"][0]["resourceName"] == "nvidia.com/mig-1g.12gb"
        request = claim["spec"]["devices"]["requests"][0]["exactly"]
        assert request["deviceClassName"] == "mig-1g-12gb.gpu.nvidia.com"
        (result,) = claim["status"]["allocation"]["devices"]["results"]
        # The driver's canonical name: profile without dots, GI profile ID 19, placement.
        assert re.fullmatch(r"gpu-[01]-mig-1g12gb-19-[0-6]", result["device"]), result
        assert result["pool"] == "gh200-0"
        terms = claim["status"]["allocation"]["nodeSelector"]["nodeSelectorTerms"]
        assert terms == [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["gh200-0"]}]}
        ]
        # The GH200 node publishes the fourteen MIG devices and no full GPU.
        slices = get(up, "resourceslices", "--field-selector", "spec.nodeName=gh200-0")
        names = [d["name"] for s in slices["items"] for d in s["spec"].get("devices", [])]
        assert len(names) == 14 and all("-mig-1g12gb-19-" in n for n in names)
    finally:
        up.kubectl("delete", "-f", str(SPECS / "mig-1g-12gb.yaml"), "--wait=true")


TWO_MIGS = """\
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: two-migs}
spec:
  devices:
    requests:
    - name: big
      exactly:
        deviceClassName: mig.nvidia.com
        selectors: [{cel: {expression: "device.attributes['gpu.nvidia.com'].profile == '4g.40gb'"}}]
    - name: small
      exactly:
        deviceClassName: mig.nvidia.com
        selectors: [{cel: {expression: "device.attributes['gpu.nvidia.com'].profile == '3g.40gb'"}}]
    constraints: [{requests: [], matchAttribute: "gpu.nvidia.com/parentUUID"}]
---
apiVersion: v1
kind: Pod
metadata: {name: two-migs}
spec:
  nodeSelector: {kubernetes.io/hostname: h100-dynamic-0}
  resourceClaims: [{name: m, resourceClaimName: two-migs}]
  containers: [{name: c, image: registry.k8s.io/pause:3.10, resources: {claims: [{name: m}]}}]
---
apiVersion: v1
kind: Pod
metadata: {name: whole-node}
spec:
  nodeSelector: {kubernetes.io/hostname: h100-dynamic-0}
  containers:
  - {name: c, image: registry.k8s.io/pause:3.10, resources: {limits: {nvidia.com/gpu: 8}}}
"""


def test_dynamic_mig_devices_share_their_gpus_counters(up: UpCluster) -> None:
    """What upstream's 1.37.2 scheduler does with the same slices (reference/up): a 4g and a
    3g instance on one GPU take placements 0 and 4, and a pod wanting all eight GPUs waits
    (`cannot allocate all claims`) until they are given back."""
    up.kubectl("apply", "-f", "-", input=TWO_MIGS)
    try:
        up.kubectl("wait", "--for=condition=Ready", "pod/two-migs", "--timeout=120s")
        claim = get(up, "resourceclaim", "two-migs")
        devices = [r["device"] for r in claim["status"]["allocation"]["devices"]["results"]]
        assert devices == ["gpu-0-mig-4g40gb-5-0", "gpu-0-mig-3g40gb-9-4"]
        up.kubectl(
            "wait", "--for=jsonpath={.reason}=FailedScheduling", "event",
            "--field-selector", "involvedObject.name=whole-node", "--timeout=120s",
        )  # fmt: skip
        events = get(up, "events", "--field-selector", "involvedObject.name=whole-node")
        assert any("cannot allocate all claims" in e["message"] for e in events["items"])
        up.kubectl("delete", "pod", "two-migs", "--wait=true")
        up.kubectl("delete", "resourceclaim", "two-migs", "--wait=true")
        up.kubectl("wait", "--for=condition=Ready", "pod/whole-node", "--timeout=120s")
    finally:
        up.kubectl("delete", "-f", "-", "--ignore-not-found", "--wait=true", input=TWO_MIGS)
