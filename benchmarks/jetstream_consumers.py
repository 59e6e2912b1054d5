"""JetStream with thousands of consumers on one stream, as kubelets make them.

    python benchmarks/jetstream_consumers.py [--consumers 0,2500,10000] [--messages 20000]
                                             [--json FILE]

A kubelet watches each node it hosts through a consumer of its own (a push consumer in
memory filtering `<prefix>.ev.pods.<node>.>`, flow control, 30 s idle heartbeats:
`drasim.common.bus.consumer`), so a cluster of N nodes has N consumers on its event
stream. For each count, on a fresh stream of an embedded nats-server, this makes that
many consumers (64 requests in flight, as `_CREATE_CONCURRENCY` allows two watches) and
then publishes `--messages` events of 1.5 KB on subjects no consumer filters (Leases: most
of what a large cluster writes), and reports:

- `create_s`: seconds to make the consumers;
- `publish_per_s`: events the stream stores per second, pipelined as the outbox does (one
  acknowledged publish per 500).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
import uuid
from pathlib import Path

import nats
from nats.aio.client import Client

from drasim.common.embedded import EmbeddedNats

PAYLOAD = b"x" * 1500
CHUNK = 500
IN_FLIGHT = 64
HEARTBEAT_NS = 30 * 1_000_000_000


async def _make_consumers(nc: Client, stream: str, count: int) -> float:
    inbox = nc.new_inbox()

    async def drop(_msg: object) -> None:
        return None

    await nc.subscribe(inbox + ".>", cb=drop)
    limit = asyncio.Semaphore(IN_FLIGHT)

    async def make(i: int) -> None:
        name = uuid.uuid4().hex
        filter_subject = f"{stream}.pods.node{i}.>"
        config = {
            "name": name,
            "deliver_subject": f"{inbox}.{i}",
            "deliver_policy": "new",
            "filter_subject": filter_subject,
            "ack_policy": "none",
            "flow_control": True,
            "idle_heartbeat": HEARTBEAT_NS,
            "mem_storage": True,
            "num_replicas": 1,
        }
        request = json.dumps({"stream_name": stream, "config": config}).encode()
        async with limit:
            await nc.request(
                f"$JS.API.CONSUMER.CREATE.{stream}.{name}.{filter_subject}", request, timeout=120
            )

    started = time.perf_counter()
    await asyncio.gather(*(make(i) for i in range(count)))
    return time.perf_counter() - started


async def measure(url: str, consumers: int, messages: int) -> dict:
    nc = await nats.connect(url)
    js = nc.jetstream(timeout=120)
    stream = f"S{uuid.uuid4().hex[:8]}"
    await js.add_stream(name=stream, subjects=[f"{stream}.>"], max_consumers=1_000_000)
    try:
        create_s = await _make_consumers(nc, stream, consumers)
        started = time.perf_counter()
        for first in range(0, messages, CHUNK):
            for i in range(first, first + CHUNK - 1):
                await nc.publish(f"{stream}.leases.node{i % 10_000}.lease", PAYLOAD)
            await js.publish(f"{stream}.leases.last.lease", PAYLOAD)
        publish_per_s = messages / (time.perf_counter() - started)
    finally:
        await js.delete_stream(stream)
        await nc.close()
    return {
        "consumers": consumers,
        "create_s": round(create_s, 1),
        "publish_per_s": round(publish_per_s),
    }


async def run(args: argparse.Namespace, data_dir: Path) -> list[dict]:
    results = []
    with EmbeddedNats(data_dir) as server:  # as `drasim up` runs it (8 MiB payloads)
        for count in args.consumers:
            results.append(await measure(server.admin_url, count, args.messages))
            print(json.dumps(results[-1]), flush=True)
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--consumers",
        type=lambda text: [int(n) for n in text.split(",")],
        default=[0, 2500, 10_000],
        help="consumer counts to measure, comma-separated",
    )
    parser.add_argument("--messages", type=int, default=20_000, help="events per count")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="drasim-js-") as tmp:
        results = asyncio.run(run(args, Path(tmp)))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
