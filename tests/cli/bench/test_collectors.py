"""What the bench collects: throughput samples and percentiles as upstream's, and
scheduling attempts counted from the scheduler's Events."""

from __future__ import annotations

import pytest

from drasim.cli.bench import collectors, views


@pytest.mark.parametrize(
    ("samples", "want"),
    [
        ([5.0], (5.0, 5.0, 5.0)),
        ([float(i) for i in range(1, 11)], (5.0, 9.0, 10.0)),
        ([float(i) for i in range(1, 101)], (50.0, 90.0, 99.0)),
    ],
    ids=["one", "ten", "hundred"],
)
def test_percentiles_as_upstream(samples, want):
    assert tuple(collectors.percentile(samples, q) for q in (50, 90, 99)) == want


class _Done(Exception):
    pass


def _script(values):
    """A function answering `values`, one per call, then raising _Done."""
    it = iter(values)

    def answer():
        for value in it:
            return value
        raise _Done

    return answer


async def test_collector_merges_idle_intervals(monkeypatch):
    """No sample before the first binding; the first one seen is the baseline; an interval
    with no binding is merged into the next and counted once per interval it covers."""
    monkeypatch.setattr(collectors, "SAMPLE_INTERVAL", 0)
    collector = collectors.ThroughputCollector(
        _script([0, 10, 20, 20, 40, 55]), clock=_script([0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    )
    with pytest.raises(_Done):
        await collector.run()
    assert collector.samples == [10.0, 10.0, 10.0, 15.0]


def _event(name: str, reason: str, count: int) -> views.EventView:
    return views.EventView(
        metadata=views.Meta(name=name, namespace="test"),
        reason=reason,
        involved_object=views.InvolvedObject(namespace="test", name=name.split(".")[0]),
        count=count,
    )


def test_attempts_count_how_much_each_event_count_grew():
    tracker = collectors.ClusterTracker(bus=None)
    for watch_event, event in [
        ("ADDED", _event("a.1", "FailedScheduling", 1)),
        ("MODIFIED", _event("a.1", "FailedScheduling", 2)),
        ("MODIFIED", _event("a.1", "FailedScheduling", 4)),  # two attempts between updates
        ("MODIFIED", _event("a.1", "FailedScheduling", 4)),  # no new attempt
        ("MODIFIED", _event("b.1", "FailedScheduling", 3)),  # first seen: all of its count
        ("ADDED", _event("a.2", "Scheduled", 1)),
        ("ADDED", _event("a.3", "Pulled", 1)),  # not the scheduler's
        ("DELETED", _event("a.1", "FailedScheduling", 4)),
        ("ADDED", _event("a.4", "FailedScheduling", 1)),  # re-created after the deletion
    ]:
        tracker.observe_event(watch_event, event)
    assert tracker.attempts_in("test") == {"FailedScheduling": 8, "Scheduled": 1}
    assert tracker.attempts_in("other") == {}
