"""Watch: every event after a resourceVersion, in order, once, across restarts of either side."""

from __future__ import annotations

import asyncio

import msgspec
import pytest

from drasim.apistore.request import Context
from drasim.apistore.server import ApiServer
from drasim.common import codec, errors, watch
from drasim.common.api import core_v1
from drasim.common.bus import messages
from drasim.common.bus.client import Bus
from drasim.common.client import ApiClient
from drasim.common.embedded import EmbeddedNats
from drasim.common.informer import Informer
from tests.apistore.watching import collect
from tests.builders import make_pod


def assert_in_order_once(events, names):
    seqs = [e.resource_version for e in events]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    assert [e.object.metadata.name for e in events] == names


async def test_watch_resumes_across_apistore_restart(fresh, server, api):
    _, rv0 = await api.list(core_v1.Pod)
    watcher = asyncio.create_task(collect(api, rv0, 40))
    for i in range(20):
        await api.create(make_pod(f"p{i:02d}").obj())
    await server.stop()
    restarted = await ApiServer.start(
        nats_url=fresh.nats_url, database_url=fresh.database_url, prefix=fresh.prefix
    )
    try:
        for i in range(20, 40):
            await api.create(make_pod(f"p{i:02d}").obj())
        events = await watcher
        names = [f"p{i:02d}" for i in range(40)]
        assert_in_order_once(events, names)
        # A watcher that restarts resumes from the last resourceVersion it saw.
        resumed = await collect(api, events[9].resource_version, 30)
        assert_in_order_once(resumed, names[10:])
    finally:
        await restarted.stop()
        server.stop = _noop  # already stopped; the fixture's teardown must not stop twice


async def _noop() -> None:
    return None


async def test_too_old_resource_version_is_expired(fresh, bus):
    server = await ApiServer.start(
        nats_url=fresh.nats_url,
        database_url=fresh.database_url,
        prefix=fresh.prefix,
        max_stream_msgs=5,
    )
    try:
        api = ApiClient(bus, actor="test")
        for i in range(12):
            last = await api.create(make_pod(f"p{i}").obj())
        rv = int(last.metadata.resource_version)
        # Wait until the outbox has published everything, then the oldest are gone.
        await collect(api, rv - 1, 1)
        with pytest.raises(errors.Expired, match="too old resource version"):
            async for _ in watch.watch_resource(api.bus, core_v1.Pod, resource_version=1):
                break
        recent = await collect(api, rv - 3, 3)
        assert [e.object.metadata.name for e in recent] == ["p9", "p10", "p11"]
    finally:
        await server.stop()


async def test_writes_while_nats_is_down_are_delivered_after_it_returns(fresh, tmp_path):
    nats_server = EmbeddedNats(tmp_path).start()
    port = nats_server.port
    server = await ApiServer.start(
        nats_url=nats_server.admin_url, database_url=fresh.database_url, prefix=fresh.prefix
    )
    bus = await Bus.connect(nats_server.admin_url, prefix=fresh.prefix)
    try:
        api = ApiClient(bus, actor="test")
        before = await api.create(make_pod("before").obj())
        nats_server.stop()
        # NATS is gone: writes still commit (here through the core, the HTTP API's way in).
        for i in range(10):
            body = codec.encode(make_pod(f"during{i}").dict())
            await server.core.handle(
                messages.Create(resource="pods", object=msgspec.Raw(body)), Context(actor="test")
            )
        nats_server.start(port=port)
        events = await collect(api, int(before.metadata.resource_version), 10)
        assert_in_order_once(events, [f"during{i}" for i in range(10)])
    finally:
        await bus.close()
        await server.stop()
        nats_server.stop()


async def test_informer_follows_adds_updates_and_deletes(api):
    seen: list[tuple[str, str]] = []
    done = asyncio.Event()

    def on_add(pod: core_v1.Pod) -> None:
        seen.append(("add", pod.metadata.name))
        if pod.metadata.name == "last":
            done.set()

    informer = Informer(
        api,
        core_v1.Pod,
        on_add=on_add,
        on_update=lambda o, n: seen.append(("update", n.metadata.name)),
        on_delete=lambda p: seen.append(("delete", p.metadata.name)),
    )
    await api.create(make_pod("listed").obj())
    informer.start()
    try:
        await informer.wait_synced(10)
        pod = await api.create(make_pod("watched").obj())
        await api.bind(pod, "n1")
        await api.delete(core_v1.Pod, "listed", namespace="default")
        await api.create(make_pod("last").obj())
        await asyncio.wait_for(done.wait(), 10)
        assert seen == [
            ("add", "listed"),
            ("add", "watched"),
            ("update", "watched"),
            ("delete", "listed"),
            ("add", "last"),
        ]
        assert sorted(informer.cache) == [("default", "last"), ("default", "watched")]
        assert informer.get("watched", "default").spec.node_name == "n1"
    finally:
        await informer.stop()
