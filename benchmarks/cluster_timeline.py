"""A running cluster over time: is anything falling behind?

    python benchmarks/cluster_timeline.py --data-dir .drasim [--every 10] [--seconds 600]
                                          [--json FILE]

Beside a load (`drasim loadtest` against the same `drasim up`, or the soak), every
`--every` seconds until `--seconds` pass or Ctrl-C, reads each service's /metrics (the
addresses `drasim up` keeps in `<data-dir>/cluster.json`) and the processes of the `up`
that wrote it, and prints one JSON line:

- `outbox_lag_events`, `outbox_lag_s`: committed events JetStream has not acknowledged,
  and the age of the oldest: how far every watcher is behind the log at best;
- `log_events`, `log_last_seq`: the event log's rows (bounded by compaction) and its end;
  `writes_per_s` since the last sample;
- `scheduler_pending`: the scheduling queue's lengths (`active`, `backoff`,
  `unschedulable`, `gated`);
- `cpu_percent`, `pss_mib`: each service's (Postgres: its postmaster and backends). PSS
  (proportional set size) rather than RSS: every Postgres backend maps the shared buffers,
  and their RSS summed counts those pages once per backend (6 GB for 0.9 GB in use).

With `--json FILE` the samples go there too, with the largest of each figure: a run whose
lags and queues stay bounded shows maxima close to the typical samples.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import time
from pathlib import Path

import aiohttp
import psutil
from prometheus_client.parser import text_string_to_metric_families

from drasim.cli import cluster

_PROCESS_ROLES = ("nats-server", "postgres")


def _role(cmdline: list[str]) -> str | None:
    text = " ".join(cmdline)
    if "-m drasim." in text:
        return text.split("-m drasim.", 1)[1].split()[0]
    for role in _PROCESS_ROLES:
        if role in text:
            return role
    return None


class Processes:
    """The services of one `drasim up` (its children), by role."""

    def __init__(self, up_pid: int) -> None:
        self.roles: dict[str, list[psutil.Process]] = {}
        for child in psutil.Process(up_pid).children():
            with contextlib.suppress(psutil.Error):
                role = _role(child.cmdline())
                if role is not None:
                    self.roles.setdefault(role, []).append(child)
        self._cpu: dict[str, float] = {}
        self._at = time.monotonic()

    def _members(self, role: str, proc: psutil.Process) -> list[psutil.Process]:
        if role != "postgres":
            return [proc]
        with contextlib.suppress(psutil.Error):
            return [proc, *proc.children(recursive=True)]
        return [proc]

    def sample(self) -> tuple[dict[str, float], dict[str, float]]:
        """CPU % of a core since the last sample, and PSS in MiB, by role."""
        now, cpu, pss = time.monotonic(), {}, {}
        for role, procs in self.roles.items():
            seconds, resident = 0.0, 0
            for proc in procs:
                for member in self._members(role, proc):
                    with contextlib.suppress(psutil.Error):
                        times = member.cpu_times()
                        seconds += times.user + times.system
                        resident += member.memory_full_info().pss
            cpu[role], pss[role] = seconds, round(resident / 2**20)
        elapsed = now - self._at
        percent = {
            role: round(100 * (s - self._cpu.get(role, s)) / elapsed, 1) if elapsed else 0.0
            for role, s in cpu.items()
        }
        self._cpu, self._at = cpu, now
        return percent, pss


async def scrape(session: aiohttp.ClientSession, url: str) -> dict[str, float]:
    """Every sample of a /metrics page, keyed `name{label=value,...}`."""
    async with session.get(url) as response:
        text = await response.text()
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))
            found[f"{sample.name}{{{labels}}}" if labels else sample.name] = sample.value
    return found


async def sample_once(
    session: aiohttp.ClientSession, endpoints: dict[str, str], processes: Processes
) -> dict:
    apistore = await scrape(session, endpoints["apistore"])
    scheduler = await scrape(session, endpoints["scheduler"]) if "scheduler" in endpoints else {}
    cpu, pss = processes.sample()
    pending = {
        key.split("queue=", 1)[1].rstrip("}"): int(value)
        for key, value in scheduler.items()
        if key.startswith("scheduler_pending_pods{")
    }
    return {
        "t": time.strftime("%H:%M:%S"),
        "outbox_lag_events": int(apistore.get("drasim_apistore_outbox_lag_events", 0)),
        "outbox_lag_s": round(apistore.get("drasim_apistore_outbox_lag_seconds", 0.0), 3),
        "log_events": int(apistore.get("drasim_apistore_event_log_events", 0)),
        "log_last_seq": int(apistore.get("drasim_apistore_event_log_last_sequence", 0)),
        "scheduler_pending": pending,
        "cpu_percent": cpu,
        "pss_mib": pss,
    }


async def run(args: argparse.Namespace, samples: list[dict]) -> None:
    """Sample into `samples` until `--seconds` pass or the cluster stops answering."""
    info = cluster.load_cluster(args.data_dir)
    if info is None or not info.metrics:
        raise SystemExit(f"no running drasim up with /metrics under {args.data_dir}")
    processes = Processes(info.pid)
    deadline = time.monotonic() + args.seconds
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as session:
        previous_at = 0.0
        while time.monotonic() < deadline:
            try:
                sample = await sample_once(session, dict(info.metrics), processes)
            except (aiohttp.ClientError, OSError) as exc:  # the cluster went away: keep what was
                print(f"cluster_timeline: stopped: {exc}", file=sys.stderr)
                return
            now = time.monotonic()
            if samples:
                written = sample["log_last_seq"] - samples[-1]["log_last_seq"]
                sample["writes_per_s"] = round(written / (now - previous_at))
            samples.append(sample)
            previous_at = now
            print(json.dumps(sample), flush=True)
            await asyncio.sleep(args.every)


def maxima(samples: list[dict]) -> dict:
    keys = ("outbox_lag_events", "outbox_lag_s", "log_events", "writes_per_s")
    found: dict = {k: max((s.get(k, 0) for s in samples), default=0) for k in keys}
    found["scheduler_pending"] = {
        queue: max(s["scheduler_pending"].get(queue, 0) for s in samples)
        for queue in {q for s in samples for q in s["scheduler_pending"]}
    }
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, default=Path(".drasim"))
    parser.add_argument("--every", type=float, default=10.0, help="seconds between samples")
    parser.add_argument("--seconds", type=float, default=600.0, help="how long to sample")
    parser.add_argument("--json", type=Path, help="also write the samples and maxima here")
    args = parser.parse_args()
    samples: list[dict] = []
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(run(args, samples))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(
            json.dumps({"maxima": maxima(samples), "samples": samples}, indent=2) + "\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
