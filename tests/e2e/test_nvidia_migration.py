"""A migration rehearsal as NVIDIA users run it (KEP-5004's gradual transition): two pools
of DGX H100s on NVIDIA's device plugin move to the NVIDIA DRA driver pool by pool with
`drasim node migrate`, while Deployments keep asking `nvidia.com/gpu: 1` and
`nvidia.com/mig-1g.10gb: 1` and keep running.

- `dp-h100` (two nodes): the device plugin with `migStrategy: none`, `nvidia.com/gpu: 8`;
  after the move the chart's `gpu.nvidia.com` class maps `nvidia.com/gpu`.
- `dp-mig` (one node, every GPU split into seven 1g.10gb by mig-parted): the plugin with
  `migStrategy: mixed`, `nvidia.com/mig-1g.10gb: 56`; after the move a class of the
  user's own maps that name, as the driver's KEP-5004 demo does for 1g.12gb.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.e2e.conftest import UpCluster

CLUSTER = """\
apiVersion: drasim.io/v1alpha1
kind: Cluster
deviceClasses:
  - apiVersion: resource.k8s.io/v1
    kind: DeviceClass
    metadata: {name: mig-1g-10gb.gpu.nvidia.com}
    spec:
      selectors:
        - cel:
            expression: >-
              device.driver == 'gpu.nvidia.com' &&
              device.attributes['gpu.nvidia.com'].type == 'mig' &&
              device.attributes['gpu.nvidia.com'].profile == '1g.10gb'
      extendedResourceName: nvidia.com/mig-1g.10gb
pools:
  - name: dp-h100
    count: 2
    profile: nvidia-dgx-h100
    devices:
      gpu: {exposure: device-plugin, migStrategy: none}
  - name: dp-mig
    profile: nvidia-dgx-h100
    devices:
      gpu:
        exposure: device-plugin
        migStrategy: mixed
        migConfig: [{devices: all, mig-enabled: true, mig-devices: {"1g.10gb": 7}}]
"""

DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata: {{name: {name}}}
spec:
  replicas: {replicas}
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec:
      containers:
      - name: cuda
        image: nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0
        resources: {{limits: {{{resource}: 1}}}}
"""


@pytest.fixture(scope="module")
def up(up_clusters: dict[str, UpCluster]) -> UpCluster:
    return up_clusters[CLUSTER]


def migrate(up: UpCluster, pool: str) -> list[str]:
    """`drasim node migrate <pool> --to dra` against the cluster, as its user runs it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DRASIM_")}
    done = subprocess.run(
        [sys.executable, "-m", "drasim.cli.main", "--data-dir", str(up.data_dir)]
        + ["node", "migrate", pool, "--to", "dra"],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def deploy(up: UpCluster, name: str, replicas: int, resource: str) -> None:
    manifest = DEPLOYMENT.format(name=name, replicas=replicas, resource=resource)
    up.kubectl("apply", "-f", "-", input=manifest)


def capacity(up: UpCluster, node: str) -> dict[str, str]:
    got = json.loads(up.kubectl("get", "node", node, "-o", "json").stdout)
    return {k: v for k, v in got["status"]["capacity"].items() if k.startswith("nvidia.com/")}


def available(up: UpCluster, name: str, replicas: int) -> list[dict]:
    """Wait until the Deployment's pods all run again; its pods."""
    up.kubectl(
        "wait", f"--for=jsonpath={{.status.availableReplicas}}={replicas}",
        f"deployment/{name}", "--timeout=120s",
    )  # fmt: skip
    up.kubectl("wait", "--for=condition=Ready", "pod", "-l", f"app={name}", "--timeout=120s")
    pods = json.loads(up.kubectl("get", "pods", "-l", f"app={name}", "-o", "json").stdout)
    running = [p for p in pods["items"] if not p["metadata"].get("deletionTimestamp")]
    assert len(running) == replicas
    return running


def visible(pod: dict) -> str:
    given = json.loads(pod["metadata"]["annotations"]["drasim.io/container-devices"])
    return given["cuda"]["env"]["NVIDIA_VISIBLE_DEVICES"]


def test_pools_move_from_the_device_plugin_to_the_dra_driver(up: UpCluster) -> None:
    assert capacity(up, "dp-h100-0") == {"nvidia.com/gpu": "8"}
    assert capacity(up, "dp-mig-0") == {"nvidia.com/mig-1g.10gb": "56"}
    deploy(up, "train", 10, "nvidia.com/gpu")
    deploy(up, "infer", 4, "nvidia.com/mig-1g.10gb")

    # On the device plugin: each container sees its GPU's or MIG device's UUID.
    for pod in available(up, "train", 10):
        assert pod["spec"]["nodeName"] in ("dp-h100-0", "dp-h100-1")
        assert (
            visible(pod).startswith("GPU-") and "extendedResourceClaimStatus" not in pod["status"]
        )
    for pod in available(up, "infer", 4):
        assert pod["spec"]["nodeName"] == "dp-mig-0" and visible(pod).startswith("MIG-")
    assert up.kubectl("get", "resourceslices", "-o", "name").stdout == ""

    lines = migrate(up, "dp-h100")
    assert lines[0] == "node/dp-h100-0 cordoned" and lines[-1] == "node/dp-h100-1 uncordoned"
    assert "node/dp-h100-1: gpu is now exposed through dra" in lines

    # The same pods' replacements ask the same `nvidia.com/gpu: 1`, now served by DRA.
    for pod in available(up, "train", 10):
        claim = pod["status"]["extendedResourceClaimStatus"]
        assert claim["requestMappings"][0]["resourceName"] == "nvidia.com/gpu"
        assert visible(pod) == "void"
    assert capacity(up, "dp-h100-0") == {} and capacity(up, "dp-mig-0") != {}
    for pod in available(up, "infer", 4):
        assert visible(pod).startswith("MIG-")  # the MIG pool has not moved yet

    migrate(up, "dp-mig")
    for pod in available(up, "infer", 4):
        status = pod["status"]["extendedResourceClaimStatus"]
        name = status["resourceClaimName"]
        claim = json.loads(up.kubectl("get", "resourceclaim", name, "-o", "json").stdout)
        (result,) = claim["status"]["allocation"]["devices"]["results"]
        assert result["pool"] == "dp-mig-0"
        assert result["device"].startswith("gpu-") and "-mig-1g10gb-19-" in result["device"]
    assert capacity(up, "dp-mig-0") == {}
    slices = json.loads(up.kubectl("get", "resourceslices", "-o", "json").stdout)["items"]
    assert sorted({s["spec"]["nodeName"] for s in slices}) == ["dp-h100-0", "dp-h100-1", "dp-mig-0"]
