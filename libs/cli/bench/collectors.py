"""What the bench watches while the scheduler works, as scheduler_perf's collectors do.

`ClusterTracker` follows pods and Events through two watches: when each pod was first
seen bound, and how many scheduling attempts each namespace's pods took.
`ThroughputCollector` samples the bound count once per second into upstream's
SchedulingThroughput samples; `percentile` reads them as upstream's `collect` does.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections import Counter
from collections.abc import Callable

from drasim.cli.bench import views
from drasim.common.bus.client import Bus
from drasim.common.watch import watch_raw

SAMPLE_INTERVAL = 1.0  # upstream `throughputSampleInterval`


class ClusterTracker:
    """Pods seen bound and scheduling attempts, per namespace, from two watches.

    As upstream's collector, a pod counts as scheduled the first time it is seen with a
    `spec.nodeName`. Attempts are counted from the scheduler's Events: repeated attempts
    share one Event whose `count` grows, so each ADDED or MODIFIED Event adds what its
    `count` grew since it was last seen (all of it when first seen).
    """

    def __init__(self, bus: Bus) -> None:
        self.bus = bus
        self.bound: dict[str, dict[str, float]] = {}  # namespace -> pod -> when seen bound
        self.events: dict[str, Counter[str]] = {}  # namespace -> reason -> attempts
        self._event_counts: dict[tuple[str, str], int] = {}  # (namespace, name) -> count
        self._changed = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self, resource_version: int) -> None:
        self._tasks = [
            asyncio.create_task(self._watch_pods(resource_version), name="bench-watch-pods"),
            asyncio.create_task(self._watch_events(resource_version), name="bench-watch-events"),
        ]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def bound_in(self, namespace: str) -> int:
        return len(self.bound.get(namespace, ()))

    def attempts_in(self, namespace: str) -> Counter[str]:
        return self.events.get(namespace, Counter())

    async def changed(self, timeout: float) -> None:
        """Return on the next change seen, or after `timeout`."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._changed.wait(), timeout)

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def _watch_pods(self, resource_version: int) -> None:
        async for _, event in watch_raw(self.bus, "pods", resource_version=resource_version):
            pod = views.pod_decoder.decode(event.object)
            if event.type == "DELETED" or not pod.spec.node_name:
                continue
            bound = self.bound.setdefault(pod.metadata.namespace, {})
            if pod.metadata.name not in bound:
                bound[pod.metadata.name] = time.monotonic()
                self._notify()

    async def _watch_events(self, resource_version: int) -> None:
        async for _, event in watch_raw(self.bus, "events", resource_version=resource_version):
            self.observe_event(event.type, views.event_decoder.decode(event.object))

    def observe_event(self, event_type: str, ev: views.EventView) -> None:
        """Count the attempts one watch event of an Event adds."""
        if ev.reason not in ("Scheduled", "FailedScheduling"):
            return
        key = (ev.metadata.namespace, ev.metadata.name)
        if event_type == "DELETED":
            self._event_counts.pop(key, None)
            return
        count = max(ev.count, 1)  # an Event without a count is one occurrence
        grown = count - self._event_counts.get(key, 0)
        if grown <= 0:
            return
        self._event_counts[key] = count
        self.events.setdefault(ev.involved_object.namespace, Counter())[ev.reason] += grown
        self._notify()


class ThroughputCollector:
    """Upstream's `throughputCollector`: one sample of pods bound per second."""

    def __init__(
        self, count: Callable[[], int], *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.count = count
        self.clock = clock
        self.samples: list[float] = []

    async def run(self) -> None:
        """Sample until cancelled (when every measured pod is bound)."""
        started = False
        last_count, last_time, skipped = 0, self.clock(), 0
        while True:
            await asyncio.sleep(SAMPLE_INTERVAL)
            now, scheduled = self.clock(), self.count()
            if scheduled == 0:
                continue
            if not started:
                # The first sample is an outlier: sampling and pod creation start apart.
                started, last_count, last_time = True, scheduled, now
                continue
            new = scheduled - last_count
            if new == 0:
                # No binding in this interval: rather than a 0 pods/s sample, wait for the
                # next one and count the whole span, once per interval it covers.
                skipped += 1
                continue
            self.samples += [new / (now - last_time)] * (skipped + 1)
            last_count, last_time, skipped = scheduled, now, 0


def percentile(ordered: list[float], q: int) -> float:
    """The ceil(n*q/100)-th smallest sample, as upstream's `collect`."""
    return ordered[math.ceil(len(ordered) * q / 100) - 1]
