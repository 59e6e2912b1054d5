"""The scheduling queue: which pending pod to try next, and when to try a failed one again.

Upstream: `pkg/scheduler/backend/queue/scheduling_queue.go` with queueing hints on. Three
places hold a pod:

- activeQ, the pods to try now, highest priority first, then longest waiting;
- backoffQ, failed pods serving their backoff (1 s doubling per attempt up to 10 s), moved
  to activeQ the moment it ends;
- unschedulablePods, pods a plugin rejected. Only a cluster event that plugin registered
  for, and whose queueing hint says QUEUE, moves such a pod on (to backoffQ if its backoff
  has not ended yet, else to activeQ); pods left there for 5 minutes are moved anyway.
  A pod a PreEnqueue plugin holds back (SchedulingGates: the pod has scheduling gates)
  waits there too, "gated", never tried until that plugin lets it into activeQ.

A popped pod is "in flight" until `done`. Events that arrive meanwhile are kept, so that a
pod failing because of a state that changed during its attempt is retried after backoff
instead of waiting in unschedulablePods for an event that already happened.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import enum
import heapq
import itertools
import logging
import math
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from drasim.common.api import core_v1
from drasim.scheduler import framework
from drasim.scheduler.framework import ClusterEvent, ClusterEventWithHint, QueueingHint

__all__ = [
    "DEFAULT_POD_INITIAL_BACKOFF",
    "DEFAULT_POD_MAX_BACKOFF",
    "DEFAULT_POD_MAX_IN_UNSCHEDULABLE_PODS_DURATION",
    "UNSCHEDULABLE_TIMEOUT",
    "QueuedPodInfo",
    "SchedulingQueue",
]

log = logging.getLogger(__name__)

DEFAULT_POD_INITIAL_BACKOFF = 1.0
DEFAULT_POD_MAX_BACKOFF = 10.0
DEFAULT_POD_MAX_IN_UNSCHEDULABLE_PODS_DURATION = 5 * 60.0
# How often unschedulablePods is checked for pods that waited too long (upstream: 30 s).
UNSCHEDULABLE_PODS_FLUSH_PERIOD = 30.0

UNSCHEDULABLE_TIMEOUT = ClusterEvent(framework.EventResource.WILDCARD, framework.ActionType.ALL)
"""The event of the periodic flush; a wildcard moves every pod it is given."""


@dataclasses.dataclass(slots=True)
class QueuedPodInfo:
    """A pod in the queue, with what the queue learned from its attempts."""

    pod: core_v1.Pod
    timestamp: float
    """When the pod last entered the queue (added, or back after a failed attempt)."""
    attempts: int = 0
    unschedulable_plugins: set[str] = dataclasses.field(default_factory=set)
    """Plugins that rejected the pod in its last attempt: only their events move it."""
    pending_plugins: set[str] = dataclasses.field(default_factory=set)
    """Plugins that returned Pending: their events move the pod straight to activeQ."""
    initial_attempt_timestamp: float | None = None
    """When the pod first entered the queue (the start of its scheduling SLI)."""
    traceparent: str = ""
    """The trace of the event that queued the pod: every attempt continues it."""
    gating_plugin: str = ""
    """The PreEnqueue plugin that keeps the pod out of activeQ; empty once none does."""

    @property
    def uid(self) -> str:
        return self.pod.metadata.uid


class _QueueingStrategy(enum.Enum):
    QUEUE_SKIP = enum.auto()
    QUEUE_AFTER_BACKOFF = enum.auto()
    QUEUE_IMMEDIATELY = enum.auto()


@dataclasses.dataclass(frozen=True, slots=True)
class _InFlightEvent:
    seq: int
    event: ClusterEvent
    old: Any
    new: Any


class _Heap:
    """Pods by UID in a heap ordered by `sort_key`. Update and delete leave the old heap
    entry behind as stale (it no longer matches `_seq_of`); pop and peek skip it."""

    def __init__(self, sort_key: Callable[[QueuedPodInfo], tuple[float, ...]]) -> None:
        self._sort_key = sort_key
        self._items: dict[str, QueuedPodInfo] = {}
        self._seq_of: dict[str, int] = {}
        self._heap: list[tuple[tuple[float, ...], int, str]] = []
        self._seqs = itertools.count()

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, uid: object) -> bool:
        return uid in self._items

    def __iter__(self) -> Iterator[QueuedPodInfo]:
        return iter(list(self._items.values()))

    def get(self, uid: str) -> QueuedPodInfo | None:
        return self._items.get(uid)

    def add_or_update(self, pinfo: QueuedPodInfo) -> None:
        seq = next(self._seqs)
        self._items[pinfo.uid] = pinfo
        self._seq_of[pinfo.uid] = seq
        heapq.heappush(self._heap, (self._sort_key(pinfo), seq, pinfo.uid))
        if len(self._heap) > 2 * len(self._items) + 64:
            self._compact()

    def delete(self, uid: str) -> QueuedPodInfo | None:
        self._seq_of.pop(uid, None)
        return self._items.pop(uid, None)

    def peek(self) -> QueuedPodInfo | None:
        while self._heap:
            _, seq, uid = self._heap[0]
            if self._seq_of.get(uid) == seq:
                return self._items[uid]
            heapq.heappop(self._heap)
        return None

    def pop(self) -> QueuedPodInfo | None:
        pinfo = self.peek()
        if pinfo is not None:
            heapq.heappop(self._heap)
            self.delete(pinfo.uid)
        return pinfo

    def _compact(self) -> None:
        self._heap = [entry for entry in self._heap if self._seq_of.get(entry[2]) == entry[1]]
        heapq.heapify(self._heap)


class SchedulingQueue:
    """activeQ, backoffQ and unschedulablePods, moved between by cluster events.

    `events_to_register` is the profile's plugin name → events (`Framework.
    events_to_register()`). Everything but `pop` and `run` is synchronous: callers are
    informer handlers and the scheduling loop, all on one event loop.
    """

    def __init__(
        self,
        events_to_register: Mapping[str, Sequence[ClusterEventWithHint]],
        *,
        clock: Callable[[], float] = time.monotonic,
        pod_initial_backoff: float = DEFAULT_POD_INITIAL_BACKOFF,
        pod_max_backoff: float = DEFAULT_POD_MAX_BACKOFF,
        pod_max_in_unschedulable_pods_duration: float = (
            DEFAULT_POD_MAX_IN_UNSCHEDULABLE_PODS_DURATION
        ),
        pre_enqueue: Callable[[core_v1.Pod], framework.Status | None] | None = None,
    ) -> None:
        self._hints = [
            (registered.event, plugin, registered.queueing_hint_fn)
            for plugin, registrations in events_to_register.items()
            for registered in registrations
        ]
        self._interest: dict[ClusterEvent, bool] = {}
        self._clock = clock
        self._pod_initial_backoff = pod_initial_backoff
        self._pod_max_backoff = pod_max_backoff
        self._pod_max_in_unschedulable_pods_duration = pod_max_in_unschedulable_pods_duration
        # The profile's PreEnqueue plugins (`Framework.run_pre_enqueue_plugins`).
        self._pre_enqueue = pre_enqueue

        # Priority first (higher wins), then the longest waiting (PrioritySort).
        self._active_q = _Heap(lambda p: (-(p.pod.spec.priority or 0), p.timestamp))
        self._backoff_q = _Heap(lambda p: (self._backoff_expiry(p),))
        self._unschedulable_pods: dict[str, QueuedPodInfo] = {}
        # In-flight pods by UID → the sequence number they were popped at, in pop order.
        self._in_flight_pods: dict[str, int] = {}
        self._in_flight_events: collections.deque[_InFlightEvent] = collections.deque()
        self._seqs = itertools.count()
        self._active_q_not_empty = asyncio.Event()
        self._backoff_q_changed = asyncio.Event()

    # -- the scheduling loop's side --------------------------------------------------------

    async def pop(self) -> QueuedPodInfo:
        """Wait for a pod in activeQ and take it; it is in flight until `done`."""
        while not self._active_q:
            self._active_q_not_empty.clear()
            await self._active_q_not_empty.wait()
        pinfo = self._active_q.pop()
        assert pinfo is not None
        pinfo.attempts += 1
        # The rejectors of the last attempt do not carry over to this one.
        pinfo.unschedulable_plugins.clear()
        pinfo.pending_plugins.clear()
        self._in_flight_pods[pinfo.uid] = next(self._seqs)
        return pinfo

    def done(self, uid: str) -> None:
        """The pod's attempt is over: forget it, and the events no in-flight pod needs."""
        if self._in_flight_pods.pop(uid, None) is None:
            return
        # Pods are popped in sequence order and dicts keep insertion order.
        oldest = next(iter(self._in_flight_pods.values()), math.inf)
        while self._in_flight_events and self._in_flight_events[0].seq < oldest:
            self._in_flight_events.popleft()

    def add_unschedulable_if_not_present(self, pinfo: QueuedPodInfo) -> None:
        """Requeue a pod whose attempt failed (its `unschedulable_plugins` say who rejected
        it; none means an error). Events seen during the attempt may send it to backoffQ or
        activeQ; otherwise it waits in unschedulablePods."""
        uid = pinfo.uid
        try:
            if uid in self._unschedulable_pods or uid in self._active_q or uid in self._backoff_q:
                log.error("pod %s is already queued, not requeuing it", _name(pinfo.pod))
                return
            pinfo.timestamp = self._clock()
            strategy = self._determine_scheduling_hint_for_in_flight_pod(pinfo)
            self._requeue_pod_with_queueing_strategy(pinfo, strategy)
        finally:
            self.done(uid)

    # -- informer handlers' side ----------------------------------------------------------

    def add(self, pod: core_v1.Pod, *, traceparent: str = "") -> None:
        """A new pending pod goes to activeQ."""
        uid = pod.metadata.uid
        self._unschedulable_pods.pop(uid, None)
        self._backoff_q.delete(uid)
        self._move_to_active_q(QueuedPodInfo(pod, timestamp=self._clock(), traceparent=traceparent))

    def update(self, old: core_v1.Pod, new: core_v1.Pod, *, traceparent: str = "") -> None:
        """A pending pod changed. In unschedulablePods the change itself may be the event
        that helps it (e.g. a toleration added); during its attempt it is kept as an
        in-flight event. A pod new to the queue continues `traceparent`."""
        uid = new.metadata.uid
        events = framework.pod_scheduling_properties_change(new, old)
        if uid in self._in_flight_pods:
            for event in events:
                self._add_event_if_pods_in_flight(event, old, new)
            return
        if (pinfo := self._active_q.get(uid)) is not None:
            pinfo.pod = new
            self._active_q.add_or_update(pinfo)  # the priority may have changed
            return
        if (pinfo := self._backoff_q.get(uid)) is not None:
            pinfo.pod = new
            return
        if (pinfo := self._unschedulable_pods.get(uid)) is not None:
            pinfo.pod = new
            for event in events:
                strategy = self._is_pod_worth_requeuing(pinfo, event, old, new)
                if strategy is not _QueueingStrategy.QUEUE_SKIP:
                    del self._unschedulable_pods[uid]
                    self._requeue_pod_with_queueing_strategy(pinfo, strategy)
                    return
            return
        self.add(new, traceparent=traceparent)

    def delete(self, pod: core_v1.Pod) -> None:
        uid = pod.metadata.uid
        self._active_q.delete(uid)
        self._backoff_q.delete(uid)
        self._unschedulable_pods.pop(uid, None)

    def move_all_to_active_or_backoff_queue(
        self,
        event: ClusterEvent,
        old: Any,
        new: Any,
        pre_check: Callable[[core_v1.Pod], bool] | None = None,
    ) -> None:
        """A cluster event: move the unschedulable pods it may help (those passing
        `pre_check`), and remember it for the pods in flight."""
        if not self._is_event_of_interest(event):
            return
        pods = [
            p for p in self._unschedulable_pods.values() if pre_check is None or pre_check(p.pod)
        ]
        self._move_pods_to_active_or_backoff_queue(pods, event, old, new)
        self._add_event_if_pods_in_flight(event, old, new)

    # -- timers ---------------------------------------------------------------------------

    async def run(self) -> None:
        """Move each pod to activeQ when its backoff ends, and flush unschedulablePods of
        pods that waited too long every 30 s; runs until cancelled."""
        next_leftover_flush = self._clock() + UNSCHEDULABLE_PODS_FLUSH_PERIOD
        while True:
            self.flush_backoff_q_completed()
            if self._clock() >= next_leftover_flush:
                self.flush_unschedulable_pods_leftover()
                next_leftover_flush += UNSCHEDULABLE_PODS_FLUSH_PERIOD
            head = self._backoff_q.peek()
            wake = (
                next_leftover_flush
                if head is None
                else min(next_leftover_flush, self._backoff_expiry(head))
            )
            self._backoff_q_changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._backoff_q_changed.wait(), max(wake - self._clock(), 0))

    def flush_backoff_q_completed(self) -> None:
        """Move the pods whose backoff has ended to activeQ."""
        now = self._clock()
        while (head := self._backoff_q.peek()) is not None and self._backoff_expiry(head) <= now:
            self._backoff_q.pop()
            self._move_to_active_q(head)

    def flush_unschedulable_pods_leftover(self) -> None:
        """Give pods stuck in unschedulablePods for too long another try, in case an event
        that would have helped was missed (or none is registered)."""
        now = self._clock()
        stale = [
            p
            for p in self._unschedulable_pods.values()
            if now - p.timestamp > self._pod_max_in_unschedulable_pods_duration
        ]
        self._move_pods_to_active_or_backoff_queue(stale, UNSCHEDULABLE_TIMEOUT, None, None)

    # -- reading --------------------------------------------------------------------------

    def pending_pods(self) -> tuple[list[core_v1.Pod], str]:
        """Every queued pod and a summary of where they are (upstream `PendingPods`)."""
        active = [p.pod for p in self._active_q]
        backoff = [p.pod for p in self._backoff_q]
        unschedulable = [p.pod for p in self._unschedulable_pods.values()]
        summary = (
            f"activeQ:{len(active)}; backoffQ:{len(backoff)}; "
            f"unschedulablePods:{len(unschedulable)}"
        )
        return active + backoff + unschedulable, summary

    def pending_pods_by_queue(self) -> dict[str, int]:
        """How many pods wait where, by `scheduler_pending_pods`' queue names: the gated
        pods of unschedulablePods count apart."""
        gated = sum(1 for p in self._unschedulable_pods.values() if p.gating_plugin)
        return {
            "active": len(self._active_q),
            "backoff": len(self._backoff_q),
            "unschedulable": len(self._unschedulable_pods) - gated,
            "gated": gated,
        }

    # -- internals ------------------------------------------------------------------------

    def _backoff_duration(self, pinfo: QueuedPodInfo) -> float:
        if pinfo.attempts == 0:
            return 0.0
        return min(self._pod_initial_backoff * 2 ** (pinfo.attempts - 1), self._pod_max_backoff)

    def _backoff_expiry(self, pinfo: QueuedPodInfo) -> float:
        return pinfo.timestamp + self._backoff_duration(pinfo)

    def _is_pod_backing_off(self, pinfo: QueuedPodInfo) -> bool:
        return self._backoff_expiry(pinfo) > self._clock()

    def _move_to_active_q(self, pinfo: QueuedPodInfo) -> None:
        """Into activeQ, unless a PreEnqueue plugin holds the pod back: then it waits in
        unschedulablePods, gated, for an event that plugin registered (upstream
        `moveToActiveQ`). Its scheduling attempts, and their latency, start once it is in."""
        status = self._pre_enqueue(pinfo.pod) if self._pre_enqueue is not None else None
        if not framework.is_success(status):
            assert status is not None
            pinfo.gating_plugin = status.plugin
            pinfo.unschedulable_plugins.add(status.plugin)
            self._unschedulable_pods[pinfo.uid] = pinfo
            return
        pinfo.gating_plugin = ""
        if pinfo.initial_attempt_timestamp is None:
            pinfo.initial_attempt_timestamp = self._clock()
        self._active_q.add_or_update(pinfo)
        self._active_q_not_empty.set()

    def _add_to_backoff_q(self, pinfo: QueuedPodInfo) -> None:
        self._backoff_q.add_or_update(pinfo)
        self._backoff_q_changed.set()

    def _add_event_if_pods_in_flight(self, event: ClusterEvent, old: Any, new: Any) -> None:
        if self._in_flight_pods and self._is_event_of_interest(event):
            self._in_flight_events.append(_InFlightEvent(next(self._seqs), event, old, new))

    def _is_event_of_interest(self, event: ClusterEvent) -> bool:
        """Whether any plugin registered for the event; asked on every informer event, so
        answered once per kind of event."""
        known = self._interest.get(event)
        if known is None:
            known = event.resource == framework.EventResource.WILDCARD or any(
                _match(registered, event) for registered, _, _ in self._hints
            )
            self._interest[event] = known
        return known

    def _move_pods_to_active_or_backoff_queue(
        self, pods: Sequence[QueuedPodInfo], event: ClusterEvent, old: Any, new: Any
    ) -> None:
        for pinfo in pods:
            strategy = self._is_pod_worth_requeuing(pinfo, event, old, new)
            if strategy is _QueueingStrategy.QUEUE_SKIP:
                continue
            del self._unschedulable_pods[pinfo.uid]
            self._requeue_pod_with_queueing_strategy(pinfo, strategy)

    def _requeue_pod_with_queueing_strategy(
        self, pinfo: QueuedPodInfo, strategy: _QueueingStrategy
    ) -> None:
        if strategy is _QueueingStrategy.QUEUE_SKIP:
            self._unschedulable_pods[pinfo.uid] = pinfo
        elif strategy is _QueueingStrategy.QUEUE_AFTER_BACKOFF and self._is_pod_backing_off(pinfo):
            self._add_to_backoff_q(pinfo)
        else:
            # Queue immediately, or the backoff already ended while the pod waited.
            self._move_to_active_q(pinfo)

    def _determine_scheduling_hint_for_in_flight_pod(
        self, pinfo: QueuedPodInfo
    ) -> _QueueingStrategy:
        """What the events seen during the pod's attempt say about requeuing it."""
        if not pinfo.unschedulable_plugins and not pinfo.pending_plugins:
            # No plugin rejected it (an error, e.g. the API server failed): retry.
            return _QueueingStrategy.QUEUE_AFTER_BACKOFF
        popped_at = self._in_flight_pods.get(pinfo.uid)
        if popped_at is None:
            # Done was already called (the binding cycle failed): nothing to go by, retry.
            return _QueueingStrategy.QUEUE_AFTER_BACKOFF
        strategy = _QueueingStrategy.QUEUE_SKIP
        for recorded in self._in_flight_events:
            if recorded.seq < popped_at:
                continue
            hint = self._is_pod_worth_requeuing(pinfo, recorded.event, recorded.old, recorded.new)
            if hint is _QueueingStrategy.QUEUE_IMMEDIATELY:
                return hint
            if hint is _QueueingStrategy.QUEUE_AFTER_BACKOFF:
                strategy = hint
        return strategy

    def _is_pod_worth_requeuing(
        self, pinfo: QueuedPodInfo, event: ClusterEvent, old: Any, new: Any
    ) -> _QueueingStrategy:
        """Ask the hints of the plugins that rejected the pod and registered this event.

        Queue from a Pending plugin means activeQ at once; from an unschedulable one,
        activeQ after backoff. A hint that raises counts as Queue.
        """
        rejectors = pinfo.unschedulable_plugins | pinfo.pending_plugins
        if not rejectors or event.resource == framework.EventResource.WILDCARD:
            return _QueueingStrategy.QUEUE_AFTER_BACKOFF
        strategy = _QueueingStrategy.QUEUE_SKIP
        for registered, plugin, hint_fn in self._hints:
            if plugin not in rejectors or not _match(registered, event):
                continue
            hint = QueueingHint.QUEUE
            if hint_fn is not None:
                try:
                    hint = hint_fn(pinfo.pod, old, new)
                except Exception:
                    log.exception(
                        "queueing hint of %s for %s failed; queueing the pod",
                        plugin,
                        event.label(),
                    )
            if hint == QueueingHint.QUEUE_SKIP:
                continue
            if plugin in pinfo.pending_plugins:
                return _QueueingStrategy.QUEUE_IMMEDIATELY
            if not pinfo.pending_plugins:
                return _QueueingStrategy.QUEUE_AFTER_BACKOFF
            strategy = _QueueingStrategy.QUEUE_AFTER_BACKOFF
        return strategy


def _match(registered: ClusterEvent, event: ClusterEvent) -> bool:
    """A registered event matches when it names the kind (or `*`) and shares an action."""
    return registered.resource in (event.resource, framework.EventResource.WILDCARD) and bool(
        registered.action_type & event.action_type
    )


def _name(pod: core_v1.Pod) -> str:
    return f"{pod.metadata.namespace}/{pod.metadata.name}"


class Nominator:
    """Pods nominated to a node by preemption and not bound yet (upstream's nominator):
    other pods' Filter counts those of at least their own priority on that node, so the
    room preemption made is kept for its pod."""

    def __init__(self) -> None:
        self._by_uid: dict[str, tuple[str, core_v1.Pod]] = {}

    def __bool__(self) -> bool:
        return bool(self._by_uid)

    def set(self, pod: core_v1.Pod, node_name: str) -> None:
        """Record (or with "" drop) the pod's nomination."""
        if node_name:
            self._by_uid[pod.metadata.uid] = (node_name, pod)
        else:
            self._by_uid.pop(pod.metadata.uid, None)

    def follow(self, pod: core_v1.Pod) -> None:
        """A pod as the informer has it: nominated while unbound, else not."""
        if pod.spec.node_name or pod.metadata.deletion_timestamp:
            self._by_uid.pop(pod.metadata.uid, None)
        else:
            self.set(pod, pod.status.nominated_node_name)

    def forget(self, pod: core_v1.Pod) -> None:
        self._by_uid.pop(pod.metadata.uid, None)

    def on_node(self, node_name: str) -> list[core_v1.Pod]:
        """The pods nominated to a node."""
        return [pod for node, pod in self._by_uid.values() if node == node_name]

    def for_pod(self, pod: core_v1.Pod) -> dict[str, list[core_v1.Pod]]:
        """Per node, the other nominated pods whose priority is at least `pod`'s."""
        mine = pod.spec.priority or 0
        found: dict[str, list[core_v1.Pod]] = {}
        for uid, (node, other) in self._by_uid.items():
            if uid != pod.metadata.uid and (other.spec.priority or 0) >= mine:
                found.setdefault(node, []).append(other)
        return found
