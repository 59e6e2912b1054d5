"""The apistore's NATS front door: request/reply on `<prefix>.api`, served by a queue group.

Many requests are in flight at once so that the writer can commit them together. A write
costs no task of its own: the subscription's callback queues it for the writer and the
answer goes out when its future completes (answers of one batch are sent together). Reads,
which wait on Postgres, each run as a task. Answers carry the object JSON; errors carry a
`Status` and the `Drasim-Status` header with its code.
"""

from __future__ import annotations

import asyncio
import functools
import logging

import msgspec
from nats.aio.msg import Msg

from drasim.apistore.core import ApiCore
from drasim.apistore.mutations import Context
from drasim.common import errors
from drasim.common.bus import headers, messages, subjects
from drasim.common.bus.client import Bus

log = logging.getLogger(__name__)
_status_encoder = msgspec.json.Encoder()

_READS = (messages.Get, messages.List, messages.EventLog)

Reply = tuple[str, bytes, dict[str, str] | None]


def _error_reply(exc: BaseException) -> tuple[bytes, dict[str, str]]:
    if isinstance(exc, errors.ApiError):
        return _status_encoder.encode(exc.to_status()), {headers.STATUS_CODE: str(exc.code)}
    log.error("request failed", exc_info=exc)
    return _status_encoder.encode(errors.InternalError(str(exc)).to_status()), {
        headers.STATUS_CODE: "500"
    }


class NatsApi:
    def __init__(self, core: ApiCore, bus: Bus) -> None:
        self._core = core
        self._bus = bus
        self._inflight: set[asyncio.Task[None]] = set()
        self._writes: set[asyncio.Future[bytes]] = set()
        self._replies: list[Reply] = []
        self._replier: asyncio.Task[None] | None = None
        self._sub = None

    async def start(self) -> None:
        self._sub = await self._bus.nc.subscribe(
            subjects.api(self._bus.prefix),
            queue=subjects.api_queue_group(),
            cb=self._on_request,
            pending_msgs_limit=1_000_000,
        )
        # Serving once started: the server has the subscription before the first request.
        # Twice: nats-py writes the PING of a flush ahead of commands still buffered (the
        # SUB); the second PING goes out after them, so its PONG means the SUB is in place.
        await self._bus.nc.flush()
        await self._bus.nc.flush()

    async def stop(self) -> None:
        if self._sub is not None:
            await self._sub.unsubscribe()
            self._sub = None
        if self._inflight or self._writes:
            await asyncio.gather(*self._inflight, *self._writes, return_exceptions=True)
        await asyncio.sleep(0)  # let the last writes' done-callbacks queue their answers
        if self._replier is not None:
            await asyncio.gather(self._replier, return_exceptions=True)

    async def _on_request(self, msg: Msg) -> None:
        hdrs = msg.headers or {}
        ctx = Context(
            actor=hdrs.get(headers.ACTOR, ""), traceparent=hdrs.get(headers.TRACEPARENT, "")
        )
        try:
            req = messages.request_decoder.decode(msg.data)
        except msgspec.DecodeError as exc:
            self._answer(msg.reply, *_error_reply(errors.BadRequest(f"malformed request: {exc}")))
            return
        if isinstance(req, _READS):
            task = asyncio.create_task(self._serve_read(msg.reply, req, ctx))
            self._inflight.add(task)
            task.add_done_callback(self._inflight.discard)
            return
        fut = self._core.submit(req, ctx)
        self._writes.add(fut)
        fut.add_done_callback(functools.partial(self._write_done, msg.reply))

    async def _serve_read(self, reply: str, req: messages.Request, ctx: Context) -> None:
        try:
            body = await self._core.handle(req, ctx)
        except Exception as exc:
            self._answer(reply, *_error_reply(exc))
        else:
            self._answer(reply, body, None)

    def _write_done(self, reply: str, fut: asyncio.Future[bytes]) -> None:
        self._writes.discard(fut)
        if fut.cancelled():
            return
        exc = fut.exception()
        if exc is None:
            self._answer(reply, fut.result(), None)
        else:
            self._answer(reply, *_error_reply(exc))

    def _answer(self, reply: str, body: bytes, hdrs: dict[str, str] | None) -> None:
        if not reply:
            return
        self._replies.append((reply, body, hdrs))
        if self._replier is None:
            self._replier = asyncio.get_running_loop().create_task(self._send_answers())

    async def _send_answers(self) -> None:
        """Publish the queued answers (one task per burst of answers, not one per request)."""
        try:
            while self._replies:
                replies, self._replies = self._replies, []
                for reply, body, hdrs in replies:
                    try:
                        await self._bus.nc.publish(reply, body, headers=hdrs)
                    except Exception:
                        log.exception("could not answer a request")
        finally:
            self._replier = None
