"""The NVIDIA DRA driver's KEP-5004 demo (demo/specs/extended-resources/, see
nvidia_specs/README.md) applied unchanged with kubectl: pods ask `nvidia.com/gpu: 1` and
`nvidia.com/mig-1g.12gb: 1` in their limits, with no resourceClaims, and the scheduler
makes the claim the specs' comments show.

The nodes are those the specs name: a DGX H100 for the full GPU (the chart's gpu.nvidia.com
class maps `nvidia.com/gpu`), and the 2×GH200 node of mig-1g-12gb.yaml's comment with
seven 1g.12gb MIG devices on each GPU (its mig-partition.yaml).
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
        assert result["driver"] == "gpu.nvidia.com" and result["pool"] == "h100-0"
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
