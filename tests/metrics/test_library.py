"""`drasim.common.metrics`: the lock-free counters and histograms render as Prometheus
parses them, with `le` buckets and scrape-time label expansion."""

from __future__ import annotations

import gc

from drasim.common import metrics
from tests.metrics.scraping import Scrape


def test_histogram_buckets_are_cumulative_and_inclusive() -> None:
    registry = metrics.new_registry(process=False)
    histogram = metrics.HistogramVec("op_seconds", "Op.", ("op",), buckets=(0.1, 1.0))
    registry.register(histogram)
    for value in (0.05, 0.1, 0.5, 3.0):
        histogram.observe(("a",), value)

    got = Scrape(metrics.render(registry).decode())
    assert got.value("op_seconds_bucket", op="a", le="0.1") == 2  # 0.1 counts in le="0.1"
    assert got.value("op_seconds_bucket", op="a", le="1.0") == 3
    assert got.value("op_seconds_bucket", op="a", le="+Inf") == 4
    assert got.value("op_seconds_count", op="a") == 4
    assert got.value("op_seconds_sum", op="a") == 3.65
    assert histogram.count(("a",)) == 4


def test_series_keys_expand_into_labels_at_scrape_time() -> None:
    registry = metrics.new_registry(process=False)
    counter = metrics.CounterVec(
        "requests_total", "Requests.", ("verb", "group"), expand=lambda key: (key[0], "apps")
    )
    registry.register(counter)
    counter.inc(("GET",))
    counter.inc(("GET",), 2)

    got = Scrape(metrics.render(registry).decode())
    assert got.value("requests_total", verb="GET", group="apps") == 3
    assert counter.value(("GET",)) == 3


def test_exponential_buckets_match_component_base() -> None:
    assert metrics.exponential_buckets(1, 2, 5) == (1.0, 2.0, 4.0, 8.0, 16.0)
    assert metrics.exponential_buckets(0.001, 2, 3) == (0.001, 0.002, 0.004)


def test_a_process_registry_times_each_collection_by_generation() -> None:
    registry = metrics.new_registry()
    before = Scrape(metrics.render(registry).decode())
    full_before = before.value("python_gc_duration_seconds_count", generation="2") or 0
    young_before = before.value("python_gc_duration_seconds_count", generation="0") or 0

    gc.collect(2)
    gc.collect(0)

    got = Scrape(metrics.render(registry).decode())
    assert got.value("python_gc_duration_seconds_count", generation="2") >= full_before + 1
    assert got.value("python_gc_duration_seconds_count", generation="0") >= young_before + 1
    assert got.value("python_gc_duration_seconds_sum", generation="2") > 0
