"""The write pipeline end to end (real NATS and Postgres): the writer's statements, the
outbox's in-memory hand-over and its catch-up from the log, answers to bursts of requests,
and the client's request path."""

from __future__ import annotations

import asyncio

import asyncpg
import msgspec
import nats.errors
import pytest

from drasim.apistore import sql
from drasim.apistore.core import ApiCore
from drasim.apistore.request import Context
from drasim.apistore.store import EventRow, ObjectRow, Store
from drasim.common import codec, errors
from drasim.common.api import core_v1
from drasim.common.bus import headers, messages, subjects
from drasim.common.client import ApiClient, stream_bounds
from drasim.common.watch import watch_raw
from tests.builders import make_pod


def _event(seq: int, name: str, type_: str = "ADDED") -> EventRow:
    return EventRow(seq, type_, "pods", "default", name, f"uid-{name}", "", b"{}", "t", "")


async def test_write_batch_inserts_upserts_and_deletes_in_one_statement(server):
    store: Store = server.store
    keys = [("pods", "default", "a"), ("pods", "default", "b")]
    start = await store.max_seq()
    async with store.write_transaction() as txn:
        last, rows = await txn.max_seq_and_objects(keys)
        assert (last, rows) == (start, {})
        await txn.write_batch(
            [_event(start + 1, "a"), _event(start + 2, "b")],
            [
                ObjectRow("pods", "default", "a", "uid-a", start + 1, "", ["o1", "o2"], b'{"a":1}'),
                ObjectRow("pods", "default", "b", "uid-b", start + 2, "n1", [], b'{"b":1}'),
            ],
            [],
        )
    async with store.write_transaction() as txn:
        last, rows = await txn.max_seq_and_objects([*keys, ("pods", "default", "missing")])
        assert last == start + 2
        assert rows == {keys[0]: b'{"a":1}', keys[1]: b'{"b":1}'}
        assert set(await txn.select_dependents(["o2"])) == {keys[0]}
        await txn.write_batch(
            [_event(start + 3, "a", "DELETED"), _event(start + 4, "b", "MODIFIED")],
            [ObjectRow("pods", "default", "b", "uid-b", start + 4, "n2", [], b'{"b":2}')],
            [keys[0]],
        )
    assert await store.select_object(*keys[0]) is None
    assert await store.select_object(*keys[1]) == b'{"b":2}'
    on_n2 = (await store.select_objects("pods", node_name="n2")).objects
    assert on_n2 == [b'{"b":2}']
    assert [e.seq for e in await store.select_events_after(start)] == [
        start + 1,
        start + 2,
        start + 3,
        start + 4,
    ]


