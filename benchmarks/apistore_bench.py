"""apistore benchmark: sustained writes through the NATS API, watch lag, and raw ceilings.

    python benchmarks/apistore_bench.py [--duration 10] [--clients 64] [--json FILE]

Runs the apistore as its own process (as `drasim up` does) on embedded NATS and Postgres
(or DRASIM_NATS_URL / DRASIM_DATABASE_URL), then measures in one run:
- writes_per_s: create+update of ~440-byte pods from many concurrent clients;
- watch_lag_p50_ms / p99: write acknowledged → a watcher receives the event;
- ceilings on the same machine and payload: raw batched asyncpg inserts, raw pipelined
  JetStream publishes, raw NATS request/reply round trips.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import asyncpg
import nats
from nats.js import api as js_api

from drasim.common import codec
from drasim.common.api import core_v1
from drasim.common.api.meta_v1 import ObjectMeta
from drasim.common.bus.client import Bus
from drasim.common.client import ApiClient
from drasim.common.config import Config
from drasim.common.embedded import EmbeddedNats, EmbeddedPostgres
from drasim.common.quantity import parse_quantity

PAYLOAD_SIZE = 440


_LIMITS = {
    "example.com/gpu": parse_quantity("1"),
    "cpu": parse_quantity("100m"),
    "memory": parse_quantity("64Mi"),
}


def make_pod(name: str) -> core_v1.Pod:
    """A pod whose JSON is about 440 bytes, the payload every figure uses (built from the
    typed structs, as the services build theirs)."""
    return core_v1.Pod(
        metadata=ObjectMeta(
            name=name,
            namespace="default",
            labels={"app": "bench", "tier": "db"},
            annotations={"example.com/owner": "bench"},
        ),
        spec=core_v1.PodSpec(
            containers=[
                core_v1.Container(
                    name="main",
                    image="registry.k8s.io/pause:3.10",
                    env=[
                        core_v1.EnvVar(name="MODE", value="benchmark"),
                        core_v1.EnvVar(name="LOG_LEVEL", value="info"),
                    ],
                    resources=core_v1.ResourceRequirements(limits=dict(_LIMITS)),
                )
            ],
            scheduler_name="default-scheduler",
        ),
    )


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def bench_writes(nats_url: str, prefix: str, duration: float, clients: int) -> dict:
    buses = [await Bus.connect(nats_url, prefix=prefix, name=f"bench-{i}") for i in range(4)]
    watch_bus = await Bus.connect(nats_url, prefix=prefix, name="bench-watch")
    apis = [ApiClient(b, actor="bench") for b in buses]
    acked: dict[int, float] = {}
    received: dict[int, float] = {}
    _, start_rv = await apis[0].list(core_v1.Pod)
    last_written = 0  # set once the writers stop
    caught_up = asyncio.Event()

    async def watch() -> None:
        watcher = ApiClient(watch_bus, actor="bench")
        async for event in watcher.watch(core_v1.Pod, resource_version=start_rv):
            received[event.resource_version] = time.perf_counter()
            if last_written and event.resource_version >= last_written:
                caught_up.set()

    watch_task = asyncio.create_task(watch())
    stop_at = time.perf_counter() + duration
    writes = 0

    async def client(i: int) -> None:
        nonlocal writes
        api = apis[i % len(apis)]
        n = 0
        while time.perf_counter() < stop_at:
            pod = await api.create(make_pod(f"c{i}-{n}"))
            acked[int(pod.metadata.resource_version)] = time.perf_counter()
            pod.metadata.labels = {"app": "bench", "tier": "db", "phase": "updated"}
            pod = await api.update(pod)
            acked[int(pod.metadata.resource_version)] = time.perf_counter()
            writes += 2
            n += 1

    t0 = time.perf_counter()
    await asyncio.gather(*(client(i) for i in range(clients)))
    elapsed = time.perf_counter() - t0
    last_written = max(acked)
    if max(received, default=0) >= last_written:
        caught_up.set()
    # Let the watcher drain what was written (bounded wait).
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(caught_up.wait(), 30)
    watch_task.cancel()
    lags = [(received[rv] - t) * 1000 for rv, t in acked.items() if rv in received]
    for b in [*buses, watch_bus]:
        await b.close()
    return {
        "writes": writes,
        "writes_per_s": writes / elapsed,
        "watch_events_received": len(lags),
        "watch_lag_p50_ms": percentile(lags, 0.50),
        "watch_lag_p99_ms": percentile(lags, 0.99),
    }


async def ceiling_pg(database_url: str, seconds: float = 3.0) -> float:
    conn = await asyncpg.connect(database_url)
    await conn.execute("CREATE TEMP TABLE bench_rows (seq bigint, body bytea)")
    body = b"x" * PAYLOAD_SIZE
    rows, seq = 0, 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        async with conn.transaction():
            batch = list(range(seq, seq + 500))
            await conn.execute(
                "INSERT INTO bench_rows SELECT * FROM unnest($1::bigint[], $2::bytea[])",
                batch,
                [body] * len(batch),
            )
        seq += 500
        rows += 500
    elapsed = time.perf_counter() - t0
    await conn.close()
    return rows / elapsed


async def ceiling_js(nats_url: str, prefix: str, seconds: float = 3.0) -> float:
    nc = await nats.connect(nats_url)
    js = nc.jetstream()
    stream = f"{prefix.upper()}_CEILING"
    await js.add_stream(js_api.StreamConfig(name=stream, subjects=[f"{prefix}.ceiling"]))
    body = b"x" * PAYLOAD_SIZE
    sent = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        await asyncio.gather(*(js.publish(f"{prefix}.ceiling", body) for _ in range(512)))
        sent += 512
    elapsed = time.perf_counter() - t0
    await js.delete_stream(stream)
    await nc.close()
    return sent / elapsed


RESPONDER = """
import asyncio, sys, nats
async def main():
    nc = await nats.connect(sys.argv[1])
    async def cb(msg):
        await msg.respond(msg.data)
    await nc.subscribe(sys.argv[2], cb=cb)
    await nc.flush()  # (twice: nats-py's PING may overtake the buffered SUB)
    await nc.flush()  # the subscription is in place before the first request
    print("READY", flush=True)
    await asyncio.Event().wait()
