"""The SLI arithmetic of `drasim loadtest`, as clusterloader2 does it; pure, no servers.

- `TransitionTimes` is clusterloader2's `ObjectTransitionTimes`
  (`pkg/measurement/util/phase_latency.go`): per object, the time each phase was first
  seen; a transition's latencies are `to - from` over the objects that have both, a
  negative one counted as 0.
- `LatencyMetric.of` is its `NewLatencyMetric` (`util/latency_metric.go`): the q-th
  percentile of n sorted latencies is the `ceil(n*q/100)`-th smallest, 0 for none.
- `histogram_quantile` is Prometheus' function of the same name over one histogram's
  cumulative buckets, which clusterloader2's metric measurements query.
- `Sli` is one figure held against its threshold: clusterloader2's
  `VerifyThresholdByPercentile` fails a percentile above its threshold.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

__all__ = [
    "API_CALL_MULTIPLE_RESOURCES_THRESHOLD_S",
    "API_CALL_SINGLE_RESOURCE_THRESHOLD_S",
    "CLAIM_ALLOCATION_THRESHOLD_S",
    "POD_STARTUP_THRESHOLD_S",
    "LatencyMetric",
    "Sli",
    "TransitionTimes",
    "api_call_threshold",
    "histogram_quantile",
]

# clusterloader2's defaults (the DRA test's config.yaml sets none of its own):
# PodStartupLatency's `threshold` for p50, p90 and p99 alike;
POD_STARTUP_THRESHOLD_S = 5.0
# ResourceClaimAllocationLatency's;
CLAIM_ALLOCATION_THRESHOLD_S = 300.0
# APIResponsivenessPrometheus': calls on one object (`scope="resource"`: get, create,
# update, patch, delete), and lists (namespace or cluster scope).
API_CALL_SINGLE_RESOURCE_THRESHOLD_S = 1.0
API_CALL_MULTIPLE_RESOURCES_THRESHOLD_S = 30.0


@dataclass(frozen=True)
class LatencyMetric:
    """p50, p90 and p99 of some latencies, in seconds, and how many there were."""

    p50: float
    p90: float
    p99: float
    count: int

    @classmethod
    def of(cls, latencies: Iterable[float]) -> LatencyMetric:
        ordered = sorted(latencies)
        n = len(ordered)
        if n == 0:
            return cls(0.0, 0.0, 0.0, 0)

        def perc(q: int) -> float:
            return ordered[math.ceil(n * q / 100) - 1]

        return cls(perc(50), perc(90), perc(99), n)

    def as_dict(self) -> dict[str, float | int]:
        return {
            "p50_s": round(self.p50, 4),
            "p90_s": round(self.p90, 4),
            "p99_s": round(self.p99, 4),
            "count": self.count,
        }


class TransitionTimes:
    """When each object (by key) was first seen in each phase (`create`, `schedule`,
    `run`, ...), in seconds on one clock."""

    def __init__(self) -> None:
        self.times: dict[str, dict[str, float]] = {}

    def set_once(self, key: str, phase: str, at: float) -> bool:
        """Record `phase` for `key` unless it is recorded already; True if it was new."""
        phases = self.times.setdefault(key, {})
        if phase in phases:
            return False
        phases[phase] = at
        return True

    def get(self, key: str, phase: str) -> float | None:
        return self.times.get(key, {}).get(phase)

    def latencies(
        self, start: str, end: str, *, keys: Callable[[str], bool] = lambda _: True
    ) -> list[float]:
        """`end - start` of every object with both phases that `keys` selects (≥ 0)."""
        return [latency for _, latency in self._spans(start, end, keys)]

    def _spans(
        self, start: str, end: str, keys: Callable[[str], bool]
    ) -> list[tuple[float, float]]:
        """(time of `start`, `end - start` ≥ 0) of every object with both that `keys`
        selects."""
        return [
            (phases[start], max(0.0, phases[end] - phases[start]))
            for key, phases in self.times.items()
            if start in phases and end in phases and keys(key)
        ]

    def metric(
        self, start: str, end: str, *, keys: Callable[[str], bool] = lambda _: True
    ) -> LatencyMetric:
        return LatencyMetric.of(self.latencies(start, end, keys=keys))

    def metric_by_window(
        self,
        start: str,
        end: str,
        window: float,
        *,
        keys: Callable[[str], bool] = lambda _: True,
    ) -> list[LatencyMetric]:
        """`metric` of the objects that reached `start` in each `window` seconds from the
        first one that did: where in a phase its slow ones were (a compaction round, a
        relist), which one figure for the whole phase hides."""
        spans = self._spans(start, end, keys)
        if not spans:
            return []
        first = min(at for at, _ in spans)
        windows: dict[int, list[float]] = {}
        for at, latency in spans:
            windows.setdefault(int((at - first) // window), []).append(latency)
        return [LatencyMetric.of(windows.get(i, ())) for i in range(max(windows) + 1)]


def histogram_quantile(q: float, buckets: Sequence[tuple[float, float]]) -> float | None:
    """Prometheus' `histogram_quantile(q, ...)` of one histogram: `buckets` are its
    (upper bound, cumulative count) pairs, `+Inf` included. None without observations.

    Within the bucket the rank falls in, the value is interpolated linearly from the
    bucket's lower bound (0 for the first bucket); a rank in the `+Inf` bucket answers the
    highest finite bound."""
    ordered = sorted(buckets)
    if not ordered or ordered[-1][0] != math.inf or ordered[-1][1] <= 0:
        return None
    total = ordered[-1][1]
    rank = q * total
    lower_bound, lower_count = 0.0, 0.0
    for upper_bound, count in ordered:
        if count >= rank:
            if upper_bound == math.inf:
                return lower_bound
            if count == lower_count:
                return upper_bound
            return lower_bound + (upper_bound - lower_bound) * (rank - lower_count) / (
                count - lower_count
            )
        lower_bound, lower_count = upper_bound, count
    return lower_bound


def api_call_threshold(scope: str) -> float:
    """The API call latency SLO's threshold for a call of `scope` (clusterloader2's
    `validateAPICalls`: `resource` scope is one object, any other a list)."""
    if scope == "resource":
        return API_CALL_SINGLE_RESOURCE_THRESHOLD_S
    return API_CALL_MULTIPLE_RESOURCES_THRESHOLD_S


@dataclass(frozen=True)
class Sli:
    """One measured figure (`None`: not measured in this run) against its threshold."""

    name: str
    value: float | None
    threshold: float

    @property
    def passed(self) -> bool | None:
        """Whether the figure is within its threshold; None when it was not measured."""
        return None if self.value is None else self.value <= self.threshold

    def as_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "value_s": None if self.value is None else round(self.value, 4),
            "threshold_s": self.threshold,
            "pass": self.passed,
        }
