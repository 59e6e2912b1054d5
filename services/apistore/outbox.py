"""Publish committed events, in order, from Postgres to the JetStream stream.

Writes never wait for NATS: they commit to Postgres and wake this loop. The loop publishes
every event after the stream's last sequence, so when NATS was away it simply catches up.

The stream is kept *aligned* with the log: stream sequence N is the event with seq N, i.e.
resourceVersion N. Every publish carries `Nats-Expected-Last-Sequence: N-1` (the server
refuses anything out of place) and `Nats-Msg-Id: N` (a re-publish after a lost ack is
dropped as a duplicate). A watcher resuming from resourceVersion R therefore starts a
consumer at stream sequence R+1 and sees every later event once, in order; events the
stream no longer holds (limits, a new NATS) make it answer "too old, relist".
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

import nats.errors
import nats.js.errors
from nats.js import api as js_api

from drasim.apistore.store import EventRow, Store
from drasim.common.bus import headers, subjects
from drasim.common.bus.client import Bus

log = logging.getLogger(__name__)

PUBLISH_CHUNK = 512
DEFAULT_MAX_MSGS = 2_000_000


def event_payload(ev: EventRow) -> bytes:
    """Kubernetes' watch event JSON, built without re-encoding the stored object."""
    return b'{"type":"' + ev.type.encode() + b'","object":' + ev.object + b"}"


def event_subject(prefix: str, ev: EventRow) -> str:
    return subjects.event(
        prefix, ev.resource, node=ev.node_name, namespace=ev.namespace, name=ev.name
    )


async def ensure_stream(bus: Bus, *, max_msgs: int = DEFAULT_MAX_MSGS) -> js_api.StreamInfo:
    """Create the event stream if missing (file storage, discard old beyond `max_msgs`)."""
    name = subjects.stream(bus.prefix)
    try:
        return await bus.js.stream_info(name)
    except nats.js.errors.NotFoundError:
        pass
    config = js_api.StreamConfig(
        name=name,
        subjects=[subjects.events_of(bus.prefix)],
        storage=js_api.StorageType.FILE,
        retention=js_api.RetentionPolicy.LIMITS,
        discard=js_api.DiscardPolicy.OLD,
        max_msgs=max_msgs,
        duplicate_window=120.0,
    )
    with contextlib.suppress(nats.js.errors.BadRequestError):  # made by another apistore
        await bus.js.add_stream(config)
    return await bus.js.stream_info(name)


def _headers(ev: EventRow) -> dict[str, str]:
    found = {
        headers.NATS_MSG_ID: str(ev.seq),
        headers.EXPECTED_LAST_SEQUENCE: str(ev.seq - 1),
        headers.RESOURCE_VERSION: str(ev.seq),
    }
    if ev.traceparent:
        found[headers.TRACEPARENT] = ev.traceparent
    if ev.actor:
        found[headers.ACTOR] = ev.actor
    return found


class Outbox:
    """The publishing loop; `wake(seq)` is called after each commit."""

    def __init__(self, store: Store, bus: Bus, *, max_msgs: int = DEFAULT_MAX_MSGS) -> None:
        self._store = store
        self._bus = bus
        self._max_msgs = max_msgs
        self._wakeup = asyncio.Event()
        self.committed = 0
        self.published = 0

    def wake(self, seq: int) -> None:
        self.committed = max(self.committed, seq)
        self._wakeup.set()

    async def run(self) -> None:
        delay = 0.05
        while True:
            try:
                await self._publish_until_idle()
                delay = 0.05
            except (TimeoutError, nats.errors.Error, nats.js.errors.Error, OSError) as exc:
                log.warning("outbox: NATS not available (%s); retrying in %.1fs", exc, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)
                continue
            self._wakeup.clear()
            if self.committed > self.published:
                continue
            # The timeout also catches up with other apistore replicas' commits.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wakeup.wait(), timeout=1.0)

    async def _publish_until_idle(self) -> None:
        info = await ensure_stream(self._bus, max_msgs=self._max_msgs)
        published = info.state.last_seq
        while True:
            rows = await self._store.select_events_after(published, limit=PUBLISH_CHUNK)
            if not rows:
                self.published = published
                return
            if rows[0].seq != published + 1:
                published = await self._realign(info, published, rows[0].seq)
                continue
            await self._publish(rows)
            published = rows[-1].seq
            self.published = published
            await self._store.update_outbox_seq(published)

    async def _realign(
        self, info: js_api.StreamInfo, published: int, first_unpublished: int
    ) -> int:
        """The stream lost its messages (a new NATS) or never had the early ones: restart it
        at the next unpublished seq. Watchers behind that point get "too old, relist"."""
        name = subjects.stream(self._bus.prefix)
        tracked = await self._store.select_outbox_seq()
        start = max(tracked + 1, first_unpublished) if published == 0 else first_unpublished
        log.warning(
            "outbox: stream %s at %d, log continues at %d; realigning stream at %d",
            name,
            published,
            first_unpublished,
            start,
        )
        await self._bus.js.purge_stream(name, seq=start)
        return (await self._bus.js.stream_info(name)).state.last_seq

    async def _publish(self, rows: list[EventRow]) -> None:
        """Publish one chunk pipelined (sent in order on one connection, acks awaited together)."""
        prefix = self._bus.prefix
        acks = [
            self._bus.js.publish(
                event_subject(prefix, ev),
                event_payload(ev),
                headers=_headers(ev),
                timeout=10.0,
            )
            for ev in rows
        ]
        results = await asyncio.gather(*acks, return_exceptions=True)
        for ev, result in zip(rows, results, strict=True):
            if isinstance(result, BaseException):
                raise result
            if result.seq != ev.seq:
                raise nats.js.errors.Error(
                    f"stream out of step: event {ev.seq} stored as {result.seq}"
                )
