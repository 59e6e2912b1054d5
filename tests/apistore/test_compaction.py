"""Compaction of the event log and stream: what is kept, replay from the compacted log,
refusals of points before it, rounds among replicas, and the interval running it."""

from __future__ import annotations

import asyncio
import contextlib
import itertools

import pytest

from drasim.apistore import compaction
from drasim.apistore.compaction import Compactor
from drasim.apistore.server import ApiServer
from drasim.cli import replay
from drasim.common import errors, watch
from drasim.common.api import core_v1
from drasim.common.bus import messages
from drasim.common.client import ApiClient
from tests.builders import make_pod
from tests.cli.test_commands import drasim, write_busy_history


async def _busy_history(api) -> None:  # noqa: ANN001
    """`write_busy_history`, and a deleted pod's name used again."""
    await write_busy_history(api, 12)
    await api.create(make_pod("p0").labels(again="yes").obj())


async def _on_stream(api, resource_version: int) -> None:  # noqa: ANN001
    """Wait until the outbox has put the event at `resource_version` on the stream."""
    events = watch.watch_raw(api.bus, None, resource_version=resource_version - 1)
    async with contextlib.aclosing(events), asyncio.timeout(10):
        async for seq, _ in events:
            assert seq == resource_version
            return


async def _logged(server: ApiServer) -> list[messages.LoggedEvent]:
    page = messages.event_log_decoder.decode(
        await server.core.event_log(messages.EventLog(limit=10_000))
    )
    assert not page.continue_after
    return page.events


async def test_the_compacted_log_replays_to_the_same_state_and_refuses_older_points(
    fresh, server, api, capsys
):
    await _busy_history(api)
    cut = await server.store.max_seq()
    await api.patch(core_v1.Pod, "p1", {"metadata": {"labels": {"late": "1"}}}, namespace="default")
    last = await api.create(make_pod("late").obj())
    await _on_stream(api, int(last.metadata.resource_version))
    before = await _logged(server)
    at_cut = await replay.read_log(api, until=cut)
    carried = await replay.read_log(api, until=cut - 5)  # a fold that goes on later (chaos.py)

    assert await Compactor(server.store, server.bus, 60).compact(cut) == cut

    kept = await _logged(server)
    # At or before the cut: each live object's last event there, nothing deleted; after
    # it, every event as it was.
    last_at_cut = {(e.resource, e.namespace, e.name): e for e in before if e.seq <= cut}
    assert [e.seq for e in kept if e.seq <= cut] == sorted(
        e.seq for e in last_at_cut.values() if e.type != "DELETED"
    )
    assert [e.seq for e in kept if e.seq > cut] == [e.seq for e in before if e.seq > cut]
    assert len(kept) < len(before)
    # The compacted log folds to the same state at the cut as the whole log did...
    assert (await replay.read_log(api, until=cut)).objects == at_cut.objects
    # ...and to the live state at its end.
    code, out, err = await drasim(fresh, capsys, "replay", "--verify")
    assert code == 0, err
    assert "equals the projection" in out
    # A fold carried on from before the cut cannot go on over the compacted part: verify
    # folds afresh.
    with pytest.raises(errors.Expired, match=f"compacted up to resourceVersion {cut}"):
        await replay.read_log(api, view=carried)
    assert await replay.verify(api, carried) is None
    assert carried.resource_version == int(last.metadata.resource_version)
    code, out, _ = await drasim(fresh, capsys, "replay", "--to", str(cut), "get", "pods")
    assert code == 0
    assert "late" not in out.split()
    # A point before the cut is no longer in the log: said so, as upstream's 410.
    code, _, err = await drasim(fresh, capsys, "replay", "--to", str(cut - 1))
    assert code == 1
    assert err.startswith(
        "Error from server (Expired): The resourceVersion for the provided replay is too old:"
        f" the event log is compacted up to resourceVersion {cut} ("
    )
    code, _, err = await drasim(fresh, capsys, "replay", "--to", "2020-01-01T00:00:00Z")
    assert code == 1
    assert "The time for the provided replay is too old" in err
    # The stream dropped the same history: a watch from before the cut relists.
    with pytest.raises(errors.Expired, match=f"too old resource version: 1 \\({cut}\\)"):
        events = watch.watch_raw(api.bus, "pods", resource_version=1)
        async with contextlib.aclosing(events):
            await anext(events)


