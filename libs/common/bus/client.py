"""The one place that imports `nats`: a connection with its JetStream context and prefix."""

from __future__ import annotations

import asyncio
import itertools

import nats
import nats.errors
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.js import JetStreamContext

# The status NATS answers a request with when nobody subscribes to its subject.
_NO_RESPONDERS = "503"


class Bus:
    """A NATS connection that reconnects forever, plus the cluster's subject prefix."""

    def __init__(self, nc: NATS, prefix: str) -> None:
        self.nc = nc
        self.js: JetStreamContext = nc.jetstream()
        self.prefix = prefix
        # Replies to `request`: one wildcard subscription, one future per request.
        self._reply_prefix = ""
        self._reply_sub: Subscription | None = None
        self._reply_lock = asyncio.Lock()
        self._waiting: dict[str, asyncio.Future[Msg]] = {}
        self._tokens = itertools.count()

    @classmethod
    async def connect(cls, url: str, *, prefix: str, name: str = "drasim") -> Bus:
        nc = await nats.connect(
            url,
            name=name,
            allow_reconnect=True,
            max_reconnect_attempts=-1,
            reconnect_time_wait=0.25,
            connect_timeout=5,
            pending_size=64 * 1024 * 1024,
        )
        return cls(nc, prefix)

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
        """`nc.request`, leaner: a counter instead of random tokens and one timer handle
        instead of `wait_for` per request (the API client's hot path).

        Raises `nats.errors.NoRespondersError` and `nats.errors.TimeoutError` as
        `nc.request` does.
        """
        if self._reply_sub is None:
            await self._subscribe_replies()
        token = str(next(self._tokens))
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Msg] = loop.create_future()
        self._waiting[token] = fut
        timer = loop.call_later(timeout, _expire, fut)
        try:
            await self.nc.publish(
                subject, payload, reply=self._reply_prefix + token, headers=headers
            )
            msg = await fut
        finally:
            timer.cancel()
            self._waiting.pop(token, None)
        if msg.headers and msg.headers.get("Status") == _NO_RESPONDERS:
            raise nats.errors.NoRespondersError
        return msg

    async def _subscribe_replies(self) -> None:
        async with self._reply_lock:
            if self._reply_sub is not None:
                return
            prefix = self.nc.new_inbox() + "."
            self._reply_sub = await self.nc.subscribe(prefix + "*", cb=self._on_reply)
            self._reply_prefix = prefix

    async def _on_reply(self, msg: Msg) -> None:
        fut = self._waiting.get(msg.subject[len(self._reply_prefix) :])
        if fut is not None and not fut.done():
            fut.set_result(msg)


def _expire(fut: asyncio.Future[Msg]) -> None:
    if not fut.done():
        fut.set_exception(nats.errors.TimeoutError())
