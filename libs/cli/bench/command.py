"""`drasim bench`: upstream scheduler_perf workloads against the apistore and the scheduler.

drasim bench ExtendedResource/fast
drasim bench ExtendedResource_25Classes/5000pods_500nodes --json result.json
drasim bench --list

The command line: which workload, on which servers (embedded ones in a scratch directory
unless `--nats-url` / `--database-url` give some), and where its logs stay when it fails.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import signal
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

from drasim.cli import cluster, launch
from drasim.cli.bench import report
from drasim.cli.bench.runner import BenchError, run_workload
from drasim.cli.bench.workloads import CONFIG, CONFIG_FILE, load_workloads
from drasim.common import errors
from drasim.common.config import Config


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "bench",
        help="run an upstream scheduler_perf workload and report SchedulingThroughput",
        description=__doc__.split("\n\n")[0],
    )
    p.add_argument("workload", nargs="?", help="TEST/WORKLOAD, e.g. ExtendedResource/fast")
    p.add_argument("--list", action="store_true", help="list the workloads and exit")
    p.add_argument("--json", type=Path, metavar="FILE", help="also write the result as JSON")
    p.add_argument(
        "--keep",
        action="store_true",
        help="leave the cluster running after the run (until Ctrl-C) to inspect it",
    )
    p.add_argument(
        "--config",
        type=Path,
        default=CONFIG / CONFIG_FILE,
        help="workload configuration (default: the source tree's "
        "benchmarks/scheduler_perf/performance-config.yaml)",
    )
    p.add_argument(
        "--stall-timeout",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="give up waiting for pods to bind after this long without a new binding",
    )
    p.add_argument(
        "--timeout",
        type=float,
        metavar="SECONDS",
        help="stop waiting for the measured pods after this long and report what was bound",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        workloads = load_workloads(args.config)
    except FileNotFoundError:
        print(
            f"drasim bench: no workload configuration at {args.config} (--config)", file=sys.stderr
        )
        return 2
    if args.list or not args.workload:
        for name, w in workloads.items():
            threshold = "" if w.threshold is None else f"  (upstream threshold {w.threshold:g})"
            print(f"{name}{threshold}")
        return 0 if args.list else 2
    workload = workloads.get(args.workload)
    if workload is None:
        print(f"drasim bench: unknown workload {args.workload!r}; see --list", file=sys.stderr)
        return 2

    # Given servers come from flags or DRASIM_*; a running `drasim up` is not borrowed.
    config = Config.from_env(**cluster.cluster_flags(args))
    work_dir = Path(tempfile.mkdtemp(prefix="drasim-bench-"))
    try:
        with (
            _terminate_as_interrupt(),
            launch.infrastructure(
                work_dir, nats_url=config.nats_url, database_url=config.database_url
            ) as infra,
        ):
            # The run's services connect as the embedded servers' admins, whose Postgres
            # superuser makes and owns the run's database.
            result = asyncio.run(
                run_workload(
                    workload,
                    nats_url=infra.admin_nats_url,
                    database_url=infra.admin_database_url,
                    log_level=os.environ.get("DRASIM_BENCH_LOG_LEVEL", "WARNING"),
                    stall_timeout=args.stall_timeout,
                    timeout=args.timeout,
                    work_dir=work_dir,
                    keep=args.keep,
                    report=lambda result: report.print_report(result, args.json),
                )
            )
    except (BenchError, errors.ApiError) as err:
        print(f"drasim bench: FAILED {workload.name}: {err}", file=sys.stderr)
        print(f"drasim bench: logs kept in {work_dir}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"drasim bench: interrupted; logs kept in {work_dir}", file=sys.stderr)
        return 130
    if result.ok:
        shutil.rmtree(work_dir, ignore_errors=True)
    else:
        print(f"drasim bench: logs and data kept in {work_dir}", file=sys.stderr)
    return 0 if result.ok else 1


@contextlib.contextmanager
def _terminate_as_interrupt() -> Any:
    """SIGTERM ends the run as Ctrl-C does, so the service processes and embedded servers
    are stopped on the way out (a signal's default action would leave them running)."""
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread may set handlers (tests run the CLI in a thread)
        return

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
