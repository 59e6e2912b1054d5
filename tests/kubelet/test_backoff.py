"""CrashLoopBackOff's schedule, as upstream's kubelet keeps it (flowcontrol.Backoff with the
kubelet's 10-minute expiry): immediate first restart, then 10s doubling to 5m."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from drasim.kubelet import backoff
from drasim.kubelet.backoff import BackoffEntry, CrashLoopBackOff

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def test_delays_double_from_ten_seconds_to_five_minutes() -> None:
    policy = backoff.UPSTREAM
    entry: BackoffEntry | None = None
    delays = []
    now = 0.0
    for _ in range(9):
        exited = now  # the container exits at once each time it starts
        assert not policy.in_backoff_since(
            entry, at(exited), at(exited + (entry.delay if entry else 0))
        )
        if entry is not None:
            assert policy.in_backoff_since(entry, at(exited), at(exited + entry.delay - 0.1))
        now = exited + (entry.delay if entry else 0)
        entry = policy.next(entry, at(exited), at(now))
        delays.append(entry.delay)
    assert delays == [10, 20, 40, 80, 160, 300, 300, 300, 300]


def test_the_first_restart_is_immediate() -> None:
    assert not backoff.UPSTREAM.in_backoff_since(None, at(0), at(0))


def test_a_container_that_ran_ten_minutes_starts_over() -> None:
    policy = backoff.UPSTREAM
    entry = BackoffEntry(delay=300, updated=at(0))
    # Exits 601 s after its last restart: the entry has expired.
    assert not policy.in_backoff_since(entry, at(601), at(601))
    assert policy.next(entry, at(601), at(601)).delay == 10
    # Exits 599 s after: still backing off, and the next delay is capped.
    assert policy.in_backoff_since(entry, at(599), at(600))
    assert policy.next(entry, at(599), at(899)).delay == 300


def test_reduced_decay_and_the_flag() -> None:
    assert (backoff.REDUCED.initial, backoff.REDUCED.maximum) == (1.0, 60.0)
    assert backoff.parse("100ms/1s") == CrashLoopBackOff(initial=0.1, maximum=1.0)
    for bad in ("1s", "2s/1s", "x/1s"):
        with pytest.raises(ValueError):
            backoff.parse(bad)
