"""The watch layers (`drasim.common.watch`) on a real event stream, without an apistore:
events published on the stream's subjects as the outbox publishes them, and scopes whose
lists answer what a test says."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from typing import Any

import nats.errors
import pytest

from drasim.apistore.outbox import ensure_stream
from drasim.common import errors, watch
from drasim.common.api import core_v1
from drasim.common.bus import consumer, messages, subjects
from drasim.common.bus.client import Bus
from tests.builders import make_pod
from tests.conftest import Infra


@pytest.fixture
async def bus(infra: Infra) -> AsyncIterator[Bus]:
    bus = await Bus.connect(infra.nats_url, prefix=f"w{uuid.uuid4().hex[:12]}", name="test")
    try:
        yield bus
    finally:
        await bus.js.delete_stream(subjects.stream(bus.prefix))
        await bus.close()


async def publish(bus: Bus, node: str, name: str) -> int:
    """An ADDED event of pod `name` on `node`; answers its resourceVersion."""
    subject = subjects.event(bus.prefix, "pods", node=node, namespace="default", name=name)
    pod = make_pod(name).node(node).dict()
    ack = await bus.js.publish(subject, messages.encoder.encode({"type": "ADDED", "object": pod}))
    return ack.seq


def scope(bus: Bus, node: str, *lists: tuple[list[Any], int] | Exception) -> watch.Scope:
    """The pods of `node`, listed as `lists` say, one after the other (the last again)."""
    answers = list(lists)

    async def list_pods() -> tuple[list[Any], int]:
        answer = answers.pop(0) if len(answers) > 1 else answers[0]
        if isinstance(answer, Exception):
            raise answer
        return answer

    return watch.Scope(subjects.events_of(bus.prefix, "pods", node=node), list_pods)


def summary(item: watch.WatchEvent | watch.Bookmark) -> tuple[Any, ...]:
    if isinstance(item, watch.Bookmark):
        return ("BOOKMARK", item.resource_version)
    return (item.type, item.object.metadata.name, item.resource_version)


async def take(events: AsyncIterator[Any], count: int) -> list[tuple[Any, ...]]:
    return [summary(await asyncio.wait_for(anext(events), 10)) for _ in range(count)]


async def test_list_then_watch_follows_each_scope_from_its_own_list(bus: Bus) -> None:
    await ensure_stream(bus)
    assert await publish(bus, "a", "a1") == 1
    assert await publish(bus, "b", "b1") == 2
    listed_a1 = make_pod("a1").node("a").obj()
    scopes = [scope(bus, "a", ([listed_a1], 1)), scope(bus, "b", ([], 0))]
    positions: dict[str, int] = {}
    events = watch.list_then_watch(
        bus=bus,
        type_=core_v1.Pod,
        scopes=scopes,
        positions=positions,
        heartbeat=watch.HEARTBEAT_S,
        name="test",
    )
    try:
        # a's list already holds a1; b's list is older than b1, which its watch shows.
        assert await take(events, 3) == [(None, "a1", 1), ("BOOKMARK", 1), ("ADDED", "b1", 2)]
        assert positions == {scopes[0].subject: 1, scopes[1].subject: 2}
        await publish(bus, "a", "a2")
        assert await take(events, 1) == [("ADDED", "a2", 3)]
        assert positions == {scopes[0].subject: 3, scopes[1].subject: 2}
    finally:
        await events.aclose()


async def test_list_then_watch_returns_on_expired_having_forgotten_where_it_was(
    bus: Bus,
) -> None:
    await ensure_stream(bus, max_msgs=2)
    for i in range(4):
        await publish(bus, "a", f"a{i}")
    positions = {subjects.events_of(bus.prefix, "pods", node="a"): 0}  # event 1 is gone
    events = watch.list_then_watch(
        bus=bus,
        type_=core_v1.Pod,
        scopes=[scope(bus, "a", ([], 0))],
        positions=positions,
        heartbeat=watch.HEARTBEAT_S,
        name="test",
    )
    assert [item async for item in events] == []
    assert positions == {}


def watch_forever(bus: Bus, *scopes: watch.Scope) -> AsyncIterator[Any]:
    return watch.watch_forever(
        bus=bus, type_=core_v1.Pod, scopes=scopes, heartbeat=watch.HEARTBEAT_S, name="test"
    )


async def test_watch_forever_lists_again_when_its_position_expired(bus: Bus) -> None:
    await ensure_stream(bus, max_msgs=2)
    for i in range(3):
        await publish(bus, "a", f"a{i}")
    a2 = make_pod("a2").node("a").obj()
    events = watch_forever(bus, scope(bus, "a", ([], 0), ([a2], 3)))
    try:
        assert await take(events, 3) == [("BOOKMARK", 0), (None, "a2", 3), ("BOOKMARK", 3)]
        await publish(bus, "a", "a3")
        assert await take(events, 1) == [("ADDED", "a3", 4)]
    finally:
        await events.aclose()


async def test_watch_forever_carries_on_after_an_error(bus: Bus, caplog) -> None:
    await ensure_stream(bus)
    away = errors.ServiceUnavailable("the apistore is away")
    events = watch_forever(bus, scope(bus, "a", away, ([], 0)))
    try:
        assert await take(events, 1) == [("BOOKMARK", 0)]
        assert "test: the apistore is away; retrying in 0.1s" in caplog.messages
        await publish(bus, "a", "a1")
        assert await take(events, 1) == [("ADDED", "a1", 1)]
    finally:
        await events.aclose()


async def test_a_watch_of_many_nodes_makes_consumers_a_few_at_a_time_and_tries_again(
    bus: Bus, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A kubelet of thousands of nodes must not flood JetStream's API with consumer
    requests, nor give up its whole watch when a busy server leaves one unanswered."""
    monkeypatch.setattr(consumer, "_CREATE_CONCURRENCY", 4)
    await ensure_stream(bus)
    nodes = [f"n{i}" for i in range(40)]
    for node in nodes:
        await publish(bus, node, f"{node}-pod")
    request = bus.request
    in_flight, most, unanswered = 0, 0, consumer._CREATE_ATTEMPTS - 1

    async def busy_server(subject: str, *args: Any, **kwargs: Any) -> Any:
        nonlocal in_flight, most, unanswered
        if not subject.startswith("$JS.API.CONSUMER.CREATE."):
            return await request(subject, *args, **kwargs)
        if unanswered:
            unanswered -= 1
            raise nats.errors.TimeoutError
        in_flight += 1
        most = max(most, in_flight)
        try:
            return await request(subject, *args, **kwargs)
        finally:
            in_flight -= 1

    monkeypatch.setattr(bus, "request", busy_server)
    starts = {subjects.events_of(bus.prefix, "pods", node=n): 0 for n in nodes}
    events = watch.watch_once(bus=bus, starts=starts, type_=core_v1.Pod)
    try:
        got = {(await asyncio.wait_for(anext(events), 10))[1].object.metadata.name for _ in nodes}
    finally:
        await events.aclose()
    assert got == {f"{node}-pod" for node in nodes}
    assert unanswered == 0 and most == 4


