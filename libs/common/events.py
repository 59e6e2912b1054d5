"""Kubernetes Events recorded as client-go's recorder records them (`tools/record`): a
repeated occurrence bumps `count` and `lastTimestamp` on the Event already written instead
of creating another one.

A thousand pending pods failing to schedule over and over would otherwise write a new
Event per attempt, flooding the store, and `kubectl describe pod` could not say
"(x5 over 3m)". As upstream's EventCorrelator, occurrences are counted only when they are
identical (same `EventKey`); upstream's aggregation of similar events with different
messages is left out.

Recorders of the legacy API (the kubelet's, the controllers') also drop what an object's
source writes beyond a burst of 25, refilled one every five minutes (upstream's
`EventSourceObjectSpamFilter`): a ReplicaSet creating 1,000 pods records 25
`SuccessfulCreate` Events, not 1,000 writes. The scheduler's (events.k8s.io upstream) has
no such filter.

The first occurrence is created with `count=1` and `firstTimestamp = lastTimestamp = now`;
the recorder remembers its name in a bounded LRU cache (4096 keys, as upstream). A later
identical occurrence is a merge patch of `count` and `lastTimestamp` on that Event; if the
Event was deleted meanwhile (NotFound), a new one is created with `count=1`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections import OrderedDict
from collections.abc import Callable
from datetime import UTC, datetime
from typing import NamedTuple

from drasim.common import errors, tables
from drasim.common.api import core_v1, meta_v1
from drasim.common.api.meta_v1 import KubeObject
from drasim.common.client import ApiClient

__all__ = [
    "CACHE_SIZE",
    "EventCache",
    "EventKey",
    "EventRecorder",
    "Observation",
    "SpamFilter",
    "event_key",
    "reference",
]

CACHE_SIZE = 4096
"""Keys remembered per recorder (upstream `maxLruCacheEntries`)."""
SPAM_BURST = 25
"""Events one source may write about one object at once (upstream `defaultSpamBurst`)."""
SPAM_REFILL_SECONDS = 300.0
"""Then one more per this many seconds (upstream `defaultSpamQPS` = 1/300)."""


class EventKey(NamedTuple):
    """What makes two Events the same occurrence (upstream `getEventKey`). The involved
    object's resourceVersion is left out: the pod changes between two failed attempts."""

    source_component: str
    source_host: str
    kind: str
    namespace: str
    name: str
    uid: str
    api_version: str
    field_path: str
    type: str
    reason: str
    message: str
    reporting_component: str
    reporting_instance: str


def reference(obj: KubeObject) -> core_v1.ObjectReference:
    """`ref.GetReference`: what an Event about `obj` names as its involved object."""
    meta = obj.metadata
    return core_v1.ObjectReference(
        kind=obj.kind,
        api_version=obj.api_version,
        namespace=meta.namespace,
        name=meta.name,
        uid=meta.uid,
        resource_version=meta.resource_version,
    )


def event_key(event: core_v1.Event) -> EventKey:
    ref = event.involved_object
    return EventKey(
        source_component=event.source.component,
        source_host=event.source.host,
        kind=ref.kind,
        namespace=ref.namespace,
        name=ref.name,
        uid=ref.uid,
        api_version=ref.api_version,
        field_path=ref.field_path,
        type=event.type,
        reason=event.reason,
        message=event.message,
        reporting_component=event.reporting_component,
        reporting_instance=event.reporting_instance,
    )


@dataclasses.dataclass(frozen=True, slots=True)
class Observation:
    """The Event written for a key: its name (to patch it) and its count so far."""

    name: str
    count: int


class EventCache:
    """An LRU map EventKey → Observation, indexed by involved object UID so that
    everything about one object can be forgotten at once."""

    def __init__(self, size: int = CACHE_SIZE) -> None:
        if size < 1:
            raise ValueError(f"cache size must be positive, not {size}")
        self.size = size
        self._entries: OrderedDict[EventKey, Observation] = OrderedDict()
        self._by_uid: dict[str, set[EventKey]] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: EventKey) -> bool:
        return key in self._entries

    def get(self, key: EventKey) -> Observation | None:
        """The observation of `key`, which becomes the most recently used."""
        found = self._entries.get(key)
        if found is not None:
            self._entries.move_to_end(key)
        return found

    def add(self, key: EventKey, observation: Observation) -> None:
        """Remember `key` as the most recently used; past `size`, the least recently used
        key is evicted."""
        self._entries[key] = observation
        self._entries.move_to_end(key)
        self._by_uid.setdefault(key.uid, set()).add(key)
        while len(self._entries) > self.size:
            oldest, _ = self._entries.popitem(last=False)
            self._unindex(oldest)

    def remove(self, key: EventKey) -> None:
        if self._entries.pop(key, None) is not None:
            self._unindex(key)

    def forget(self, uid: str) -> None:
        """Drop every key about the object with this UID."""
        for key in self._by_uid.pop(uid, ()):
            del self._entries[key]

    def _unindex(self, key: EventKey) -> None:
        keys = self._by_uid.get(key.uid)
        if keys is not None:
            keys.discard(key)
            if not keys:
                del self._by_uid[key.uid]


