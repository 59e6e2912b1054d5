"""`benchmarks/scheduler_memory.py`, short: the whole scheduler on its in-memory API binds
every pod in each mode, so the benchmark measures a scheduler that works."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCHMARK = Path(__file__).parents[2] / "benchmarks" / "scheduler_memory.py"
MODES = ("claims", "extended-resources", "device-plugin")


def test_every_pod_is_bound_in_each_mode(tmp_path: Path) -> None:
    results = tmp_path / "scheduler_memory.json"
    run = subprocess.run(
        [sys.executable, str(BENCHMARK), "--nodes", "4", "--pods", "24", "--frames", "1",
         "--mode", ",".join(MODES), "--json", str(results)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-5000:] + run.stderr[-5000:]
    found = json.loads(results.read_text())["results"]
    # 4 nodes of 8 GPUs, 24 one-GPU pods: all bound, no device in two claims.
    assert [
        (r["mode"], r["nodes"], r["pods"], r["bound"], r["devices_allocated_twice"]) for r in found
    ] == [(mode, 4, 24, 24, 0) for mode in MODES]
    assert all(r["traced_bytes_per_node"] > 0 and r["traced_bytes_per_pod"] > 0 for r in found)
