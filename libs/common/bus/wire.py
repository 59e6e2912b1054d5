"""Every use drasim makes of nats-py's private internals, in one module.

drasim's hot paths (the API client's requests, the apistore's answers, the outbox's
publishes, every message a service receives) cost more through nats-py's public API than
everything else they do, so they go one level down, to the protocol and to the connection's
own buffers. What each needs and why:

- `Client._send_command(cmd)` and `Client._flush_pending()`: hand protocol commands built
  here (`pub_frame`) to the connection and wake its flusher, as `Client.publish` does after
  encoding its arguments; many commands go as one (`send_frames`). `Client._flush_queue`:
  wake the flusher only when no wake-up is queued yet, as `publish` does.
- `Client._pending_data_size` and `Client._max_pending_size`: while reconnecting, refuse a
  command that would overflow the pending buffer, as `publish` does (`check_pending_room`).
- `Client._process_msg(sid, subject, reply, data, headers)`, which nats-py's parser awaits
  for every message: replaced (`install`) so that messages of direct subscriptions reach
  their handler at once, without nats-py's queue and task per subscription.
  `Client._subs` says whether a subscription still exists, `Subscription._id` is the sid a
  message carries (`subscription_id`), and `Msg(_sid=...)` builds a message as nats-py does.
- `Client._process_headers(raw)`, which nats-py awaits for every message with headers:
  replaced (`install`) by `parse_headers`, which reads the usual block faster.

nats-py is pinned to the minor version these were written against (pyproject.toml), and
`tests/common/bus/test_wire.py` fails, naming what changed, when one of them is gone or
behaves differently. Fix them here; nothing else in drasim touches nats-py's internals.
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Awaitable, Callable, Iterable

import nats.errors
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

__all__ = [
    "DirectHandlers",
    "check_pending_room",
    "header_block",
    "header_value",
    "install",
    "parse_headers",
    "pub_frame",
    "send_frames",
    "subscription_id",
    "write",
]

log = logging.getLogger(__name__)

DirectHandlers = dict[int, Callable[[Msg], None]]
"""Handlers of direct subscriptions, by subscription id (see `install`)."""

HEADER_LINE = b"NATS/1.0\r\n"
# What nats-py's `publish` accepts as a header name (its own rule).
_HEADER_KEY = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_NO_NEWLINES = str.maketrans({"\r": " ", "\n": " "})
# What `bytes.strip()` strips, and the ASCII characters `str.isspace()` accepts.
_ASCII_STRIP = " \t\n\r\x0b\x0c"
_SPACE_IN_NAME = re.compile(r"[\t\n\x0b\x0c\r\x1c-\x1f ]")


# -- frames -------------------------------------------------------------------------------


def pub_frame(subject: str, payload: bytes, *, reply: str = "", headers: bytes = b"") -> bytes:
    """The PUB command (HPUB with a `headers` block) publishing `payload` on `subject`, the
    bytes `Client.publish` writes for it."""
    to = b"%s %s" % (subject.encode(), reply.encode()) if reply else subject.encode()
    if headers:
        size = len(headers) + len(payload)
        return b"HPUB %s %d %d\r\n%s%s\r\n" % (to, len(headers), size, headers, payload)
    return b"PUB %s %d\r\n%s\r\n" % (to, len(payload), payload)


def header_value(value: str) -> bytes:
    """A header value as `Client.publish` writes it: trimmed, line breaks made spaces."""
    if "\r" in value or "\n" in value:
        value = value.translate(_NO_NEWLINES)
    return value.strip().encode()


def header_block(items: Iterable[tuple[str, str]]) -> bytes:
    """The `NATS/1.0` block of `items` as `Client.publish` writes it: names trimmed and
    checked (`nats.errors.BadHeaderError`), empty names skipped, values as `header_value`."""
    lines = [HEADER_LINE]
    for name, value in items:
        name = name.strip()
        if not name:
            continue
        if not _HEADER_KEY.fullmatch(name):
            raise nats.errors.BadHeaderError(name)
        lines.append(b"%s: %s\r\n" % (name.encode(), header_value(value)))
    lines.append(b"\r\n")
    return b"".join(lines)


# -- sending ------------------------------------------------------------------------------


def check_pending_room(nc: NATS, size: int) -> None:
    """Raise `OutboundBufferLimitError` as `Client.publish` does when, the connection being
    down, `size` more bytes would overflow what nats-py buffers until it is back."""
    if not nc.is_connected and (
        nc._max_pending_size <= 0 or size + nc._pending_data_size > nc._max_pending_size
    ):
        raise nats.errors.OutboundBufferLimitError


async def write(nc: NATS, data: bytes) -> None:
    """Queue protocol commands on the connection and wake its flusher, as `Client.publish`
    does once it has built its command."""
    await nc._send_command(data)
    if nc._flush_queue is not None and nc._flush_queue.empty():
        await nc._flush_pending()


async def send_frames(nc: NATS, frames: list[bytes]) -> None:
    """Send many `pub_frame`s in one go (`write`).

    Like `Client.publish`, refuses a closed connection and a message over the server's
    payload limit (the server would close the connection; a frame is a little longer than
    its headers and payload, so this errs on the safe side), and buffers while
    reconnecting up to the connection's pending limit."""
    if nc.is_closed:
        raise nats.errors.ConnectionClosedError
    if any(len(frame) > nc.max_payload for frame in frames):
        raise nats.errors.MaxPayloadError
    data = b"".join(frames)
    check_pending_room(nc, len(data))
    await write(nc, data)


