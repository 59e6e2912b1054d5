"""Typed async client of the apistore over NATS: every service talks to the cluster through it
(and watches it through `drasim.common.watch`).

bus = await Bus.connect(url, prefix="drasim", name="scheduler")
api = ApiClient(bus, actor="system:kube-scheduler")
pod = await api.get(core_v1.Pod, "my-pod", namespace="default")
await api.bind(pod, "worker-1")
"""

from __future__ import annotations

from typing import Any, TypeVar

import msgspec
import nats.errors
import nats.js.errors

from drasim.common import codec, errors, tracing
from drasim.common.api import registry
from drasim.common.api.meta_v1 import KubeObject
from drasim.common.bus import headers, messages, subjects
from drasim.common.bus.client import Bus, ConnectionLost

T = TypeVar("T", bound=KubeObject)

_status_decoder = msgspec.json.Decoder(errors.Status)
# Objects per list page: ~1 KiB each keeps a page well under NATS' 1 MiB payload limit.
LIST_PAGE = 500


def _span_name(req: messages.Request) -> str:
    """`create pods`, `patch pods/status`: a request's CLIENT span name."""
    verb = type(req).__struct_config__.tag
    subresource = getattr(req, "subresource", "")
    return f"{verb} {req.resource}/{subresource}" if subresource else f"{verb} {req.resource}"


