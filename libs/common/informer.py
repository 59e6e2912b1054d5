"""Informers: list + watch one resource into a local cache, calling handlers on every change.

The three watch layers follow kopf: `Informer.run` retries forever (backoff on errors,
resume from the last resourceVersion seen); `_list_then_watch` lists, marks the cache
synced, then watches from the list's resourceVersion and returns on `Expired` so `run`
relists; the watch itself is `ApiClient.watch`.

Handlers keep their Kubernetes signatures; the trace of the event they are called for is
`event_traceparent()`, so the work they start can continue the write that caused it.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from drasim.common import errors
from drasim.common.api.meta_v1 import KubeObject
from drasim.common.client import ApiClient

T = TypeVar("T", bound=KubeObject)
log = logging.getLogger(__name__)

Key = tuple[str, str]  # (namespace, name)

_event_traceparent: contextvars.ContextVar[str] = contextvars.ContextVar(
    "drasim_event_traceparent", default=""
)


def event_traceparent() -> str:
    """Inside an informer handler: the `traceparent` of the event being handled ('' for
    objects a list delivered, or outside a handler)."""
    return _event_traceparent.get()


def _version(obj: KubeObject) -> int:
    return int(obj.metadata.resource_version or 0)


def key_of(obj: KubeObject) -> Key:
    return (obj.metadata.namespace or "", obj.metadata.name)


class Informer(Generic[T]):
    """A cache of one resource kept current by list+watch.

    Handlers run synchronously, in event order, after the cache is updated:
    `on_add(obj)`, `on_update(old, new)`, `on_delete(obj)`.
    """

    def __init__(
        self,
        client: ApiClient,
        type_: type[T],
        *,
        namespace: str = "",
        node: str | None = None,
        on_add: Callable[[T], Any] | None = None,
        on_update: Callable[[T, T], Any] | None = None,
        on_delete: Callable[[T], Any] | None = None,
    ) -> None:
        self.client = client
        self.type = type_
        self.namespace = namespace
        self.node = node
        self.cache: dict[Key, T] = {}
        self.resource_version = 0
        self.synced = asyncio.Event()
        self._handlers_add = [on_add] if on_add else []
        self._handlers_update = [on_update] if on_update else []
        self._handlers_delete = [on_delete] if on_delete else []
        self._task: asyncio.Task[None] | None = None

    def add_handlers(
        self,
        *,
        on_add: Callable[[T], Any] | None = None,
        on_update: Callable[[T, T], Any] | None = None,
        on_delete: Callable[[T], Any] | None = None,
    ) -> None:
        if on_add:
            self._handlers_add.append(on_add)
        if on_update:
            self._handlers_update.append(on_update)
        if on_delete:
            self._handlers_delete.append(on_delete)

    def start(self) -> asyncio.Task[None]:
        self._task = asyncio.create_task(self.run(), name=f"informer-{self.type.__name__}")
        return self._task

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def wait_synced(self, timeout: float | None = None) -> None:
        await asyncio.wait_for(self.synced.wait(), timeout)

    def get(self, name: str, namespace: str = "") -> T | None:
        return self.cache.get((namespace, name))

    def list(self) -> list[T]:
        return list(self.cache.values())

    async def run(self) -> None:
        delay = 0.1
        while True:
            try:
                if not self.synced.is_set() or self.resource_version == 0:
                    await self._relist()
                await self._watch()
                delay = 0.1
            except errors.Expired:
                log.info(
                    "informer %s: resourceVersion %d too old, relisting",
                    self.type.__name__,
                    self.resource_version,
                )
                self.resource_version = 0
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the bus or apistore is away: retry from where we are
                log.warning("informer %s: %s; retrying in %.1fs", self.type.__name__, exc, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)

    async def _relist(self) -> None:
        field_selector = f"spec.nodeName={self.node}" if self.node is not None else ""
        items, rv = await self.client.list(
            self.type, namespace=self.namespace, field_selector=field_selector
        )
        fresh = {key_of(o): o for o in items}
        old_cache, self.cache = self.cache, fresh
        self.resource_version = rv
        for key, obj in fresh.items():
            old = old_cache.get(key)
            if old is None:
                self._call(self._handlers_add, obj)
            elif old.metadata.resource_version != obj.metadata.resource_version:
                self._call(self._handlers_update, old, obj)
        for key, obj in old_cache.items():
            if key not in fresh:
                self._call(self._handlers_delete, obj)
        self.synced.set()

    async def _watch(self) -> None:
        async for event in self.client.watch(
            self.type, resource_version=self.resource_version, node=self.node
        ):
            self.resource_version = event.resource_version
            obj = event.object
            if self.namespace and obj.metadata.namespace != self.namespace:
                continue
            key = key_of(obj)
            cached = self.cache.get(key)
            if cached is not None and _version(cached) > event.resource_version:
                continue  # a later list page already had a newer version of this object
            token = _event_traceparent.set(event.traceparent)
            try:
                if event.type == "DELETED":
                    self.cache.pop(key, None)
                    self._call(self._handlers_delete, obj)
                    continue
                old = self.cache.get(key)
                self.cache[key] = obj
                if old is None:
                    self._call(self._handlers_add, obj)
                else:
                    self._call(self._handlers_update, old, obj)
            finally:
                _event_traceparent.reset(token)

    def _call(self, handlers: list[Callable[..., Any]], *args: Any) -> None:
        for handler in handlers:
            try:
                handler(*args)
            except Exception:
                log.exception("informer %s: handler failed", self.type.__name__)
