"""The event chain: each published event names the one before it of its resource and of
its resource on its node, exactly across apistore restarts; a watch that gets an event
naming one it never had ends 410 Expired instead of going on without it."""

from __future__ import annotations

import asyncio
import contextlib

import pytest
from nats.aio.msg import Msg

from drasim.apistore.event_chain import EventChain
from drasim.apistore.server import ApiServer
from drasim.apistore.store import EventRow
from drasim.common import errors, watch
from drasim.common.api import core_v1
from drasim.common.bus import headers, subjects
from drasim.common.bus.client import Bus
from drasim.common.client import ApiClient
from tests.builders import make_pod


def _row(seq: int, resource: str, node: str = "") -> EventRow:
    return EventRow(seq, "ADDED", resource, "default", f"o{seq}", f"u{seq}", node, b"{}")


def test_links_name_the_previous_event_of_the_resource_and_of_the_node():
    chain = EventChain()
    chain.advance([(3, "pods", "n1"), (4, "nodes", ""), (5, "pods", "n2")])
    rows = [_row(6, "pods", "n1"), _row(7, "pods", "n1"), _row(8, "leases", "")]
    assert chain.links(rows) == [(5, 3), (6, 6), (0, 0)]
    # Links are computed, not taken: the chain moves only once the stream took them.
    assert chain.links(rows[:1]) == [(5, 3)]
    chain.advance((r.seq, r.resource, r.node_name) for r in rows)
    assert chain.known_upto == 8
    assert chain.links([_row(9, "pods", "n2")]) == [(7, 5)]


def test_no_link_names_less_than_the_floor():
    chain = EventChain()
    chain.advance([(3, "pods", "n1")])
    chain.skip_to(10)  # the stream was realigned after events the chain never saw
    assert chain.links([_row(11, "pods", "n1"), _row(12, "pods", "n1")]) == [(10, 10), (11, 11)]


def _links(msg: Msg) -> tuple[int, int, int]:
    return (
        int(msg.headers[headers.RESOURCE_VERSION]),
        int(msg.headers[headers.PREV_OF_RESOURCE]),
        int(msg.headers[headers.PREV_ON_NODE]),
    )


class _Listener:
    """Plain subscriber of every event of a prefix, from before the writes it awaits."""

    def __init__(self, bus: Bus) -> None:
        self.bus = bus
        self.msgs: list[Msg] = []
        self.arrived = asyncio.Event()

    async def __aenter__(self) -> _Listener:
        def on_msg(msg: Msg) -> None:
            self.msgs.append(msg)
            self.arrived.set()

        self.sub = await self.bus.subscribe_direct(subjects.events_of(self.bus.prefix), on_msg)
        await self.bus.nc.flush()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.sub.unsubscribe()

    async def upto(self, seq: int) -> list[tuple[int, int, int]]:
        """(seq, previous of resource, previous on node) of every event got, once event
        `seq` was."""
        async with asyncio.timeout(10):
            while not self.msgs or _links(self.msgs[-1])[0] < seq:
                self.arrived.clear()
                await self.arrived.wait()
        return [_links(m) for m in self.msgs]


async def test_the_outbox_links_each_event_and_keeps_the_chain_across_a_restart(fresh, bus):
    api = ApiClient(bus, actor="test")
    server = await ApiServer.start(
        nats_url=fresh.nats_url, database_url=fresh.database_url, prefix=fresh.prefix
    )
    try:
        async with _Listener(bus) as seen:
            a = await api.create(make_pod("a").node("n1").obj())
            b = await api.create(make_pod("b").node("n2").obj())
            c = await api.create(make_pod("c").node("n1").obj())
            links = await seen.upto(int(c.metadata.resource_version))
        ra, rb, rc = (int(p.metadata.resource_version) for p in (a, b, c))
        assert [link for link in links if link[0] in (rb, rc)] == [(rb, ra, 0), (rc, rb, ra)]
    finally:
        await server.stop()
    # A new apistore reads the chain back from the log: its first links are exact.
    server = await ApiServer.start(
        nats_url=fresh.nats_url, database_url=fresh.database_url, prefix=fresh.prefix
    )
    try:
        async with _Listener(bus) as seen:
            d = await api.create(make_pod("d").node("n2").obj())
            rd = int(d.metadata.resource_version)
            links = await seen.upto(rd)
        assert links[-1] == (rd, rc, rb)
    finally:
        await server.stop()


async def test_a_watch_that_the_stream_skipped_events_of_ends_expired(server, api):
    _, rv = await api.list(core_v1.Pod)
    created = [await api.create(make_pod(f"p{i}").node("n1").obj()) for i in range(3)]
    last = int(created[-1].metadata.resource_version)
    # Wait until the stream holds them, then remove the middle one, as compaction does
    # to the events of a watch that lags behind it.
    subject = subjects.events_of(api.bus.prefix, "pods", node="n1")
    events = watch.watch_once(bus=api.bus, starts={subject: rv}, until_caught_up=True)
    async with contextlib.aclosing(events):
        assert [e.resource_version async for _, e in events][-1] == last
    middle = int(created[1].metadata.resource_version)
    await api.bus.js.delete_msg(subjects.stream(api.bus.prefix), middle)

    for start in (
        {subject: rv},  # the node's events
        {subjects.events_of(api.bus.prefix, "pods"): rv},  # the resource's
        {subjects.events_of(api.bus.prefix): rv},  # the whole stream
    ):
        got = []
        events = watch.watch_once(bus=api.bus, starts=start, until_caught_up=True)
        with pytest.raises(errors.Expired, match=f"too old resource version: .* \\({middle}\\)"):
            async with contextlib.aclosing(events):
                async for _, event in events:
                    got.append(event.resource_version)
        assert got == [int(created[0].metadata.resource_version)]
