"""Chaos: SIGKILL a random part of `drasim up` while a Deployment scales, again and again.

    python benchmarks/chaos.py [--nodes 200] [--pods N] [--kills 20] [--seed S]
                               [--kubelets 2] [--kill-within 5] [--timeout 60]
                               [--targets apistore,...] [--keep] [--json FILE]

Starts `drasim up` with `cluster_soak.py`'s cluster (half DRA nodes with 8 GPUs, half
device-plugin nodes with 2) and its Deployment of pods asking for `example.com/gpu: 1`.
Then, `--kills` times: scale the Deployment (up to between half and all of `--pods`, by
default one pod per GPU, then down to at most a quarter, in turn) and SIGKILL one target
at a random moment from `--kill-within` seconds before the scale to as long after it (so
kills land before, during and after scales): the apistore, the controllers, the
scheduler, a kubelet process (each in turn), the embedded NATS or Postgres (or only the kinds
`--targets` names), drawn from a shuffled deck, so every kind gets its share. Then:

- wait for `drasim up` to say the target is back (`ready again` / `back on port`); the
  back-off it waited is reported (it doubles for a target killed again within 60 s);
- time to converge, from that moment: until one look at the cluster finds every desired
  pod Running, the Deployment's status saying so, the invariants of
  `cluster_soak.allocation_checks` (no device in two claims, exactly one special claim
  per pod on a DRA node and named by its `extendedResourceClaimStatus`, none for pods on
  device-plugin nodes, no claim without its pod, no status naming a missing claim) and
  the apistore's `drasim_apistore_outbox_lag_events` back to 0;
- `replay --verify` (`drasim.cli.replay.verify`): the fold of the event log equals the
  projection.

A kill whose target does not come back, or whose cluster does not converge within
`--timeout` seconds, or whose replay differs, is a violation. At the end `drasim replay
--verify` runs as a user runs it, and `drasim up` must stop with exit code 0. Prints a
line per kill, then per target kind: kills, restart (kill until back) and converge
p50/max, violations. Exits 1 on any violation.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
import cluster_soak
import psutil

from drasim.cli import replay
from drasim.common import errors
from drasim.common.api import apps_v1, core_v1, resource_v1
from drasim.common.replay import ClusterView

TARGETS = ("apistore", "controllers", "scheduler", "kubelet", "nats", "postgres")
SERVERS = ("nats", "postgres")  # embedded: `up` watches them rather than runs them
POLL = 0.5  # seconds between looks at the cluster while it converges
BACK_TIMEOUT = 90.0  # the supervisor's back-off is at most 30 s, plus a start
CONVERGE_TARGET = 30.0  # issue 15: every convergence under 30 s after the restart
_BACKOFF = re.compile(r"restarting it in ([\d.]+)s")
_LAG = "drasim_apistore_outbox_lag_events"


def find_target(up_pid: int, name: str) -> psutil.Process | None:
    """The process of `drasim up` that `name` is: `kubelet-<i>` by its shard, postgres
    its postmaster (a child of `up`; its backends are the postmaster's children)."""
    for child in psutil.Process(up_pid).children():
        try:
            cmdline = child.cmdline()
        except psutil.Error:
            continue
        role = cluster_soak.process_role(cmdline)
        if role == "kubelet" and "--shard" in cmdline:
            role = f"kubelet-{cmdline[cmdline.index('--shard') + 1].split('/')[0]}"
        if role == name:
            return child
    return None


def is_back(name: str, line: str) -> bool:
    """`up`'s line saying the target serves again."""
    if name in SERVERS:
        return line.startswith(f"drasim: embedded {name} is back on port")
    return line.startswith(f"drasim: service {name} is ready again")


async def outbox_lag(session: aiohttp.ClientSession, url: str) -> float:
    async with session.get(url, timeout=aiohttp.ClientTimeout(total=5)) as response:
        text = await response.text()
    for line in text.splitlines():
        if line.startswith(_LAG + " "):
            return float(line.split()[1])
    raise LookupError(f"no {_LAG} at {url}")


async def look(up: cluster_soak.RunningUp, session: aiohttp.ClientSession, desired: int) -> dict:
    """One look at the cluster: the allocation checks, the Deployment's status, the lag;
    and, to say what a slow convergence waited for, a few pods not Running."""
    pods, _ = await up.api.list(core_v1.Pod, namespace=cluster_soak.NAMESPACE)
    claims, _ = await up.api.list(resource_v1.ResourceClaim, namespace=cluster_soak.NAMESPACE)
    checks = cluster_soak.allocation_checks(pods, claims, desired)
    checks["not_running"] = [
        f"{p.metadata.name}:{p.status.phase}@{p.spec.node_name or '-'}"
        + ("(deleting)" if p.metadata.deletion_timestamp else "")
        for p in pods
        if p.status.phase != "Running" or p.metadata.deletion_timestamp
    ][:3]
    dep = await up.api.get(apps_v1.Deployment, cluster_soak.NAME, namespace=cluster_soak.NAMESPACE)
    checks["deployment_status_behind"] = int(
        dep.status.replicas != desired or dep.status.ready_replicas != desired
    )
    checks["outbox_lag_events"] = await outbox_lag(session, up.info.metrics["apistore"])
    checks["ok"] = (
        checks["ok"] and not checks["deployment_status_behind"] and not checks["outbox_lag_events"]
    )
    return checks


async def converge(
    up: cluster_soak.RunningUp, session: aiohttp.ClientSession, desired: int, deadline: float
) -> tuple[float | None, dict]:
    """When (monotonic) a look first found the cluster converged, or None by `deadline`;
    and the last look that did not (empty if the first did), which says what it awaited."""
    waited: dict = {}
    while True:
        try:
            last = await look(up, session, desired)
        except Exception as exc:  # the apistore, NATS or Postgres not serving yet
            last = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        if last["ok"]:
            return time.monotonic(), waited
        waited = last
        if time.monotonic() > deadline:
            return None, last
        await asyncio.sleep(POLL)


async def scale_until_taken(up: cluster_soak.RunningUp, desired: int, deadline: float) -> bool:
    """Scale as a client does while part of the cluster is away: again until it is taken."""
    while True:
        try:
            await cluster_soak.scale(up.api, desired)
            return True
        except Exception:  # the apistore, NATS or Postgres away (the patch is idempotent)
            if time.monotonic() > deadline:
                return False
            await asyncio.sleep(POLL)


def failing(checks: dict) -> str:
    """What a look found wrong, as `name=count` words."""
    if "error" in checks:
        return checks["error"]
    wrong = [*cluster_soak.PROBLEMS, "deployment_status_behind", "outbox_lag_events"]
    words = [f"{name}={checks[name]:g}" for name in wrong if checks.get(name)]
    return " ".join(words + checks["not_running"])


async def kill_once(
    up: cluster_soak.RunningUp,
    session: aiohttp.ClientSession,
    rng: random.Random,
    args: argparse.Namespace,
    name: str,
    desired: int,
    view: ClusterView,
) -> dict:
    """Scale and SIGKILL `name`, the kill at a random moment from `--kill-within` seconds
    before the scale to as long after it; wait for `name` to be back and for convergence."""
    moment = rng.uniform(-args.kill_within, args.kill_within)
    record: dict = {"target": name, "desired_pods": desired, "moment_s": round(moment, 2)}
    if moment >= 0:
        try:  # the cluster converged after the last kill: it must take the request
            await cluster_soak.scale(up.api, desired)
        except errors.ApiError as exc:
            record["violation"] = f"scaling to {desired} pods before killing {name}: {exc}"
            return record
        await asyncio.sleep(moment)
    victim = find_target(up.process.pid, name)
    if victim is None:
        record["violation"] = f"{name}: no such process of drasim up to kill"
        return record
    mark = len(up.log.lines)
    killed_at = time.monotonic()
    victim.send_signal(signal.SIGKILL)
    back = asyncio.create_task(
        up.log.wait_for(lambda line: is_back(name, line), after=mark, timeout=BACK_TIMEOUT)
    )
    if moment < 0:
        await asyncio.sleep(-moment)
        if not await scale_until_taken(up, desired, killed_at + BACK_TIMEOUT + args.timeout):
            back.cancel()
            record["violation"] = f"scaling to {desired} pods after killing {name}: never taken"
            return record
    try:
        back_at, _ = await back
    except TimeoutError:
        record["violation"] = f"{name}: not back within {BACK_TIMEOUT:.0f} s of its kill"
        return record
    record["restart_s"] = round(back_at - killed_at, 2)
    for _, line in up.log.lines[mark:]:
        if line.startswith(f"drasim: service {name} exited") and (found := _BACKOFF.search(line)):
            record["backoff_s"] = float(found.group(1))
    converged_at, checks = await converge(up, session, desired, back_at + args.timeout)
    if converged_at is None:
        record["violation"] = (
            f"{name}: not converged {args.timeout:.0f} s after its restart: {failing(checks)}"
        )
        return record
    record["converge_s"] = round(max(converged_at - back_at, 0.0), 2)
    if checks:
        record["last_awaited"] = failing(checks)
    t0 = time.monotonic()
    problem = await replay.verify(up.api, view)
    record["replay_verify_s"] = round(time.monotonic() - t0, 2)
    if problem is not None:
        record["violation"] = f"{name}: replay --verify: {problem}"
    return record


def progress(record: dict) -> str:
    """One kill, as its progress line says it."""
    moment = record["moment_s"]
    line = f"{record['target']} {abs(moment):.1f} s {'after' if moment >= 0 else 'before'} "
    line += f"scaling to {record['desired_pods']} pods"
    if "restart_s" in record:
        line += f"; back after {record['restart_s']} s (back-off {record.get('backoff_s', 0):g} s)"
    if "converge_s" in record:
        line += f"; converged in {record['converge_s']} s"
    if "last_awaited" in record:
        line += f" (last awaited: {record['last_awaited']})"
    return f"{line}; {record.get('violation', 'ok')}"


def _quantiles(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"p50": None, "max": None}
    return {"p50": round(statistics.median(values), 2), "max": round(max(values), 2)}


def summarize(kills: list[dict]) -> dict[str, dict]:
    """Per target kind (kubelet-0 and kubelet-1 are both `kubelet`)."""
    by_kind: dict[str, dict] = {}
    for kind in TARGETS:
        mine = [k for k in kills if k["target"].split("-")[0] == kind]
        if not mine:
            continue
        restart = _quantiles([k["restart_s"] for k in mine if "restart_s" in k])
        converge_ = _quantiles([k["converge_s"] for k in mine if "converge_s" in k])
        by_kind[kind] = {
            "kills": len(mine),
            "restart_p50_s": restart["p50"],
            "restart_max_s": restart["max"],
            "converge_p50_s": converge_["p50"],
            "converge_max_s": converge_["max"],
            "violations": sum("violation" in k for k in mine),
        }
    return by_kind


def table(by_kind: dict[str, dict]) -> str:
    def s(value: float | None) -> str:
        return "-" if value is None else f"{value:.1f}"

    lines = [
        f"{'target':<12}{'kills':>6}{'restart p50':>13}{'max':>7}{'converge p50':>14}{'max':>7}"
        f"{'violations':>12}"
    ]
    for kind, row in by_kind.items():
        lines.append(
            f"{kind:<12}{row['kills']:>6}{s(row['restart_p50_s']):>13}{s(row['restart_max_s']):>7}"
            f"{s(row['converge_p50_s']):>14}{s(row['converge_max_s']):>7}{row['violations']:>12}"
        )
    return "\n".join(lines)


def replay_verify_cli(data_dir: Path) -> subprocess.CompletedProcess[str]:
    """`drasim replay --verify`, as a user runs it beside the cluster."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DRASIM_")}
    return subprocess.run(
        [sys.executable, "-m", "drasim.cli.main", "--data-dir", str(data_dir),
         "replay", "--verify"],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip


async def chaos(args: argparse.Namespace, workdir: Path) -> dict:
    rng = random.Random(args.seed)
    pods = args.pods or cluster_soak.gpus(args.nodes)
    results: dict = {
        "nodes": args.nodes, "kubelet_processes": args.kubelets, "pods": pods,
        "kills": args.kills, "seed": args.seed, "kill_within_s": args.kill_within,
        "timeout_s": args.timeout, "targets_killed": args.targets,
    }  # fmt: skip
    kills: list[dict] = []
    violations: list[str] = []
    async with (
        cluster_soak.running_up(
            workdir, nodes=args.nodes, kubelets=args.kubelets, timeout=300, api_timeout=5.0
        ) as up,
        aiohttp.ClientSession() as session,
    ):
        results["ready_s"] = round(up.ready_s, 1)
        print(f"drasim up ready in {up.ready_s:.1f} s; log: {up.log.path}", flush=True)
        await up.api.create(cluster_soak.deployment(0))
        deck: list[str] = []
        view = ClusterView()  # the event log folded so far: each replay --verify carries on
        t0 = time.monotonic()
        for i in range(args.kills):
            if not deck:
                deck = rng.sample(args.targets, len(args.targets))
            kind = deck.pop()
            name = kind
            if kind == "kubelet":  # each kubelet process in turn
                earlier = sum(k["target"].startswith("kubelet-") for k in kills)
                name = f"kubelet-{earlier % args.kubelets}"
            desired = (
                rng.randint(max(pods // 2, 1), pods) if i % 2 == 0 else rng.randint(0, pods // 4)
            )
            record = await kill_once(up, session, rng, args, name, desired, view)
            kills.append(record)
            if "violation" in record:
                violations.append(f"kill {i + 1}: {record['violation']}")
            print(f"kill {i + 1}/{args.kills}: {progress(record)}", flush=True)
            results["chaos_s"] = round(time.monotonic() - t0, 1)
            if args.json:  # so far, so that a run cut short keeps its figures
                write_json(args.json, tally(results, kills, violations))
        verified = await asyncio.to_thread(replay_verify_cli, workdir / "data")
        results["final_replay_verify"] = (verified.stdout + verified.stderr).strip()
        if verified.returncode != 0:
            violations.append(f"final drasim replay --verify: {results['final_replay_verify']}")
    results["up_exit_code"] = up.process.returncode
    if up.process.returncode != 0:
        violations.append(f"drasim up exited with code {up.process.returncode}")
    results["log_tracebacks"] = sum("Traceback" in line for _, line in up.log.lines)
    results["complete"] = True
    return tally(results, kills, violations)


def tally(results: dict, kills: list[dict], violations: list[str]) -> dict:
    """The results with the kills so far: per target, convergences over 30 s, violations."""
    converged = [k["converge_s"] for k in kills if "converge_s" in k]
    return {
        "complete": False,
        **results,
        "kills_done": len(kills),
        "targets": summarize(kills),
        "convergences_over_30_s": sum(c >= CONVERGE_TARGET for c in converged),
        "violations": violations,
        "kill_log": kills,
    }


def write_json(path: Path, results: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=2) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=200, help="nodes, half of them DRA")
    parser.add_argument(
        "--pods", type=int, default=0, help="most pods at once (default: one per GPU)"
    )
    parser.add_argument("--kills", type=int, default=20, help="SIGKILLs, one per scale")
    parser.add_argument("--seed", type=int, help="of the random choices (default: a new one)")
    parser.add_argument("--kubelets", type=int, default=2, help="kubelet processes")
    parser.add_argument(
        "--kill-within",
        type=float,
        default=5.0,
        help="seconds before or after a scale the kill comes within",
    )
    parser.add_argument(
        "--timeout", type=float, default=60.0, help="seconds to converge after a restart"
    )
    parser.add_argument(
        "--targets",
        type=lambda text: text.split(","),
        default=list(TARGETS),
        help=f"kinds to kill, comma-separated (default: {','.join(TARGETS)})",
    )
    parser.add_argument(
        "--keep", action="store_true", help="keep drasim up's log and data (kept on violations)"
    )
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    if unknown := set(args.targets) - set(TARGETS):
        parser.error(f"--targets: no such kind: {', '.join(sorted(unknown))}")
    # This process's own client says each failed reconnect; here those are expected.
    logging.getLogger("drasim.common.bus.client").setLevel(logging.ERROR)
    if args.seed is None:
        args.seed = random.randrange(2**32)
    print(f"seed {args.seed}", flush=True)
    workdir = Path(tempfile.mkdtemp(prefix="drasim-chaos-"))
    results = asyncio.run(chaos(args, workdir))
    print(table(results["targets"]))
    print(
        f"{args.kills} kills in {results['chaos_s']} s; convergences over 30 s: "
        f"{results['convergences_over_30_s']}; violations: {len(results['violations'])}"
    )
    for violation in results["violations"]:
        print(f"VIOLATION {violation}")
    if results["violations"] or args.keep:
        print(f"kept {workdir} (drasim up's log: up.log; the data directory: data)")
    else:
        shutil.rmtree(workdir, ignore_errors=True)
    if args.json:
        write_json(args.json, results)
    return 1 if results["violations"] else 0


if __name__ == "__main__":
    sys.exit(main())
