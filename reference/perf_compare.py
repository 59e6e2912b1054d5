"""`reference/perf_compare`: upstream's scheduler_perf beside `drasim bench`, same workloads.

    reference/build --perf                       once: upstream's test binary
    reference/perf_compare [WORKLOAD ...] [--json FILE]

Each workload runs first in upstream's own harness (test/integration/scheduler_perf of
the reference's k8s.io/kubernetes: the reference's etcd, an in-process kube-apiserver and
kube-scheduler, `BenchmarkPerfScheduling` with `-test.benchtime=1x`), then as `drasim bench`
(drasim's port of the same workload: apistore and scheduler as their own processes), on
the same machine one after the other. It reports both SchedulingThroughput averages
(pods/s, as upstream's throughputCollector measures) and drasim/upstream.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from reference import paths

__all__ = [
    "WORKLOADS",
    "drasim_throughput",
    "main",
    "perf_dir",
    "run_drasim",
    "run_upstream",
    "throughput",
    "throughput_from_log",
]

# drasim bench's workload (benchmarks/scheduler_perf) → upstream v1.37's name for it
# (test/integration/scheduler_perf/dra/extendedresource/performance-config.yaml).
WORKLOADS = {
    "ExtendedResource/fast": "ExtendedResource/fast",
    "ExtendedResource_25Classes/2000pods_200nodes": (
        "ExtendedResource/Explicit_25classes_2000pods_200nodes"
    ),
    "ExtendedResource_50Classes/2000pods_200nodes": (
        "ExtendedResource/Explicit_50classes_2000pods_200nodes"
    ),
    "ImplicitExtendedResource_25Classes/2000pods_200nodes": (
        "ExtendedResource/Implicit_25classes_2000pods_200nodes"
    ),
    "ExtendedResource_25Classes/5000pods_500nodes": (
        "ExtendedResource/Explicit_25classes_5000pods_500nodes"
    ),
    "ExtendedResource_50Classes/5000pods_500nodes": (
        "ExtendedResource/Explicit_50classes_5000pods_500nodes"
    ),
    "ImplicitExtendedResource_25Classes/5000pods_500nodes": (
        "ExtendedResource/Implicit_25classes_5000pods_500nodes"
    ),
}
DEFAULT = [w for w in WORKLOADS if "5000pods" not in w]


def perf_dir() -> Path | None:
    """Where `reference/build --perf` put the test binary, if it did."""
    answer = subprocess.run(
        [str(paths.HERE / "build"), "--print"], capture_output=True, text=True, check=True
    )
    bin_dir = Path(answer.stdout.strip())
    found = sorted(bin_dir.parent.parent.glob(f"{paths.kubernetes_version()}-perf-*/.complete"))
    return found[-1].parent if found else None


def throughput(data_items: dict[str, Any]) -> dict[str, float]:
    """SchedulingThroughput (Average, Perc50, ...) of a scheduler_perf data-items file."""
    for item in data_items.get("dataItems") or []:
        if (item.get("labels") or {}).get("Metric") == "SchedulingThroughput":
            return {k: float(v) for k, v in (item.get("data") or {}).items()}
    return {}


def run_upstream(workload: str, perf: Path, bin_dir: Path, log: Path) -> dict[str, float]:
    """One scheduler_perf workload in upstream's harness, which starts its own etcd from
    PATH (the reference's) and its own kube-apiserver and kube-scheduler in-process."""
    with tempfile.TemporaryDirectory(prefix="drasim-perf-") as tmp:
        bench = "/".join(f"^{part}$" for part in ["BenchmarkPerfScheduling", *workload.split("/")])
        env = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
        with log.open("w") as out:
            subprocess.run(
                [
                    str(perf / "extendedresource.test"),
                    "-test.run=^$",
                    f"-test.bench={bench}",
                    "-test.benchtime=1x",
                    "-test.timeout=60m",
                    "-perf-scheduling-label-filter=",
                    f"-data-items-dir={tmp}",
                ],
                cwd=perf / "dra" / "extendedresource",
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                # A workload under upstream's own threshold fails the benchmark; its
                # figures are still what this machine measured.
                check=False,
            )
        for path in sorted(Path(tmp).glob("*.json")):
            found = throughput(json.loads(path.read_text()))
            if found:
                return found
        return throughput_from_log(log.read_text(errors="replace"))


def throughput_from_log(text: str) -> dict[str, float]:
    """SchedulingThroughput from the benchmark's result line (`37.78
    SchedulingThroughput/Average`), or from its threshold failure (`expected
    "SchedulingThroughput" "Average" to be higher: got 18.065912`)."""
    found = {
        m.group(2): float(m.group(1))
        for m in re.finditer(r"([0-9.]+) SchedulingThroughput/(\w+)", text)
    }
    if not found:
        m = re.search(r'"SchedulingThroughput" "Average" to be higher: got ([0-9.]+)', text)
        if m:
            found["Average"] = float(m.group(1))
    return found


def drasim_throughput(bench: dict[str, Any]) -> tuple[float | None, str]:
    """drasim's figure beside upstream's SchedulingThroughput average: its own average of
    one-second samples, or, for a run shorter than one sample, its measured pods over the
    measuring time (`overall`)."""
    if bench.get("throughput_avg"):
        return bench["throughput_avg"], "avg"
    return bench.get("throughput_overall"), "overall"


def run_drasim(workload: str, log: Path) -> dict[str, Any]:
    """The same workload as `drasim bench --json`."""
    with tempfile.TemporaryDirectory(prefix="drasim-perf-") as tmp:
        result = Path(tmp) / "result.json"
        drasim = Path(sys.executable).parent / "drasim"
        env = {k: v for k, v in os.environ.items() if not k.startswith("DRASIM_")}
        with log.open("w") as out:
            subprocess.run(
                [str(drasim), "bench", workload, "--json", str(result)],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                check=True,
            )
        found: dict[str, Any] = json.loads(result.read_text())
        return found


def main(argv: list[str] | None = None) -> int:
    """Run the workloads and print the table; 2 if the binaries are not built."""
    parser = argparse.ArgumentParser(
        prog="reference/perf_compare", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "workloads", nargs="*", help=f"drasim bench names (default: {', '.join(DEFAULT)})"
    )
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    parser.add_argument("--logs", type=Path, default=Path("."), help="directory for the runs' logs")
    args = parser.parse_args(argv)
    bin_dir, perf = paths.built_bin_dir(), perf_dir()
    if bin_dir is None or perf is None:
        print(
            "reference/perf_compare: run reference/build and reference/build --perf first",
            file=sys.stderr,
        )
        return 2
    unknown = [w for w in args.workloads if w not in WORKLOADS]
    if unknown:
        print(
            f"reference/perf_compare: unknown workloads {unknown}; known: {list(WORKLOADS)}",
            file=sys.stderr,
        )
        return 2
    args.logs.mkdir(parents=True, exist_ok=True)
    context = paths.run_context()
    rows = []
    for workload in args.workloads or DEFAULT:
        upstream_name = WORKLOADS[workload]
        slug = workload.replace("/", "_")
        started = time.monotonic()
        theirs = run_upstream(upstream_name, perf, bin_dir, args.logs / f"upstream-{slug}.log")
        upstream_seconds = time.monotonic() - started
        started = time.monotonic()
        ours = run_drasim(workload, args.logs / f"drasim-{slug}.log")
        drasim_seconds = time.monotonic() - started
        upstream_avg = theirs.get("Average")
        drasim_rate, drasim_basis = drasim_throughput(ours)
        ratio = drasim_rate / upstream_avg if drasim_rate and upstream_avg else None
        rows.append(
            {
                "workload": workload,
                "upstream_workload": upstream_name,
                "upstream_throughput": theirs,
                "drasim_throughput_avg": ours.get("throughput_avg"),
                "drasim_throughput_overall": ours.get("throughput_overall"),
                "drasim_basis": drasim_basis,
                "ratio": ratio,
                "upstream_seconds": upstream_seconds,
                "drasim_seconds": drasim_seconds,
            }
        )
        print(
            f"{workload:52} upstream {upstream_avg or 0:8.1f} pods/s"
            f"  drasim {drasim_rate or 0:8.1f} pods/s ({drasim_basis})"
            f"  drasim/upstream {'-' if ratio is None else f'{ratio:.2f}'}",
            flush=True,
        )
    if args.json:
        args.json.write_text(json.dumps({**context, "runs": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
