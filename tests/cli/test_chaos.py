"""The chaos suite, short (CI): `benchmarks/chaos.py` on a small cluster kills each kind of
target once (the apistore, the controllers, the scheduler, a kubelet, NATS, Postgres)
and the cluster must come back to the invariants every time."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

CHAOS = Path(__file__).parents[2] / "benchmarks" / "chaos.py"
KINDS = {"apistore", "controllers", "scheduler", "kubelet", "nats", "postgres"}


def test_every_kind_of_kill_converges_without_violations(tmp_path: Path) -> None:
    results = tmp_path / "chaos.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("DRASIM_")}
    run = subprocess.run(
        [sys.executable, str(CHAOS), "--nodes", "6", "--pods", "30", "--kills", str(len(KINDS)),
         "--seed", "15", "--kill-within", "2", "--timeout", "30", "--json", str(results)],
        capture_output=True, text=True, env=env, timeout=110,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-5000:] + run.stderr[-5000:]
    found = json.loads(results.read_text())
    assert found["violations"] == []
    assert set(found["targets"]) == KINDS
    assert all("converge_s" in kill for kill in found["kill_log"]), found["kill_log"]
    assert found["final_replay_verify"].startswith("replay --verify: the fold of the event log")
