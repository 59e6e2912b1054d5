"""Following scopes of the event stream by plain NATS subscription, as the kubelet does.

A JetStream consumer per scope costs the server for every event it stores (it matches each
consumer's filter and keeps each consumer's state), and a kubelet process hosting a
thousand nodes has a thousand scopes: at 10,000 nodes the stream fell minutes behind the
writes. A plain subscription costs NATS an entry in its subject tree, and the outbox's
publish of an event reaches it as it reaches the stream.

But a plain subscription loses what is published while the connection is away. So:

- every scope is subscribed to before it is listed: each event after the list reaches the
  subscription (or is lost, and then noticed);
- each event names the one before it on its scope (the apistore's `event_chain`): an event
  naming one after the scope's position says events were lost, and the scope catches up
  from the stream from its position (`watch.watch_once(until_caught_up=True)`); when the
  stream no longer holds them (`Expired`), the scopes of that catch-up are listed again,
  alone, each ending with a `Bookmark` naming it: a node whose events were compacted
  away costs one node's list, not every node's;
- after a reconnection every scope catches up, since the last events before it may have
  been lost with nothing after them to tell;
- a scope with `heads` hears its last event announced now and then by the apistore
  (`subjects.heads_of`): one after its position was lost with nothing after it, though
  the connection stayed (a route between NATS servers lost and back), and is caught up.

Events come in order per scope, once each; a catch-up's events and the subscription's
overlap and are told apart by resourceVersion. What NATS permissions allow is the same as
for consumers: a subscription of one node's subject, and consumers of it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Sequence
from typing import NamedTuple

import msgspec
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

from drasim.common import codec, errors, watch
from drasim.common.bus import headers, messages
from drasim.common.bus.client import Bus

__all__ = ["follow_forever"]

log = logging.getLogger(__name__)

# Scopes caught up at once after a reconnection (each is one short-lived consumer).
CATCH_UP_BATCH = 64
# A catch-up can come before the stream stored the event that called for it: the event is
# taken again after the catch-up, and after this wait (doubled, up to a second) if the
# catch-up found nothing.
_STORED_WAIT_S = 0.01
_RECONNECTED = "reconnected"


class _Head(NamedTuple):
    """An announced last event of a scope (`subjects.heads_of`)."""

    subject: str
    seq: int


_Item = tuple[str, Msg] | _Head | str  # an event (scope, message), a head, or _RECONNECTED


async def follow_forever(
    *, bus: Bus, type_: type, scopes: Sequence[watch.Scope], name: str
) -> AsyncIterator[watch.WatchEvent | watch.Bookmark]:
    """List, then follow every change of `scopes`, forever, as `watch.watch_forever` does
    but through plain subscriptions (see the module docstring)."""
    async for item in watch.retry_forever(
        lambda positions: _follow(bus, type_, scopes, positions, name), name=name
    ):
        yield item


async def _follow(
    bus: Bus, type_: type, scopes: Sequence[watch.Scope], positions: dict[str, int], name: str
) -> AsyncIterator[watch.WatchEvent | watch.Bookmark]:
    """Subscribe, list (or catch up from `positions`), then follow, keeping `positions`."""
    queue: asyncio.Queue[_Item] = asyncio.Queue()
    subs: list[Subscription] = []
    stop = bus.on_reconnect(lambda: queue.put_nowait(_RECONNECTED))
    try:
        for scope in scopes:
            subs.append(
                await bus.subscribe_direct(
                    scope.subject, lambda msg, s=scope.subject: queue.put_nowait((s, msg))
                )
            )
            if scope.heads:
                subs.append(
                    await bus.subscribe_direct(
                        scope.heads, lambda msg, s=scope.subject: _heard_head(queue, s, msg)
                    )
                )
        await bus.nc.flush()  # the server has every subscription before anything is listed
        behind: set[str] = set()
        if positions:
            behind.update(s.subject for s in scopes)
        else:
            listed = await watch.list_scopes(scopes)
            for scope, (objects, resource_version) in zip(scopes, listed, strict=True):
                for obj in objects:
                    yield watch.WatchEvent(None, obj, resource_version, scope=scope.subject)
                positions[scope.subject] = resource_version
            yield watch.Bookmark(max((rv for _, rv in listed), default=0))
        by_subject = {s.subject: s for s in scopes}
        decode = messages.watch_event_decoder.decode
        link_headers = {s.subject: watch.link_header(bus.prefix, s.subject) for s in scopes}
        again: tuple[str, Msg] | None = None  # the event that called for a catch-up
        wait = _STORED_WAIT_S
        while True:
            if behind:
                caught = 0
                async for event in _catch_up(bus, type_, by_subject, positions, behind):
                    caught += 1
                    yield event
                behind.clear()
                if again is not None and not caught:
                    await asyncio.sleep(wait)
                    wait = min(wait * 2, 1.0)
                else:
                    wait = _STORED_WAIT_S
            if again is not None:
                item, again = again, None
            else:
                item = await queue.get()
            if item == _RECONNECTED:
                log.info("%s: reconnected; catching up %d scopes", name, len(scopes))
                behind.update(s.subject for s in scopes)
                continue
            if isinstance(item, _Head):
                if item.seq > positions[item.subject]:
                    log.info("%s: %s announced at %d; catching up", name, *item)
                    behind.add(item.subject)
                continue
            subject, msg = item
            hdrs = msg.headers or {}
            seq = int(hdrs.get(headers.RESOURCE_VERSION, 0))
            position = positions[subject]
            if seq <= position:
                continue  # had it (from the list or a catch-up)
            previous = watch.previous_event(msg, seq, link_headers[subject])
            if previous > position or headers.STAND_IN in hdrs:
                # Events before it are missing (or it stands in for one the stream's
                # reader resolves): the stream has them, or will have them shortly.
                behind.add(subject)
                again = item
                continue
            event = decode(msg.data)
            positions[subject] = seq
            yield watch.WatchEvent(
                event.type,
                codec.decode(event.object, type_),
                seq,
                hdrs.get(headers.TRACEPARENT, ""),
                subject,
            )
    finally:
        stop()
        for sub in subs:
            with contextlib.suppress(Exception):
                await sub.unsubscribe()


def _heard_head(
    queue: asyncio.Queue[tuple[str, Msg] | _Head | str], subject: str, msg: Msg
) -> None:
    with contextlib.suppress(ValueError):
        queue.put_nowait(_Head(subject, int(msg.data)))


async def _catch_up(
    bus: Bus,
    type_: type,
    scopes: dict[str, watch.Scope],
    positions: dict[str, int],
    behind: set[str],
) -> AsyncIterator[watch.WatchEvent | watch.Bookmark]:
    """Every event the stream holds of the scopes `behind` after their positions,
    `CATCH_UP_BATCH` scopes at a time. A batch the stream no longer holds the events of
    (`Expired`) is listed again, scope by scope, each list ending with its `Bookmark`."""
    pending = sorted(behind)
    for i in range(0, len(pending), CATCH_UP_BATCH):
        batch = pending[i : i + CATCH_UP_BATCH]
        starts = {s: positions[s] for s in batch}
        events = watch.watch_once(bus=bus, starts=starts, type_=type_, until_caught_up=True)
        try:
            async with contextlib.aclosing(events):
                async for subject, event in events:
                    positions[subject] = event.resource_version
                    yield msgspec.structs.replace(event, scope=subject)
        except errors.Expired as exc:
            log.info("catching up %d scopes: %s; listing them again", len(batch), exc)
            listed = await watch.list_scopes([scopes[s] for s in batch])
            for subject, (objects, resource_version) in zip(batch, listed, strict=True):
                for obj in objects:
                    yield watch.WatchEvent(None, obj, resource_version, scope=subject)
                positions[subject] = resource_version
                yield watch.Bookmark(resource_version, scope=subject)
