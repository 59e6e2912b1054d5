"""Following scopes by plain subscription (`drasim.common.follow`, the kubelet's pod
watch): no JetStream consumer while nothing is lost; a lost event is caught up from the
stream, before the events after it, when the chain says so or after a reconnection."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable

import pytest
from nats.aio.msg import Msg

from drasim.apistore import outbox
from drasim.common import watch
from drasim.common.api import core_v1
from drasim.common.bus import subjects
from drasim.common.bus.client import Bus
from drasim.common.client import ApiClient
from drasim.common.informer import Informer
from drasim.kubelet.watch import pod_informer
from tests.builders import make_pod

NODES = ["node-a", "node-b"]


class _Heard:
    """What the kubelet's handler heard, and a way to await a pod's event."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []
        self._changed = asyncio.Event()

    def __call__(self, type_: str, pod: core_v1.Pod, _traceparent: str) -> None:
        self.events.append((type_, pod.metadata.name))
        self._changed.set()

    async def until(self, event: tuple[str, str]) -> None:
        async with asyncio.timeout(10):
            while event not in self.events:
                self._changed.clear()
                await self._changed.wait()


def _losing(bus: Bus, monkeypatch: pytest.MonkeyPatch, lost: set[str]) -> None:
    """The bus's plain subscriptions lose the first event of each pod named in `lost`."""
    subscribe = bus.subscribe_direct

    async def subscribe_direct(subject: str, handler: Callable[[Msg], None], **kw: str):  # noqa: ANN202
        def losing(msg: Msg) -> None:
            name = subjects.untoken(msg.subject.rsplit(".", 1)[-1])
            if name in lost:
                lost.discard(name)
                return
            handler(msg)

        return await subscribe(subject, losing, **kw)

    monkeypatch.setattr(bus, "subscribe_direct", subscribe_direct)


@contextlib.asynccontextmanager
async def _following(api: ApiClient, heard: _Heard) -> AsyncIterator[Informer[core_v1.Pod]]:
    """The kubelet's pod informer of `NODES`, synced, telling `heard`; stopped after."""
    informer = pod_informer(api, NODES, heard)
    informer.start()
    try:
        await informer.wait_synced(10)
        yield informer
    finally:
        await informer.stop()


async def _consumers(bus: Bus) -> int:
    return (await bus.js.stream_info(subjects.stream(bus.prefix))).state.consumer_count


async def test_the_pod_watch_follows_its_nodes_without_a_consumer(api: ApiClient):
    await api.create(make_pod("listed").node("node-a").obj())
    heard = _Heard()
    before = await _consumers(api.bus)
    async with _following(api, heard):
        await api.create(make_pod("on-b").node("node-b").obj())
        await api.create(make_pod("elsewhere").node("node-c").obj())
        await api.create(make_pod("on-a").node("node-a").obj())
        await heard.until(("ADDED", "on-a"))
        await heard.until(("ADDED", "on-b"))
        assert await _consumers(api.bus) == before
        assert sorted(heard.events) == [("ADDED", "listed"), ("ADDED", "on-a"), ("ADDED", "on-b")]


async def test_a_lost_event_is_caught_up_before_the_next(api, monkeypatch):
    _losing(api.bus, monkeypatch, {"lost"})
    heard = _Heard()
    async with _following(api, heard):
        await api.create(make_pod("lost").node("node-a").obj())
        await api.create(make_pod("next").node("node-a").obj())
        await heard.until(("ADDED", "next"))
        assert heard.events == [("ADDED", "lost"), ("ADDED", "next")]


async def test_an_event_lost_with_none_after_it_is_caught_up_on_reconnection(api, monkeypatch):
    _losing(api.bus, monkeypatch, {"last"})
    heard = _Heard()
    async with _following(api, heard) as informer:
        await api.create(make_pod("first").node("node-b").obj())
        await heard.until(("ADDED", "first"))
        last = await api.create(make_pod("last").node("node-b").obj())
        # It was published (and lost); then the connection comes back.
        await _on_stream(api, last)
        assert ("default", "last") not in informer.cache
        await api.bus._reconnected()
        await heard.until(("ADDED", "last"))
        assert heard.events == [("ADDED", "first"), ("ADDED", "last")]


async def _on_stream(api: ApiClient, pod: core_v1.Pod) -> None:
    """Wait until the stream holds `pod`'s event (a watch from just before it)."""
    rv = int(pod.metadata.resource_version or 0)
    events = watch.watch_raw(api.bus, "pods", resource_version=rv - 1)
    async with contextlib.aclosing(events), asyncio.timeout(10):
        seq, _ = await anext(events)
    assert seq == rv


async def test_a_node_whose_events_were_compacted_away_is_listed_again_alone(api, monkeypatch):
    """A node's lost event that the stream no longer holds: that node alone is listed
    again (not every node the kubelet hosts), and what it no longer has is deleted."""
    await api.create(make_pod("a-old").node("node-a").obj())
    await api.create(make_pod("b-pod").node("node-b").obj())
    lists: list[str] = []
    list_pods = ApiClient.list

    async def counting_list(self, type_, **kw):  # noqa: ANN001, ANN202
        lists.append(kw.get("field_selector", ""))
        return await list_pods(self, type_, **kw)

    monkeypatch.setattr(ApiClient, "list", counting_list)
    _losing(api.bus, monkeypatch, {"a-old"})
    heard = _Heard()
    async with _following(api, heard) as informer:
        assert sorted(lists) == ["spec.nodeName=node-a", "spec.nodeName=node-b"]
        lists.clear()
        _, rv = await api.list(core_v1.Pod)
        lists.clear()
        await api.delete(core_v1.Pod, "a-old", namespace="default", grace_period_seconds=0)
        # The deletion's event is lost to the subscription and compacted out of the stream.
        events = watch.watch_raw(api.bus, "pods", resource_version=rv)
        async with contextlib.aclosing(events), asyncio.timeout(10):
            deleted, _ = await anext(events)
        await api.bus.js.delete_msg(subjects.stream(api.bus.prefix), deleted)

        await api.create(make_pod("next").node("node-a").obj())
        await heard.until(("ADDED", "next"))
        assert heard.events == [
            ("ADDED", "a-old"),
            ("ADDED", "b-pod"),
            ("ADDED", "next"),  # (a list's handlers: what it has, then what went)
            ("DELETED", "a-old"),
        ]
        assert lists == ["spec.nodeName=node-a"]
        assert sorted(name for _, name in informer.cache) == ["b-pod", "next"]


async def test_an_event_lost_with_none_after_it_is_caught_up_when_its_head_is_announced(
    server, api, monkeypatch
):
    """No reconnection (a route between NATS servers lost and back): the apistore's
    announcement of the node's last event tells the kubelet what it missed."""
    monkeypatch.setattr(outbox, "HEADS_INTERVAL", 0.05)
    server.outbox._heads_at = 0.0  # (announced at its start, next in HEADS_INTERVAL as was)
    _losing(api.bus, monkeypatch, {"last"})
    heads: list[bytes] = []
    sub = await api.bus.subscribe_direct(
        subjects.heads_of(api.bus.prefix, "pods", "node-b"), lambda msg: heads.append(msg.data)
    )
    heard = _Heard()
    try:
        async with _following(api, heard):
            last = await api.create(make_pod("last").node("node-b").obj())
            await heard.until(("ADDED", "last"))
            assert heard.events == [("ADDED", "last")]
            assert str(last.metadata.resource_version).encode() in heads
    finally:
        await sub.unsubscribe()
