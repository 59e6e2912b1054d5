"""A watch outlives a restart of NATS: it carries on from the event after the last one it
gave as soon as the connection is back, not once nats-py missed two idle heartbeats (a
restarted server has lost every ordered consumer; they live in its memory)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from drasim.apistore.outbox import ensure_stream
from drasim.common.bus import messages, subjects
from drasim.common.bus.client import Bus
from drasim.common.client import watch_raw
from drasim.common.embedded import EmbeddedNats
from drasim.kubelet.watch import watch_nodes_raw

PREFIX = "restart"
NODE = "gpu-node-0"
# Well under the stall the heartbeats gave: 2 x 2 s for watch_raw, 2 x 5 s for a kubelet's.
PROMPTLY = 3.0

Watch = Callable[[Bus], AsyncIterator[tuple[int, messages.WatchEvent]]]
WATCHES: dict[str, Watch] = {
    "watch_raw": lambda bus: watch_raw(bus, "pods", resource_version=0),
    "kubelet's watch_nodes_raw": lambda bus: watch_nodes_raw(
        bus, "pods", [NODE], resource_version=0
    ),
}


async def publish(bus: Bus, name: str) -> None:
    subject = subjects.event(PREFIX, "pods", node=NODE, namespace="default", name=name)
    event = {"type": "ADDED", "object": {"metadata": {"name": name}}}
    await bus.js.publish(subject, messages.encoder.encode(event))


@pytest.mark.parametrize("watch", WATCHES.values(), ids=WATCHES.keys())
async def test_a_watch_carries_on_at_once_after_nats_restarts(tmp_path: Path, watch: Watch) -> None:
    with EmbeddedNats(tmp_path) as server:
        bus = await Bus.connect(server.admin_url, prefix=PREFIX, name="test")
        try:
            await ensure_stream(bus)
            await publish(bus, "before")
            events = watch(bus)
            seq, first = await asyncio.wait_for(anext(events), PROMPTLY)
            assert (seq, first.type) == (1, "ADDED")

            await asyncio.to_thread(server.restart)  # SIGKILL, then the same port and data
            await publish(bus, "after")  # (sent once the client is back)
            seq, second = await asyncio.wait_for(anext(events), PROMPTLY)
            assert seq == 2 and b'"after"' in bytes(second.object)
            await events.aclose()
        finally:
            await bus.close()