async def test_compaction_keeps_the_logs_last_event_and_what_the_stream_lacks(server, api):
    pod = await api.create(make_pod("p").obj())
    await _on_stream(api, int(pod.metadata.resource_version))
    await api.delete(core_v1.Pod, "p", namespace="default", grace_period_seconds=0)
    end = await server.store.max_seq()
    await _on_stream(api, end)
    # The last event is a deletion: compacting it away would move the log's end back
    # and hand out its resourceVersion again.
    compactor = Compactor(server.store, server.bus, 60)
    assert await compactor.compact(end) == end - 1
    assert await server.store.max_seq() == end
    created = await api.create(make_pod("q").obj())
    assert int(created.metadata.resource_version) == end + 1


async def test_compaction_goes_in_steps(server, api, monkeypatch):
    monkeypatch.setattr(compaction, "STEP_EVENTS", 3)
    for _ in range(10):
        pod = await api.create(make_pod("p").obj())
        await api.delete(core_v1.Pod, "p", namespace="default", grace_period_seconds=0)
    end = await server.store.max_seq()
    await _on_stream(api, end)
    assert await Compactor(server.store, server.bus, 60).compact(end) == end - 1
    # Of the pod's twenty events, the last creation (its last event at the cut) and the
    # deletion after the cut are left.
    pods = [(e.type, e.name, e.uid) for e in await _logged(server) if e.resource == "pods"]
    assert pods == [("ADDED", "p", pod.metadata.uid), ("DELETED", "p", pod.metadata.uid)]


async def test_a_rounds_steps_leave_postgres_most_of_the_time(server, api, monkeypatch):
    """A round's steps take `ROUND_DUTY` of its time: after each step it waits three times
    as long as the step took, so a large round does not take a Postgres backend from the
    writes for a minute on end; `compact` alone goes back to back."""
    monkeypatch.setattr(compaction, "STEP_EVENTS", 3)
    for _ in range(5):
        pod = await api.create(make_pod("p").obj())
        await api.delete(core_v1.Pod, "p", namespace="default", grace_period_seconds=0)
    end = await server.store.max_seq()
    await _on_stream(api, end)
    steps: list[tuple[float, float]] = []
    step = server.store.compact_events
    clock = asyncio.get_running_loop().time

    async def slow_step(after: int, upto: int) -> int:
        started = clock()
        await asyncio.sleep(0.05)
        removed = await step(after, upto)
        steps.append((started, clock()))
        return removed

    monkeypatch.setattr(server.store, "compact_events", slow_step)
    compactor = Compactor(server.store, server.bus, 60)
    assert await compactor.round() is None  # records the log's end
    assert await compactor.round() == end - 1
    assert len(steps) == -(-(end - 1) // 3) >= 3
    wait = (1 - compaction.ROUND_DUTY) / compaction.ROUND_DUTY
    for (started, ended), (next_started, _) in itertools.pairwise(steps):
        assert next_started - ended >= wait * (ended - started) * 0.95
    pods = [(e.type, e.name, e.uid) for e in await _logged(server) if e.resource == "pods"]
    assert pods == [("ADDED", "p", pod.metadata.uid), ("DELETED", "p", pod.metadata.uid)]


async def test_one_replica_takes_each_round_up_to_what_the_round_before_saw(server, api):
    first, second = (Compactor(server.store, server.bus, 60) for _ in range(2))
    await api.create(make_pod("a").obj())
    assert await first.round() is None  # records the log's end, compacts nothing
    seen = await server.store.max_seq()
    assert await second.round() is None  # lost the round: takes the count for next time
    assert (await server.store.select_compaction()).rounds == 1
    await api.patch(core_v1.Pod, "a", {"metadata": {"labels": {"x": "1"}}}, namespace="default")
    last = await api.create(make_pod("b").obj())
    await _on_stream(api, int(last.metadata.resource_version))
    assert await second.round() == seen
    assert await first.round() is None
    assert (await server.store.select_compaction()).revision == seen


async def test_the_apistore_compacts_every_interval(fresh, bus):
    api = ApiClient(bus, actor="test")
    server = await ApiServer.start(
        nats_url=fresh.nats_url,
        database_url=fresh.database_url,
        prefix=fresh.prefix,
        compaction_interval=0.2,
    )
    try:
        for i in range(3):
            await api.create(make_pod(f"p{i}").obj())
            await api.delete(core_v1.Pod, f"p{i}", namespace="default", grace_period_seconds=0)
        assert server.compactor is not None
        async with asyncio.timeout(10):
            while (await server.store.select_compaction()).revision == 0:
                server.compactor.compacted.clear()
                await server.compactor.compacted.wait()
        page = messages.event_log_decoder.decode(await server.core.event_log(messages.EventLog()))
        assert page.compacted > 0 and page.compacted_at
    finally:
        await server.stop()
