"""Publish committed events, in order, from Postgres to the JetStream stream.

Writes never wait for NATS: they commit to Postgres and wake this loop. The loop publishes
every event after the stream's last sequence, so when NATS was away it simply catches up.

The stream is kept *aligned* with the log: stream sequence N is the event with seq N, i.e.
resourceVersion N. Every publish carries `Nats-Expected-Last-Sequence: N-1` (the server
refuses anything out of place) and `Nats-Msg-Id: N` (a re-publish after a lost ack is
dropped as a duplicate). A watcher resuming from resourceVersion R therefore starts a
consumer at stream sequence R+1 and sees every later event once, in order; events the
stream no longer holds (limits, a new NATS) make it answer "too old, relist".

An event too large for NATS (over the connection's `max_payload` or the stream's
`max_msg_size`, which the apistore's start-up check makes unlikely but an operator can
lower later) must not stop the events after it: it is published as a *stand-in* in its
place, keeping the alignment. The stand-in carries the `Drasim-Stand-In` header (the size
of the message it replaces) and the event's type with only the object's identity; watchers
read the event itself back from the log (`drasim.common.watch.watch_once`). Each one
is an alarm: an ERROR in the log and `drasim_apistore_outbox_oversized_events_total`.

Every event also names the previous event of its resource and of its resource on its node
(`drasim.apistore.event_chain`), by which a watcher knows that it missed events.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import logging
import time
from datetime import UTC, datetime

import msgspec
import nats.errors
import nats.js.errors
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.js import api as js_api

from drasim.apistore.event_chain import EventChain
from drasim.apistore.store import EventRow, Store
from drasim.common import errors
from drasim.common.api import registry
from drasim.common.bus import headers, subjects, wire
from drasim.common.bus.client import Bus

log = logging.getLogger(__name__)

PUBLISH_CHUNK = 512
DEFAULT_MAX_MSGS = 2_000_000
# Every watch is a consumer of the event stream: one per node a kubelet hosts, one per
# kind each service's informers watch. nats-server 2.15 and later give a stream that sets
# no limit theirs of 1,000, which a cluster of a thousand nodes outgrows.
MAX_CONSUMERS = 1_000_000
ACK_TIMEOUT = 10.0
NO_RESPONDERS = "503"  # status of the answer NATS sends when no stream takes the subject
# Committed events handed over in memory and not yet published; beyond this (NATS away for
# long) the oldest are dropped and read back from Postgres when their turn comes.
MAX_PENDING = 10_000
# How often the published position is written to Postgres while events keep coming (it is
# also written whenever the outbox catches up). It only decides where a stream that lost
# its messages restarts (`_realign`); a position behind the truth republishes a few more.
TRACK_INTERVAL = 1.0
# How often each node's last event is announced (`subjects.heads_of`): the longest a
# follower takes to notice an event lost with none after it and no reconnection (a route
# between NATS servers lost and back), at one small message per node and resource.
HEADS_INTERVAL = 30.0


def event_payload(ev: EventRow) -> bytes:
    """Kubernetes' watch event JSON, built without re-encoding the stored object."""
    return b'{"type":"' + ev.type.encode() + b'","object":' + ev.object + b"}"


def stand_in_payload(ev: EventRow) -> bytes:
    """The payload of an event's stand-in: its type, and of the object only what names it
    (kind, name, namespace, uid, resourceVersion)."""
    meta = {"name": ev.name, "uid": ev.uid, "resourceVersion": str(ev.seq)}
    if ev.namespace:
        meta["namespace"] = ev.namespace
    obj: dict[str, object] = {"metadata": meta}
    try:
        info = registry.by_plural(ev.resource)
        obj = {"apiVersion": info.api_version, "kind": info.kind, **obj}
    except errors.NotFound:  # a kind this version does not serve: never stop publishing
        pass
    return msgspec.json.encode({"type": ev.type, "object": obj})


def event_subject(prefix: str, ev: EventRow) -> str:
    return subjects.event(
        prefix, ev.resource, node=ev.node_name, namespace=ev.namespace, name=ev.name
    )


