"""Ordered push consumers of the event stream, one per filter subject, made through the
subject-filtered JetStream API so that NATS' permissions can bound what a client reads.

A consumer made on `$JS.API.CONSUMER.CREATE.<stream>.<name>.<filter>` must filter exactly
`<filter>` (the server refuses any other configuration), so a permission on that subject is
a permission on what the consumer delivers: a kubelet may make consumers of its own nodes'
pod events and of nothing else (`drasim.common.nats_auth`). The subject-less API
(`CONSUMER.CREATE.<stream>`, which nats-py's ordered consumers use) and multi-filter
consumers cannot be bounded that way, so every watch reads through this module instead.

Each consumer is what nats-py calls an ordered consumer: ephemeral, in memory, no acks,
flow control, idle heartbeats; made again from the next stream sequence when a consumer
sequence is skipped, when heartbeats stop, or when the connection to NATS was made again
(a restarted server has lost it). Messages of all filters come through one queue: in
order per filter, interleaved between them. Unlike nats-py's, no task per consumer: one
watchdog per watch checks every consumer's heartbeats. `drasim.common.watch` builds the
watches of drasim on them.

An idle heartbeat names the last stream sequence its consumer has gone past
(`Nats-Last-Stream`), matching or not: a quiet filter's consumer moves on with the stream,
and is made again from there, not from its last message. A filter quiet for longer than
the stream keeps its messages (compaction) would otherwise be made again from a sequence
the stream no longer holds, and its watch would list everything again for nothing. The
watch hears how far each filter has got (`Passed`), to carry on from there the next time.

A watch may also end once it has given everything the stream held when it started
(`until_caught_up`): a catch-up of what a plain subscription missed.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import time
import uuid
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

import nats.errors
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

from drasim.common import errors
from drasim.common.bus import subjects
from drasim.common.bus.client import Bus

__all__ = ["Passed", "create_subject", "ordered_messages"]

# How long the server keeps a consumer nobody listens to any more (one replaced by a new
# one, or left by a client that went away).
_INACTIVE_THRESHOLD_S = 30.0
# Heartbeats missed before a consumer is taken for lost (nats-py's figure).
_MISSED_HEARTBEATS = 2
_CREATE_TIMEOUT_S = 5.0
# Consumers one watch makes at once. A kubelet watches thousands of nodes, and nats-server
# answers JetStream API requests from one queue: thousands at once left the last ones
# unanswered past the timeout, the watch failed, and its retry listed and made them all
# again, at 10,000 nodes for ever.
_CREATE_CONCURRENCY = 32
# Tries of a consumer whose request went unanswered (a busy server) before the watch fails.
_CREATE_ATTEMPTS = 3
_NANOS = 1_000_000_000


def create_subject(prefix: str, filter_subject: str, consumer: str = "*") -> str:
    """The JetStream API subject that makes a consumer of `filter_subject` (a permission
    pattern with the default `consumer`; with the prefix `*`, of any cluster's stream)."""
    stream = "*" if prefix == "*" else subjects.stream(prefix)
    return f"$JS.API.CONSUMER.CREATE.{stream}.{consumer}.{filter_subject}"


class Passed(NamedTuple):
    """A filter's consumer went past every stream sequence up to `seq` and gave all it had
    of them: the filter has nothing more up to there."""

    seq: int


@dataclass(eq=False)
class _Consumer:
    filter: str
    next_seq: int  # the stream sequence of the next message to give
    generation: int = 0
    delivered: int = 0  # consumer sequence of the last message taken
    last_active: float = field(default_factory=time.monotonic)
    sub: Subscription | None = None
    # Messages the server has not delivered yet, as it last said; None: not made yet.
    pending: int | None = None


class _Watch:
    """The consumers of one `ordered_messages` call and the queue they fill."""

    def __init__(self, bus: Bus, starts: Mapping[str, int], heartbeat: float) -> None:
        self.bus = bus
        self.heartbeat = heartbeat
        self.consumers = [_Consumer(f, start) for f, start in starts.items()]
        # Messages to give, errors that end the watch, and the reply subjects of flow
        # control requests (answered once the reader got that far, which is what flow
        # control asks: the server holds back what the reader has not caught up with).
        self.queue: asyncio.Queue[tuple[str, Msg | Passed] | str | BaseException] = asyncio.Queue()
        self._inbox = bus.nc.new_inbox()
        self._ids = itertools.count()
        self._tasks: set[asyncio.Task[None]] = set()
        self._creating = asyncio.Semaphore(_CREATE_CONCURRENCY)

    async def start(self) -> None:
        """Make every consumer; raises `Expired` when the stream no longer holds the first
        message asked for, and what the JetStream API answered otherwise."""
        await asyncio.gather(*(self._create(c, c.generation) for c in self.consumers))

    def caught_up(self) -> bool:
        """Whether every consumer has given all the stream held for it."""
        return self.queue.empty() and all(c.pending == 0 for c in self.consumers)

    def renew(self, consumer: _Consumer) -> None:
        """Replace `consumer` by a new one from its next message (in the background; a
        failure ends the watch through the queue)."""
        consumer.generation += 1
        consumer.delivered = 0
        consumer.pending = None
        consumer.last_active = time.monotonic()
        if consumer.sub is not None:
            self._unsubscribe(consumer.sub)
            consumer.sub = None
        task = asyncio.get_running_loop().create_task(self._renewed(consumer, consumer.generation))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def renew_all(self) -> None:
        for consumer in self.consumers:
            self.renew(consumer)

    async def watchdog(self) -> None:
        """Renew each consumer that sent nothing, not even a heartbeat, for too long."""
        limit = self.heartbeat * _MISSED_HEARTBEATS
        while True:
            await asyncio.sleep(self.heartbeat)
            now = time.monotonic()
            for consumer in self.consumers:
                if now - consumer.last_active > limit:
                    self.renew(consumer)

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        for consumer in self.consumers:
            if consumer.sub is not None:
                self._unsubscribe(consumer.sub)
                consumer.sub = None

    async def _renewed(self, consumer: _Consumer, generation: int) -> None:
        try:
            await self._create(consumer, generation)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:
            if generation == consumer.generation:
                self.queue.put_nowait(exc)

    async def _create(self, consumer: _Consumer, generation: int) -> None:
        """Make `consumer` (at most `_CREATE_CONCURRENCY` at once), trying again when the
        server did not answer in time; a try's consumer that the server made all the same
        delivers to a subject nobody listens to any more, and expires."""
        async with self._creating:
            for attempt in range(1, _CREATE_ATTEMPTS + 1):
                try:
                    await self._create_once(consumer, generation)
                    return
                except nats.errors.TimeoutError:
                    if consumer.sub is not None:
                        self._unsubscribe(consumer.sub)
                        consumer.sub = None
                    if attempt == _CREATE_ATTEMPTS or generation != consumer.generation:
                        raise

    async def _create_once(self, consumer: _Consumer, generation: int) -> None:
        name = uuid.uuid4().hex
        deliver = f"{self._inbox}.{next(self._ids)}"
        sub = await self.bus.subscribe_direct(
            deliver, lambda msg: self._on_message(consumer, generation, msg)
        )
        if generation != consumer.generation:  # renewed meanwhile
            self._unsubscribe(sub)
            return
        consumer.sub = sub
        start = consumer.next_seq
        config = {
            "name": name,
            "deliver_subject": deliver,
            "deliver_policy": "by_start_sequence",
            "opt_start_seq": start,
            "filter_subject": consumer.filter,
            "ack_policy": "none",
            "max_deliver": 1,
            "replay_policy": "instant",
            "flow_control": True,
            "idle_heartbeat": int(self.heartbeat * _NANOS),
            "inactive_threshold": int(_INACTIVE_THRESHOLD_S * _NANOS),
            "mem_storage": True,
            "num_replicas": 1,
        }
        stream = subjects.stream(self.bus.prefix)
        request = json.dumps({"stream_name": stream, "config": config}).encode()
        try:
            answer = await self.bus.request(
                create_subject(self.bus.prefix, consumer.filter, name),
                request,
                timeout=_CREATE_TIMEOUT_S,
            )
        except nats.errors.NoRespondersError as exc:
            raise errors.ServiceUnavailable("JetStream is not available") from exc
        info = json.loads(answer.data)
        error = info.get("error")
        if error:
            if error.get("err_code") == 10059:  # stream not found
                raise errors.ServiceUnavailable("the event stream does not exist yet")
            raise errors.ServiceUnavailable(
                f"could not watch {consumer.filter}: {error.get('description', error)}"
            )
        # A stream whose first message is past `start` starts the consumer there: the
        # events in between are gone.
        first_given = info["delivered"]["stream_seq"] + 1
        if first_given > start:
            raise errors.Expired(f"too old resource version: {start - 1} ({first_given - 1})")
        if consumer.pending is None and generation == consumer.generation:
            consumer.pending = info.get("num_pending", 0)

    def _on_message(self, consumer: _Consumer, generation: int, msg: Msg) -> None:
        if generation != consumer.generation:
            return  # from a consumer already replaced
        consumer.last_active = time.monotonic()
        hdrs = msg.headers
        if hdrs and hdrs.get("Status") == "100":
            if msg.reply:  # a flow control request
                self.queue.put_nowait(msg.reply)
                return
            stalled = hdrs.get("Nats-Consumer-Stalled")
            if stalled:
                self._publish(stalled)
            last = hdrs.get("Nats-Last-Consumer")
            if last is None:
                return
            if int(last) != consumer.delivered:
                self.renew(consumer)  # the heartbeat says messages were sent we never got
                return
            passed = int(hdrs.get("Nats-Last-Stream") or 0)
            if passed >= consumer.next_seq:
                consumer.next_seq = passed + 1
                self.queue.put_nowait((consumer.filter, Passed(passed)))
            return
        if hdrs and "Status" in hdrs:
            return  # another status (e.g. 409 consumer deleted): heartbeats end, renewed
        stream_seq, consumer_seq = ack_sequences(msg.reply)
        if consumer_seq != consumer.delivered + 1:
            self.renew(consumer)
            return
        consumer.delivered = consumer_seq
        consumer.next_seq = stream_seq + 1
        consumer.pending = ack_pending(msg.reply)
        self.queue.put_nowait((consumer.filter, msg))

    def _publish(self, subject: str) -> None:
        task = asyncio.get_running_loop().create_task(self._publish_quietly(subject))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _publish_quietly(self, subject: str) -> None:
        with contextlib.suppress(nats.errors.Error):
            await self.bus.nc.publish(subject, b"")

    def _unsubscribe(self, sub: Subscription) -> None:
        task = asyncio.get_running_loop().create_task(self._unsubscribe_quietly(sub))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    @staticmethod
    async def _unsubscribe_quietly(sub: Subscription) -> None:
        with contextlib.suppress(nats.errors.Error):
            await sub.unsubscribe()


def ack_sequences(reply: str) -> tuple[int, int]:
    """(stream sequence, consumer sequence) of a delivered message, from its ack subject:
    `$JS.ACK.<stream>.<consumer>.<delivered>.<stream seq>.<consumer seq>.<time>.<pending>`,
    or with domain and account hash after `$JS.ACK` (12 tokens or more)."""
    tokens = reply.split(".")
    if len(tokens) == 9:
        return int(tokens[5]), int(tokens[6])
    if len(tokens) >= 12 and tokens[0] == "$JS" and tokens[1] == "ACK":
        return int(tokens[7]), int(tokens[8])
    raise errors.InternalError(f"not a JetStream message: {reply!r}")


def ack_pending(reply: str) -> int:
    """The messages the consumer has still to deliver after this one (its ack subject's
    `<pending>`, the token after the time)."""
    tokens = reply.split(".")
    return int(tokens[8] if len(tokens) == 9 else tokens[10])


async def ordered_messages(
    bus: Bus, starts: Mapping[str, int], *, idle_heartbeat: float, until_caught_up: bool = False
) -> AsyncIterator[tuple[str, Msg | Passed]]:
    """The event stream's messages on each filter subject of `starts` from the stream
    sequence it maps to, each filter's in order, through one ordered consumer per filter,
    as (filter, message), and now and then how far a quiet filter has got, as (filter,
    `Passed`); with `until_caught_up`, only until every filter's consumer has delivered
    what the stream held for it.

    Raises `Expired` when the stream no longer holds a sequence asked for (the caller
    relists), `ServiceUnavailable` when it cannot make a consumer (the caller retries from
    where each filter was)."""
    watch = _Watch(bus, starts, idle_heartbeat)
    stop = bus.on_reconnect(watch.renew_all)
    watchdog: asyncio.Task[None] | None = None
    try:
        await watch.start()
        watchdog = asyncio.create_task(watch.watchdog())
        while True:
            if until_caught_up and watch.caught_up():
                return
            item = await watch.queue.get()
            if isinstance(item, tuple):
                yield item
            elif isinstance(item, BaseException):
                raise item
            else:
                await bus.nc.publish(item, b"")
    finally:
        stop()
        if watchdog is not None:
            watchdog.cancel()
        await watch.close()