class Positions(dict[str, int]):
    """A watch's positions that say when one moves."""

    def __init__(self) -> None:
        super().__init__()
        self.moved = asyncio.Event()

    def __setitem__(self, subject: str, seq: int) -> None:
        super().__setitem__(subject, seq)
        self.moved.set()

    async def reach(self, subject: str, seq: int) -> None:
        """Until `subject`'s position reaches `seq` (heartbeats move a quiet one on)."""
        async with asyncio.timeout(10):
            while self.get(subject, 0) < seq:
                self.moved.clear()
                await self.moved.wait()


def quiet_scope_watch(
    bus: Bus, positions: dict[str, int], lists: list[str]
) -> AsyncIterator[watch.WatchEvent | watch.Bookmark]:
    """A watch of node a's pods (whose list is empty at 0), noting each list in `lists`."""

    async def list_pods() -> tuple[list[Any], int]:
        lists.append("a")
        return [], 0

    return watch.list_then_watch(
        bus=bus,
        type_=core_v1.Pod,
        scopes=[watch.Scope(subjects.events_of(bus.prefix, "pods", node="a"), list_pods)],
        positions=positions,
        heartbeat=0.2,
        name="test",
    )


async def test_a_quiet_scope_keeps_up_with_the_stream_and_outlives_a_compaction(
    bus: Bus,
) -> None:
    """Node a has no event while node b has many, then the stream drops them (as
    compaction does). Neither a consumer of a made again (here: the server lost it) nor a
    new watch from the positions (after a failed one) lists again: heartbeats moved a's
    position past b's events."""
    await ensure_stream(bus)
    stream = subjects.stream(bus.prefix)
    a = subjects.events_of(bus.prefix, "pods", node="a")
    positions = Positions()
    lists: list[str] = []
    events = quiet_scope_watch(bus, positions, lists)
    try:
        assert await take(events, 1) == [("BOOKMARK", 0)]
        for i in range(20):
            await publish(bus, "b", f"b{i}")
        following = asyncio.create_task(anext(events))
        await positions.reach(a, 20)
        await bus.js.purge_stream(stream, seq=21)
        for info in await bus.js.consumers_info(stream):
            await bus.js.delete_consumer(stream, info.name)
        assert await publish(bus, "a", "a1") == 21
        assert summary(await asyncio.wait_for(following, 10)) == ("ADDED", "a1", 21)
        for i in range(20, 40):
            await publish(bus, "b", f"b{i}")
        following = asyncio.create_task(anext(events))
        await positions.reach(a, 41)
        following.cancel()  # the watch fails
        with contextlib.suppress(asyncio.CancelledError):
            await following
    finally:
        await events.aclose()
    assert positions == {a: 41}

    await bus.js.purge_stream(stream, seq=42)
    events = quiet_scope_watch(bus, positions, lists)
    try:
        following = asyncio.create_task(anext(events))
        assert await publish(bus, "a", "a2") == 42
        assert summary(await asyncio.wait_for(following, 10)) == ("ADDED", "a2", 42)
    finally:
        await events.aclose()
    assert lists == ["a"]
