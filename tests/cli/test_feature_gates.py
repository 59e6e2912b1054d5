"""`drasim up --kubernetes-version 1.36 --feature-gates DRAExtendedResource=false`: the
whole cluster, real services, behaves as a 1.36 cluster with the gate off, seen through
kubectl; and flags that cannot be honoured are refused before anything starts."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from drasim.cli.up import SERVICES
from tests.cli.test_up import DEADLINE, Up
from tests.http.conftest import kubectl_env

KUBECTL = shutil.which("kubectl")
GPU = "example.com/gpu"


def gpu_pod(name: str, gpus: int) -> str:
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {
                "containers": [
                    {
                        "name": "c",
                        "image": "registry.k8s.io/pause:3.10",
                        "resources": {"limits": {GPU: str(gpus)}},
                    }
                ]
            },
        }
    )


@pytest.fixture
def up_136_without_extended_resources(tmp_path: Path) -> Iterator[Up]:
    """The KEP example cluster (a DRA node with 8 GPUs, a device-plugin node with 2)."""
    started = Up(
        tmp_path,
        "--services", ",".join(SERVICES), "--kubelets", "1",
        "--kubernetes-version", "1.36", "--feature-gates", "DRAExtendedResource=false",
    )  # fmt: skip
    yield started
    if started.process.poll() is None:
        started.process.send_signal(signal.SIGTERM)
        started.process.wait(timeout=DEADLINE)


def kubectl(tmp_path: Path, *args: str, input: str | None = None) -> str:
    assert KUBECTL is not None
    done = subprocess.run(
        [KUBECTL, "--kubeconfig", str(tmp_path / "kubeconfig"), *args],
        input=input,
        capture_output=True,
        text=True,
        env=kubectl_env(),
        timeout=DEADLINE,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed on this machine")
def test_a_136_cluster_without_dra_extended_resources(
    up_136_without_extended_resources: Up, tmp_path: Path
) -> None:
    up = up_136_without_extended_resources
    up.wait_for_ready()
    version = json.loads(kubectl(tmp_path, "get", "--raw", "/version"))
    assert (version["minor"], version["emulationMinor"]) == ("37", "36")

    # The cluster file's class asked for the name; the apistore dropped it (upstream
    # `dropDisabledDRAExtendedResourceFields`, `pkg/registry/resource/deviceclass/strategy.go`).
    shown = kubectl(tmp_path, "get", "deviceclass", "gpu.example.com", "-o", "json")
    assert "extendedResourceName" not in json.loads(shown)["spec"]

    # The device plugin still serves the name; DRA's devices do not (upstream
    # `shouldDelegateResourceToDRA` without `EnableDRAExtendedResource`).
    kubectl(tmp_path, "apply", "-f", "-", input=gpu_pod("small", 1))
    kubectl(tmp_path, "apply", "-f", "-", input=gpu_pod("big", 3))
    wait = ("wait", "--timeout", f"{DEADLINE:.0f}s")
    kubectl(tmp_path, *wait, "--for", "jsonpath={.status.phase}=Running", "pod/small")
    kubectl(tmp_path, *wait, "--for", "condition=PodScheduled=false", "pod/big")
    small = json.loads(kubectl(tmp_path, "get", "pod", "small", "-o", "json"))
    assert small["spec"]["nodeName"] == "dp-gpu-0"
    assert "extendedResourceClaimStatus" not in small["status"]
    big = json.loads(kubectl(tmp_path, "get", "pod", "big", "-o", "json"))
    [scheduled] = [c for c in big["status"]["conditions"] if c["type"] == "PodScheduled"]
    assert scheduled["reason"] == "Unschedulable"
    # Upstream's words with the gate off (test/integration/dra/extendedresource.go), but
    # for the "no new claims to deallocate, " drasim's DynamicResources PostFilter still
    # inserts before "preemption:" (reference/divergences.yaml lists it).
    message = scheduled["message"]
    assert message.startswith(f"0/2 nodes are available: 2 Insufficient {GPU}. ")
    assert message.endswith(
        "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
    )
    assert json.loads(kubectl(tmp_path, "get", "resourceclaims", "-o", "json"))["items"] == []

    up.process.send_signal(signal.SIGTERM)
    assert up.finish() == 0, up.output


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (
            ["--feature-gates", "DRAExtendedResource=false"],
            "drasim up: error: --feature-gates: cannot set feature gate DRAExtendedResource to "
            "false, feature is locked to true",
        ),
        (
            ["--feature-gates", "DRAExtendedResources=false"],
            "drasim up: error: --feature-gates: unrecognized feature gate: DRAExtendedResources",
        ),
        (
            ["--kubernetes-version", "1.38"],
            "drasim up: error: --kubernetes-version: emulation version 1.38 is not between "
            "[1.34, 1.37.0]",
        ),
    ],
    ids=["locked", "unknown", "too new"],
)
def test_up_refuses_gates_it_cannot_honour(tmp_path: Path, flags: list[str], message: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "drasim.cli.main", "--data-dir", str(tmp_path), "up", *flags],
        capture_output=True,
        text=True,
        timeout=DEADLINE,
    )
    assert done.returncode == 2
    assert done.stderr.splitlines()[-1] == message
    assert not (tmp_path / "cluster.json").exists()  # nothing started
