"""`drasim loadtest`: the command line, and the cluster it runs against.

drasim loadtest --nodes 100 --mode claims --json results.json
drasim loadtest --nodes 1000 --mode extended-resources --fill-qps 20
drasim --data-dir .drasim loadtest --existing --mode claims   # a running `drasim up`

Without `--existing` it starts `drasim up` on a scratch data directory with a cluster file
of `--nodes` 8-GPU nodes (embedded NATS and Postgres, each service its own process, as
`drasim up` always runs them) and stops it at the end. The machine's round-trip ceiling is
measured right before the fill and right after the drain (`drasim.cli.roundtrips`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import shutil
import sys
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from drasim.cli import cluster, launch, roundtrips
from drasim.cli.loadtest import results, workload
from drasim.cli.loadtest.runner import Options, run_load_test
from drasim.common import codec, errors, service
from drasim.common.api import core_v1
from drasim.common.bus import messages
from drasim.common.bus.client import Bus
from drasim.common.client import ApiClient

__all__ = ["add_parser", "run"]

ACTOR = "drasim-loadtest"
CEILING_SECONDS = 3.0


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "loadtest",
        help="run clusterloader2's DRA steady-state test and report its SLIs",
        description=__doc__.split("\n\n")[0],
    )
    p.add_argument("--nodes", type=int, help="8-GPU nodes of the cluster to start")
    p.add_argument("--mode", choices=workload.MODES, default=workload.CLAIMS)
    p.add_argument("--fill", type=float, default=0.9, help="fraction of GPUs the fill takes")
    p.add_argument("--fill-qps", type=float, default=Options.fill_qps, help="fill Jobs/s")
    p.add_argument("--churn-qps", type=float, default=Options.churn_qps, help="churn Jobs/s")
    p.add_argument("--churn-seconds", type=float, default=Options.churn_seconds)
    p.add_argument(
        "--churn-run-for", default=Options.churn_run_for, help="how long a churn pod runs"
    )
    p.add_argument("--churn-completions", type=int, default=Options.churn_completions)
    p.add_argument("--fill-run-for", default=Options.fill_run_for, help="how long a fill pod runs")
    p.add_argument(
        "--device-plugin-fraction",
        type=float,
        default=0.0,
        help="fraction of the nodes whose GPUs a device plugin serves (default: none)",
    )
    p.add_argument("--kubelets", type=int, default=2, help="kubelet processes (default 2)")
    p.add_argument("--timeout", type=float, default=Options.timeout, help="seconds per wait")
    p.add_argument(
        "--ceiling-seconds",
        type=float,
        default=CEILING_SECONDS,
        help="seconds of each round-trip ceiling measurement (0: none)",
    )
    p.add_argument(
        "--existing",
        action="store_true",
        help="run against the running cluster (cluster.json of --data-dir, or --nats-url)",
    )
    p.add_argument("--json", type=Path, metavar="FILE", help="also write the results as JSON")
    p.set_defaults(func=run, parser=p)


def run(args: argparse.Namespace) -> int:
    problem = _check(args)
    if problem:
        args.parser.error(problem)
    options = Options(
        fill_qps=args.fill_qps,
        churn_qps=args.churn_qps,
        churn_seconds=args.churn_seconds,
        fill_run_for=args.fill_run_for,
        churn_run_for=args.churn_run_for,
        churn_completions=args.churn_completions,
        timeout=args.timeout,
    )
    # The run's watches hold every pod it made: collect as the services do, so that a full
    # collection does not stall the watch whose arrival times are the measurement.
    gc.set_threshold(*service.GC_THRESHOLDS)
    service.freeze_survivors()
    try:
        found = asyncio.run(_run(args, options))
    except (TimeoutError, launch.LaunchError) as exc:
        print(f"drasim loadtest: FAILED: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("drasim loadtest: interrupted", file=sys.stderr)
        return 130
    print(results.format_table(found))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(found, indent=2) + "\n")
    return 0 if found["slo_pass"] else 1


def _check(args: argparse.Namespace) -> str:
    if not args.existing and (args.nodes is None or args.nodes < 1):
        return "--nodes N (at least 1) is required unless --existing"
    if not 0 < args.fill < 1:
        return "--fill must be between 0 and 1"
    if args.fill_qps <= 0 or args.churn_qps <= 0:
        return "--fill-qps and --churn-qps must be positive"
    if not 0 <= args.device_plugin_fraction < 1:
        return "--device-plugin-fraction must be at least 0 and below 1"
    if args.churn_completions < 1:
        return "--churn-completions must be at least 1"
    return ""


@dataclass
class _Cluster:
    """What the run talks to: the bus, the services' metrics, and the cluster file's shape."""

    bus: Bus
    nats_url: str
    metrics_urls: list[str]
    credentials: Path | None


async def _run(args: argparse.Namespace, options: Options) -> dict[str, Any]:
    async with _cluster(args) as (target, shape):
        api = ApiClient(target.bus, actor=ACTOR, timeout=60.0)
        if args.existing:
            shape = await _existing_shape(api, args)
        print(
            f"[loadtest] {shape.nodes} nodes ({shape.device_plugin_nodes} device plugin), "
            f"mode {shape.mode}: fill {shape.fill_pods} of {shape.gpus} GPUs at "
            f"{options.fill_qps:g}/s, churn {options.churn_qps:g}/s for "
            f"{options.churn_seconds:g} s",
            flush=True,
        )
        ceilings = [await _ceiling(target, args)]
        found = await run_load_test(api, shape, options, metrics_urls=target.metrics_urls, say=_say)
        ceilings.append(await _ceiling(target, args))
    measured = [c for c in ceilings if c is not None]
    found["ceiling_reqreply_per_s"] = round(sum(measured) / len(measured)) if measured else None
    found["ceiling_reqreply_each_per_s"] = [None if c is None else round(c) for c in ceilings]
    return found


def _say(line: str) -> None:
    print(line, flush=True)


async def _ceiling(target: _Cluster, args: argparse.Namespace) -> float | None:
    if args.ceiling_seconds <= 0:
        return None
    job = workload.job("small-0", "loadtest-1", phase=workload.CHURN, mode=args.mode, run_for="5s")
    create = messages.Create(
        resource="jobs", namespace="loadtest-1", object=msgspec.Raw(codec.encode(job))
    )
    body = messages.encoder.encode(create)
    return await roundtrips.ceiling(
        target.nats_url,
        target.bus.prefix,
        body=body,
        seconds=args.ceiling_seconds,
        credentials=target.credentials,
    )


@contextlib.asynccontextmanager
async def _cluster(args: argparse.Namespace) -> AsyncIterator[tuple[_Cluster, workload.Shape]]:
    """The cluster to load: the running one (`--existing`), or a `drasim up` of its own."""
    if args.existing:
        config = cluster.resolve_config(args)
        if not config.nats_url:
            raise errors.ServiceUnavailable(
                f"no running cluster found in {config.data_dir} (--data-dir, --nats-url)"
            )
        info = cluster.load_cluster(config.data_dir)
        async with _connected(config.nats_url, config.prefix, config.nats_credentials) as bus:
            urls = list(info.metrics.values()) if info is not None else []
            shape = workload.Shape(nodes=0, mode=args.mode, fill=args.fill)
            yield _Cluster(bus, config.nats_url, urls, config.nats_credentials), shape
        return
    dp_nodes = int(args.nodes * args.device_plugin_fraction)
    shape = workload.Shape(args.nodes, args.mode, args.fill, device_plugin_nodes=dp_nodes)
    work = Path(tempfile.mkdtemp(prefix="drasim-loadtest-"))
    path = work / "cluster.yaml"
    path.write_text(workload.cluster_file(shape))
    kubelets = str(max(1, min(args.kubelets, args.nodes)))
    spec = launch.Launch.up(work / "data", "--cluster", str(path), "--kubelets", kubelets)
    log = (work / "up.log").open("w")
    print(f"[loadtest] starting drasim up with {args.nodes} nodes (log: {log.name})", flush=True)
    up = await launch.ServiceProcess.spawn(spec, on_line=lambda line: print(line, file=log))
    ok = False
    try:
        await up.wait_ready(args.timeout)
        info = cluster.load_cluster(work / "data")
        assert info is not None, "drasim up is ready but wrote no cluster.json"
        credentials = Path(info.nats_credentials) if info.nats_credentials else None
        async with _connected(info.nats_url, info.prefix, credentials) as bus:
            target = _Cluster(bus, info.nats_url, list(info.metrics.values()), credentials)
            yield target, shape
        ok = True
    finally:
        await up.stop(timeout=None)
        log.close()
        if ok:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(
                f"drasim loadtest: the cluster's log and data are kept in {work}", file=sys.stderr
            )


@contextlib.asynccontextmanager
async def _connected(url: str, prefix: str, credentials: Path | None) -> AsyncIterator[Bus]:
    bus = await Bus.connect(url, prefix=prefix, name=ACTOR, credentials=credentials)
    try:
        yield bus
    finally:
        await bus.close()


async def _existing_shape(api: ApiClient, args: argparse.Namespace) -> workload.Shape:
    """The running cluster's shape: its nodes, those whose device plugin advertises the
    extended resource counted as device-plugin nodes (8 GPUs each assumed)."""
    nodes, _ = await api.list(core_v1.Node)
    device_plugin = sum(workload.EXTENDED_RESOURCE_NAME in n.status.allocatable for n in nodes)
    return workload.Shape(len(nodes), args.mode, args.fill, device_plugin_nodes=device_plugin)