asyncio.run(main())
"""


async def ceiling_reqreply(nats_url: str, prefix: str, seconds: float = 3.0) -> float:
    """Round trips to a responder in another process, 64 in flight, as the API is used."""
    subject = f"{prefix}.echo"
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", RESPONDER, nats_url, subject, stdout=subprocess.PIPE
    )
    try:
        assert proc.stdout is not None and (await proc.stdout.readline()).startswith(b"READY")
        nc = await nats.connect(nats_url)
        body = b"x" * PAYLOAD_SIZE
        done = 0
        stop_at = time.perf_counter() + seconds

        async def requester() -> None:
            nonlocal done
            while time.perf_counter() < stop_at:
                await nc.request(subject, body, timeout=5)
                done += 1

        t0 = time.perf_counter()
        await asyncio.gather(*(requester() for _ in range(64)))
        elapsed = time.perf_counter() - t0
        await nc.close()
        return done / elapsed
    finally:
        proc.terminate()
        await proc.wait()


def start_apistore(nats_url: str, database_url: str, prefix: str) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "drasim.apistore",
            "--nats-url",
            nats_url,
            "--database-url",
            database_url,
            "--prefix",
            prefix,
            "--log-level",
            "WARNING",
        ],
        stdout=subprocess.PIPE,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith(b"READY"):
        proc.kill()
        raise SystemExit(f"apistore did not start: {line!r}")
    return proc


async def fresh_database(database_url: str) -> str:
    name = f"bench_{uuid.uuid4().hex[:8]}"
    conn = await asyncpg.connect(database_url)
    await conn.execute(f'CREATE DATABASE "{name}"')
    await conn.close()
    return database_url.rsplit("/", 1)[0] + f"/{name}"


async def run(args: argparse.Namespace, nats_url: str, database_url: str) -> dict:
    prefix = f"bench{uuid.uuid4().hex[:6]}"
    db = await fresh_database(database_url)
    proc = await asyncio.to_thread(start_apistore, nats_url, db, prefix)
    try:
        results = await bench_writes(nats_url, prefix, args.duration, args.clients)
    finally:
        proc.terminate()
        proc.wait()
    results["ceiling_pg_rows_per_s"] = await ceiling_pg(db)
    results["ceiling_js_msgs_per_s"] = await ceiling_js(nats_url, prefix)
    results["ceiling_reqreply_per_s"] = await ceiling_reqreply(nats_url, prefix)
    slowest = min(
        results["ceiling_pg_rows_per_s"],
        results["ceiling_js_msgs_per_s"],
        results["ceiling_reqreply_per_s"],
    )
    results["fraction_of_slowest_ceiling"] = results["writes_per_s"] / slowest
    results["duration_s"] = args.duration
    results["clients"] = args.clients
    results["payload_bytes"] = len(codec.encode(make_pod("c0-0")))
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--json", type=Path, help="also write the figures as JSON here")
    args = parser.parse_args()
    config = Config.from_env()
    with tempfile.TemporaryDirectory() as tmp:
        nats_server = pg = None
        try:
            if config.nats_url is None:
                nats_server = EmbeddedNats(tmp).start()
            if config.database_url is None:
                pg = EmbeddedPostgres(tmp).start()
            nats_url = config.nats_url or nats_server.url
            database_url = config.database_url or pg.url
            results = asyncio.run(run(args, nats_url, database_url))
        finally:
            if nats_server is not None:
                nats_server.stop()
            if pg is not None:
                pg.stop()
    width = max(len(k) for k in results)
    for key, value in results.items():
        if key.startswith("fraction"):
            shown = f"{value:.3f}"
        else:
            shown = f"{value:,.1f}" if isinstance(value, float) else f"{value:,}"
        print(f"{key:<{width}}  {shown}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    ok = (
        results["writes_per_s"] >= 5000
        and results["watch_lag_p99_ms"] < 100
        and results["fraction_of_slowest_ceiling"] >= 0.25
    )
    print("targets met" if ok else "TARGETS NOT MET (>=5000 writes/s, p99 lag <100 ms, >=25%)")
    return 0 if ok else 1


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