async def test_list_pages_read_their_page_not_the_rest(server):
    """Pages stream through a cursor: every object once, in order, with and without a
    filter; `remaining` counted only without one."""
    store: Store = server.store
    start = await store.max_seq()
    names = [f"page-{i:03}" for i in range(25)]
    rows = [ObjectRow("pods", "pg", n, f"uid-{n}", start + 1, "", [], n.encode()) for n in names]
    async with store.write_transaction() as txn:
        await txn.write_batch([_event(start + 1, "pages")], rows, [])
    even = {n.encode() for n in names[::2]}
    for keep, want in ((None, names), (even.__contains__, names[::2])):
        seen, after, pages = [], None, 0
        while True:
            listed = await store.select_objects(
                "pods", namespace="pg", after=after, limit=4, keep=keep
            )
            seen += [o.decode() for o in listed.objects]
            pages += 1
            if listed.more is None:
                assert listed.remaining == 0
                break
            assert listed.more == ("pg", seen[-1])
            assert listed.remaining == (len(want) - len(seen) if keep is None else 0)
            after = listed.more
        assert seen == want and pages == -(-len(want) // 4)
    everything = await store.select_objects("pods", namespace="pg", keep=even.__contains__)
    assert [o.decode() for o in everything.objects] == names[::2] and everything.more is None


async def test_list_pages_end_before_they_outgrow_max_bytes(server):
    store: Store = server.store
    start = await store.max_seq()
    rows = [
        ObjectRow("pods", "big", f"b{i}", f"uid-b{i}", start + 1, "", [], b"x" * 100)
        for i in range(5)
    ]
    async with store.write_transaction() as txn:
        await txn.write_batch([_event(start + 1, "big")], rows, [])
    page = await store.select_objects("pods", namespace="big", max_bytes=350)
    assert len(page.objects) == 3 and page.more == ("big", "b2") and page.remaining == 2
    # A page holds one object even if that alone is more.
    one = await store.select_objects("pods", namespace="big", limit=4, max_bytes=10)
    assert len(one.objects) == 1 and one.more == ("big", "b0")


async def test_a_list_bigger_than_one_nats_message_comes_in_pages(server, api, bus):
    """Every page fits the bus's maximum payload (nats-server's default is 1 MB, the
    embedded one's 8 MiB): a page of 500 pods with their status could be more, and an
    answer over it is dropped (the client times out)."""
    await api.create(codec.convert({"metadata": {"name": "wide"}}, core_v1.Namespace))
    count = bus.nc.max_payload // 100_000 + 5  # more than one message carries
    names = [f"wide-{i:02}" for i in range(count)]
    for name in names:
        pod = make_pod(name, namespace="wide").dict()
        pod["metadata"]["annotations"] = {"filler": "x" * 100_000}
        await api.create(codec.convert(pod, core_v1.Pod))
    pods, _ = await api.list(core_v1.Pod, namespace="wide")
    assert [p.metadata.name for p in pods] == names
    first = messages.list_result_decoder.decode(
        await api.request(messages.List(resource="pods", namespace="wide", limit=500))
    )
    assert 0 < len(first.items) < count and first.continue_token and first.remaining > 0
    assert sum(len(i) for i in first.items) <= bus.nc.max_payload


async def test_guarded_write_writes_only_after_the_expected_event(server):
    store: Store = server.store
    start = await store.max_seq()
    row = ObjectRow("pods", "default", "g", "uid-g", start + 1, "", [], b"{}")
    async with store.write_transaction() as txn:
        stale = await txn.write_batch(
            [_event(start + 1, "g")], [row], [("pods", "default", "x")], after_seq=start - 1
        )
        assert stale is False
        assert await txn.max_seq_and_objects([("pods", "default", "g")]) == (start, {})
        assert await txn.write_batch([_event(start + 1, "g")], [row], [], after_seq=start)
    assert await store.max_seq() == start + 1
    assert await store.select_object("pods", "default", "g") == b"{}"


async def test_write_alone_loses_to_a_writer_that_held_the_lock(server):
    """The one-statement write of a batch prepared ahead waits for the lock with a snapshot
    from before it; a writer that commits meanwhile took the same numbers, and the
    statement writes nothing (see `sql.WRITE_BATCH_ALONE`)."""
    store: Store = server.store
    start = await store.max_seq()

    def row(name: str) -> ObjectRow:
        return ObjectRow("pods", "default", name, f"uid-{name}", start + 1, "", [], b"{}")

    async with store.write_session() as ours, store.write_session() as other:
        async with other.transaction() as txn:
            await txn.write_batch([_event(start + 1, "a")], [row("a")], [])
            racing = asyncio.create_task(
                ours.write_batch_alone([_event(start + 1, "b")], [row("b")], [], after_seq=start)
            )
            await asyncio.sleep(0.3)
            assert not racing.done()  # waiting for the lock
        assert await racing is False
        assert not ours.broken
        assert await ours.write_batch_alone(
            [_event(start + 2, "b")], [row("b")], [], after_seq=start + 1
        )
    assert [e.name for e in await store.select_events_after(start)] == ["a", "b"]
    assert await store.select_object("pods", "default", "b") == b"{}"


async def test_failed_write_transaction_rolls_back_and_the_next_one_works(server):
    store: Store = server.store
    start = await store.max_seq()
    with pytest.raises(RuntimeError):
        async with store.write_transaction() as txn:
            await txn.write_batch([_event(start + 1, "x")], [], [])
            raise RuntimeError("bug in the batch")
    with pytest.raises(errors.InternalError):  # a database error becomes an API error
        async with store.write_transaction() as txn:
            await txn.write_batch([_event(start + 1, "x"), _event(start + 1, "y")], [], [])
    assert await store.max_seq() == start
    async with store.write_transaction() as txn:
        await txn.write_batch([_event(start + 1, "z")], [], [])
    assert await store.max_seq() == start + 1


async def test_connection_released_inside_a_transaction_comes_back_clean(server):
    """The pool's reset does nothing of its own (see `store._keep_session`): a connection
    given back with an open transaction holding the write lock is still rolled back."""
    store: Store = server.store
    start = await store.max_seq()
    conn = await store._pool.acquire()
    await conn.execute(sql.BEGIN_AND_LOCK_WRITES)
    await store._pool.release(conn)
    async with asyncio.timeout(10):  # (with the lock still held this would wait forever)
        async with store.write_transaction() as txn:
            await txn.write_batch([_event(start + 1, "after-release")], [], [])
    assert await store.max_seq() == start + 1


async def test_concurrent_writes_each_get_their_own_answer(api):
    pods = await asyncio.gather(*(api.create(make_pod(f"p{i}").obj()) for i in range(200)))
    assert [p.metadata.name for p in pods] == [f"p{i}" for i in range(200)]
    assert len({p.metadata.resource_version for p in pods}) == 200
    results = await asyncio.gather(
        *(api.create(make_pod(f"p{i}").obj()) for i in range(0, 200, 2)),
        *(api.update(p) for p in pods[1::2]),  # no-ops: same resourceVersion back
        return_exceptions=True,
    )
    assert all(isinstance(r, errors.AlreadyExists) for r in results[:100])
    assert [r.metadata.resource_version for r in results[100:]] == [
        p.metadata.resource_version for p in pods[1::2]
    ]


async def test_malformed_request_is_answered_with_bad_request(server, bus):
    msg = await bus.request(subjects.api(bus.prefix, "test"), b"{not json", timeout=5)
    assert msg.headers[headers.STATUS_CODE] == "400"
    assert b"malformed request" in msg.data


async def test_request_without_responders_or_answer(bus):
    api = ApiClient(bus, actor="test", timeout=0.2)
    with pytest.raises(errors.ServiceUnavailable):
        await api.get(core_v1.Pod, "p", namespace="default")
    silent = await bus.nc.subscribe(subjects.api(bus.prefix, "test"))
    try:
        with pytest.raises(errors.Timeout):
            await api.get(core_v1.Pod, "p", namespace="default")
        with pytest.raises(nats.errors.TimeoutError):
            await bus.request(subjects.api(bus.prefix, "test"), b"{}", timeout=0.1)
    finally:
        await silent.unsubscribe()


async def _stream_events(bus, count: int, after: int = 0) -> list[tuple[int, str, str]]:
    got: list[tuple[int, str, str]] = []

    async def run() -> None:
        while True:  # the outbox makes the stream again when it next publishes
            try:
                await stream_bounds(bus)
                break
            except errors.ServiceUnavailable:
                await asyncio.sleep(0.05)
        async for seq, event in watch_raw(bus, "pods", resource_version=after):
            got.append((seq, event.type, codec.decode(event.object, core_v1.Pod).metadata.name))
            if len(got) == count:
                return

    await asyncio.wait_for(run(), 30)
    return got


async def test_outbox_fills_gaps_left_by_another_writer_from_the_log(server, api, bus):
    # A second writer on the same database (another replica) hands nothing to this
    # apistore's outbox: its events reach the stream only through the log.
    other = ApiCore(server.store)
    await other.start()
    _, start = await api.list(core_v1.Pod)
    try:
        for i in range(6):
            if i % 2:
                body = msgspec.Raw(codec.encode(make_pod(f"p{i}").obj()))
                await other.handle(messages.Create(resource="pods", object=body), Context())
            else:
                await api.create(make_pod(f"p{i}").obj())
    finally:
        await other.stop()
    events = await _stream_events(bus, 6, after=start)
    assert [name for _, _, name in events] == [f"p{i}" for i in range(6)]
    logged = await server.store.select_events_after(start)
    assert [seq for seq, _, _ in events] == [e.seq for e in logged]


async def test_outbox_republishes_into_a_recreated_stream(server, api, bus):
    for i in range(3):
        await api.create(make_pod(f"before{i}").obj())
    await _stream_events(bus, 3)
    await bus.js.delete_stream(subjects.stream(bus.prefix))
    for i in range(3):
        await api.create(make_pod(f"after{i}").obj())
    events = await _stream_events(bus, 6)
    names = [f"before{i}" for i in range(3)] + [f"after{i}" for i in range(3)]
    assert [name for _, _, name in events] == names
    logged = await server.store.select_events_after(0)
    assert [seq for seq, _, _ in events] == [e.seq for e in logged if e.resource == "pods"]


async def test_published_events_carry_their_headers(server, api, bus):
    created = await api.create(make_pod("p").obj())
    rv = int(created.metadata.resource_version)
    sub = await bus.js.subscribe(
        subjects.events_of(bus.prefix, "pods"), stream=subjects.stream(bus.prefix)
    )
    try:
        msg = await sub.next_msg(timeout=10)
    finally:
        await sub.unsubscribe()
    assert msg.metadata.sequence.stream == rv
    assert msg.headers[headers.NATS_MSG_ID] == str(rv)
    assert msg.headers[headers.EXPECTED_LAST_SEQUENCE] == str(rv - 1)
    assert msg.headers[headers.RESOURCE_VERSION] == str(rv)
    assert msg.headers[headers.ACTOR] == "test"


async def test_batches_prepared_ahead_of_the_lock_keep_write_semantics(server, api):
    """600 requests at once make two batches (512 is the most in one): the second is
    prepared while the first writes and commits, on top of what the first wrote."""
    ahead = server.core.stats["ahead"]
    pods = await asyncio.gather(*(api.create(make_pod(f"p{i:03d}").obj()) for i in range(300)))
    updates = []
    for label in ("first", "second"):  # two updates per pod from the same resourceVersion
        for pod in pods:
            changed = codec.decode(codec.encode(pod), core_v1.Pod)
            changed.metadata.labels = {"update": label}
            updates.append(changed)
    results = await asyncio.gather(*(api.update(p) for p in updates), return_exceptions=True)
    assert server.core.stats["ahead"] > ahead
    for i, pod in enumerate(pods):
        first, second = results[i], results[300 + i]
        assert isinstance(second, errors.Conflict), second  # the first update won
        assert first.metadata.labels == {"update": "first"}
        assert int(first.metadata.resource_version) > int(pod.metadata.resource_version)
    stored, _ = await api.list(core_v1.Pod)
    assert all(p.metadata.labels == {"update": "first"} for p in stored)
    logged = await server.store.select_events_after(0, limit=10_000)
    assert [e.seq for e in logged] == list(range(1, len(logged) + 1))
    assert [e.type for e in logged if e.resource == "pods"] == ["ADDED"] * 300 + ["MODIFIED"] * 300


async def test_two_writers_on_one_database_number_events_without_gaps(server, api):
    """Another replica's commits make batches prepared ahead lose their race: they are
    redone under the lock, and the log stays one gap-free sequence."""
    other = ApiCore(server.store)
    await other.start()

    async def through_other(i: int) -> bytes:
        body = msgspec.Raw(codec.encode(make_pod(f"o{i:03d}").obj()))
        return await other.handle(messages.Create(resource="pods", object=body), Context())

    try:
        for wave in range(3):
            created = await asyncio.gather(
                *(api.create(make_pod(f"a{wave}-{i:03d}").obj()) for i in range(250)),
                *(through_other(wave * 250 + i) for i in range(250)),
            )
            rvs = [
                int(c.metadata.resource_version)
                if isinstance(c, core_v1.Pod)
                else int(codec.decode(c, core_v1.Pod).metadata.resource_version)
                for c in created
            ]
            assert len(set(rvs)) == 500
    finally:
        await other.stop()
    logged = await server.store.select_events_after(0, limit=10_000)
    assert [e.seq for e in logged] == list(range(1, len(logged) + 1))
    assert sum(e.resource == "pods" for e in logged) == 1500
    stored, rv = await api.list(core_v1.Pod)
    assert len(stored) == 1500 and rv == logged[-1].seq


async def test_a_write_after_postgres_ended_the_writers_sessions_succeeds(server, api, fresh):
    """As after a Postgres restart: asyncpg hands the connections the writer keeps between
    batches back to the pool once their server closes them, and the next write takes a
    live one instead of failing with 503 "connection has been released back to the pool"."""
    await api.create(make_pod("before").obj())
    conn = await asyncpg.connect(fresh.database_url)
    try:
        ended = await conn.fetchval(
            "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid, 5000)) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
    finally:
        await conn.close()
    assert ended >= 1
    created = await api.create(make_pod("after").obj())
    assert created.metadata.name == "after"
