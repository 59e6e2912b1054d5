"""`drasim loadtest` end to end at a tiny size, in both modes and with a mixed pool (half
the nodes serving their GPUs through a device plugin): it starts its own `drasim up`
(embedded NATS and Postgres), runs fill, churn and drain, and writes results whose figures
must agree with what it created."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

NODES, FILL = 4, 0.75  # 32 GPUs: 24 fill pods, 8 left free for churn


@pytest.mark.parametrize(
    ("mode", "device_plugin_fraction"),
    [("claims", 0.0), ("extended-resources", 0.0), ("extended-resources", 0.5)],
    ids=["claims", "extended-resources", "mixed-pool"],
)
def test_loadtest_runs_every_phase_and_reports_consistent_figures(
    tmp_path: Path, mode: str, device_plugin_fraction: float
) -> None:
    out = tmp_path / "results.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("DRASIM_")}
    run = subprocess.run(
        [sys.executable, "-m", "drasim.cli.main", "--data-dir", str(tmp_path / "unused"),
         "loadtest", "--nodes", str(NODES), "--mode", mode, "--fill", str(FILL),
         "--fill-qps", "20", "--churn-qps", "4", "--churn-seconds", "3",
         "--churn-run-for", "1s", "--ceiling-seconds", "0.5", "--timeout", "120",
         "--device-plugin-fraction", str(device_plugin_fraction), "--json", str(out)],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    output = run.stdout[-5000:] + run.stderr[-5000:]
    assert run.returncode in (0, 1), output  # 1: an SLO failed on a loaded machine
    found = json.loads(out.read_text())

    assert (found["nodes"], found["mode"], found["gpus"]) == (NODES, mode, NODES * 8)
    assert found["fill_pods"] == int(NODES * 8 * FILL) == found["phases"]["fill"]["jobs_created"]
    churn_jobs = found["phases"]["churn"]["jobs_created"]
    assert churn_jobs >= 1 and found["create_errors"] == []
    # One pod per Job (one completion each, none failed), each seen created and started.
    assert found["jobs_created"] == found["fill_pods"] + churn_jobs
    assert found["pods_created"] == found["jobs_created"] == found["pods_started"]
    # No device held twice at once: DRA ones by claims, device-plugin ones by pods. The
    # fill's 24 pods outgrow the 16 GPUs of either half of a mixed pool, so both watches
    # see devices held there; without a device plugin, only the claim watch does.
    dp_nodes = int(NODES * device_plugin_fraction)
    assert found["device_plugin_nodes"] == dp_nodes
    assert found["devices_allocated_twice"] == 0
    assert found["dra_devices_allocated_twice"] == 0
    assert found["device_plugin_devices_allocated_twice"] == 0
    checked = found["devices_checked"]
    assert 0 < checked["dra"] <= (NODES - dp_nodes) * 8
    if dp_nodes:
        assert 0 < checked["device_plugin"] <= dp_nodes * 8
    else:
        assert checked["device_plugin"] == 0
    for phase in ("fill", "churn"):
        figures = found["phases"][phase]
        assert figures["jobs_failed"] == 0
        for sli in ("pod_startup", "scheduling"):
            latency = figures[sli]
            assert latency["count"] == figures["pods_created"], (phase, sli, latency)
            assert 0 < latency["p50_s"] <= latency["p90_s"] <= latency["p99_s"], (phase, sli)
        by_minute = figures["pod_startup_by_minute"]
        assert sum(m["count"] for m in by_minute) == figures["pods_started"]
        # Some minute is at least as slow as the phase at its p99.
        assert max(m["p99_s"] for m in by_minute) >= figures["pod_startup"]["p99_s"]
        # A claim per pod on a DRA node: every pod's without a device plugin; the special
        # claim in extended-resources mode (a device-plugin node's pods have none).
        claims = figures["claim_allocation"]
        special = figures["pod_create_to_special_claim_allocation"]["count"]
        if dp_nodes:
            assert claims["count"] == special <= figures["pods_created"], (phase, claims)
            if phase == "fill":  # 24 pods: at least 8 on either half
                assert 8 <= special <= figures["pods_created"] - 8
        else:
            assert claims["count"] == figures["pods_created"], (phase, claims)
            assert special == (figures["pods_created"] if mode == "extended-resources" else 0)
        if phase == "fill" or not dp_nodes:  # few churn pods may all land on device plugins
            assert 0 < claims["p50_s"] <= claims["p90_s"] <= claims["p99_s"], phase
            assert figures["node_prepare_p99_s"] > 0  # the DRA devices' prepare
        assert figures["scheduling"]["p99_s"] <= figures["pod_startup"]["p99_s"] + 1e-9
    assert found["pod_startup_p99_s"] == found["phases"]["churn"]["pod_startup"]["p99_s"]
    assert found["claim_allocation_p99_s"] == found["phases"]["churn"]["claim_allocation"]["p99_s"]
    calls = {
        (r["phase"], r["verb"], r["resource"], r["subresource"]) for r in found["api_call_latency"]
    }
    assert ("fill", "POST", "jobs", "") in calls and ("churn", "POST", "pods", "binding") in calls
    writes = [r for r in found["api_call_latency"] if r["verb"] in ("POST", "PATCH", "PUT")]
    assert all(r["scope"] == "resource" and r["threshold_s"] == 1.0 for r in writes)
    verdicts = [s["pass"] for s in found["slis"]] + [r["pass"] for r in found["api_call_latency"]]
    assert found["slo_pass"] == all(verdicts)
    assert (run.returncode == 0) == found["slo_pass"]
    assert found["ceiling_reqreply_per_s"] > 0
    assert "[fill] started" in run.stdout and "SLO: " in run.stdout