# -- receiving ----------------------------------------------------------------------------


def subscription_id(sub: Subscription) -> int:
    """The sid the server's MSG commands carry for `sub`."""
    return sub._id


def install(nc: NATS, direct: DirectHandlers) -> None:
    """Make `nc` read headers with `parse_headers`, and hand each message of a subscription
    in `direct` to its handler as the connection reads it (see `_process_msg`)."""
    nc._process_headers = functools.partial(parse_headers, nc._process_headers)  # type: ignore[method-assign]
    nc._process_msg = functools.partial(_process_msg, nc, nc._process_msg, direct)  # type: ignore[method-assign]


async def _process_msg(
    nc: NATS,
    process: Callable[[int, bytes, bytes, bytes, bytes], Awaitable[None]],
    direct: DirectHandlers,
    sid: int,
    subject: bytes,
    reply: bytes,
    data: bytes,
    headers: bytes,
) -> None:
    """nats-py's `Client._process_msg`, except for direct subscriptions: their handler gets
    the message at once (dropped once unsubscribed, as nats-py drops it)."""
    handler = direct.get(sid)
    if handler is None:
        return await process(sid, subject, reply, data, headers)
    if sid not in nc._subs:  # unsubscribed
        del direct[sid]
        return None
    nc.stats["in_msgs"] += 1
    nc.stats["in_bytes"] += len(data)
    msg = Msg(
        nc,
        subject=subject.decode(),
        reply=reply.decode(),
        data=data,
        headers=await nc._process_headers(headers) if headers else None,
        _sid=sid,
    )
    try:
        handler(msg)
    except Exception:
        log.exception("handling a message on %s failed", msg.subject)
    return None


async def parse_headers(
    parse: Callable[[bytes], Awaitable[dict[str, str] | None]], headers: bytes
) -> dict[str, str] | None:
    """nats-py's header parsing (`Client._process_headers`, its `parse`) for the usual
    block, ASCII without a status line, in less time: one decode for the block instead of
    two per line and a character loop per name. Same result: names and values
    trimmed as `bytes.strip` does, names containing whitespace dropped, an empty block
    None. Anything else goes to `parse`."""
    if not headers:
        return None
    if headers[:10] != HEADER_LINE or not headers.isascii():
        return await parse(headers)
    found = {}
    for line in headers[10:].decode().split("\r\n"):
        if line:
            name, sep, value = line.partition(":")
            if sep:
                name = name.strip(_ASCII_STRIP)
                if not _SPACE_IN_NAME.search(name):
                    found[name] = value.strip(_ASCII_STRIP)
    return found or None
