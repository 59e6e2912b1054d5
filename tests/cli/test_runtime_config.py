"""`drasim up --runtime-config` and the cluster file's `runtimeConfig`: the KEP example
cluster serves resource.k8s.io's older versions, so a pod whose claim comes from a v1beta1
ResourceClaimTemplate (as the dra-example-driver's 1.32 manifests write it) runs; flags
that cannot be honoured are refused before anything starts."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from drasim.apistore import __main__ as apistore_main
from drasim.cli.up import APISTORE, SERVICES
from drasim.common import profiles
from tests.cli.test_feature_gates import kubectl
from tests.cli.test_up import DEADLINE, Up

KUBECTL = shutil.which("kubectl")
V1BETA1_TEMPLATE_AND_POD = """\
apiVersion: resource.k8s.io/v1beta1
kind: ResourceClaimTemplate
metadata: {name: single-gpu, namespace: default}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        deviceClassName: gpu.example.com
---
apiVersion: v1
kind: Pod
metadata: {name: pod0, namespace: default}
spec:
  containers:
  - name: ctr0
    image: registry.k8s.io/pause:3.10
    resources:
      claims: [{name: gpu}]
  resourceClaims:
  - name: gpu
    resourceClaimTemplateName: single-gpu
"""


def _stop(up: Up) -> None:
    if up.process.poll() is None:
        up.process.send_signal(signal.SIGTERM)
        up.process.wait(timeout=DEADLINE)


@pytest.fixture
def kep_example(tmp_path: Path) -> Iterator[Up]:
    """The KEP example cluster, every service and its two nodes."""
    started = Up(tmp_path, "--services", ",".join(SERVICES), "--kubelets", "1")
    yield started
    _stop(started)


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed on this machine")
def test_a_pod_claims_devices_through_a_v1beta1_template(kep_example: Up, tmp_path: Path) -> None:
    kep_example.wait_for_ready()
    versions = kubectl(tmp_path, "api-versions").split()
    assert {"resource.k8s.io/v1beta1", "resource.k8s.io/v1beta2"} <= set(versions)
    kubectl(tmp_path, "apply", "-f", "-", input=V1BETA1_TEMPLATE_AND_POD)
    kubectl(tmp_path, "wait", "pod/pod0", "--for=condition=Ready", f"--timeout={DEADLINE:.0f}s")
    claims = json.loads(
        kubectl(tmp_path, "get", "resourceclaims.v1beta1.resource.k8s.io", "-o", "json")
    )["items"]
    assert len(claims) == 1
    claim = claims[0]
    assert claim["apiVersion"] == "resource.k8s.io/v1beta1"
    assert claim["spec"]["devices"]["requests"] == [
        {"name": "gpu", "deviceClassName": "gpu.example.com", "allocationMode": "ExactCount",
         "count": 1}
    ]  # fmt: skip
    [result] = claim["status"]["allocation"]["devices"]["results"]
    assert (result["request"], result["driver"]) == ("gpu", "gpu.example.com")
    assert claim["status"]["reservedFor"][0]["name"] == "pod0"
    kep_example.process.send_signal(signal.SIGTERM)
    assert kep_example.finish() == 0, kep_example.output


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed on this machine")
def test_the_flag_overrides_the_cluster_file(tmp_path: Path) -> None:
    up = Up(tmp_path, "--services", APISTORE, "--kubelets", "0",
            "--runtime-config", "resource.k8s.io/v1beta1=false")  # fmt: skip
    try:
        up.wait_for_ready()
        versions = kubectl(tmp_path, "api-versions").split()
        assert [v for v in versions if v.startswith("resource.k8s.io/")] == [
            "resource.k8s.io/v1",
            "resource.k8s.io/v1beta2",
        ]
    finally:
        _stop(up)


def _bad_cluster_file(tmp_path: Path) -> Path:
    path = tmp_path / "cluster.yaml"
    text = profiles.DEFAULT_CLUSTER.read_text()
    path.write_text(text.replace('resource.k8s.io/v1beta2: "true"', 'api/beta: "yes"'))
    return path


@pytest.mark.parametrize(
    ("flags", "code", "message"),
    [
        (["--runtime-config", "resource.k8s.io/v9=true"], 2,
         "drasim up: error: --runtime-config: group version resource.k8s.io/v9 that has not "
         "been registered"),
        (["--runtime-config", "resource.k8s.io/v1=false"], 2,
         "drasim up: error: --runtime-config: drasim cannot stop serving resource.k8s.io/v1: "
         "its own services read and write it"),
        (["--cluster", "{bad}"], 1,
         "drasim: {bad}: field runtimeConfig: invalid value api/beta=yes"),
    ],
    ids=["unknown version", "stored version off", "cluster file"],
)  # fmt: skip
def test_up_refuses_what_it_cannot_serve(
    tmp_path: Path, flags: list[str], code: int, message: str
) -> None:
    bad = str(_bad_cluster_file(tmp_path))
    flags = [flag.format(bad=bad) for flag in flags]
    done = subprocess.run(
        [sys.executable, "-m", "drasim.cli.main", "--data-dir", str(tmp_path / "data"), "up",
         *flags],
        capture_output=True,
        text=True,
        timeout=DEADLINE,
    )  # fmt: skip
    assert done.returncode == code
    assert done.stderr.splitlines()[-1] == message.format(bad=bad)
    assert not (tmp_path / "data" / "cluster.json").exists()  # nothing started


def test_the_apistore_alone_refuses_too(capsys: pytest.CaptureFixture[str]) -> None:
    """`python -m drasim.apistore --runtime-config`, as compose runs it: refused before it
    connects anywhere."""
    argv = ["--nats-url", "nats://127.0.0.1:1", "--database-url", "postgresql://x@127.0.0.1:1/x",
            "--runtime-config", "resource.k8s.io/v1beta3=true"]  # fmt: skip
    assert apistore_main.main(argv) == 2
    assert capsys.readouterr().err.strip() == (
        "drasim-apistore: --runtime-config: group version resource.k8s.io/v1beta3 that has not "
        "been registered"
    )
