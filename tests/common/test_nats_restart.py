"""Clients across a restart of NATS (SIGKILL, then the same port and data, as `drasim up`
does): a watch carries on from the event after the last one it gave as soon as the
connection is back, not once nats-py missed two idle heartbeats (a restarted server has
lost every ordered consumer; they live in its memory); a request the dead connection
carried fails at once rather than at its timeout; one made meanwhile is answered."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from nats.aio.msg import Msg

from drasim.apistore.outbox import ensure_stream
from drasim.common import errors
from drasim.common.bus import messages, subjects
from drasim.common.bus.client import Bus
from drasim.common.client import ApiClient
from drasim.common.embedded import EmbeddedNats
from drasim.common.watch import watch_raw
from drasim.kubelet.watch import watch_nodes_raw

if TYPE_CHECKING:
    from tests.conftest import Fresh

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


async def test_a_request_out_when_nats_dies_fails_at_once_one_made_meanwhile_waits(
    tmp_path: Path,
) -> None:
    """Requests to a stand-in apistore (answers `{}` to any request) on the client's own
    connection, so it is back as soon as the client is."""
    with EmbeddedNats(tmp_path) as server:
        bus = await Bus.connect(server.admin_url, prefix=PREFIX, name="test")
        api = ApiClient(bus, actor="test", timeout=30.0)
        get = messages.Get(resource="pods", namespace="default", name="p")
        try:

            async def answer(msg: Msg) -> None:
                await msg.respond(b"{}")

            await bus.nc.subscribe(subjects.api_all(PREFIX), cb=answer)
            assert await api.request(get) == b"{}"
            assert server.pid is not None
            os.kill(server.pid, signal.SIGKILL)
            # Sent before the client noticed, so on the dead connection: lost with it. Its
            # outcome is unknown, as for a timeout (which binders and PreBind allow for).
            with pytest.raises(errors.Timeout, match="connection to NATS broke"):
                await asyncio.wait_for(api.request(get), PROMPTLY)
            # Made while the client knows NATS is away: sent once it is back.
            meanwhile = asyncio.create_task(api.request(get))
            await asyncio.to_thread(server.restart)
            assert await asyncio.wait_for(meanwhile, PROMPTLY) == b"{}"
        finally:
            await bus.close()


async def test_closing_the_connection_says_nothing(fresh: Fresh, caplog) -> None:
    """A CLI command closes its connection as it ends: that is no disconnection to report
    (every command printed "nats: disconnected; reconnecting" on its way out)."""
    bus = await Bus.connect(fresh.nats_url, prefix=fresh.prefix, name="test")
    with caplog.at_level(logging.INFO, logger="drasim.common.bus.client"):
        await bus.close()
    assert caplog.messages == []
