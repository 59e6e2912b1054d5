"""The apistore's NATS front door: request/reply on `<prefix>.api`, served by a queue group.

Each request runs as its own task so that many are in flight at once and the writer can
commit them together. Answers carry the object JSON; errors carry a `Status` and the
`Drasim-Status` header with its code.
"""

from __future__ import annotations

import asyncio
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


class NatsApi:
    def __init__(self, core: ApiCore, bus: Bus) -> None:
        self._core = core
        self._bus = bus
        self._inflight: set[asyncio.Task[None]] = set()
        self._sub = None

    async def start(self) -> None:
        self._sub = await self._bus.nc.subscribe(
            subjects.api(self._bus.prefix),
            queue=subjects.api_queue_group(),
            cb=self._on_request,
            pending_msgs_limit=1_000_000,
        )

    async def stop(self) -> None:
        if self._sub is not None:
            await self._sub.unsubscribe()
            self._sub = None
        if self._inflight:
            await asyncio.gather(*self._inflight, return_exceptions=True)

    async def _on_request(self, msg: Msg) -> None:
        task = asyncio.create_task(self._serve(msg))
        self._inflight.add(task)
        task.add_done_callback(self._inflight.discard)

    async def _serve(self, msg: Msg) -> None:
        hdrs = msg.headers or {}
        ctx = Context(
            actor=hdrs.get(headers.ACTOR, ""), traceparent=hdrs.get(headers.TRACEPARENT, "")
        )
        try:
            try:
                req = messages.request_decoder.decode(msg.data)
            except msgspec.DecodeError as exc:
                raise errors.BadRequest(f"malformed request: {exc}") from exc
            body = await self._core.handle(req, ctx)
            reply_headers = None
        except errors.ApiError as exc:
            body = _status_encoder.encode(exc.to_status())
            reply_headers = {headers.STATUS_CODE: str(exc.code)}
        except Exception as exc:
            log.exception("request failed")
            body = _status_encoder.encode(errors.InternalError(str(exc)).to_status())
            reply_headers = {headers.STATUS_CODE: "500"}
        if msg.reply:
            await self._bus.nc.publish(msg.reply, body, headers=reply_headers)
