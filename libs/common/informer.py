"""Informers: one resource kept in a local cache by list+watch (`drasim.common.watch`),
calling handlers on every change.

Handlers keep their Kubernetes signatures; the trace of the event they are called for is
`event_traceparent()`, so the work they start can continue the write that caused it.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import logging
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

from drasim.common import follow, watch
from drasim.common.api import registry
from drasim.common.api.meta_v1 import KubeObject
from drasim.common.bus import subjects
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
    `on_add(obj)`, `on_update(old, new)`, `on_delete(obj)`. By default the informer
    watches every object of its type (in `namespace`); `scopes` watch parts of it instead
    (`watch.Scope`), each with its own list and consumer; with `follow`, each followed
    by plain subscription instead of a consumer (`drasim.common.follow`). After a list,
    handlers hear of the listed objects in `list_order` (a sort key), or as listed. When
    one scope alone is listed again (`follow`, its events lost to compaction), only the
    objects that came through that scope are replaced.
    """

    def __init__(
        self,
        client: ApiClient,
        type_: type[T],
        *,
        namespace: str = "",
        scopes: Sequence[watch.Scope] | None = None,
        heartbeat: float = watch.HEARTBEAT_S,
        list_order: Callable[[T], Any] | None = None,
        follow: bool = False,
        on_add: Callable[[T], Any] | None = None,
        on_update: Callable[[T, T], Any] | None = None,
        on_delete: Callable[[T], Any] | None = None,
    ) -> None:
        self.client = client
        self.type = type_
        self.namespace = namespace
        self.scopes = scopes
        self.heartbeat = heartbeat
        self.list_order = list_order
        self.follow = follow
        self.cache: dict[Key, T] = {}
        # The scope each cached object came through, where the watch says (`follow`).
        self._scope_of: dict[Key, str] = {}
        # Of the last event or list seen.
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
        """Keep the cache current until cancelled (`watch.watch_forever`)."""
        scopes = self.scopes or [self._scope()]
        name = f"informer {self.type.__name__}"
        bus = self.client.bus
        if self.follow:
            events = follow.follow_forever(bus=bus, type_=self.type, scopes=scopes, name=name)
        else:
            events = watch.watch_forever(
                bus=bus, type_=self.type, scopes=scopes, heartbeat=self.heartbeat, name=name
            )
        listed: list[watch.WatchEvent] = []
        async with contextlib.aclosing(events):
            async for item in events:
                if isinstance(item, watch.Bookmark):
                    self._replace(listed, item.resource_version, item.scope)
                    listed = []
                elif item.type is None:
                    listed.append(item)
                else:
                    self._on_event(item)

    def _scope(self) -> watch.Scope:
        """Every object of the type (in the namespace), listed as the client."""
        plural = registry.by_type(self.type).plural
        return watch.Scope(
            subjects.events_of(self.client.bus.prefix, plural),
            functools.partial(self.client.list, self.type, namespace=self.namespace),
        )

    def _replace(self, listed: list[watch.WatchEvent], resource_version: int, scope: str) -> None:
        """A list's objects become the cache (with `scope`: the objects of that scope):
        handlers hear what changed since the last."""
        fresh = {key_of(e.object): e.object for e in listed}
        scope_of = {key_of(e.object): e.scope for e in listed if e.scope}
        if scope:
            replaced = {k: o for k, o in self.cache.items() if self._scope_of.get(k) == scope}
            for key in replaced:
                del self.cache[key]
                self._scope_of.pop(key, None)
            self.cache.update(fresh)
            self._scope_of.update(scope_of)
        else:
            replaced, self.cache, self._scope_of = self.cache, fresh, scope_of
        self.resource_version = resource_version
        objects = sorted(fresh.values(), key=self.list_order) if self.list_order else fresh.values()
        for obj in objects:
            old = replaced.get(key_of(obj))
            if old is None:
                self._call(self._handlers_add, obj)
            elif old.metadata.resource_version != obj.metadata.resource_version:
                self._call(self._handlers_update, old, obj)
        for key, obj in replaced.items():
            if key not in fresh:
                self._call(self._handlers_delete, obj)
        self.synced.set()

    def _on_event(self, event: watch.WatchEvent) -> None:
        self.resource_version = event.resource_version
        obj = event.object
        if self.namespace and obj.metadata.namespace != self.namespace:
            return
        key = key_of(obj)
        cached = self.cache.get(key)
        if cached is not None and _version(cached) > event.resource_version:
            return  # a later list page already had a newer version of this object
        token = _event_traceparent.set(event.traceparent)
        try:
            if event.type == "DELETED":
                self.cache.pop(key, None)
                self._scope_of.pop(key, None)
                self._call(self._handlers_delete, obj)
                return
            self.cache[key] = obj
            if event.scope:
                self._scope_of[key] = event.scope
            if cached is None:
                self._call(self._handlers_add, obj)
            else:
                self._call(self._handlers_update, cached, obj)
        finally:
            _event_traceparent.reset(token)

    def _call(self, handlers: list[Callable[..., Any]], *args: Any) -> None:
        for handler in handlers:
            try:
                handler(*args)
            except Exception:
                log.exception("informer %s: handler failed", self.type.__name__)
