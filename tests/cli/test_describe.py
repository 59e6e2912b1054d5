"""`drasim describe`: events show how often and over how long they repeated, as kubectl's."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from drasim.cli import describe
from drasim.common import events
from drasim.common.api import core_v1, registry, scheduling_v1
from drasim.common.api.meta_v1 import ObjectMeta
from drasim.common.client import ApiClient
from tests.builders import make_pod

NOW = datetime(2025, 1, 1, 12, 0, tzinfo=UTC)


def _at(seconds_ago: int) -> str:
    return (NOW - timedelta(seconds=seconds_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")


@pytest.mark.parametrize(
    ("event", "want"),
    [
        (core_v1.Event(count=1, first_timestamp=_at(30), last_timestamp=_at(30)), "30s"),
        (
            core_v1.Event(count=3, first_timestamp=_at(600), last_timestamp=_at(45)),
            "45s (x3 over 10m)",
        ),
        (core_v1.Event(first_timestamp=None, last_timestamp=_at(5)), "5s"),
        (
            # Written by another client: fractional seconds, an offset.
            core_v1.Event(
                count=2,
                first_timestamp="2025-01-01T11:58:00.123456Z",
                last_timestamp="2025-01-01T13:59:30.5+02:00",
            ),
            "29s (x2 over 119s)",
        ),
    ],
    ids=["once", "repeated", "no-count", "fractional-seconds"],
)
def test_event_age(event: core_v1.Event, want: str) -> None:
    assert describe.event_age(event, NOW) == want


async def test_describe_shows_a_repeated_event_once_with_its_count(api: ApiClient) -> None:
    pod = await api.create(make_pod("p").obj())
    recorder = events.EventRecorder(api, component="default-scheduler")
    involved = core_v1.ObjectReference(
        kind="Pod", api_version="v1", namespace="default", name="p", uid=pod.metadata.uid
    )
    for _ in range(3):
        await recorder.record(involved, "Warning", "FailedScheduling", "0/1 nodes are available")
    await recorder.record(involved, "Normal", "Scheduled", "Successfully assigned default/p to n")

    out = await describe.describe(api, registry.resolve("pod"), "p", "default")
    lines = out.splitlines()
    header, dashes, *rows = lines[lines.index("Events:") + 1 :]
    assert header.split() == ["Type", "Reason", "Age", "From", "Message"]
    assert set(dashes.replace(" ", "")) == {"-"}
    assert len(rows) == 2
    # Both happened within the same second: their order is not the point here.
    [failed] = [r for r in rows if "FailedScheduling" in r]
    [scheduled] = [r for r in rows if "Scheduled " in r]
    assert failed.split()[:2] == ["Warning", "FailedScheduling"]
    assert " (x3 over " in failed and failed.endswith("0/1 nodes are available")
    assert scheduled.split()[:2] == ["Normal", "Scheduled"] and "(x" not in scheduled
    # The columns stay aligned around the longer Age.
    assert failed.index("default-scheduler") == scheduled.index("default-scheduler")
    assert header.index("From") == scheduled.index("default-scheduler")


def test_event_age_reads_a_series_and_event_time() -> None:
    now = datetime(2026, 11, 30, 4, 0, 0, tzinfo=UTC)
    ev = core_v1.Event(
        event_time="2026-11-30T03:50:00.000000Z",
        series=core_v1.EventSeries(count=4, last_observed_time="2026-11-30T03:59:30.000000Z"),
    )
    assert describe.event_age(ev, now) == "30s (x4 over 10m)"
    assert describe.event_age(core_v1.Event(event_time="2026-11-30T03:58:00.5Z"), now) == "119s"


async def test_long_reasons_and_sources_keep_their_columns(api) -> None:
    pod = await api.create(make_pod("q").obj())
    recorder = events.EventRecorder(api, component="deployment-controller")
    involved = core_v1.ObjectReference(
        kind="Pod", api_version="v1", namespace="default", name="q", uid=pod.metadata.uid
    )
    await recorder.record(involved, "Warning", "FailedResourceClaimCreation", "boom")
    out = await describe.describe(api, registry.resolve("pod"), "q", "default")
    kind, reason, age, source, message = out.splitlines()[-1].split()
    assert (kind, reason, source, message) == (
        "Warning",
        "FailedResourceClaimCreation",
        "deployment-controller",
        "boom",
    )
    assert age in ("0s", "1s")  # (the clock may pass a second between write and describe)


async def test_describe_shows_priority_and_a_priority_class(api) -> None:
    await api.create(
        scheduling_v1.PriorityClass(
            metadata=ObjectMeta(name="batch"), value=100, description="batch pods first"
        )
    )
    pod = make_pod("r").obj()
    pod.spec.priority_class_name = "batch"
    await api.create(pod)
    out = await describe.describe(api, registry.resolve("pod"), "r", "default")
    assert "Priority:       100" in out.splitlines()
    assert "Priority Class Name: batch" in out.splitlines()
    out = await describe.describe(api, registry.resolve("pc"), "batch", "")
    lines = out.splitlines()
    for line in (
        "Value:          100",
        "GlobalDefault:  false",
        "PreemptionPolicy: PreemptLowerPriority",
        "Description:    batch pods first",
    ):
        assert line in lines