async def ensure_stream(bus: Bus, *, max_msgs: int = DEFAULT_MAX_MSGS) -> js_api.StreamInfo:
    """Create the event stream if missing (file storage, discard old beyond `max_msgs`),
    and let it take `MAX_CONSUMERS` consumers."""
    name = subjects.stream(bus.prefix)
    try:
        info = await bus.js.stream_info(name)
    except nats.js.errors.NotFoundError:
        config = js_api.StreamConfig(
            name=name,
            subjects=[subjects.events_of(bus.prefix)],
            storage=js_api.StorageType.FILE,
            retention=js_api.RetentionPolicy.LIMITS,
            discard=js_api.DiscardPolicy.OLD,
            max_msgs=max_msgs,
            max_consumers=MAX_CONSUMERS,
            duplicate_window=120.0,
        )
        with contextlib.suppress(nats.js.errors.BadRequestError):  # made by another apistore
            await bus.js.add_stream(config)
        info = await bus.js.stream_info(name)
    if info.config.max_consumers != MAX_CONSUMERS:
        # A stream made without the limit: nats-server 2.15 and later hold it to their
        # default (1,000). An older server may refuse the change; it has no default.
        config = dataclasses.replace(info.config, max_consumers=MAX_CONSUMERS)
        with contextlib.suppress(nats.js.errors.BadRequestError):
            info = await bus.js.update_stream(config)
    return info


_SEQ_HEADERS = (
    f"NATS/1.0\r\n{headers.NATS_MSG_ID}: %d\r\n{headers.EXPECTED_LAST_SEQUENCE}: %d\r\n"
    f"{headers.RESOURCE_VERSION}: %d\r\n{headers.PREV_OF_RESOURCE}: %d\r\n"
    f"{headers.PREV_ON_NODE}: %d\r\n"
).encode()
_TRACEPARENT = f"{headers.TRACEPARENT}: ".encode()
_ACTOR = f"{headers.ACTOR}: ".encode()
_STAND_IN = f"{headers.STAND_IN}: ".encode()


def event_frame(
    prefix: str,
    ev: EventRow,
    reply: str = "",
    *,
    links: tuple[int, int] = (0, 0),
    stand_in_for: int = 0,
) -> bytes:
    """The NATS protocol command (HPUB) that publishes one event: its subject, its headers
    (`Nats-Msg-Id` and `Nats-Expected-Last-Sequence` as the module docstring says, the
    resourceVersion, its `links` in the event chain, the write's traceparent and actor)
    and `event_payload`; with `stand_in_for` (the size of the event's own message), its
    stand-in instead.

    Built here in one go: nats-py's `publish` encodes a headers dict key by key, which cost
    more than everything else the apistore does to publish an event."""
    hdr = _SEQ_HEADERS % (ev.seq, ev.seq - 1, ev.seq, *links)
    if ev.traceparent:
        hdr += _TRACEPARENT + wire.header_value(ev.traceparent) + b"\r\n"
    if ev.actor:
        hdr += _ACTOR + wire.header_value(ev.actor) + b"\r\n"
    if stand_in_for:
        hdr += _STAND_IN + b"%d\r\n" % stand_in_for
    hdr += b"\r\n"
    payload = stand_in_payload(ev) if stand_in_for else event_payload(ev)
    return wire.pub_frame(event_subject(prefix, ev), payload, reply=reply, headers=hdr)


class _PubAck(msgspec.Struct):
    """JetStream's answer to a publish: the stream sequence, or an error."""

    stream: str = ""
    seq: int = 0
    duplicate: bool = False
    error: dict | None = None


_pub_ack_decoder = msgspec.json.Decoder(_PubAck)


class _Chunk:
    """The ack of one pipelined chunk: only its last event asks for one (see `_publish`)."""

    def __init__(self, token: str, last: int) -> None:
        self.token = token
        self.last = last
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def ack(self, seq: int, msg: Msg) -> None:
        if self.done.done() or seq != self.last:
            return
        if msg.headers and msg.headers.get(js_api.Header.STATUS) == NO_RESPONDERS:
            self.done.set_exception(nats.js.errors.NoStreamResponseError())
            return
        try:
            ack = _pub_ack_decoder.decode(msg.data)
        except msgspec.DecodeError as exc:
            self.done.set_exception(nats.js.errors.Error(f"bad publish ack: {exc}"))
            return
        if ack.error is not None:
            try:
                nats.js.errors.APIError.from_error(ack.error)
            except nats.js.errors.APIError as exc:
                self.done.set_exception(exc)
            return
        if ack.seq != seq:
            self.done.set_exception(
                nats.js.errors.Error(f"stream out of step: event {seq} stored as {ack.seq}")
            )
            return
        self.done.set_result(None)