class ApiClient:
    """Request/reply client of the apistore; `actor` is recorded with every write."""

    def __init__(self, bus: Bus, *, actor: str, timeout: float = 10.0) -> None:
        self.bus = bus
        self.actor = actor
        self.timeout = timeout

    @property
    def actor(self) -> str:
        return self._actor

    @actor.setter
    def actor(self, actor: str) -> None:
        """Who the requests act as: their subject says it (`subjects.api`), and the bus'
        permissions decide whether this connection may."""
        self._actor = actor
        self._subject = subjects.api(self.bus.prefix, actor)

    async def request(self, req: messages.Request, *, traceparent: str = "") -> bytes:
        """Send one API request; answers with the body or raises the `ApiError` it carried.

        The request continues `traceparent`, or else the current span's trace (under a
        CLIENT span of its own when the current span records).
        """
        span = None
        if not traceparent:
            span, traceparent = tracing.start_client_span(_span_name, req)
        hdrs = {headers.TRACEPARENT: traceparent} if traceparent else None
        if span is None:
            return await self._send(req, hdrs)
        try:
            data = await self._send(req, hdrs)
        except BaseException as exc:
            tracing.end(span, exc)
            raise
        tracing.end(span)
        return data

    async def _send(self, req: messages.Request, hdrs: dict[str, str] | None) -> bytes:
        try:
            msg = await self.bus.request(
                self._subject, messages.encoder.encode(req), timeout=self.timeout, headers=hdrs
            )
        except nats.errors.NoRespondersError as exc:
            raise errors.ServiceUnavailable("no apistore is serving") from exc
        except nats.errors.TimeoutError as exc:
            raise errors.Timeout(f"apistore did not answer within {self.timeout}s") from exc
        except ConnectionLost as exc:
            # As for a request that timed out, the outcome is unknown (504 says "may still
            # be processing"): a binder sends the binding again, PreBind keeps the devices.
            raise errors.Timeout(
                "the connection to NATS broke before the apistore answered; the request "
                "may or may not have been served"
            ) from exc
        except nats.errors.MaxPayloadError as exc:  # refused before it left, as by the server
            raise errors.RequestEntityTooLarge(
                f"Request entity too large: limit is {self.bus.nc.max_payload}"
            ) from exc
        if msg.headers and headers.STATUS_CODE in msg.headers:
            raise errors.ApiError.from_status(_status_decoder.decode(msg.data))
        return msg.data

    # -- typed verbs -----------------------------------------------------------------
    async def create(self, obj: T, *, namespace: str = "", dry_run: bool = False) -> T:
        info = registry.by_type(type(obj))
        data = await self.request(
            messages.Create(
                resource=info.plural,
                namespace=namespace or obj.metadata.namespace or "",
                object=msgspec.Raw(codec.encode(obj)),
                dry_run=dry_run,
            )
        )
        return codec.decode(data, info.type)

    async def get(self, type_: type[T], name: str, *, namespace: str = "") -> T:
        info = registry.by_type(type_)
        data = await self.request(
            messages.Get(resource=info.plural, namespace=namespace, name=name)
        )
        return codec.decode(data, type_)

    async def list(
        self,
        type_: type[T],
        *,
        namespace: str = "",
        label_selector: str = "",
        field_selector: str = "",
    ) -> tuple[list[T], int]:
        """All matching objects, and the resourceVersion the list is of.

        Lists come in pages of `LIST_PAGE` objects, so no answer outgrows the NATS payload
        limit; every page is of the first page's state (the continue token carries its
        resourceVersion). If the log is compacted past it meanwhile (410 Expired), the list
        starts again, as client-go's pager lists again in full.
        """
        info = registry.by_type(type_)
        items: list[T] = []
        first_rv: int | None = None
        token = ""
        while True:
            try:
                data = await self.request(
                    messages.List(
                        resource=info.plural,
                        namespace=namespace,
                        label_selector=label_selector,
                        field_selector=field_selector,
                        limit=LIST_PAGE,
                        continue_token=token,
                    )
                )
            except errors.Expired:
                if not token:
                    raise
                items, first_rv, token = [], None, ""
                continue
            result = messages.list_result_decoder.decode(data)
            items.extend(codec.decode(item, type_) for item in result.items)
            if first_rv is None:
                first_rv = result.resource_version
            token = result.continue_token
            if not token:
                return items, first_rv

    async def update(self, obj: T, *, subresource: str = "") -> T:
        """Replace the object; a stale `metadata.resourceVersion` raises `Conflict`."""
        info = registry.by_type(type(obj))
        data = await self.request(
            messages.Update(
                resource=info.plural,
                namespace=obj.metadata.namespace or "",
                name=obj.metadata.name,
                object=msgspec.Raw(codec.encode(obj)),
                subresource=subresource,
            )
        )
        return codec.decode(data, info.type)

    async def update_status(self, obj: T) -> T:
        return await self.update(obj, subresource="status")

    async def patch(
        self,
        type_: type[T],
        name: str,
        patch: Any,
        *,
        namespace: str = "",
        subresource: str = "",
        patch_type: messages.PatchType = "merge",
        traceparent: str = "",
    ) -> T:
        info = registry.by_type(type_)
        data = await self.request(
            messages.Patch(
                resource=info.plural,
                namespace=namespace,
                name=name,
                patch=msgspec.Raw(msgspec.json.encode(patch)),
                patch_type=patch_type,
                subresource=subresource,
            ),
            traceparent=traceparent,
        )
        return codec.decode(data, type_)

    async def delete(
        self,
        type_: type[T],
        name: str,
        *,
        namespace: str = "",
        grace_period_seconds: int | None = None,
        propagation_policy: str = "",
        uid: str = "",
        resource_version: str = "",
    ) -> T:
        """Delete; answers the object as it is now (terminating, or as it was when removed)."""
        info = registry.by_type(type_)
        data = await self.request(
            messages.Delete(
                resource=info.plural,
                namespace=namespace,
                name=name,
                grace_period_seconds=grace_period_seconds,
                propagation_policy=propagation_policy,
                precondition_uid=uid,
                precondition_resource_version=resource_version,
            )
        )
        return codec.decode(data, type_)

    async def bind(self, pod: KubeObject, node_name: str, *, traceparent: str = "") -> Any:
        """pods/binding: assign the pod to a node (fails with Conflict if already bound)."""
        info = registry.by_plural("pods")
        data = await self.request(
            messages.Bind(
                resource="pods",
                namespace=pod.metadata.namespace or "default",
                name=pod.metadata.name,
                node_name=node_name,
                uid=pod.metadata.uid or "",
            ),
            traceparent=traceparent,
        )
        return codec.decode(data, info.type)


async def stream_bounds(bus: Bus) -> tuple[int, int]:
    """(first, last) sequence the event stream holds now."""
    try:
        info = await bus.js.stream_info(subjects.stream(bus.prefix))
    except nats.js.errors.NotFoundError as exc:
        raise errors.ServiceUnavailable("the event stream does not exist yet") from exc
    return info.state.first_seq, info.state.last_seq
