"""apistore benchmark: sustained writes through the NATS API, watch lag, and raw ceilings.

    python benchmarks/apistore_bench.py [--duration 10] [--clients 64] [--json FILE]

Runs the apistore as its own process (as `drasim up` does) on embedded NATS and Postgres
(or DRASIM_NATS_URL / DRASIM_DATABASE_URL), then measures in one run:
- writes_per_s: create+update of ~440-byte pods from many concurrent clients;
- watch_lag_p50_ms / p99: write acknowledged → a watcher receives the event;
- ceilings on the same machine and payloads: raw batched asyncpg inserts, raw pipelined
  JetStream publishes, raw NATS request/reply round trips;
- the CPU each process spent per write (apistore, the clients' process, nats-server,
  Postgres) and how much CPU other work on the machine took meanwhile: on a shared 2-core
  machine writes/s moves with that load, CPU per write much less.

Every process runs on the event loop the services use (`DRASIM_LOOP`, uvloop by default).

How the ceilings are measured (same machine, payloads, connections and requests in flight):
- request/reply: the same client process, connections (`--connections`), requests in flight
  (`--clients`), request bytes and headers as the write benchmark, answered by a trivial
  responder in its own process, as the apistore is one; measured right before and right
  after the writes and averaged (the machine's other load moves then alike). The ceiling
  (`ceiling_reqreply_per_s`) is the raw round trip as nats-py makes it (`nc.request`), what
  the issue took as its ceiling. Beside it, stricter, the
  same round trips through drasim's own faster request path (`Bus.request`, which the
  writes' clients use): `reqreply_own_client_per_s`, `fraction_of_own_client_reqreply`;
  `reqreply_own_client_cpu_us` is the CPU one such round trip costs the processes and
  `cpu_share_of_reqreply` that against a write's (`cpu_us_per_write`), the like-for-like
  share counted in CPU, which other load moves far less.
- JetStream: the apistore's own event payloads and headers (`Nats-Msg-Id`,
  `Nats-Expected-Last-Sequence`, ...) into a stream set up like its event stream, published
  the way its outbox publishes: pipelined on one connection, one ack per chunk of 512 (the
  expected-last-sequence header makes the last ack cover the chunk). Waiting for an ack per
  message (`ceiling_js_acked_each_msgs_per_s`, shown, not used for the share) measures
  nats-py's per-request bookkeeping rather than JetStream.
- Postgres: the same pod JSON as rows of a logged table keyed like the event log, 500 rows
  per committed transaction (a TEMP table would skip the WAL and the commit's flush, which
  every apistore commit pays).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

import asyncpg
import msgspec
from nats.aio.msg import Msg
from nats.js import api as js_api

from drasim.apistore import outbox
from drasim.apistore.store import EventRow
from drasim.cli import launch
from drasim.cli.roundtrips import CpuMeter, RoundTrips
from drasim.common import codec, service, watch
from drasim.common.api import core_v1
from drasim.common.api.meta_v1 import ObjectMeta
from drasim.common.bus import headers, messages, wire
from drasim.common.bus.client import Bus
from drasim.common.client import ApiClient
from drasim.common.config import Config
from drasim.common.quantity import parse_quantity

CEILING_SECONDS = 3.0
WARM_UP_SECONDS = 2.0
JS_CHUNK = outbox.PUBLISH_CHUNK
PG_BATCH = 500


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


class WriteLoad:
    """Create+update of pods from `clients` concurrent clients over `connections`
    connections, in windows (`window`), with one watcher of every pod event throughout."""

    def __init__(self, nats_url: str, prefix: str, clients: int, connections: int) -> None:
        self.nats_url, self.prefix = nats_url, prefix
        self.clients, self.connections = clients, connections
        self.acked: dict[int, float] = {}  # resourceVersion -> when its write was answered
        self.received: dict[int, float] = {}  # resourceVersion -> when the watcher got it
        self.writes = 0
        self.seconds = 0.0
        self.cpu: dict[str, float] = {}
        self._buses: list[Bus] = []
        self._windows = 0
        self._caught_up = asyncio.Event()
        self._last_written = 0
        self._watch_task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._buses = [
            await Bus.connect(self.nats_url, prefix=self.prefix, name=f"bench-{i}")
            for i in range(self.connections)
        ]
        watch_bus = await Bus.connect(self.nats_url, prefix=self.prefix, name="bench-watch")
        self._buses.append(watch_bus)
        _, start_rv = await ApiClient(watch_bus, actor="bench").list(core_v1.Pod)
        self._watch_task = asyncio.create_task(self._watch(watch_bus, start_rv))

    async def _watch(self, bus: Bus, start_rv: int) -> None:
        async for event in watch.watch_resource(bus, core_v1.Pod, resource_version=start_rv):
            self.received[event.resource_version] = time.perf_counter()
            if self._last_written and event.resource_version >= self._last_written:
                self._caught_up.set()

    async def window(self, seconds: float, meter: CpuMeter | None) -> float:
        """Writes for `seconds`; answers writes/s. Counted (writes, time, CPU by process)
        unless `meter` is None (a warm-up)."""
        apis = [ApiClient(b, actor="bench") for b in self._buses[: self.connections]]
        tag = self._windows = self._windows + 1
        stop_at = time.perf_counter() + seconds
        writes = 0
        acked = self.acked if meter is not None else {}

        async def client(i: int) -> None:
            nonlocal writes
            api = apis[i % len(apis)]
            n = 0
            while time.perf_counter() < stop_at:
                pod = await api.create(make_pod(f"w{tag}-c{i}-{n}"))
                acked[int(pod.metadata.resource_version)] = time.perf_counter()
                pod.metadata.labels = {"app": "bench", "tier": "db", "phase": "updated"}
                pod = await api.update(pod)
                acked[int(pod.metadata.resource_version)] = time.perf_counter()
                writes += 2
                n += 1

        cpu0 = meter.sample() if meter is not None else {}
        t0 = time.perf_counter()
        await asyncio.gather(*(client(i) for i in range(self.clients)))
        elapsed = time.perf_counter() - t0
        if meter is not None:
            cpu1 = meter.sample()
            for role in cpu1:
                self.cpu[role] = self.cpu.get(role, 0.0) + cpu1[role] - cpu0[role]
            self.writes += writes
            self.seconds += elapsed
        return writes / elapsed

    async def finish(self) -> dict:
        """Wait (bounded) for the watcher to catch up; the figures of all counted windows."""
        self._last_written = max(self.acked)
        if max(self.received, default=0) >= self._last_written:
            self._caught_up.set()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._caught_up.wait(), 30)
        assert self._watch_task is not None
        self._watch_task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._watch_task
        for bus in self._buses:
            await bus.close()
        lags = [
            (self.received[rv] - t) * 1000 for rv, t in self.acked.items() if rv in self.received
        ]
        results = {
            "writes": self.writes,
            "writes_per_s": self.writes / self.seconds,
            "watch_events_received": len(lags),
            "watch_lag_p50_ms": percentile(lags, 0.50),
            "watch_lag_p99_ms": percentile(lags, 0.99),
        }
        ours = 0.0
        for role, seconds in self.cpu.items():
            if role != "machine":
                results[f"cpu_us_per_write_{role}"] = seconds / self.writes * 1e6
                ours += seconds
        # Cores busy with other work while the writes ran (the rest of the machine's load).
        results["other_load_cores"] = max(0.0, self.cpu["machine"] - ours) / self.seconds
        return results


def request_body(name: str = "c0-0") -> bytes:
    """The bytes of one create request of the write benchmark."""
    pod = msgspec.Raw(codec.encode(make_pod(name)))
    return messages.encoder.encode(
        messages.Create(resource="pods", namespace="default", object=pod)
    )


def sample_event(seq: int, body: bytes) -> EventRow:
    return EventRow(
        seq=seq,
        type="MODIFIED",
        resource="pods",
        namespace="default",
        name="c0-0",
        uid="6b1f5b4e-6c1a-4b8e-9d0e-2f4a0c1d2e3f",
        node_name="",
        object=body,
        actor="bench",
        traceparent="00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
    )


def event_headers(ev: EventRow) -> dict[str, str]:
    """The headers the outbox publishes an event with, as a dict for `js.publish`."""
    return {
        headers.NATS_MSG_ID: str(ev.seq),
        headers.EXPECTED_LAST_SEQUENCE: str(ev.seq - 1),
        headers.RESOURCE_VERSION: str(ev.seq),
        headers.TRACEPARENT: ev.traceparent,
        headers.ACTOR: ev.actor,
    }


async def ceiling_pg(database_url: str, seconds: float = CEILING_SECONDS) -> float:
    """Rows of pod JSON into a logged table keyed like the event log, a committed
    transaction per batch."""
    conn = await asyncpg.connect(database_url)
    await conn.execute("CREATE TABLE bench_rows (seq bigint PRIMARY KEY, body bytea NOT NULL)")
    body = codec.encode(make_pod("c0-0"))
    rows, seq = 0, 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        async with conn.transaction():
            batch = list(range(seq, seq + PG_BATCH))
            await conn.execute(
                "INSERT INTO bench_rows SELECT * FROM unnest($1::bigint[], $2::bytea[])",
                batch,
                [body] * len(batch),
            )
        seq += PG_BATCH
        rows += PG_BATCH
    elapsed = time.perf_counter() - t0
    await conn.execute("DROP TABLE bench_rows")
    await conn.close()
    return rows / elapsed


async def _ceiling_stream(bus: Bus, name: str) -> str:
    """A stream set up as the apistore's event stream is (see `outbox.ensure_stream`), for
    events published under the prefix it answers."""
    prefix = f"{bus.prefix}{name.lower()}"
    await bus.js.add_stream(
        js_api.StreamConfig(
            name=f"{prefix.upper()}_EVENTS",
            subjects=[f"{prefix}.ev.>"],
            storage=js_api.StorageType.FILE,
            retention=js_api.RetentionPolicy.LIMITS,
            discard=js_api.DiscardPolicy.OLD,
            max_msgs=outbox.DEFAULT_MAX_MSGS,
            duplicate_window=120.0,
        )
    )
    return prefix


async def ceiling_js(nats_url: str, prefix: str, seconds: float = CEILING_SECONDS) -> float:
    """The apistore's event messages, published as its outbox publishes them: pipelined in
    order on one connection, one ack per chunk (`Nats-Expected-Last-Sequence` on every
    message makes the last one's ack cover the chunk)."""
    bus = await Bus.connect(nats_url, prefix=prefix, name="bench-js")
    events_prefix = await _ceiling_stream(bus, "ceiling")
    body = codec.encode(make_pod("c0-0"))
    inbox = bus.nc.new_inbox()
    acks: asyncio.Queue[bytes] = asyncio.Queue()

    async def on_ack(msg: Msg) -> None:
        acks.put_nowait(msg.data)

    await bus.nc.subscribe(inbox, cb=on_ack)
    seq = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        frames = []
        for i in range(JS_CHUNK):
            seq += 1
            ev = sample_event(seq, body)
            frames.append(outbox.event_frame(events_prefix, ev, inbox if i == JS_CHUNK - 1 else ""))
        await wire.send_frames(bus.nc, frames)
        ack = json.loads(await asyncio.wait_for(acks.get(), 10))
        assert ack.get("seq") == seq, ack
    elapsed = time.perf_counter() - t0
    await bus.js.delete_stream(f"{events_prefix.upper()}_EVENTS")
    await bus.close()
    return seq / elapsed


async def ceiling_js_acked_each(
    nats_url: str, prefix: str, seconds: float = CEILING_SECONDS
) -> float:
    """The same messages through nats-py's `js.publish`, an ack awaited for each (512 in
    flight): for comparison, not a ceiling of the apistore's way."""
    bus = await Bus.connect(nats_url, prefix=prefix, name="bench-js")
    events_prefix = await _ceiling_stream(bus, "ceiling2")
    body = codec.encode(make_pod("c0-0"))
    sent = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        events = [sample_event(seq, body) for seq in range(sent + 1, sent + JS_CHUNK + 1)]
        await asyncio.gather(
            *(
                bus.js.publish(
                    outbox.event_subject(events_prefix, ev),
                    outbox.event_payload(ev),
                    headers=event_headers(ev),
                )
                for ev in events
            )
        )
        sent += JS_CHUNK
    elapsed = time.perf_counter() - t0
    await bus.js.delete_stream(f"{events_prefix.upper()}_EVENTS")
    await bus.close()
    return sent / elapsed


async def run(
    args: argparse.Namespace, nats_url: str, database_url: str, servers: dict[str, int | None]
) -> dict:
    prefix = f"bench{uuid.uuid4().hex[:6]}"
    db = await launch.create_database(database_url)

    # Writes and the round-trip ceiling are measured in turns, in windows of equal length:
    # a round-trip bracket (nats-py's `nc.request`, then `Bus.request`), a write window,
    # a bracket, ... a bracket. A machine whose speed drifts (a shared one does, within
    # minutes) then moves each write window and the brackets around it alike.
    window = args.duration / args.rounds
    apistore = await launch.ServiceProcess.start(
        launch.Launch.service(
            "drasim.apistore",
            nats_url=nats_url,
            database_url=db,
            prefix=prefix,
            log_level="WARNING",
        ),
        on_line=lambda line: print(f"[apistore] {line}", file=sys.stderr),
    )
    meter = CpuMeter({"apistore": apistore.pid, "clients": os.getpid(), **servers})
    load = WriteLoad(nats_url, prefix, args.clients, args.connections)
    trips = RoundTrips(
        nats_url, prefix, args.clients, args.connections, servers["nats"], body=request_body()
    )
    plain: list[tuple[int, float, float]] = []
    own: list[tuple[int, float, float]] = []
    writes_each: list[float] = []
    try:
        await trips.start()
        await load.start()
        await load.window(WARM_UP_SECONDS, None)  # the first statements plan, caches fill
        for r in range(args.rounds + 1):
            plain.append(await trips.window(window, plain=True))
            own.append(await trips.window(window, plain=False))
            if r < args.rounds:
                writes_each.append(await load.window(window, meter))
        results = await load.finish()
    finally:
        await trips.stop()
        await apistore.stop()
    results["ceiling_pg_rows_per_s"] = await ceiling_pg(db)
    results["ceiling_js_msgs_per_s"] = await ceiling_js(nats_url, prefix)
    results["ceiling_js_acked_each_msgs_per_s"] = await ceiling_js_acked_each(nats_url, prefix)
    # The raw round trip, as the issue measured its ceilings (nats-py as it comes): the
    # ceiling the share is taken against.
    plain_rates = [done / seconds for done, seconds, _ in plain]
    results["ceiling_reqreply_per_s"] = sum(d for d, _, _ in plain) / sum(t for _, t, _ in plain)
    results["ceiling_reqreply_each_per_s"] = plain_rates
    # The same round trips through drasim's own request path (`Bus.request`, what the
    # writes' clients use): a stricter, like-for-like comparison, shown beside it.
    own_done = sum(d for d, _, _ in own)
    results["reqreply_own_client_per_s"] = own_done / sum(t for _, t, _ in own)
    results["reqreply_own_client_each_per_s"] = [d / t for d, t, _ in own]
    cpu = results["reqreply_own_client_cpu_us"] = sum(c for _, _, c in own) / own_done * 1e6
    results["writes_each_per_s"] = writes_each
    # Each write window against the raw round trips right before and right after it.
    results["fraction_each_window"] = [
        w / ((plain_rates[r] + plain_rates[r + 1]) / 2) for r, w in enumerate(writes_each)
    ]
    slowest = min(
        results["ceiling_pg_rows_per_s"],
        results["ceiling_js_msgs_per_s"],
        results["ceiling_reqreply_per_s"],
    )
    results["fraction_of_slowest_ceiling"] = results["writes_per_s"] / slowest
    results["fraction_of_own_client_reqreply"] = (
        results["writes_per_s"] / results["reqreply_own_client_per_s"]
    )
    # The like-for-like share counted in CPU (what a write costs all processes against
    # what a trivial round trip through `Bus.request` costs them; with NATS and Postgres
    # embedded), which moves less with the machine's other load than rates do.
    per_write = [v for k, v in results.items() if k.startswith("cpu_us_per_write_")]
    if "cpu_us_per_write_nats" in results and "cpu_us_per_write_postgres" in results:
        results["cpu_us_per_write"] = sum(per_write)
        results["cpu_share_of_reqreply"] = cpu / results["cpu_us_per_write"]
    results["duration_s"] = args.duration
    results["windows"] = args.rounds
    results["clients"] = args.clients
    results["connections"] = args.connections
    results["payload_bytes"] = len(codec.encode(make_pod("c0-0")))
    results["event_loop"] = service.event_loop_name()
    results["load_avg_1m"] = os.getloadavg()[0]
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=10.0, help="seconds of writes")
    parser.add_argument(
        "--rounds", type=int, default=5, help="write windows the duration is split into"
    )
    parser.add_argument("--clients", type=int, default=64, help="requests in flight")
    parser.add_argument("--connections", type=int, default=4, help="client NATS connections")
    parser.add_argument("--json", type=Path, help="also write the figures as JSON here")
    args = parser.parse_args()
    config = Config.from_env()
    service.use_event_loop()
    with (
        tempfile.TemporaryDirectory() as tmp,
        launch.infrastructure(
            Path(tmp), nats_url=config.nats_url, database_url=config.database_url
        ) as infra,
    ):
        servers = {
            "nats": infra.nats.pid if infra.nats else None,
            "postgres": infra.postgres.pid if infra.postgres else None,
        }
        results = asyncio.run(run(args, infra.admin_nats_url, infra.admin_database_url, servers))
    width = max(len(k) for k in results)
    for key, value in results.items():
        if key.startswith(("fraction", "cpu_share")) and isinstance(value, list):
            shown = " / ".join(f"{v:.3f}" for v in value)
        elif key.startswith(("fraction", "cpu_share")):
            shown = f"{value:.3f}"
        elif isinstance(value, float):
            shown = f"{value:,.1f}"
        elif isinstance(value, int):
            shown = f"{value:,}"
        elif isinstance(value, list):
            shown = " / ".join(f"{v:,.1f}" for v in value)
        else:
            shown = str(value)
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
