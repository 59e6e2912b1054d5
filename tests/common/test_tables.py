"""Table columns as kubectl shows them: timestamps in every RFC 3339 form, and the events
columns of upstream's `printEvent` (`kubectl get events [-o wide]`)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from drasim.common import tables
from drasim.common.api import core_v1, meta_v1

NOW = datetime(2026, 11, 30, 3, 50, tzinfo=UTC)
AT = datetime(2026, 11, 30, 3, 45, 46, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("2026-11-30T03:45:46Z", AT),
        ("2026-11-30T03:45:46.123456Z", AT + timedelta(microseconds=123456)),
        ("2026-11-30T03:45:46.5Z", AT + timedelta(microseconds=500000)),
        ("2026-11-30T03:45:46.123456789Z", AT + timedelta(microseconds=123456)),
        ("2026-11-30T05:45:46+02:00", AT),
        ("2026-11-29T22:15:46.25-05:30", AT + timedelta(microseconds=250000)),
        ("2026-11-30t03:45:46z", AT),
        (None, None),
        ("", None),
        ("yesterday", None),
        ("2026-11-30", None),
        ("2026-11-30T03:45:46", None),  # no zone: not RFC 3339
        ("2026-13-30T03:45:46Z", None),
    ],
    ids=[
        "seconds",
        "micros",
        "short-fraction",
        "nanos",
        "offset",
        "negative-offset-with-fraction",
        "lower-case",
        "none",
        "empty",
        "garbage",
        "date-only",
        "no-zone",
        "out-of-range",
    ],
)
def test_parse_time_reads_rfc3339(text: str | None, want: datetime | None) -> None:
    parsed = tables.parse_time(text)
    assert parsed == want
    if parsed is not None:
        assert parsed.tzinfo == UTC


def _ago(seconds: float, *, micros: bool = False) -> str:
    when = NOW - timedelta(seconds=seconds)
    return when.strftime("%Y-%m-%dT%H:%M:%S.%fZ" if micros else "%Y-%m-%dT%H:%M:%SZ")


def _event(**fields) -> core_v1.Event:
    defaults = {
        "metadata": meta_v1.ObjectMeta(name="web.1880e2b1c3d4e5f6", namespace="default"),
        "involved_object": core_v1.ObjectReference(kind="ReplicaSet", name="web-5f9dc4ccb6"),
        "type": "Normal",
        "reason": "SuccessfulCreate",
        "message": "Created pod: web-5f9dc4ccb6-x2x4q\n",
    }
    return core_v1.Event(**{**defaults, **fields})


# Upstream `eventColumnDefinitions`: (name, priority); priority 1 shows with `-o wide`.
EVENT_COLUMNS = [
    ("Last Seen", 0),
    ("Type", 0),
    ("Reason", 0),
    ("Object", 0),
    ("Subobject", 1),
    ("Source", 1),
    ("Message", 0),
    ("First Seen", 1),
    ("Count", 1),
    ("Name", 1),
]


def test_event_columns_are_upstreams_in_order_and_priority() -> None:
    columns = [(c.name, c.priority) for c in tables.columns_for("events", wide=True)]
    assert columns == EVENT_COLUMNS
    [name] = [c for c in tables.columns_for("events", wide=True) if c.format == "name"]
    assert name.name == "Name"


@pytest.mark.parametrize(
    ("event", "want"),
    [
        (
            _event(
                first_timestamp=_ago(600),
                last_timestamp=_ago(45),
                count=3,
                source=core_v1.EventSource(component="replicaset-controller"),
            ),
            ["45s", "Normal", "SuccessfulCreate", "replicaset/web-5f9dc4ccb6", "",
             "replicaset-controller", "Created pod: web-5f9dc4ccb6-x2x4q", "10m", "3",
             "web.1880e2b1c3d4e5f6"],
        ),
        (
            # Written through events.k8s.io by another client: eventTime only, fractional.
            _event(
                event_time=_ago(90, micros=True),
                reporting_component="default-scheduler",
                reporting_instance="default-scheduler-node-1",
                involved_object=core_v1.ObjectReference(
                    kind="Pod", name="p", field_path="spec.containers{c}"
                ),
            ),
            ["90s", "Normal", "SuccessfulCreate", "pod/p", "spec.containers{c}",
             "default-scheduler, default-scheduler-node-1", "Created pod: web-5f9dc4ccb6-x2x4q",
             "90s", "1", "web.1880e2b1c3d4e5f6"],
        ),
        (
            _event(
                first_timestamp=_ago(30, micros=True),
                source=core_v1.EventSource(component="kubelet", host="node-1"),
                involved_object=core_v1.ObjectReference(kind="Node"),
            ),
            ["30s", "Normal", "SuccessfulCreate", "node", "", "kubelet, node-1",
             "Created pod: web-5f9dc4ccb6-x2x4q", "30s", "1", "web.1880e2b1c3d4e5f6"],
        ),
        (
            _event(),
            ["<unknown>", "Normal", "SuccessfulCreate", "replicaset/web-5f9dc4ccb6", "", "",
             "Created pod: web-5f9dc4ccb6-x2x4q", "<unknown>", "1", "web.1880e2b1c3d4e5f6"],
        ),
    ],
    ids=["core-v1", "event-time-only", "first-timestamp-only", "no-time"],
)  # fmt: skip
def test_event_cells(event: core_v1.Event, want: list[str]) -> None:
    header, [row] = tables.rows("events", [event], wide=True, now=NOW)
    assert dict(zip(header, row, strict=True)) == dict(zip(header, want, strict=True))
    narrow, [short] = tables.rows("events", [event], now=NOW)
    assert narrow == ["Last Seen", "Type", "Reason", "Object", "Message"]
    assert short == [want[0], want[1], want[2], want[3], want[6]]
