"""Watching the event stream: the one implementation under the informers, the kubelet's
pod watch, the HTTP API's watch and the CLI.

Three layers, as kopf's (`kopf/_cogs/clients/watching.py`: `infinite_watch`,
`continuous_watch`, `watch_objs`):

- `watch_forever` never ends: after an error it backs off and carries on, each scope from
  the last resourceVersion it gave; only cancellation stops it.
- `list_then_watch` lists every scope (unless it knows where each one is), yields the
  listed objects and a `Bookmark`, then watches each scope from its own resourceVersion.
  On `Expired` (410: the stream no longer holds the events after a position) it forgets
  the positions and returns, so that the caller lists again.
- `watch_once` is one watch: an ordered consumer per filter subject
  (`drasim.common.bus.consumer`) from the event after the resourceVersion it maps to.

The stream is aligned with the event log (stream sequence == resourceVersion, see the
apistore's outbox), so resuming at resourceVersion R is starting a consumer at R+1. Each
event names the one before it on the watched subject (the apistore's `event_chain`): an
event naming one after the watch's position means events were removed from the stream
while the watch lagged (compaction, the stream's limits), and the watch ends `Expired`
as if it had started too late.

What a watch follows is a list of `Scope`s, each a filter subject and how to list what it
carries. An informer (`drasim.common.informer`) has one per kind; the kubelet
(`drasim.kubelet.watch`) one per node it hosts, listed as that node: NATS' permissions can
bound a consumer of one node's subject, never one of several.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from drasim.common import codec, errors
from drasim.common.api import registry
from drasim.common.bus import consumer, headers, messages, subjects
from drasim.common.bus.client import Bus
from drasim.common.client import ApiClient

__all__ = [
    "HEARTBEAT_S",
    "Bookmark",
    "Scope",
    "WatchEvent",
    "list_scopes",
    "list_then_watch",
    "retry_forever",
    "watch_forever",
    "watch_once",
    "watch_raw",
    "watch_resource",
]

log = logging.getLogger(__name__)

# Idle heartbeat of each consumer: how soon a consumer lost without a reconnection (a
# clustered NATS server gone) is noticed.
HEARTBEAT_S = 2.0
# Lists in flight at once when a watch lists its scopes.
LIST_CONCURRENCY = 32
# Back-off of `watch_forever` after an error: the first wait, doubled up to the longest.
_BACKOFF_FIRST_S = 0.1
_BACKOFF_MAX_S = 2.0


class WatchEvent(msgspec.Struct, frozen=True):
    """One change of one object: `type` is ADDED, MODIFIED or DELETED, or None for an
    object a list delivered (as kopf's); `object` is decoded, or its JSON (`msgspec.Raw`)
    in a watch without a type; `traceparent` is the trace of the write that made the
    change ('' if none, and for listed objects), for the consumer to continue; `scope` is
    the subject of the scope it came through, where the watch says (`follow`)."""

    type: str | None
    object: Any
    resource_version: int
    traceparent: str = ""
    scope: str = ""


class Bookmark(msgspec.Struct, frozen=True):
    """The end of a list (kopf's `Bookmark.LISTED`; Kubernetes' BOOKMARK event marking the
    end of the initial events, KEP-3157): the objects before it are everything the list
    showed as of `resource_version`, and changes after it follow. With `scope`, the end of
    one scope's list, made again alone when its events were lost (`follow`): the objects
    since the last bookmark are everything that scope holds, the other scopes' stand."""

    resource_version: int
    scope: str = ""


@dataclass(frozen=True)
class Scope:
    """A part of what a watch follows: the event stream's filter `subject`, and `list`,
    which answers the objects it covers and the resourceVersion that list is current at;
    `heads`, if any, the subject on which the apistore announces the scope's last event
    now and then (`subjects.heads_of`), which `follow` checks its position against."""

    subject: str
    list: Callable[[], Awaitable[tuple[list[Any], int]]]
    heads: str = ""


async def watch_forever(
    *, bus: Bus, type_: type, scopes: Sequence[Scope], heartbeat: float, name: str
) -> AsyncIterator[WatchEvent | Bookmark]:
    """List, then follow every change of `scopes`, forever (`list_then_watch`, again each
    time it returns), carrying on after errors as `retry_forever` does."""

    def attempt(positions: dict[str, int]) -> AsyncIterator[WatchEvent | Bookmark]:
        return list_then_watch(
            bus=bus,
            type_=type_,
            scopes=scopes,
            positions=positions,
            heartbeat=heartbeat,
            name=name,
        )

    async for item in retry_forever(attempt, name=name):
        yield item


async def retry_forever(
    attempt: Callable[[dict[str, int]], AsyncIterator[WatchEvent | Bookmark]], *, name: str
) -> AsyncIterator[WatchEvent | Bookmark]:
    """What `attempt(positions)` yields, calling it again each time it ends: positions
    (scope subject → resourceVersion) say where each scope was, and are empty when it must
    list again. After `Expired` forget them; after another error wait, doubling the wait
    each time, and carry on from the last event given. `name` says whose watch it is."""
    positions: dict[str, int] = {}
    delay = _BACKOFF_FIRST_S
    while True:
        events = attempt(positions)
        try:
            async with contextlib.aclosing(events):
                async for item in events:
                    delay = _BACKOFF_FIRST_S
                    yield item
        except errors.Expired as exc:
            log.info("%s: %s; listing again", name, exc)
            positions.clear()
        except Exception as exc:
            log.warning("%s: %s; retrying in %.1fs", name, exc, delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, _BACKOFF_MAX_S)


async def list_then_watch(
    *,
    bus: Bus,
    type_: type,
    scopes: Sequence[Scope],
    positions: dict[str, int],
    heartbeat: float,
    name: str,
) -> AsyncIterator[WatchEvent | Bookmark]:
    """Without `positions`, list every scope and yield what it holds, then a `Bookmark`;
    then every change of each scope after its position (`watch_once`), keeping
    `positions` at where each scope is (`watch_once`'s `positions`).

    Returns when the stream no longer holds the events after a position (`Expired`, 410),
    having forgotten the positions: the caller calls again, which lists again. Raises when
    a list or the watch failed otherwise; `positions` say where to carry on."""
    if not positions:
        listed = await list_scopes(scopes)
        for objects, resource_version in listed:
            for obj in objects:
                yield WatchEvent(None, obj, resource_version)
        positions.update((s.subject, rv) for s, (_, rv) in zip(scopes, listed, strict=True))
        yield Bookmark(max((rv for _, rv in listed), default=0))
    events = watch_once(
        bus=bus, starts=dict(positions), type_=type_, heartbeat=heartbeat, positions=positions
    )
    try:
        async with contextlib.aclosing(events):
            async for _, event in events:
                yield event
    except errors.Expired as exc:
        log.info("%s: %s; listing again", name, exc)
        positions.clear()


async def watch_once(
    *,
    bus: Bus,
    starts: Mapping[str, int],
    type_: type | None = None,
    heartbeat: float = HEARTBEAT_S,
    until_caught_up: bool = False,
    positions: dict[str, int] | None = None,
) -> AsyncIterator[tuple[str, WatchEvent]]:
    """One watch: every event on each filter subject of `starts` after the resourceVersion
    it maps to, in order per subject, as (subject, event); objects decoded into `type_`,
    or left as JSON without one. With `until_caught_up` it ends once it gave what the
    stream held. `positions`, if given, is kept at where each subject is: its last event
    given, or a later resourceVersion the stream went past with nothing on it (a quiet
    subject's position keeps up with the stream, and a later watch from it is not from
    before a compaction).

    An event the outbox published as a stand-in (`headers.STAND_IN`: too large for NATS)
    is read back from the event log. Ends only by raising: `Expired` when the stream no
    longer holds the event after a start, `ServiceUnavailable` when no consumer can be
    made, the error of a stand-in that cannot be read back."""
    decode = messages.watch_event_decoder.decode
    if positions is None:
        positions = {}
    positions.update(starts)
    link_headers = {s: link_header(bus.prefix, s) for s in starts}
    msgs = consumer.ordered_messages(
        bus,
        {s: rv + 1 for s, rv in starts.items()},
        idle_heartbeat=heartbeat,
        until_caught_up=until_caught_up,
    )
    async with contextlib.aclosing(msgs):
        async for subject, msg in msgs:
            if isinstance(msg, consumer.Passed):
                positions[subject] = msg.seq
                continue
            seq = consumer.ack_sequences(msg.reply)[0]
            previous = previous_event(msg, seq, link_headers[subject])
            if previous > positions[subject]:
                raise errors.Expired(f"too old resource version: {positions[subject]} ({previous})")
            data, traceparent = msg.data, ""
            if msg.headers:
                traceparent = msg.headers.get(headers.TRACEPARENT, "")
                if headers.STAND_IN in msg.headers:
                    data = await _logged_event(bus, seq)
            event = decode(data)
            obj = event.object if type_ is None else codec.decode(event.object, type_)
            positions[subject] = seq
            yield subject, WatchEvent(event.type, obj, seq, traceparent)


def link_header(prefix: str, filter_subject: str) -> str | None:
    """The header naming the event before each one on `filter_subject` (see the module
    docstring): of its resource, or of its resource on its node; None for the whole
    stream, where it is the event with the sequence before."""
    tokens = filter_subject.removeprefix(f"{prefix}.ev.").split(".")
    if tokens == [">"]:
        return None
    return headers.PREV_OF_RESOURCE if len(tokens) == 2 else headers.PREV_ON_NODE


def previous_event(msg: Any, seq: int, header: str | None) -> int:
    """The resourceVersion of the event before event `seq` (message `msg`) on its
    subject, as `link_header` says; 0 when the message does not say (published before
    events named it)."""
    if header is None:
        return seq - 1
    value = msg.headers.get(header) if msg.headers else None
    return int(value) if value else 0


async def watch_resource(
    bus: Bus, type_: type, *, resource_version: int, node: str | None = None
) -> AsyncIterator[WatchEvent]:
    """Every change of the objects of `type_` (bound to `node`) after `resource_version`,
    decoded, in order, once each (`watch_once`): `Expired` says to list again."""
    subject = subjects.events_of(bus.prefix, registry.by_type(type_).plural, node=node)
    events = watch_once(bus=bus, starts={subject: resource_version}, type_=type_)
    async with contextlib.aclosing(events):
        async for _, event in events:
            yield event


async def watch_raw(
    bus: Bus, resource: str | None, *, resource_version: int, node: str | None = None
) -> AsyncIterator[tuple[int, WatchEvent]]:
    """(resourceVersion, event with the object as JSON) of every change of `resource` (of
    every resource with None; bound to `node`) after `resource_version` (`watch_once`)."""
    subject = subjects.events_of(bus.prefix, resource, node=node)
    events = watch_once(bus=bus, starts={subject: resource_version})
    async with contextlib.aclosing(events):
        async for _, event in events:
            yield event.resource_version, event


async def list_scopes(scopes: Sequence[Scope]) -> list[tuple[list[Any], int]]:
    """Each scope's list, `LIST_CONCURRENCY` at a time."""
    limit = asyncio.Semaphore(LIST_CONCURRENCY)

    async def list_one(scope: Scope) -> tuple[list[Any], int]:
        async with limit:
            return await scope.list()

    return await asyncio.gather(*(list_one(s) for s in scopes))


async def _logged_event(bus: Bus, seq: int) -> bytes:
    """Event `seq` from the event log, as the stream's watch event JSON."""
    answer = await ApiClient(bus, actor="watch").request(
        messages.EventLog(after=seq - 1, until=seq, limit=1)
    )
    logged = messages.event_log_decoder.decode(answer).events
    if not logged or logged[0].seq != seq:
        raise errors.InternalError(f"event {seq} is not in the event log")
    event = messages.WatchEvent(type=logged[0].type, object=logged[0].object)
    return messages.encoder.encode(event)