class Outbox:
    """The publishing loop. The writer hands it each batch's events (`add`) after the
    commit; `wake(seq)` only says that events up to `seq` are committed (they are then read
    back from Postgres)."""

    def __init__(self, store: Store, bus: Bus, *, max_msgs: int = DEFAULT_MAX_MSGS) -> None:
        self._store = store
        self._bus = bus
        self._max_msgs = max_msgs
        self._wakeup = asyncio.Event()
        self.committed = 0
        self.published = 0
        self._unpublished: list[EventRow] = []
        # The stream's last sequence as of our last publish; None: ask the server.
        self._stream_last: int | None = None
        self._tracked = 0
        self._tracked_at = 0.0
        self._ack_prefix = ""
        self._ack_sub: Subscription | None = None
        self._chunk: _Chunk | None = None
        self._chunk_ids = itertools.count()
        # The stream's max_msg_size as of our last look (-1: none).
        self._max_msg_size = -1
        # Events published as stand-ins (see the module docstring), and the last of them.
        self.oversized = 0
        self._last_oversized = 0
        self._chain = EventChain()
        self._heads_at = 0.0  # when the heads are announced next (monotonic)

    def add(self, events: list[EventRow]) -> None:
        """Events just committed, in seq order: published from memory, not read back."""
        if not events:
            return
        self._unpublished.extend(events)
        if len(self._unpublished) > MAX_PENDING:
            del self._unpublished[: len(self._unpublished) - MAX_PENDING]
        self.wake(events[-1].seq)

    def wake(self, seq: int) -> None:
        self.committed = max(self.committed, seq)
        self._wakeup.set()

    async def unpublished_age(self) -> float:
        """Seconds since the oldest event JetStream has not acknowledged was committed (0
        when none waits): how far watchers lag behind writes."""
        rows = await self._store.select_events_after(self.published, limit=1)
        if not rows or not isinstance(rows[0].created_at, datetime):
            return 0.0
        return max((datetime.now(UTC) - rows[0].created_at).total_seconds(), 0.0)

    async def run(self) -> None:
        delay = 0.05
        poll = True  # read the log itself: at start, after an error, and every second
        while True:
            try:
                await self._publish_until_idle(poll)
                delay = 0.05
            except (TimeoutError, nats.errors.Error, nats.js.errors.Error, OSError) as exc:
                self._stream_last = None
                log.warning("outbox: NATS not available (%s); retrying in %.1fs", exc, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)
                poll = True
                continue
            except Exception:  # e.g. the database away: retry, never stop publishing
                self._stream_last = None
                log.exception("outbox: publishing failed; retrying in %.1fs", delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)
                poll = True
                continue
            self._wakeup.clear()
            if self.committed > self.published:
                poll = False
                continue
            # The timeout also catches up with other apistore replicas' commits.
            # (`asyncio.timeout`, not `wait_for`: on 3.11 `wait_for` loses a cancellation
            # that arrives as the awaited thing completes, and `stop()` would hang.)
            try:
                async with asyncio.timeout(1.0):
                    await self._wakeup.wait()
                poll = False
            except TimeoutError:
                poll = True

    async def stop(self) -> None:
        if self._ack_sub is not None:
            with contextlib.suppress(nats.errors.Error):
                await self._ack_sub.unsubscribe()
            self._ack_sub = None

    def _take_unpublished(self, published: int) -> list[EventRow]:
        """The handed-over events that continue the stream at `published + 1` (those of
        other replicas, or dropped ones, leave a gap that the log fills)."""
        pending = self._unpublished
        drop = 0
        while drop < len(pending) and pending[drop].seq <= published:
            drop += 1
        if drop:
            del pending[:drop]
        rows: list[EventRow] = []
        for ev in pending:
            if ev.seq != published + 1 + len(rows) or len(rows) == PUBLISH_CHUNK:
                break
            rows.append(ev)
        return rows

    async def _publish_until_idle(self, poll: bool) -> None:
        poll_idle = poll
        if self._stream_last is None:
            info = await ensure_stream(self._bus, max_msgs=self._max_msgs)
            self._stream_last = info.state.last_seq
            self._max_msg_size = info.config.max_msg_size or -1
            await self._chain.sync(self._store, info.state.last_seq)
            poll = True
        published = self._stream_last
        while True:
            rows = self._take_unpublished(published)
            if not rows and (poll or self.committed > published):
                rows = await self._store.select_events_after(published, limit=PUBLISH_CHUNK)
                poll = bool(rows)
                poll_idle = poll_idle and not rows
            if not rows:
                self.published = published
                # Idle since the last timeout: a good moment to record the position.
                await self._track(published, force=poll_idle)
                await self._announce_heads()
                return
            if rows[0].seq != published + 1:
                published = self._stream_last = await self._realign(published, rows[0].seq)
                continue
            await self._publish(rows)
            published = self._stream_last = rows[-1].seq
            self.published = published
            await self._track(published)
            await self._announce_heads()

    async def _announce_heads(self) -> None:
        """Every `HEADS_INTERVAL`, publish each node's last event of each resource that the
        stream holds (plain messages, the seq as payload): what a follower checks its
        position against (`drasim.common.follow`). Never names an event the stream has not
        taken: the chain advances only on the stream's ack."""
        now = time.monotonic()
        if now < self._heads_at:
            return
        self._heads_at = now + HEADS_INTERVAL
        prefix, publish = self._bus.prefix, self._bus.nc.publish
        for resource, node, seq in self._chain.node_heads():
            await publish(subjects.heads_of(prefix, resource, node), str(seq).encode())

    async def _track(self, published: int, *, force: bool = False) -> None:
        """Record the published position in Postgres (at most every TRACK_INTERVAL)."""
        now = time.monotonic()
        if published > self._tracked and (force or now - self._tracked_at >= TRACK_INTERVAL):
            await self._store.update_outbox_seq(published)
            self._tracked, self._tracked_at = published, now

    async def _realign(self, published: int, first_unpublished: int) -> int:
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
        last = (await self._bus.js.stream_info(name)).state.last_seq
        self._chain.skip_to(last)
        return last

    async def _on_ack(self, msg: Msg) -> None:
        chunk = self._chunk
        token, _, seq = msg.subject[len(self._ack_prefix) :].partition(".")
        if chunk is not None and token == chunk.token and seq.isdigit():
            chunk.ack(int(seq), msg)

    async def _publish(self, rows: list[EventRow]) -> None:
        """Publish one chunk pipelined, in order on one connection; only the last event
        asks for an ack.

        Every event carries `Nats-Expected-Last-Sequence: seq-1`, so the stream takes event
        `seq` only at stream sequence `seq`, right after `seq-1`. If any event of the chunk
        is not stored, every later one is refused too, the last included; so the last one
        acked at its own sequence means the whole chunk is in the stream, in place. (One
        ack per chunk instead of one per event halves the messages NATS and the apistore
        handle.)
        """
        nc = self._bus.nc
        if self._ack_sub is None:
            self._ack_prefix = nc.new_inbox() + "."
            self._ack_sub = await nc.subscribe(self._ack_prefix + ">", cb=self._on_ack)
        last = rows[-1]
        chunk = self._chunk = _Chunk(str(next(self._chunk_ids)), last.seq)
        # What NATS takes: the connection's max_payload, and the stream's max_msg_size.
        limit = nc.max_payload
        if self._max_msg_size > 0:
            limit = min(limit, self._max_msg_size)
        links = self._chain.links(rows)
        try:
            frames = [
                self._frame(ev, limit, link) for ev, link in zip(rows[:-1], links[:-1], strict=True)
            ]
            reply = f"{self._ack_prefix}{chunk.token}.{last.seq}"
            frames.append(self._frame(last, limit, links[-1], reply))
            await wire.send_frames(nc, frames)
            async with asyncio.timeout(ACK_TIMEOUT):
                await chunk.done
            self._chain.advance((ev.seq, ev.resource, ev.node_name) for ev in rows)
        finally:
            self._chunk = None
            if chunk.done.done() and not chunk.done.cancelled():
                chunk.done.exception()  # retrieved: no "never retrieved" warning
            else:
                chunk.done.cancel()

    def _frame(self, ev: EventRow, limit: int, links: tuple[int, int], reply: str = "") -> bytes:
        """The event's frame, or its stand-in's if the frame is over `limit`, what NATS
        takes (which limits a little less than the whole frame)."""
        prefix = self._bus.prefix
        frame = event_frame(prefix, ev, reply, links=links)
        if len(frame) <= limit:
            return frame
        if ev.seq > self._last_oversized:  # once per event, not on every retry of it
            self._last_oversized = ev.seq
            self.oversized += 1
            log.error(
                "outbox: event %d (%s %s %s/%s) is %d bytes, more than the %d NATS takes "
                "(max_payload, or the stream's max_msg_size); published a stand-in that "
                "watchers resolve from the event log",
                ev.seq,
                ev.type,
                ev.resource,
                ev.namespace,
                ev.name,
                len(frame),
                limit,
            )
        return event_frame(prefix, ev, reply, links=links, stand_in_for=len(frame))
