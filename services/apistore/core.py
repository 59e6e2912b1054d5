"""The apistore core: reads, and writes through one group-commit writer.

Both front doors (the NATS request/reply API and the HTTP API) call `ApiCore.handle`.
Writes queue up while the previous transaction commits and then go to Postgres together, one
event per accepted request, in one transaction (group commit); the NATS side never waits on
Postgres per request and Postgres sees few, large transactions.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
from collections.abc import Callable
from typing import Any

import msgspec

from drasim.apistore import faults, mutations, strategy
from drasim.apistore.mutations import Context
from drasim.apistore.store import Store
from drasim.common import codec, errors, labels
from drasim.common.bus import messages

log = logging.getLogger(__name__)

MAX_BATCH = 512

# Field selectors served per resource (Kubernetes serves a few per kind, always
# metadata.name and metadata.namespace).
_FIELD_SELECTORS: dict[str, set[str]] = {
    "pods": {"spec.nodeName", "status.phase", "spec.schedulerName"},
    "resourceslices": {"spec.nodeName", "spec.driver"},
    "events": {"involvedObject.name", "involvedObject.kind", "involvedObject.uid", "reason"},
}


class _MetaLabels(msgspec.Struct):
    labels: dict[str, str] | None = None
    name: str = ""
    namespace: str = ""


class _View(msgspec.Struct):
    """The few fields list filtering reads, decoded instead of the whole object."""

    metadata: _MetaLabels = msgspec.field(default_factory=_MetaLabels)
    spec: dict[str, Any] | None = None
    status: dict[str, Any] | None = None
    involvedObject: dict[str, Any] | None = None  # noqa: N815
    reason: str | None = None


_view_decoder = msgspec.json.Decoder(_View)


def _field_value(view: _View, path: str) -> str:
    head, _, tail = path.partition(".")
    if head == "metadata":
        return getattr(view.metadata, tail, "") or ""
    if head == "reason":
        return view.reason or ""
    source = {"spec": view.spec, "status": view.status, "involvedObject": view.involvedObject}
    value = (source.get(head) or {}).get(tail, "")
    return "" if value is None else str(value)


class ApiCore:
    """Serves every API verb over one `Store`; `on_commit(seq)` wakes the outbox."""

    def __init__(
        self,
        store: Store,
        *,
        fault_plan: faults.FaultPlan | None = None,
        on_commit: Callable[[int], None] | None = None,
    ) -> None:
        self.store = store
        self.fault_plan = fault_plan
        self._on_commit = on_commit
        self._queue: asyncio.Queue[tuple[messages.Request, Context, asyncio.Future[bytes]]] = (
            asyncio.Queue()
        )
        self._writer: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._writer = asyncio.create_task(self._write_loop(), name="apistore-writer")
        for ns in strategy.BUILTIN_NAMESPACES:
            body = codec.encode({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
            with contextlib.suppress(errors.AlreadyExists):
                await self.handle(
                    messages.Create(resource="namespaces", object=msgspec.Raw(body)),
                    Context(actor="apistore"),
                )

    async def stop(self) -> None:
        if self._writer is not None:
            self._writer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._writer
            self._writer = None
        while not self._queue.empty():
            _, _, fut = self._queue.get_nowait()
            if not fut.done():
                fut.set_exception(errors.ServiceUnavailable("apistore is shutting down"))

    async def handle(self, req: messages.Request, ctx: Context) -> bytes:
        """Serve one request; returns the answer's JSON or raises an `ApiError`."""
        if isinstance(req, messages.Get):
            return await self.get(req)
        if isinstance(req, messages.List):
            return await self.list(req)
        if isinstance(req, messages.EventLog):
            return await self.event_log(req)
        fut: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        self._queue.put_nowait((req, ctx, fut))
        return await fut

    # -- reads ----------------------------------------------------------------------
    async def get(self, req: messages.Get) -> bytes:
        info = mutations.resource_info(req.resource)
        key = mutations.key_of(info, req.namespace or "default", req.name)
        data = await self.store.select_object(*key)
        if data is None:
            raise errors.NotFound(
                f'{mutations._qualified(info)} "{req.name}" not found',
                kind=info.plural,
                name=req.name,
                group=info.group,
            )
        return data

    async def list(self, req: messages.List) -> bytes:
        info = mutations.resource_info(req.resource)
        selector = labels.parse(req.label_selector)
        fields = labels.parse_field_selector(req.field_selector)
        allowed = {"metadata.name", "metadata.namespace"} | _FIELD_SELECTORS.get(info.plural, set())
        for path in fields:
            if path not in allowed:
                raise errors.BadRequest(
                    f'field label not supported: {path} ("{path}" is not a known field selector '
                    f"for {info.plural})"
                )
        node = fields.get("spec.nodeName")
        name = fields.get("metadata.name")
        after = None
        if req.continue_token:
            try:
                ns, _, last = base64.urlsafe_b64decode(req.continue_token).decode().partition("/")
            except ValueError as exc:
                raise errors.BadRequest("invalid continue token") from exc
            after = (ns, last)
        rv, rows = await self.store.select_objects(
            info.plural,
            namespace=req.namespace or None if info.namespaced else None,
            node_name=node[1]
            if node and node[0] == "=" and info.plural in ("pods", "resourceslices")
            else None,
            name=name[1] if name and name[0] == "=" else None,
            after=after,
        )
        if fields or not selector.empty():
            kept = []
            for data in rows:
                view = _view_decoder.decode(data)
                if not selector.matches(view.metadata.labels):
                    continue
                if all(
                    (_field_value(view, path) == value) == (op == "=")
                    for path, (op, value) in fields.items()
                ):
                    kept.append(data)
            rows = kept
        token, remaining = "", 0
        if req.limit and len(rows) > req.limit:
            remaining = len(rows) - req.limit
            rows = rows[: req.limit]
            last = _view_decoder.decode(rows[-1]).metadata
            token = base64.urlsafe_b64encode(f"{last.namespace}/{last.name}".encode()).decode()
        result = messages.ListResult(
            resource_version=rv,
            items=[msgspec.Raw(r) for r in rows],
            continue_token=token,
            remaining=remaining,
        )
        return messages.encoder.encode(result)

    async def event_log(self, req: messages.EventLog) -> bytes:
        rows = await self.store.select_events(
            gt=req.after,
            lte=req.until or None,
            resource=req.resource or None,
            namespace=req.namespace or None,
            name=req.name or None,
            actor=req.actor or None,
            trace_id=req.trace_id or None,
            limit=min(max(req.limit, 1), 10_000),
        )
        result = messages.EventLogResult(
            events=[
                messages.LoggedEvent(
                    seq=r.seq,
                    type=r.type,
                    resource=r.resource,
                    namespace=r.namespace,
                    name=r.name,
                    uid=r.uid,
                    actor=r.actor,
                    traceparent=r.traceparent,
                    time=mutations.now_rfc3339(r.created_at),
                    object=msgspec.Raw(r.object),
                )
                for r in rows
            ],
            last_seq=await self.store.max_seq(),
        )
        return messages.encoder.encode(result)

    # -- writes ---------------------------------------------------------------------
    async def _write_loop(self) -> None:
        while True:
            items = [await self._queue.get()]
            while len(items) < MAX_BATCH and not self._queue.empty():
                items.append(self._queue.get_nowait())
            try:
                await self._commit(items)
            except errors.ApiError as exc:
                for _, _, fut in items:
                    if not fut.done():
                        fut.set_exception(exc)
            except Exception as exc:  # a bug must not kill the writer
                log.exception("write batch failed")
                for _, _, fut in items:
                    if not fut.done():
                        fut.set_exception(errors.InternalError(f"write failed: {exc}"))

    async def _commit(
        self, items: list[tuple[messages.Request, Context, asyncio.Future[bytes]]]
    ) -> None:
        keys: set[tuple[str, str, str]] = set()
        ready = []
        for req, ctx, fut in items:
            if fut.cancelled():
                continue
            try:
                keys.update(mutations.prepare_keys(req))
            except errors.ApiError as exc:
                fut.set_exception(exc)
                continue
            ready.append((req, ctx, fut))
        if not ready:
            return
        results: list[bytes | errors.ApiError] = []
        async with self.store.write_transaction() as txn:
            first_seq = await txn.max_seq() + 1
            loaded = await txn.select_objects(sorted(keys))
            batch = mutations.Batch(loaded, first_seq=first_seq, fault_plan=self.fault_plan)
            for req, ctx, _ in ready:
                try:
                    results.append(batch.apply(req, ctx))
                except errors.ApiError as exc:
                    results.append(exc)
                except (msgspec.ValidationError, ValueError, TypeError, AttributeError) as exc:
                    log.exception("request failed: %r", req)
                    results.append(errors.InternalError(f"{type(exc).__name__}: {exc}"))
            gc_ctx = Context(actor="garbage-collector")
            while pending := batch.pending_gc():
                batch.collect_garbage(await txn.select_dependents(pending), gc_ctx)
            upserts, deletes = batch.projection()
            await txn.insert_events(batch.events)
            await txn.upsert_objects(upserts)
            await txn.delete_objects(deletes)
        for (_, _, fut), result in zip(ready, results, strict=True):
            if fut.done():
                continue
            if isinstance(result, errors.ApiError):
                fut.set_exception(result)
            else:
                fut.set_result(result)
        if batch.events and self._on_commit is not None:
            self._on_commit(batch.events[-1].seq)
