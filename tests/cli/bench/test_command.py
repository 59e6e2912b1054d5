"""`drasim bench ExtendedResource/fast` end to end (apistore and scheduler as processes) on
the session's servers."""

from __future__ import annotations

import asyncio
import shutil
import time

import msgspec

from drasim.cli.bench import workloads
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


STEADY = """\
- name: SteadyPartitions
  workloadTemplate:
  - opcode: createNodes
    nodeTemplatePath: templates/node-with-dra-test-driver.yaml
    count: 2
  - opcode: createAny
    templatePath: templates/resourceslice-partitionable-countersets.yaml
    count: 2
  - opcode: createAny
    templatePath: templates/resourceslice-partitionable-devices.yaml
    count: 2
  - {opcode: createAny, templatePath: templates/deviceclass.yaml}
  - opcode: createAny
    templatePath: templates/resourceclaim-partitionable.yaml
    namespace: init
    count: 1
  - {opcode: allocResourceClaims, namespace: init}
  - opcode: createAny
    templatePath: templates/resourceclaimtemplate-for-two-devices.yaml
    namespace: test
  - opcode: createPods
    namespace: test
    count: 1
    steadyStateParam: $steady
    durationParam: $duration
    podTemplatePath: templates/pod-with-claim-template.yaml
    collectMetrics: true
  workloads:
  - {name: short, params: {steady: true, duration: 4s}}
"""


async def test_steady_state_after_allocated_claims(infra, tmp_path):
    """Upstream's allocResourceClaims takes one of two nodes' partitions; the steady
    state then schedules one pod at a time on the other node, deleting each once bound
    (so its claim is deallocated and the next pod fits again), for the duration."""
    config = tmp_path / "config"
    shutil.copytree(workloads.CONFIG / "templates", config / "templates")
    (config / "performance-config.yaml").write_text(STEADY)
    out = tmp_path / "steady.json"
    argv = ["--nats-url", infra.nats_url, "--database-url", infra.admin_url]
    code = await asyncio.to_thread(
        main,
        [
            *argv,
            "bench",
            "SteadyPartitions/short",
            "--config",
            str(config / "performance-config.yaml"),
            "--json",
            str(out),
        ],
    )
    assert code == 0
    result = msgspec.json.decode(out.read_bytes())
    # One pod at a time, each needing a claim made by the controller: several in 4s.
    assert result["measured_pods"] == result["bound_pods"] >= 2
    assert result["devices_allocated_twice"] == 0
    assert result["ok"] is True
    assert 4.0 <= result["measure_seconds"] < 10.0
