"""Prometheus metrics: one registry per service, served on `/metrics`.

Each service keeps its metrics in its own module (`drasim.scheduler.metrics`,
`drasim.apistore.metrics`, ...) with upstream's names and labels where upstream has them
(`scheduler_pending_pods`, `apiserver_request_duration_seconds`, ...), on a registry of its
own, so that several services can run in one process (as the tests run them). `serve`
publishes a registry on `GET /metrics` when the service is given `--metrics-port`.

Figures moved on hot paths (one API request, one plugin call) use `CounterVec` and
`HistogramVec` from here rather than prometheus_client's: a service updates its metrics on
one event-loop thread only, so they need no lock and no per-call label checks, and an update
costs a dict lookup and a bisection. Figures that are states
(queue lengths, object counts) are not updated at all: a `Callback` computes them from the
service's own structures when Prometheus scrapes.
"""

from __future__ import annotations

import bisect
import contextlib
import gc
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass

from aiohttp import web
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    GC_COLLECTOR,
    PLATFORM_COLLECTOR,
    PROCESS_COLLECTOR,
    CollectorRegistry,
    generate_latest,
)
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

__all__ = [
    "DEFAULT_BUCKETS",
    "GC_PAUSES",
    "LATENCY_BUCKETS",
    "Callback",
    "CounterVec",
    "Endpoint",
    "HistogramVec",
    "Labels",
    "Metric",
    "counter",
    "exponential_buckets",
    "gauge",
    "new_registry",
    "ready_detail",
    "render",
    "serve",
]

log = logging.getLogger(__name__)

# Buckets for request and plugin latencies: 100 µs … 10 s.
LATENCY_BUCKETS = (
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
    2.5, 5.0, 10.0,
)  # fmt: skip
# Prometheus' (and component-base's `metrics.DefBuckets`) default: 5 ms … 10 s.
DEFAULT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


def exponential_buckets(start: float, factor: float, count: int) -> tuple[float, ...]:
    """component-base's `metrics.ExponentialBuckets`: `count` bounds from `start`, each
    `factor` times the one before (rounded, so that the exposition stays readable)."""
    return tuple(float(f"{start * factor**i:.6g}") for i in range(count))


Labels = tuple[str, ...]


Expand = Callable[[Labels], Labels]


class CounterVec:
    """A counter per label values, for hot paths (no lock: one event-loop thread updates
    it). Exposed as `<name>_total`, as prometheus_client names counters.

    With `expand`, a series is kept under a short key and `expand(key)` makes its
    `labelnames` values at scrape time (labels that follow from others, such as a
    resource's API group, then cost nothing per update)."""

    def __init__(
        self,
        name: str,
        documentation: str,
        labelnames: Sequence[str],
        *,
        expand: Expand | None = None,
    ) -> None:
        self.name = name.removesuffix("_total")
        self.documentation = documentation
        self.labelnames = tuple(labelnames)
        self._expand = expand
        self._values: dict[Labels, float] = {}

    def inc(self, labels: Labels, amount: float = 1.0) -> None:
        values = self._values
        values[labels] = values.get(labels, 0.0) + amount

    def value(self, labels: Labels) -> float:
        return self._values.get(labels, 0.0)

    def items(self) -> list[tuple[Labels, float]]:
        """Every series counted so far, with its value."""
        return list(self._values.items())

    def describe(self) -> list[Metric]:
        return [CounterMetricFamily(self.name, self.documentation, labels=self.labelnames)]

    def collect(self) -> list[Metric]:
        family = CounterMetricFamily(self.name, self.documentation, labels=self.labelnames)
        expand = self._expand
        for labels, value in list(self._values.items()):
            family.add_metric(expand(labels) if expand else labels, value)
        return [family]


class HistogramVec:
    """A histogram per label values, for hot paths (no lock: one event-loop thread updates
    it). Each series is one list: a count per bucket (not cumulative), the +Inf bucket, and
    the sum last; the cumulative counts are made at scrape time. `expand` as `CounterVec`'s.
    """

    def __init__(
        self,
        name: str,
        documentation: str,
        labelnames: Sequence[str],
        *,
        buckets: Sequence[float] = DEFAULT_BUCKETS,
        expand: Expand | None = None,
    ) -> None:
        self.name = name
        self.documentation = documentation
        self.labelnames = tuple(labelnames)
        self._expand = expand
        self.buckets = tuple(sorted(buckets))
        self._bucket_names = [_float_text(b) for b in self.buckets] + ["+Inf"]
        self._series: dict[Labels, list[float]] = {}

    def observe(self, labels: Labels, value: float) -> None:
        series = self._series.get(labels)
        if series is None:
            series = self._series[labels] = [0] * (len(self.buckets) + 1) + [0.0]
        # `le` buckets: a value equal to a bound counts in that bound's bucket.
        series[bisect.bisect_left(self.buckets, value)] += 1
        series[-1] += value

    def count(self, labels: Labels) -> int:
        series = self._series.get(labels)
        return int(sum(series[:-1])) if series is not None else 0

    def describe(self) -> list[Metric]:
        return [HistogramMetricFamily(self.name, self.documentation, labels=self.labelnames)]

    def collect(self) -> list[Metric]:
        family = HistogramMetricFamily(self.name, self.documentation, labels=self.labelnames)
        expand = self._expand
        for labels, series in list(self._series.items()):
            cumulative = 0.0
            buckets = []
            for bucket_name, count in zip(self._bucket_names, series[:-1], strict=True):
                cumulative += count
                buckets.append((bucket_name, cumulative))
            family.add_metric(expand(labels) if expand else labels, buckets, sum_value=series[-1])
        return [family]


