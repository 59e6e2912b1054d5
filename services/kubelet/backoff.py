"""CrashLoopBackOff: how long the kubelet waits before starting an exited container again.

As upstream's kubelet (`newCrashLoopBackOff` in `pkg/kubelet/kubelet.go`, client-go's
`flowcontrol.Backoff`, `doBackOff` in `pkg/kubelet/kuberuntime/kuberuntime_manager.go`):
the first restart is immediate and arms a delay of `initial` (10 s); each later exit
within the delay waits it out, and the restart after it doubles the delay, up to `maximum`
(5 min). An exit more than `reset_after` (10 min) after the last restart starts over. The
delay is measured from the exited container's `finishedAt`.

With the `ReduceDefaultCrashLoopBackOffDecay` gate on, upstream starts at 1 s and stops at
60 s; tests give smaller times still.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from drasim.common.duration import parse_go_duration

__all__ = ["BackoffEntry", "CrashLoopBackOff", "REDUCED", "UPSTREAM", "parse"]


@dataclass(frozen=True)
class BackoffEntry:
    """One container's state in the backoff: its current delay and when it was armed."""

    delay: float
    updated: datetime


@dataclass(frozen=True)
class CrashLoopBackOff:
    initial: float = 10.0
    maximum: float = 300.0
    reset_after: float = 600.0

    def _expired(self, entry: BackoffEntry, event_time: datetime) -> bool:
        return (event_time - entry.updated).total_seconds() > self.reset_after

    def in_backoff_since(
        self, entry: BackoffEntry | None, event_time: datetime, now: datetime
    ) -> bool:
        """Upstream `IsInBackOffSince`: must a container that exited at `event_time` still
        wait at `now`?"""
        if entry is None or self._expired(entry, event_time):
            return False
        return (now - event_time).total_seconds() < entry.delay

    def next(self, entry: BackoffEntry | None, event_time: datetime, now: datetime) -> BackoffEntry:
        """Upstream `Next`: the entry after restarting a container that exited at
        `event_time`."""
        if entry is None or self._expired(entry, event_time):
            return BackoffEntry(self.initial, now)
        return BackoffEntry(min(entry.delay * 2, self.maximum), now)


UPSTREAM = CrashLoopBackOff()
REDUCED = CrashLoopBackOff(initial=1.0, maximum=60.0)


def parse(text: str) -> CrashLoopBackOff:
    """`INITIAL/MAX` in Go durations (`--crash-loop-backoff 1s/10s`)."""
    initial, sep, maximum = text.partition("/")
    if not sep:
        raise ValueError(f"crash loop backoff {text!r} is not INITIAL/MAX")
    first, longest = parse_go_duration(initial), parse_go_duration(maximum)
    if not 0 < first <= longest:
        raise ValueError(f"crash loop backoff {text!r}: need 0 < INITIAL <= MAX")
    return CrashLoopBackOff(initial=first, maximum=longest)
