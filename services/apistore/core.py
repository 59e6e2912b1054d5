"""The apistore core: reads, and writes through one group-commit writer.

Both front doors (the NATS request/reply API and the HTTP API) call `ApiCore.handle`.
Writes queue up while the previous transaction commits and then go to Postgres together, one
event per accepted request, in one transaction (group commit); the NATS side never waits on
Postgres per request and Postgres sees few, large transactions.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

import msgspec

from drasim.apistore import (
    admission,
    bootstrappolicy,
    faults,
    limits,
    list_options,
    mutations,
    node_authorizer,
    objectmeta,
    prepare,
    rbac,
    resourcequota,
    strategies,
)
from drasim.apistore.request import Context, key_of, resource_info
from drasim.apistore.store import (
    CompactedError,
    EventRow,
    FutureRevisionError,
    Key,
    ListedObjects,
    ObjectRow,
    Store,
    WriteSession,
)
from drasim.common import codec, errors, quota, selection
from drasim.common import features as gates
from drasim.common.api import apiextensions_v1, customresources, scheduling_v1
from drasim.common.bus import messages
from drasim.common.featuregate import FeatureGate

log = logging.getLogger(__name__)

MAX_BATCH = 512
# How often the PriorityClasses admission and RBAC reads are reloaded (for other
# replicas' writes).
PRIORITY_CLASS_RELOAD_SECONDS = 10.0
# What a list answer holds besides its items (resourceVersion, continue token, counts).
LIST_ENVELOPE_BYTES = 2048
# Namespaces that exist in every cluster.
BUILTIN_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


class ApiCore:
    """Serves every API verb over one `Store`; `on_commit(events)` hands each committed
    batch's events to the outbox. A write whose object would be stored larger than
    `max_object_bytes` is refused (see `limits`). `features` are the cluster's gates: a
    write drops what a disabled one guards (`Strategy.drop_disabled_fields`)."""

    def __init__(
        self,
        store: Store,
        *,
        fault_plan: faults.FaultPlan | None = None,
        on_commit: Callable[[list[EventRow]], None] | None = None,
        max_object_bytes: int = limits.MAX_OBJECT_BYTES,
        features: FeatureGate = gates.DEFAULT,
    ) -> None:
        self.store = store
        self.fault_plan = fault_plan
        self.max_object_bytes = max_object_bytes
        self.features = features
        self._on_commit = on_commit
        # Writes waiting for the writer (a list and an event: cheaper than a Queue per item).
        self._queue: list[_Write] = []
        self._queued = asyncio.Event()
        self._writer: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._batches: set[asyncio.Task[None]] = set()  # batches in flight (two at most)
        # Write batches committed and the requests in them; of the batches, those prepared
        # ahead of the lock, and those prepared ahead but redone under it.
        self.stats = {"batches": 0, "requests": 0, "ahead": 0, "redone": 0}
        self.priority_classes = admission.PriorityClasses()
        self.rbac = rbac.Policy()  # the roles and bindings the HTTP API authorizes by
        self.quotas = resourcequota.QuotaIndex(quota.extended_resource_cache)
        self._reload: asyncio.Task[None] | None = None
        # Set, and replaced by a fresh one, by each commit: what a list waiting for a
        # resourceVersion not written yet waits on.
        self._committed = asyncio.Event()

    async def start(self) -> None:
        # Kept: on Python 3.11 every `get_running_loop()` is a getpid() system call.
        self._loop = asyncio.get_running_loop()
        self._writer = asyncio.create_task(self._write_loop(), name="apistore-writer")
        await self.reload_priority_classes()
        await self.reload_rbac()
        await self.reload_quotas(claims=True)
        await self.serve_custom_resources()
        builtins = [
            ("namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
            for ns in BUILTIN_NAMESPACES
        ]
        builtins += [
            (
                "priorityclasses",
                {
                    "apiVersion": "scheduling.k8s.io/v1",
                    "kind": "PriorityClass",
                    "metadata": {"name": name},
                    "value": value,
                    "description": description,
                },
            )
            for name, (value, description) in scheduling_v1.SYSTEM_PRIORITY_CLASSES.items()
        ]
        builtins += bootstrappolicy.BOOTSTRAP
        for resource, obj in builtins:
            with contextlib.suppress(errors.AlreadyExists):
                await self.handle(
                    messages.Create(resource=resource, object=msgspec.Raw(codec.encode(obj))),
                    Context(actor="apistore"),
                )
        self._reload = asyncio.create_task(self._reload_forever(), name="priority-classes")

    async def reload_priority_classes(self) -> None:
        """Read every PriorityClass as committed (the admission's index)."""
        answer = await self.list(messages.List(resource="priorityclasses"))
        self.priority_classes.replace(codec.decode(answer, admission.PriorityClassList))

    async def serve_custom_resources(self) -> None:
        """Serve the kinds of every CRD as committed (later ones as their writes commit)."""
        customresources.withdraw(None)
        answer = await self.list(messages.List(resource="customresourcedefinitions"))
        for crd in codec.decode(answer, _CustomResourceDefinitionList).items:
            customresources.serve(crd)

    async def reload_rbac(self) -> None:
        """Read every role and binding as committed (the RBAC authorizer's index)."""
        for resource in rbac.RESOURCES:
            self.rbac.replace(resource, await self.list(messages.List(resource=resource)))

    async def reload_quotas(self, *, claims: bool = False) -> None:
        """Read the quotas and DeviceClasses as committed (the quota admission's index),
        and with `claims` the special claims too (at start: afterwards the index follows
        the claims this apistore writes)."""
        resources = ["resourcequotas", "deviceclasses", *(["resourceclaims"] if claims else [])]
        for resource in resources:
            self.quotas.replace(resource, await self.list(messages.List(resource=resource)))

    async def _reload_forever(self) -> None:
        while True:
            await asyncio.sleep(PRIORITY_CLASS_RELOAD_SECONDS)
            try:
                await self.reload_priority_classes()
                await self.reload_rbac()
                await self.reload_quotas()
            except errors.ApiError as exc:  # the database away: keep the last indexes
                log.warning("reloading PriorityClasses, RBAC and quotas failed: %s", exc)

    async def stop(self) -> None:
        self._loop = None
        customresources.withdraw(None)
        if self._reload is not None:
            self._reload.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reload
            self._reload = None
        if self._writer is not None:
            self._writer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._writer
            self._writer = None
        queued, self._queue = self._queue, []
        _fail(queued, errors.ServiceUnavailable("apistore is shutting down"))

    async def handle(
        self, req: messages.Request, ctx: Context, *, max_bytes: int | None = None
    ) -> bytes:
        """Serve one request; returns the answer's JSON or raises an `ApiError`.

        `max_bytes`: what the front door can carry in one answer (NATS' max payload); a
        list page or a page of the event log ends early to fit, and says where the rest
        continues."""
        node = node_authorizer.node_of(ctx.actor, ctx.groups)
        if isinstance(req, messages.Get):
            if node is not None:
                info = resource_info(req.resource)
                return await node_authorizer.authorize_get(
                    node, info, req, self._object, self._node_pods
                )
            return await self.get(req)
        if isinstance(req, messages.List):
            if node is not None:
                node_authorizer.authorize_list(node, resource_info(req.resource), req)
            return await self.list(req, max_bytes=max_bytes)
        if isinstance(req, messages.EventLog):
            if node is not None:
                raise node_authorizer.refuse_event_log(node)
            return await self.event_log(req, max_bytes=max_bytes)
        return await self.submit(req, ctx)

    def submit(self, req: messages.Request, ctx: Context) -> asyncio.Future[bytes]:
        """Queue a write for the group-commit writer; the future gets its answer's JSON or
        the `ApiError`."""
        fut: asyncio.Future[bytes] = (self._loop or asyncio.get_running_loop()).create_future()
        self._queue.append(_Write(req, ctx, fut))
        self._queued.set()
        return fut

    # -- reads ----------------------------------------------------------------------
    async def node_review(
        self, node: str, attrs: rbac.Attributes, field_selector: str = ""
    ) -> node_authorizer.Verdict:
        """The Node authorizer's answer to a node's access review, reading objects as its
        gets do."""
        return await node_authorizer.review(
            node, attrs, field_selector, self._object, self._node_pods
        )

    async def _object(self, resource: str, namespace: str, name: str) -> bytes:
        return await self.get(messages.Get(resource=resource, namespace=namespace, name=name))

    async def _node_pods(self, namespace: str, node: str) -> bytes:
        selector = f"spec.nodeName={node}"
        return await self.list(
            messages.List(resource="pods", namespace=namespace, field_selector=selector)
        )

    async def get(self, req: messages.Get) -> bytes:
        info = resource_info(req.resource)
        key = key_of(info, req.namespace or "default", req.name)
        data = await self.store.select_object(*key)
        if data is None:
            raise errors.not_found(info.plural, req.name, group=info.group)
        return data

    async def list(self, req: messages.List, *, max_bytes: int | None = None) -> bytes:
        """A list, or one page of it, at the state its resourceVersion, resourceVersionMatch
        and continue token ask for (`list_options`); a page ends early to fit `max_bytes`."""
        info = resource_info(req.resource)
        read = list_options.read_for(req, info)
        chosen = selection.Selection(info.plural, req.label_selector, req.field_selector)
        node_field = strategies.for_resource(info.plural).node_field
        listed = await self._select_fresh(
            read,
            lambda: self.store.select_objects(
                info.plural,
                namespace=req.namespace or None if info.namespaced else None,
                node_name=chosen.equals(node_field) if node_field else None,
                name=chosen.equals("metadata.name"),
                after=read.after,
                limit=req.limit,
                keep=None if chosen.everything() else chosen.matches,
                max_bytes=None if max_bytes is None else max_bytes - LIST_ENVELOPE_BYTES,
                at=read.at,
            ),
        )
        token = ""
        if listed.more is not None:
            # The next page reads the same state (upstream's continue token carries it).
            token = list_options.encode_continue(listed.more, listed.resource_version)
        result = messages.ListResult(
            resource_version=listed.resource_version,
            items=[msgspec.Raw(r) for r in listed.objects],
            continue_token=token,
            remaining=listed.remaining,
        )
        return messages.encoder.encode(result)

    async def _select_fresh(
        self, read: list_options.ListRead, select: Callable[[], Awaitable[ListedObjects]]
    ) -> ListedObjects:
        """`select()`, interpreting the store's refusals as upstream does: a compacted
        resourceVersion is 410 Expired; one not written yet (`at`, or `not_older_than`) is
        waited for up to `FRESHNESS_WAIT_SECONDS` (woken by this replica's commits, looked at
        again at the end for other replicas'), then 504 "Too large resource version"."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + list_options.FRESHNESS_WAIT_SECONDS
        while True:
            committed = self._committed
            try:
                listed = await select()
            except CompactedError as exc:
                raise list_options.expired(read) from exc
            except FutureRevisionError as exc:
                current = exc.current
            else:
                if listed.resource_version >= read.not_older_than:
                    return listed
                current = listed.resource_version
            remaining = deadline - loop.time()
            if remaining <= 0:
                wanted = read.at if read.at is not None else read.not_older_than
                raise list_options.too_large_resource_version(wanted, current)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(remaining):
                    await committed.wait()

    async def event_log(self, req: messages.EventLog, *, max_bytes: int | None = None) -> bytes:
        """A page of the event log, paged as lists are: at most `req.limit` events, ending
        early to fit `max_bytes`; `continue_after` is the `after` of the next page."""
        selected = await self.store.select_events(
            gt=req.after,
            lte=req.until or None,
            resource=req.resource or None,
            namespace=req.namespace or None,
            name=req.name or None,
            actor=req.actor or None,
            trace_id=req.trace_id or None,
            limit=min(max(req.limit, 1), 10_000),
            max_bytes=None if max_bytes is None else max_bytes - LIST_ENVELOPE_BYTES,
        )
        rows = selected.events
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
                    time=objectmeta.now_rfc3339(r.created_at),
                    object=msgspec.Raw(r.object),
                )
                for r in rows
            ],
            last_seq=selected.last_seq,
            continue_after=rows[-1].seq if selected.more else 0,
        )
        compaction = selected.compaction
        if compaction is not None and compaction.revision:
            result.compacted = compaction.revision
            if compaction.compacted_at is not None:
                result.compacted_at = objectmeta.now_rfc3339(compaction.compacted_at)
        return messages.encoder.encode(result)

    # -- writes ---------------------------------------------------------------------
    async def _write_loop(self) -> None:
        """Form batches from the queue and run them, two at a time at most.

        A batch runs as soon as the one before it has applied its requests (so the queue
        filled meanwhile) and the one before that has finished, so one batch prepares
        while the previous one writes and commits. See `_run_batch`.
        """
        prev: _Flight | None = None
        try:
            while True:
                while not self._queue:
                    self._queued.clear()
                    await self._queued.wait()
                items = self._queue[:MAX_BATCH]
                del self._queue[:MAX_BATCH]
                flight = _Flight(asyncio.get_running_loop())
                task = asyncio.create_task(self._run_batch(items, prev, flight))
                self._batches.add(task)
                task.add_done_callback(self._batches.discard)
                await asyncio.wait([flight.applied, task], return_when=asyncio.FIRST_COMPLETED)
                if prev is not None:
                    await asyncio.wait([prev.final])
                prev = None if flight.final.done() else flight
        finally:
            for task in list(self._batches):
                task.cancel()
            if self._batches:
                await asyncio.wait(self._batches)

    async def _run_batch(self, items: list[_Write], prev: _Flight | None, flight: _Flight) -> None:
        try:
            await self._commit(items, prev, flight)
        except errors.ApiError as exc:
            _fail(items, exc)
        except asyncio.CancelledError:
            _fail(items, errors.ServiceUnavailable("apistore is shutting down"))
            raise
        except Exception as exc:  # a bug must not kill the writer
            log.exception("write batch failed")
            _fail(items, errors.InternalError(f"write failed: {exc}"))
        finally:
            flight.announce(None)
            flight.finish(False)

    async def _commit(self, items: list[_Write], prev: _Flight | None, flight: _Flight) -> None:
        keys: set[Key] = set()
        ready = []
        for write in items:
            if write.future.cancelled():
                continue
            try:
                write.prepared = prepare.prepare(write.request)
            except errors.ApiError as exc:
                write.future.set_exception(exc)
                continue
            keys.update(write.prepared.keys)
            keys.update(self._quota_keys(write))
            ready.append(write)
        if not ready:
            # Nothing to write: the next batch may build on what the previous one built.
            flight.announce(await prev.applied if prev is not None else None)
            flight.finish(await prev.final if prev is not None else True)
            return
        async with self.store.write_session() as session:
            await self._commit_ready(session, ready, sorted(keys), prev, flight)

    async def _commit_ready(
        self,
        session: WriteSession,
        ready: list[_Write],
        keys: list[Key],
        prev: _Flight | None,
        flight: _Flight,
    ) -> None:
        """Apply and commit one batch.

        With the previous batch still in flight, the batch is prepared ahead of the write
        lock: it reads its rows as committed now, overlays the rows the previous batch
        writes, numbers its events after the previous batch's and applies its requests
        while the previous batch writes and commits. Once that batch has committed exactly
        what it announced, it writes in one statement that takes the lock and writes only
        if the log still ends at the previous batch's last event (nobody else committed in
        between; see `sql.WRITE_BATCH_ALONE`), else it is redone. Without a batch in flight it
        goes the same way from the log's end and its rows as one read found them. A batch
        to redo, and one that deletes (garbage collection reads under the lock), takes the
        lock first, then reads, applies and writes under it. Either way a batch's requests
        see the rows as committed before it, and its events follow the last committed one,
        so commit order is resourceVersion order.
        """
        # (A fault plan counts the writes it sees: a batch is applied once under it.)
        ahead = self.fault_plan is None
        loaded: dict[Key, bytes | None] = {}
        if prev is None:
            if ahead:  # nothing in flight: the log's end and the rows, one snapshot
                after_seq, found = await session.max_seq_and_objects(keys)
                loaded.update(found)
        elif (base := await prev.applied) is None:
            ahead = False  # nothing to build on (the batch before failed or wrote nothing)
        elif ahead:
            after_seq, written = base
            # Rows the previous batch writes are taken from it, not read.
            loaded.update(await session.select_objects([k for k in keys if k not in written]))
            loaded.update(written)
        if ahead:
            batch, results = self._apply(ready, loaded, after_seq + 1)
            upserts, deletes = batch.projection()
            # Garbage collection (which any delete calls for) reads under the lock.
            if not batch.pending_gc() and not deletes:
                flight.announce((batch.last_seq, _written(upserts, deletes)), by=batch)
                if (prev is None or await prev.final) and await session.write_batch_alone(
                    batch.events, upserts, deletes, after_seq=after_seq
                ):
                    self.stats["ahead"] += 1
                    self._finish(ready, batch, results, flight)
                    return
                self.stats["redone"] += 1  # someone else committed first: redo
        if prev is not None:
            await prev.final
        # The quotas of the batch's namespaces as they are now (the batch before may have
        # made one), read under the lock.
        keys = sorted(set(keys).union(*(self._quota_keys(w) for w in ready)))
        async with session.transaction() as txn:
            last_seq, loaded = await txn.max_seq_and_objects(keys)
            batch, results = self._apply(ready, loaded, last_seq + 1)
            gc_ctx = Context(actor="garbage-collector")
            while (pending := batch.pending_gc()) or batch.pending_releases():
                rows = await txn.select_dependents(pending) if pending else {}
                if released := batch.pending_releases():
                    rows.update((await txn.max_seq_and_objects(released))[1])
                batch.collect_garbage(rows, gc_ctx)
            upserts, deletes = batch.projection()
            # The next batch may build on this one while it writes and commits (unless
            # it already built on a first attempt of this batch, see `_finish`).
            flight.announce((batch.last_seq, _written(upserts, deletes)), by=batch)
            await txn.write_batch(batch.events, upserts, deletes)
        self._finish(ready, batch, results, flight)

    def _quota_keys(self, write: _Write) -> list[Key]:
        """The quota rows a write's admission reads: those of its namespace, for a create
        and for an update of the main resource."""
        req = write.request
        if isinstance(req, messages.Create):
            namespace = write.prepared.namespace if write.prepared else ""
        elif isinstance(req, messages.Update | messages.Patch) and not req.subresource:
            namespace = req.namespace or "default"
        else:
            return []
        return self.quotas.keys(namespace) if namespace else []

    def _apply(
        self, ready: list[_Write], loaded: dict[Key, bytes | None], first_seq: int
    ) -> tuple[mutations.Batch, list[bytes | errors.ApiError]]:
        batch = mutations.Batch(
            loaded,
            first_seq=first_seq,
            fault_plan=self.fault_plan,
            priority_classes=self.priority_classes,
            policy=self.rbac,
            quotas=self.quotas,
            max_object_bytes=self.max_object_bytes,
            features=self.features,
        )
        results: list[bytes | errors.ApiError] = []
        for write in ready:
            try:
                results.append(batch.apply(write.request, write.context, write.prepared))
            except errors.ApiError as exc:
                results.append(exc)
            except (msgspec.ValidationError, ValueError, TypeError, AttributeError) as exc:
                log.exception("request failed: %r", write.request)
                results.append(errors.InternalError(f"{type(exc).__name__}: {exc}"))
        return batch, results

    def _finish(
        self,
        ready: list[_Write],
        batch: mutations.Batch,
        results: list[bytes | errors.ApiError],
        flight: _Flight,
    ) -> None:
        """The batch committed: answer its requests, hand its events to the outbox."""
        self.stats["batches"] += 1
        self.stats["requests"] += len(ready)
        for write, result in zip(ready, results, strict=True):
            if write.future.done():
                continue
            if isinstance(result, errors.ApiError):
                write.future.set_exception(result)
            else:
                write.future.set_result(result)
        if batch.events:
            self._committed.set()
            self._committed = asyncio.Event()
            self.priority_classes.observe(batch.events)
            self.rbac.observe(batch.events)
            self.quotas.observe(batch.events)
            _observe_custom_resource_definitions(batch.events)
            if self._on_commit is not None:
                self._on_commit(batch.events)
        # What was announced is what committed, unless a first attempt announced its own.
        flight.finish(flight.announced is batch)


class _CustomResourceDefinitionList(msgspec.Struct):
    items: list[apiextensions_v1.CustomResourceDefinition] = []


def _observe_custom_resource_definitions(events: list[EventRow]) -> None:
    """Serve, change or withdraw the kinds of the CRDs a batch wrote."""
    for ev in events:
        if ev.resource != "customresourcedefinitions":
            continue
        if ev.type == "DELETED":
            customresources.withdraw(ev.name)
        else:
            crd = codec.decode(ev.object, apiextensions_v1.CustomResourceDefinition)
            customresources.serve(crd)


class _Write:
    """A write queued for the writer: the request, who asked, the future its answer goes
    to, and once its batch forms, what `prepare.prepare` found for it."""

    __slots__ = ("context", "future", "prepared", "request")

    def __init__(
        self, request: messages.Request, context: Context, future: asyncio.Future[bytes]
    ) -> None:
        self.request = request
        self.context = context
        self.future = future
        self.prepared: prepare.PreparedWrite | None = None


class _Flight:
    """A batch in the write pipeline, as the next batch sees it.

    `applied`: what the batch will commit, for the next batch to build on: the seq of its
    last event and the rows it writes (None for deleted ones); None when there is nothing
    to build on yet. `final`: True once the batch committed exactly what it announced
    (False when it failed or had to redo its work).
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.applied: asyncio.Future[tuple[int, dict[Key, bytes | None]] | None] = (
            loop.create_future()
        )
        self.final: asyncio.Future[bool] = loop.create_future()
        self.announced: mutations.Batch | None = None  # the attempt that announced

    def announce(
        self,
        state: tuple[int, dict[Key, bytes | None]] | None,
        *,
        by: mutations.Batch | None = None,
    ) -> None:
        """Only the first announcement counts: the next batch may already build on it."""
        if not self.applied.done():
            self.announced = by
            self.applied.set_result(state)

    def finish(self, committed: bool) -> None:
        if not self.final.done():
            self.final.set_result(committed)


def _written(upserts: list[ObjectRow], deletes: list[Key]) -> dict[Key, bytes | None]:
    rows: dict[Key, bytes | None] = {(r.resource, r.namespace, r.name): r.object for r in upserts}
    rows.update(dict.fromkeys(deletes))
    return rows


def _fail(items: list[_Write], exc: errors.ApiError) -> None:
    for write in items:
        if not write.future.done():
            write.future.set_exception(exc)