def _float_text(value: float) -> str:
    """`le` as Prometheus clients write it: `0.005`, `1.0`, `10.0`."""
    return repr(float(value))


class Callback:
    """Metrics computed at scrape time: `collect` returns the families (made with `gauge` or
    `counter`). `described` names them up front (families without samples), so that the
    registry can refuse a second collector of the same names."""

    def __init__(
        self, collect: Callable[[], Iterable[Metric]], described: Sequence[Metric]
    ) -> None:
        self._collect = collect
        self._described = list(described)

    def describe(self) -> list[Metric]:
        return self._described

    def collect(self) -> Iterable[Metric]:
        return self._collect()


def gauge(
    name: str, documentation: str, labelnames: Sequence[str] = (), samples: Iterable = ()
) -> GaugeMetricFamily:
    """A gauge family; `samples` are `(label values, value)` pairs (or plain values when
    there are no labels)."""
    family = GaugeMetricFamily(name, documentation, labels=list(labelnames))
    for sample in samples:
        labels, value = sample if labelnames else ((), sample)
        family.add_metric(list(labels), value)
    return family


def counter(
    name: str, documentation: str, labelnames: Sequence[str] = (), samples: Iterable = ()
) -> CounterMetricFamily:
    """A counter family read from a running total at scrape time (see `gauge`)."""
    family = CounterMetricFamily(name, documentation, labels=list(labelnames))
    for sample in samples:
        labels, value = sample if labelnames else ((), sample)
        family.add_metric(list(labels), value)
    return family


class _GCPauses:
    """`python_gc_duration_seconds{generation}`: how long each run of the cycle collector
    held the process, as a Go component's `go_gc_duration_seconds`. A collection stops the
    event loop, so every request in flight waits it out: at the scale of a load test a full
    collection of a service's caches is one of the things a latency's tail is made of, and
    prometheus_client only counts collections."""

    def __init__(self) -> None:
        self.histogram = HistogramVec(
            "python_gc_duration_seconds",
            "Time a run of the cycle collector held the process, by generation.",
            ["generation"],
            buckets=LATENCY_BUCKETS,
        )
        self._started = 0.0
        gc.callbacks.append(self._time)

    def _time(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            elapsed = time.perf_counter() - self._started
            self.histogram.observe((str(info["generation"]),), elapsed)

    def describe(self) -> list[Metric]:
        return self.histogram.describe()

    def collect(self) -> list[Metric]:
        return self.histogram.collect()


GC_PAUSES = _GCPauses()


def new_registry(*, process: bool = True) -> CollectorRegistry:
    """A service's registry; with `process`, the process, Python and GC collectors too
    (`process_cpu_seconds_total`, `python_info`, `python_gc_duration_seconds`, ...), as a
    Go component exposes its process and runtime figures."""
    registry = CollectorRegistry()
    if process:
        for collector in (PROCESS_COLLECTOR, PLATFORM_COLLECTOR, GC_COLLECTOR, GC_PAUSES):
            registry.register(collector)
    return registry


def render(registry: CollectorRegistry) -> bytes:
    return generate_latest(registry)


Refresh = Callable[[], Awaitable[None]]


@dataclass
class Endpoint:
    """A running `/metrics` endpoint; `url` is what to scrape."""

    runner: web.AppRunner
    url: str

    async def stop(self) -> None:
        await self.runner.cleanup()


async def serve(
    port: int,
    *,
    registry: CollectorRegistry,
    host: str = "127.0.0.1",
    refresh: Refresh | None = None,
) -> Endpoint:
    """Serve `registry` on `GET http://host:port/metrics` (port 0 picks a free one) until
    the endpoint is stopped. `refresh`, if given, runs before each scrape: for figures that
    need I/O (the apistore asks Postgres for the log's last sequence); if it fails, the
    scrape still answers with what the collectors have."""

    async def metrics(_: web.Request) -> web.Response:
        if refresh is not None:
            try:
                await refresh()
            except Exception:
                log.warning("refreshing metrics before a scrape failed", exc_info=True)
        return web.Response(body=render(registry), headers={"Content-Type": CONTENT_TYPE_LATEST})

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port).start()
    except BaseException:
        await runner.cleanup()
        raise
    bound = runner.addresses[0][1]
    shown = "127.0.0.1" if host in ("0.0.0.0", "") else host
    return Endpoint(runner, f"http://{shown}:{bound}/metrics")


@contextlib.asynccontextmanager
async def serving(
    port: int | None,
    *,
    registry: CollectorRegistry,
    host: str = "127.0.0.1",
    refresh: Refresh | None = None,
) -> AsyncIterator[Endpoint | None]:
    """`serve` for the life of the block when a port is given (`--metrics-port`); None
    otherwise."""
    if port is None:
        yield None
        return
    endpoint = await serve(port, registry=registry, host=host, refresh=refresh)
    try:
        yield endpoint
    finally:
        await endpoint.stop()


def ready_detail(endpoint: Endpoint | None) -> str:
    """The part of a service's READY line that tells `drasim up` where its metrics are."""
    return f" metrics={endpoint.url}" if endpoint is not None else ""
