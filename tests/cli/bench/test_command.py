"""`drasim bench ExtendedResource/fast` end to end (apistore and scheduler as processes) on
the session's servers."""

from __future__ import annotations

import asyncio
import time

import msgspec

from drasim.cli.main import main

FAST_LIMIT_S = 30.0


async def test_fast_end_to_end(infra, tmp_path):
    out = tmp_path / "fast.json"
    argv = ["--nats-url", infra.nats_url, "--database-url", infra.admin_url]
    start = time.monotonic()
    code = await asyncio.to_thread(
        main, [*argv, "bench", "ExtendedResource/fast", "--json", str(out)]
    )
    elapsed = time.monotonic() - start
    assert code == 0
    assert elapsed < FAST_LIMIT_S
    result = msgspec.json.decode(out.read_bytes())
    assert result["workload"] == "ExtendedResource/fast"
    assert result["measured_pods"] == result["bound_pods"] == 10
    assert result["devices_allocated_twice"] == 0
    # One special claim per pod, one device each, and one successful attempt per pod.
    assert result["claims"] == result["allocated_devices"] == 10
    assert result["attempts"] >= result["attempts_scheduled"] == 10
    for key in ("throughput_avg", "throughput_p50", "throughput_p90", "throughput_p99"):
        assert key in result
    assert result["throughput_overall"] > 0
    assert result["ok"] is True
