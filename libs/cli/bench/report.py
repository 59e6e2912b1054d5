"""What a run reports: `Result` (what `--json` writes), the summary line and table on
stdout, and why the run failed on stderr."""

from __future__ import annotations

import sys
from pathlib import Path

import msgspec


class Result(msgspec.Struct, kw_only=True):
    """What `--json` writes."""

    workload: str
    measured_pods: int
    bound_pods: int
    throughput_avg: float | None
    throughput_p50: float | None
    throughput_p90: float | None
    throughput_p99: float | None
    throughput_samples: list[float]
    throughput_overall: float | None
    attempts: int
    attempts_scheduled: int
    attempts_failed: int
    attempts_source: str
    devices_allocated_twice: int
    claims: int
    claims_unallocated: int
    allocated_devices: int
    threshold: float | None
    meets_threshold: bool | None
    nodes: int
    init_pods: int
    measure_seconds: float
    setup_seconds: float
    # Each service's CPU time in the measured phase per measured pod, in ms: what a
    # binding costs on this machine, less dependent on other load than pods/s.
    cpu_ms_per_pod: dict[str, float]
    rss_mb: dict[str, float]  # each service's resident memory when the measured pods bound
    incomplete: str  # why the bench stopped waiting for the measured pods; "" if it did not
    ok: bool


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f}"


def summary_line(r: Result) -> str:
    verdict = "OK" if r.ok else "FAILED"
    threshold = "" if r.threshold is None else f" (upstream threshold {r.threshold:g})"
    return (
        f"{verdict} {r.workload}: {r.bound_pods}/{r.measured_pods} measured pods bound, "
        f"SchedulingThroughput avg {_num(r.throughput_avg)} pods/s{threshold}, "
        f"{r.attempts} attempts, {r.devices_allocated_twice} devices allocated twice"
        + (f" [stopped waiting: {r.incomplete}]" if r.incomplete else "")
    )


def table(r: Result) -> str:
    rows = [
        ("measured pods bound", f"{r.bound_pods}/{r.measured_pods}"),
        ("init pods", str(r.init_pods)),
        ("nodes", str(r.nodes)),
        ("throughput avg (pods/s)", _num(r.throughput_avg)),
        ("throughput p50", _num(r.throughput_p50)),
        ("throughput p90", _num(r.throughput_p90)),
        ("throughput p99", _num(r.throughput_p99)),
        ("one-second samples", str(len(r.throughput_samples))),
        ("overall (pods/s)", _num(r.throughput_overall)),
        ("upstream threshold", "-" if r.threshold is None else f"{r.threshold:g}"),
        (
            "attempts",
            f"{r.attempts} ({r.attempts_scheduled} scheduled, {r.attempts_failed} failed)",
        ),
        (
            "claims (unallocated) / devices",
            f"{r.claims} ({r.claims_unallocated}) / {r.allocated_devices}",
        ),
        ("devices allocated twice", str(r.devices_allocated_twice)),
        ("measure / setup (s)", f"{r.measure_seconds:.1f} / {r.setup_seconds:.1f}"),
        (
            "resident memory (MiB)",
            ", ".join(f"{name} {mb:.0f}" for name, mb in r.rss_mb.items()) or "-",
        ),
        (
            "CPU per measured pod (ms)",
            ", ".join(f"{name} {ms:.2f}" for name, ms in r.cpu_ms_per_pod.items()) or "-",
        ),
    ]
    width = max(len(name) for name, _ in rows)
    return "\n".join(f"  {name:<{width}}  {value}" for name, value in rows)


def print_report(result: Result, json_path: Path | None) -> None:
    """The summary line, the table, the JSON file, and why the run failed, if it did."""
    print(summary_line(result))
    print(table(result), flush=True)
    if json_path:
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_bytes(msgspec.json.format(msgspec.json.encode(result)) + b"\n")
    if result.devices_allocated_twice:
        print(
            f"drasim bench: FAILED: {result.devices_allocated_twice} devices are allocated "
            "to more than one ResourceClaim",
            file=sys.stderr,
        )
    if result.bound_pods != result.measured_pods:
        print(
            f"drasim bench: FAILED: only {result.bound_pods} of {result.measured_pods} "
            "measured pods are bound",
            file=sys.stderr,
        )
