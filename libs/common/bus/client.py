"""The one place that imports `nats`: a connection with its JetStream context and prefix.

Where it goes below nats-py's public API (its request path, direct subscriptions, header
parsing), it does so through `wire`, the one module that touches nats-py's internals.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import math
import re
from collections.abc import Callable
from pathlib import Path

import nats
import nats.errors
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.js import JetStreamContext

from drasim.common.bus import wire

log = logging.getLogger(__name__)

# The status NATS answers a request with when nobody subscribes to its subject.
_NO_RESPONDERS = "503"
# What nats-py's `publish` accepts as a subject (its own rule).
_BAD_SUBJECT = re.compile(r"[ \t\r\n]")
_HEADER_BLOCKS_MAX = 1024
# Requests time out on ticks of this many seconds (late by at most one, never early).
_TIMEOUT_TICK = 0.05


async def _log_error(exc: Exception) -> None:
    """One line per connection error: while NATS restarts, every reconnect attempt fails,
    and nats-py's own callback logs a traceback for each."""
    log.warning("nats: %s: %s", type(exc).__name__, exc)


def inbox_prefix(user: str) -> str:
    """The inboxes of a NATS user: only theirs to subscribe to (embedded NATS' permissions)."""
    return f"_INBOX_{user}"


def read_credentials(path: Path) -> tuple[str, str]:
    """`user:password` from a credentials file; errors name the file."""
    try:
        text = path.read_text().strip()
    except OSError as exc:
        raise ValueError(f"cannot read NATS credentials {path}: {exc.strerror}") from None
    user, sep, password = text.partition(":")
    if not sep or not user or not password:
        raise ValueError(f"NATS credentials {path}: expected one line 'user:password'")
    return user, password


class ConnectionLost(nats.errors.Error):
    """The connection to NATS broke while a request waited for its answer."""

    def __str__(self) -> str:
        return "nats: connection lost before the answer came"


