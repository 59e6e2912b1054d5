"""Events expire after their TTL (kube-apiserver's `--event-ttl`), through the write path."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from drasim.apistore import event_ttl
from drasim.apistore.event_ttl import EventTtl
from drasim.common import errors
from drasim.common.api import core_v1, meta_v1
from drasim.common.bus import messages
from tests.builders import make_pod

TTL = 3600.0


def _event(name: str) -> core_v1.Event:
    return core_v1.Event(
        metadata=meta_v1.ObjectMeta(name=name, namespace="default"),
        involved_object=core_v1.ObjectReference(kind="Pod", namespace="default", name="p"),
        reason="Test",
        message="m",
        count=1,
        type="Normal",
    )


def _after_ttl() -> datetime:
    """A sweep's "now" by which everything written so far is older than the TTL."""
    return datetime.now(UTC) + timedelta(seconds=TTL + 5)


async def test_expired_events_are_deleted_and_nothing_else(server, api):
    await api.create(_event("old"))
    await api.create(make_pod("p").obj())
    sweep = EventTtl(server.core, TTL)
    assert await sweep.sweep() == 0  # just written: kept
    assert await sweep.sweep(now=_after_ttl()) == 1
    with pytest.raises(errors.NotFound):
        await api.get(core_v1.Event, "old", namespace="default")
    assert (await api.get(core_v1.Pod, "p", namespace="default")).metadata.name == "p"
    # The deletion went through the log like any other, by the sweep.
    log = await server.core.event_log(messages.EventLog(resource="events", name="old"))
    assert b'"type":"DELETED"' in log and b'"actor":"event-ttl"' in log


async def test_an_event_written_again_since_the_sweep_read_it_is_kept(server, api):
    written = await api.create(_event("e"))
    await api.patch(core_v1.Event, "e", {"count": 2}, namespace="default")
    sweep = EventTtl(server.core, TTL)
    # The version the sweep would have read before the patch is stale now.
    assert not await sweep._delete("default", "e", int(written.metadata.resource_version))
    kept = await api.get(core_v1.Event, "e", namespace="default")
    assert kept.count == 2


async def test_a_sweep_goes_on_past_one_round(server, api, monkeypatch):
    monkeypatch.setattr(event_ttl, "SWEEP_BATCH", 2)
    for i in range(5):
        await api.create(_event(f"e{i}"))
    assert await EventTtl(server.core, TTL).sweep(now=_after_ttl()) == 5
    events, _ = await api.list(core_v1.Event, namespace="default")
    assert events == []