class SpamFilter:
    """A token bucket per (source, involved object), `burst` tokens refilled one every
    `refill_seconds`, in an LRU of `size` objects (upstream `EventSourceObjectSpamFilter`)."""

    def __init__(
        self,
        *,
        burst: int = SPAM_BURST,
        refill_seconds: float = SPAM_REFILL_SECONDS,
        size: int = CACHE_SIZE,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.burst, self.refill_seconds, self.size, self.clock = burst, refill_seconds, size, clock
        self._buckets: OrderedDict[tuple[str, ...], tuple[float, float]] = OrderedDict()

    def allow(self, event: core_v1.Event) -> bool:
        """Take a token for `event`'s source and object; False when there is none."""
        ref = event.involved_object
        key = (
            event.source.component,
            event.source.host,
            ref.kind,
            ref.namespace,
            ref.name,
            ref.uid,
            ref.api_version,
        )
        now = self.clock()
        tokens, since = self._buckets.pop(key, (float(self.burst), now))
        tokens = min(float(self.burst), tokens + (now - since) / self.refill_seconds)
        allowed = tokens >= 1.0
        self._buckets[key] = (tokens - 1.0 if allowed else tokens, now)
        if len(self._buckets) > self.size:
            self._buckets.popitem(last=False)
        return allowed


class _KeyLock:
    """A lock for one key, with the number of callers holding or awaiting it, so the last
    one out removes it."""

    __slots__ = ("lock", "users")

    def __init__(self) -> None:
        self.lock = asyncio.Lock()
        self.users = 0


def _utc_now() -> datetime:
    return datetime.now(UTC)


class EventRecorder:
    """One component's recorder (upstream: a recorder over an EventBroadcaster with a
    correlator). `source` and `reporting_*` name who reports; they are part of the key.

    Calls for the same key are serialized, so two concurrent identical occurrences make one
    Event with `count=2`, never two Events.
    """

    def __init__(
        self,
        api: ApiClient,
        *,
        component: str,
        host: str = "",
        reporting_instance: str = "",
        cache_size: int = CACHE_SIZE,
        clock: Callable[[], datetime] = _utc_now,
        spam_filter: SpamFilter | None = None,
    ) -> None:
        self.api = api
        self.source = core_v1.EventSource(component=component, host=host)
        self.reporting_component = component
        self.reporting_instance = reporting_instance
        self.cache = EventCache(cache_size)
        self.clock = clock
        self.spam_filter = spam_filter  # None: every occurrence is written
        self._locks: dict[EventKey, _KeyLock] = {}

    async def record(
        self,
        involved: core_v1.ObjectReference,
        event_type: str,
        reason: str,
        message: str,
        *,
        action: str = "",
    ) -> core_v1.Event | None:
        """Record one occurrence about `involved`; the Event as written (created, or patched
        with its count raised), None when the spam filter dropped it.

        An `action` marks an events.k8s.io-style event, which also carries `eventTime`;
        legacy events (the kubelet's) have neither. Raises `errors.ApiError` when the API
        refused the write: callers log it, as an event is never worth failing a pod for.
        """
        now = self.clock()
        event = core_v1.Event(
            # Named as upstream names events: the involved object, then a unique hex. Events
            # about cluster-scoped objects go to "default", as upstream's.
            metadata=meta_v1.ObjectMeta(
                name=f"{involved.name}.{time.time_ns():x}",
                namespace=involved.namespace or "default",
            ),
            involved_object=involved,
            reason=reason,
            message=message,
            source=self.source,
            first_timestamp=_seconds(now),
            last_timestamp=_seconds(now),
            event_time=_micros(now) if action else None,
            count=1,
            type=event_type,
            action=action,
            reporting_component=self.reporting_component,
            reporting_instance=self.reporting_instance,
        )
        if self.spam_filter is not None and not self.spam_filter.allow(event):
            return None
        key = event_key(event)
        key_lock = self._locks.get(key)
        if key_lock is None:
            key_lock = self._locks[key] = _KeyLock()
        key_lock.users += 1
        try:
            async with key_lock.lock:
                return await self._record(key, event)
        finally:
            key_lock.users -= 1
            if key_lock.users == 0:
                del self._locks[key]

    def forget(self, uid: str) -> None:
        """Forget the Events about the object with this UID (it is gone): the cache keeps
        room for live objects."""
        self.cache.forget(uid)

    async def _record(self, key: EventKey, event: core_v1.Event) -> core_v1.Event:
        observed = self.cache.get(key)
        if observed is not None:
            patch = {"count": observed.count + 1, "lastTimestamp": event.last_timestamp}
            try:
                written = await self.api.patch(
                    core_v1.Event, observed.name, patch, namespace=event.metadata.namespace
                )
            except errors.NotFound:
                # Deleted (by a person, or garbage collected): start a new series.
                self.cache.remove(key)
            else:
                self.cache.add(key, Observation(written.metadata.name, written.count))
                return written
        written = await self.api.create(event)
        self.cache.add(key, Observation(written.metadata.name, written.count))
        return written


def _seconds(when: datetime) -> str:
    return tables.format_time(when)


def _micros(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
