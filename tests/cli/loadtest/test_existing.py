"""`drasim --data-dir DIR loadtest --existing` against a running `drasim up`: it finds the
cluster through the data directory's cluster.json, sizes the test from the cluster's
nodes, runs fill, churn and drain, and leaves no pod, claim or Job of its own behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from drasim.cli import supervisor
from drasim.cli.loadtest import workload
from drasim.cli.up import SERVICES
from tests.cli.test_up import DEADLINE, Up, drasim_cli

# One DRA node and one device-plugin node, 8 GPUs each: 12 fill pods, so at least 4 on
# either node, and 4 GPUs left for churn.
SHAPE = workload.Shape(2, workload.EXTENDED_RESOURCES, 0.75, device_plugin_nodes=1)


@pytest.fixture
def running_up(tmp_path: Path) -> Iterator[Up]:
    """A `drasim up` of every service and one kubelet, serving the test's shape."""
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(workload.cluster_file(SHAPE))
    up = Up(
        tmp_path / "data",
        "--cluster", str(cluster), "--kubelets", "1",
        services=",".join(SERVICES),
    )  # fmt: skip
    try:
        up.wait_for_ready()
        yield up
    finally:
        if up.process.poll() is None:
            up.process.send_signal(signal.SIGTERM)
            up.process.wait(timeout=DEADLINE)
        supervisor.ProcessRecords(tmp_path / "data").stop_orphans()


def test_loadtest_runs_against_the_running_cluster_and_leaves_it_clean(
    running_up: Up, tmp_path: Path
) -> None:
    data_dir, out = tmp_path / "data", tmp_path / "results.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("DRASIM_")}
    run = subprocess.run(
        [sys.executable, "-m", "drasim.cli.main", "--data-dir", str(data_dir),
         "loadtest", "--existing", "--mode", SHAPE.mode, "--fill", str(SHAPE.fill),
         "--fill-qps", "20", "--churn-qps", "4", "--churn-seconds", "2",
         "--churn-run-for", "1s", "--ceiling-seconds", "0", "--timeout", "120",
         "--json", str(out)],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    output = run.stdout[-5000:] + run.stderr[-5000:]
    assert run.returncode in (0, 1), output  # 1: an SLO failed on a loaded machine
    found = json.loads(out.read_text())

    # Sized from the running cluster's nodes, not from flags.
    assert (found["nodes"], found["device_plugin_nodes"]) == (2, 1), output
    assert (found["gpus"], found["fill_pods"]) == (SHAPE.gpus, SHAPE.fill_pods) == (16, 12)
    assert found["pods_started"] == found["pods_created"] > SHAPE.fill_pods
    assert found["create_errors"] == []
    assert found["devices_allocated_twice"] == 0
    assert found["devices_checked"]["dra"] > 0 and found["devices_checked"]["device_plugin"] > 0
    assert found["pod_startup_p99_s"] > 0 and found["scheduling_p99_s"] > 0
    # The fill's 12 pods outgrow either node: both kinds of device are measured. The
    # metric SLIs come from the services' /metrics that `up` put in cluster.json.
    fill = found["phases"]["fill"]
    assert fill["claim_allocation"]["count"] > 0 and fill["node_prepare_p99_s"] > 0
    assert fill["api_calls"] and fill["scheduling_sli_p99_s"] is not None
    measured = {s["name"] for s in found["slis"] if s["value_s"] is not None}
    assert {"fill pod start-up p99", "churn pod start-up p99"} <= measured
    verdicts = [s["pass"] for s in found["slis"]] + [r["pass"] for r in found["api_call_latency"]]
    # An SLI with nothing to measure (None: say no claim was seen unallocated) fails nothing.
    assert found["slo_pass"] == all(v for v in verdicts if v is not None)
    assert (run.returncode == 0) == found["slo_pass"]
    assert found["ceiling_reqreply_per_s"] is None  # --ceiling-seconds 0

    # The drain left the cluster as it found it: no pod, claim or Job of the test's.
    for resource in ("pods", "resourceclaims", "jobs"):
        listed = drasim_cli(data_dir, "get", resource, "-A", "-o", "name")
        assert listed.returncode == 0, listed.stderr
        assert "/" not in listed.stdout, (resource, listed.stdout)
    # And the cluster still serves: `up` is running, its nodes untouched.
    assert running_up.process.poll() is None
    nodes = drasim_cli(data_dir, "get", "nodes", "-o", "name").stdout.split()
    assert sorted(nodes) == ["node/dp-gpu-0", "node/dra-gpu-0"]
