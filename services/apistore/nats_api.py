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
import time
from typing import TYPE_CHECKING

import msgspec
from nats.aio.msg import Msg
from opentelemetry.trace import Span

from drasim.apistore import limits, nats_authz, spans
from drasim.apistore.core import ApiCore
from drasim.apistore.request import Context, resource_info
from drasim.common import errors
from drasim.common.bus import headers, messages, subjects, wire
from drasim.common.bus.client import Bus

if TYPE_CHECKING:
    from drasim.apistore.metrics import RequestMetrics

log = logging.getLogger(__name__)
_status_encoder = msgspec.json.Encoder()

_READS = (messages.Get, messages.List, messages.EventLog)

Reply = tuple[str, bytes, dict[str, str] | None]
# Room for a PUB command's own line in a frame (the server limits the payload; send_frames
# checks the whole frame, so a body this close to the limit goes through `publish`).
_FRAME_SLACK = 256


def _error_reply(exc: BaseException) -> tuple[bytes, dict[str, str]]:
    if isinstance(exc, errors.ApiError):
        return _status_encoder.encode(exc.to_status()), {headers.STATUS_CODE: str(exc.code)}
    log.error("request failed", exc_info=exc)
    return _status_encoder.encode(errors.InternalError(str(exc)).to_status()), {
        headers.STATUS_CODE: "500"
    }


def _too_large(size: int, max_payload: int) -> errors.ApiError:
    """An answer NATS cannot carry is answered with this, not left to time out."""
    return errors.InternalError(
        f"the answer ({size} bytes) exceeds the bus's maximum payload ({max_payload} bytes)"
    )


class NatsApi:
    def __init__(
        self, core: ApiCore, bus: Bus, *, request_metrics: RequestMetrics | None = None
    ) -> None:
        self._core = core
        self._bus = bus
        self._metrics = request_metrics  # every answered request is counted and timed
        self._inflight: set[asyncio.Task[None]] = set()
        self._writes: set[asyncio.Future[bytes]] = set()
        self._replies: list[Reply] = []
        self._replier: asyncio.Task[None] | None = None
        self._sub = None

    async def start(self) -> None:
        # Requests handed over as the connection reads them (`_on_request` only queues
        # them), without nats-py's queue and task per message.
        self._sub = await self._bus.subscribe_direct(
            subjects.api_all(self._bus.prefix), self._on_request, queue=subjects.api_queue_group()
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

    def _on_request(self, msg: Msg) -> None:
        started = time.perf_counter()
        hdrs = msg.headers or {}
        if len(msg.data) > limits.MAX_REQUEST_BODY_BYTES:  # as an HTTP body, before decoding
            self._answer(msg.reply, *_error_reply(limits.request_entity_too_large()))
            return
        try:
            req = messages.request_decoder.decode(msg.data)
        except msgspec.DecodeError as exc:
            self._answer(msg.reply, *_error_reply(errors.BadRequest(f"malformed request: {exc}")))
            return
        # Who asks is in the subject, where NATS' permissions vouch for it (a header
        # would be whatever the sender wrote).
        actor = subjects.actor_of_api(msg.subject)
        read = isinstance(req, _READS)
        # The request's server span; its event stores the span's traceparent.
        span, traceparent = spans.start_request(
            req, hdrs.get(headers.TRACEPARENT, ""), actor=actor, write=not read
        )
        # What the actor may do, decided once for reads and writes alike.
        try:
            groups = nats_authz.authorize(self._core.rbac, actor, req)
        except errors.ApiError as exc:
            spans.end_request(span, req, error=exc)
            if self._metrics is not None:
                self._metrics.observe_nats(req, started, exc)
            self._answer(msg.reply, *_error_reply(exc))
            return
        ctx = Context(actor=actor, traceparent=traceparent, groups=groups)
        if read:
            task = asyncio.create_task(self._serve_read(msg.reply, req, ctx, span, started))
            self._inflight.add(task)
            task.add_done_callback(self._inflight.discard)
            return
        fut = self._core.submit(req, ctx)
        self._writes.add(fut)
        fut.add_done_callback(functools.partial(self._write_done, msg.reply, req, span, started))

    async def _serve_read(
        self, reply: str, req: messages.Request, ctx: Context, span: Span | None, started: float
    ) -> None:
        try:
            body = await self._core.handle(
                req, ctx, max_bytes=self._bus.nc.max_payload - _FRAME_SLACK
            )
        except Exception as exc:
            spans.end_request(span, req, error=exc)
            if self._metrics is not None:
                self._metrics.observe_nats(req, started, exc)
            self._answer(reply, *_error_reply(exc))
        else:
            spans.end_request(span, req)
            if self._metrics is not None:
                self._metrics.observe_nats(req, started)
            self._answer(reply, body, None)

    def _write_done(
        self,
        reply: str,
        req: messages.Request,
        span: Span | None,
        started: float,
        fut: asyncio.Future[bytes],
    ) -> None:
        self._writes.discard(fut)
        if fut.cancelled():
            spans.end_request(span, req, error=errors.ServiceUnavailable("cancelled"))
            return
        exc = fut.exception()
        if self._metrics is not None:
            self._metrics.observe_nats(req, started, exc)
        if exc is None:
            spans.end_request(span, req, body=fut.result())
            delay = self._planned_reply_delay(req)
            if delay:
                asyncio.get_running_loop().call_later(
                    delay, self._answer, reply, fut.result(), None
                )
                return
            self._answer(reply, fut.result(), None)
        else:
            spans.end_request(span, req, error=exc)
            self._answer(reply, *_error_reply(exc))

    def _planned_reply_delay(self, req: messages.Request) -> float:
        """A fault plan may hold back the answer to an applied write (see `faults`)."""
        plan = self._core.fault_plan
        if plan is None:
            return 0.0
        try:
            resource = resource_info(req.resource).plural
        except errors.ApiError:
            return 0.0
        verb = type(req).__struct_config__.tag
        return plan.reply_delay(resource, str(verb), getattr(req, "subresource", ""))

    def _answer(self, reply: str, body: bytes, hdrs: dict[str, str] | None) -> None:
        if not reply:
            return
        self._replies.append((reply, body, hdrs))
        if self._replier is None:
            self._replier = asyncio.get_running_loop().create_task(self._send_answers())

    async def _send_answers(self) -> None:
        """Publish the queued answers (one task per burst of answers, not one per request).

        Answers without headers go out as protocol commands handed to the connection at
        once (`wire.send_frames`): a `publish` each cost more than the rest of answering.
        """
        nc = self._bus.nc
        try:
            while self._replies:
                replies, self._replies = self._replies, []
                frames = []
                for reply, body, hdrs in replies:
                    if len(body) + _FRAME_SLACK > nc.max_payload:
                        body, hdrs = _error_reply(_too_large(len(body), nc.max_payload))
                    if hdrs is None:
                        frames.append(wire.pub_frame(reply, body))
                        continue
                    try:
                        await nc.publish(reply, body, headers=hdrs)
                    except Exception:
                        log.exception("could not answer a request")
                if frames:
                    try:
                        await wire.send_frames(nc, frames)
                    except Exception:
                        log.exception("could not answer %d requests", len(frames))
        finally:
            self._replier = None
