"""Cron schedules as robfig/cron's standard parser reads them, and their next times."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from drasim.common import cron

NOW = datetime(2026, 12, 2, 11, 30, 15, tzinfo=UTC)  # a Wednesday


@pytest.mark.parametrize(
    ("schedule", "after", "expected"),
    [
        ("*/5 * * * *", NOW, datetime(2026, 12, 2, 11, 35, tzinfo=UTC)),
        ("@hourly", NOW, datetime(2026, 12, 2, 12, 0, tzinfo=UTC)),
        ("@daily", NOW, datetime(2026, 12, 3, 0, 0, tzinfo=UTC)),
        ("@weekly", NOW, datetime(2026, 12, 6, 0, 0, tzinfo=UTC)),
        ("@monthly", NOW, datetime(2027, 1, 1, 0, 0, tzinfo=UTC)),
        ("@yearly", NOW, datetime(2027, 1, 1, 0, 0, tzinfo=UTC)),
        ("0 9 * * mon-fri", NOW, datetime(2026, 12, 3, 9, 0, tzinfo=UTC)),
        (
            "30 11 * * *",
            datetime(2026, 12, 2, 11, 30, tzinfo=UTC),
            datetime(2026, 12, 3, 11, 30, tzinfo=UTC),
        ),
        ("0 0 29 2 *", NOW, datetime(2028, 2, 29, 0, 0, tzinfo=UTC)),
        # Both day fields restricted: either matches (cron's rule); one is `*`: both must.
        ("0 0 1 * sun", NOW, datetime(2026, 12, 6, 0, 0, tzinfo=UTC)),
        ("0 0 * jan *", NOW, datetime(2027, 1, 1, 0, 0, tzinfo=UTC)),
        ("TZ=Europe/Paris 0 9 * * *", NOW, datetime(2026, 12, 3, 8, 0, tzinfo=UTC)),
        ("@every 90s", NOW, NOW.replace(microsecond=0) + timedelta(seconds=90)),
    ],
)
def test_next_activation(schedule: str, after: datetime, expected: datetime) -> None:
    assert cron.parse(schedule).next_after(after) == expected


def test_a_time_zone_is_honoured_across_daylight_saving() -> None:
    paris = cron.load_location("Europe/Paris")
    schedule = cron.parse("0 9 * * *")
    summer = schedule.next_after(datetime(2026, 7, 1, 12, 0, tzinfo=paris))
    assert summer.astimezone(UTC) == datetime(2026, 7, 2, 7, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("schedule", "message"),
    [
        ("", "empty spec string"),
        ("foo", "expected exactly 5 fields, found 1: [foo]"),
        ("* * * *", "expected exactly 5 fields, found 4: [* * * *]"),
        ("60 * * * *", "end of range (60) above maximum (59): 60"),
        ("* * 0 * *", "beginning of range (0) below minimum (1): 0"),
        ("5-1 * * * *", "beginning of range (5) beyond end of range (1): 5-1"),
        ("*/0 * * * *", "step of range should be a positive number: */0"),
        ("x * * * *", 'failed to parse int from x: strconv.Atoi: parsing "x": invalid syntax'),
        ("1-2-3 * * * *", "too many hyphens: 1-2-3"),
        ("@fortnightly", "unrecognized descriptor: @fortnightly"),
        ("@every soon", 'failed to parse duration @every soon: time: invalid duration "soon"'),
    ],
)
def test_refusals_name_robfigs_reason(schedule: str, message: str) -> None:
    with pytest.raises(cron.CronError) as refused:
        cron.parse(schedule)
    assert str(refused.value) == message


def test_go_durations() -> None:
    assert cron.parse_go_duration("1h30m") == timedelta(hours=1, minutes=30)
    assert cron.parse_go_duration("1.5s") == timedelta(seconds=1.5)
    assert cron.parse_go_duration("0") == timedelta(0)
    with pytest.raises(ValueError, match='time: invalid duration "5"'):
        cron.parse_go_duration("5")