class Bus:
    """A NATS connection that reconnects forever, plus the cluster's subject prefix."""

    def __init__(self, nc: NATS, prefix: str) -> None:
        self.nc = nc
        # Messages of `subscribe_direct` subscriptions, by subscription id (see there).
        self._direct: wire.DirectHandlers = {}
        wire.install(nc, self._direct)
        self.js: JetStreamContext = nc.jetstream()
        self.prefix = prefix
        # Replies to `request`: one wildcard subscription, one future per request.
        self._reply_prefix = ""
        self._reply_sub: Subscription | None = None
        self._reply_lock = asyncio.Lock()
        self._waiting: dict[str, asyncio.Future[Msg]] = {}
        self._tokens = itertools.count()
        # Tokens whose requests time out at each tick, one timer per tick (see `request`).
        self._expiring: dict[int, list[str]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        # Subjects `request` has checked, and encoded header blocks by their items.
        self._subjects: set[str] = set()
        self._header_blocks: dict[tuple[tuple[str, str], ...], bytes] = {}
        # Requests made while the connection is down: nats-py sends them once it is back.
        self._buffered: set[str] = set()
        # Told of every reconnection (see `on_reconnect`).
        self._reconnect_callbacks: list[Callable[[], None]] = []

    async def _reconnected(self) -> None:
        self._buffered.clear()  # sent now, on the new connection
        log.info("nats: reconnected")
        for callback in list(self._reconnect_callbacks):
            callback()

    async def _disconnected(self) -> None:
        self._lose_requests()
        # nats-py calls this on `close` too, which is no disconnection to report.
        if not self.nc.is_closed:
            log.warning("nats: disconnected; reconnecting")

    def on_reconnect(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call `callback` each time the connection to NATS is made again; returns what
        stops that. A watch needs it: a restarted server has lost every ordered consumer
        (they live in its memory), which nats-py notices only after two idle heartbeats
        went missing."""
        self._reconnect_callbacks.append(callback)
        return lambda: self._reconnect_callbacks.remove(callback)

    @classmethod
    async def connect(
        cls, url: str, *, prefix: str, name: str = "drasim", credentials: Path | None = None
    ) -> Bus:
        """Connect as the NATS user of `credentials` (a file `user:password`, see
        `read_credentials`), or as the URL says. An authenticated user's inboxes are
        `_INBOX_<user>.…`, which the server lets only that user subscribe to, so nobody
        reads another's replies."""
        auth: dict[str, str] = {}
        if credentials is not None:
            user, password = read_credentials(credentials)
            auth = {"user": user, "password": password, "inbox_prefix": inbox_prefix(user)}
        bus: Bus | None = None  # the connection's callbacks go to it once it exists

        async def reconnected() -> None:
            if bus is not None:
                await bus._reconnected()

        async def disconnected() -> None:
            if bus is not None:
                await bus._disconnected()

        nc = await nats.connect(
            url,
            name=name,
            allow_reconnect=True,
            max_reconnect_attempts=-1,
            reconnect_time_wait=0.25,
            connect_timeout=5,
            pending_size=64 * 1024 * 1024,
            error_cb=_log_error,
            disconnected_cb=disconnected,
            reconnected_cb=reconnected,
            **auth,
        )
        bus = cls(nc, prefix)
        return bus

    async def subscribe_direct(
        self, subject: str, handler: Callable[[Msg], None], *, queue: str = ""
    ) -> Subscription:
        """Subscribe `handler`, called with each message as the connection reads it.

        A callback subscription (`nc.subscribe(cb=...)`) passes every message through a
        queue to a task that awaits the callback: for a request or a reply, about as much
        as the rest of receiving it. So `handler` is a plain function, called from the
        connection's read loop: it must not block, and what it raises is logged. Messages
        arriving after `unsubscribe` are dropped, as nats-py drops them. Plain subjects
        only: JetStream's flow control and ordering checks are skipped."""
        sub = await self.nc.subscribe(subject, queue=queue)
        self._direct[wire.subscription_id(sub)] = handler
        return sub

    async def close(self) -> None:
        if not self.nc.is_closed:
            await self.nc.drain()

    async def request(
        self,
        subject: str,
        payload: bytes,
        *,
        timeout: float,
        headers: dict[str, str] | None = None,
    ) -> Msg:
        """`nc.request`, leaner (the API client's hot path): a counter instead of random
        tokens; instead of `wait_for`, timeouts on ticks of `_TIMEOUT_TICK`, one timer per
        tick however many requests it ends (a timer each cost more than the rest of a
        request here); the PUB command built in one go (`wire.pub_frame`), its header block
        encoded once per distinct headers.

        Raises `nats.errors.NoRespondersError` and `nats.errors.TimeoutError` as
        `nc.request` does, what `nc.publish` raises for a bad subject or header, a
        closed connection or an oversized payload, and `ConnectionLost` when the
        connection broke before the answer came.
        """
        if self._reply_sub is None:
            await self._subscribe_replies()
        nc = self.nc
        if subject not in self._subjects:
            if not subject or _BAD_SUBJECT.search(subject):
                raise nats.errors.BadSubjectError
            self._subjects.add(subject)
        hdr = self._header_block(headers) if headers else b""
        if nc.is_closed:
            raise nats.errors.ConnectionClosedError
        if nc.is_draining_pubs:
            raise nats.errors.ConnectionDrainingError
        size = len(payload)
        if size > nc.max_payload:
            raise nats.errors.MaxPayloadError
        token = str(next(self._tokens))
        frame = wire.pub_frame(subject, payload, reply=self._reply_prefix + token, headers=hdr)
        wire.check_pending_room(nc, len(frame))
        loop = self._loop
        assert loop is not None  # set with the reply subscription
        fut: asyncio.Future[Msg] = loop.create_future()
        self._waiting[token] = fut
        if not nc.is_connected:
            self._buffered.add(token)
        tick = math.ceil((loop.time() + timeout) / _TIMEOUT_TICK)
        expiring = self._expiring.get(tick)
        if expiring is None:
            expiring = self._expiring[tick] = []
            loop.call_at(tick * _TIMEOUT_TICK, self._expire, tick)
        expiring.append(token)
        try:
            nc.stats["out_msgs"] += 1  # as `nc.publish` counts
            nc.stats["out_bytes"] += size
            await wire.write(nc, frame)
            msg = await fut
        finally:
            self._waiting.pop(token, None)
            if self._buffered:
                self._buffered.discard(token)
        if msg.headers and msg.headers.get("Status") == _NO_RESPONDERS:
            raise nats.errors.NoRespondersError
        return msg

    def _header_block(self, headers: dict[str, str]) -> bytes:
        """The `NATS/1.0` block of `headers` as `nc.publish` writes it (names trimmed and
        checked, values trimmed with line breaks made spaces); remembered, as the API
        client sends the same few (its actor) with every request."""
        key = tuple(headers.items())
        block = self._header_blocks.get(key)
        if block is None:
            block = wire.header_block(key)
            if len(self._header_blocks) >= _HEADER_BLOCKS_MAX:
                self._header_blocks.clear()
            self._header_blocks[key] = block
        return block

    async def _subscribe_replies(self) -> None:
        async with self._reply_lock:
            if self._reply_sub is not None:
                return
            self._loop = asyncio.get_running_loop()
            prefix = self.nc.new_inbox() + "."
            self._reply_sub = await self.subscribe_direct(prefix + "*", self._on_reply)
            self._reply_prefix = prefix

    def _on_reply(self, msg: Msg) -> None:
        fut = self._waiting.get(msg.subject[len(self._reply_prefix) :])
        if fut is not None and not fut.done():
            fut.set_result(msg)

    def _lose_requests(self) -> None:
        """The connection broke: fail the requests it carried at once, rather than at their
        timeout (to `ApiClient`'s callers a timeout all the same: the outcome is unknown).
        Their answers, if any come, go to the old connection and are lost (the request
        itself may or may not have been served); those made since the break wait, as
        nats-py sends them once it is back."""
        for token, fut in self._waiting.items():
            if token not in self._buffered and not fut.done():
                fut.set_exception(ConnectionLost())

    def _expire(self, tick: int) -> None:
        """Time out the requests of `tick` still waiting for their answer."""
        for token in self._expiring.pop(tick, ()):
            fut = self._waiting.get(token)
            if fut is not None and not fut.done():
                fut.set_exception(nats.errors.TimeoutError())
