"""Go durations as `time.ParseDuration` reads them, and `Duration.String` for backoffs."""

from __future__ import annotations

import pytest

from drasim.common.duration import format_go_duration, parse_go_duration


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("0", 0.0),
        ("30s", 30.0),
        ("1.5h", 5400.0),
        ("2h45m", 9900.0),
        ("300ms", 0.3),
        ("1m0.5s", 60.5),
        (".5s", 0.5),
        ("-1m", -60.0),
        ("+2s", 2.0),
        ("10us", 1e-5),
        ("10\u00b5s", 1e-5),
        ("7ns", 7e-9),
    ],
    ids=lambda v: str(v),
)
def test_valid(text: str, seconds: float) -> None:
    assert parse_go_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", 'time: invalid duration ""'),
        ("abc", 'time: invalid duration "abc"'),
        ("1", 'time: missing unit in duration "1"'),
        ("1d", 'time: unknown unit "d" in duration "1d"'),
        ("1s2", 'time: missing unit in duration "1s2"'),
        ("-", 'time: invalid duration "-"'),
        (".s", 'time: invalid duration ".s"'),
    ],
    ids=lambda v: str(v),
)
def test_invalid_with_go_messages(text: str, message: str) -> None:
    with pytest.raises(ValueError) as raised:
        parse_go_duration(text)
    assert str(raised.value) == message


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(10, "10s"), (20, "20s"), (80, "1m20s"), (160, "2m40s"), (300, "5m0s"), (0.5, "500ms"),
     (3600, "1h0m0s"), (0, "0s")],
)  # fmt: skip
def test_format_as_go(seconds: float, text: str) -> None:
    assert format_go_duration(seconds) == text
