"""Go durations (`time.ParseDuration`): `30s`, `1.5h`, `2h45m`, `300ms`.

Kubernetes users write durations this way in flags and annotations, so drasim's own
duration annotations (`drasim.io/run-for`) and cluster-file fields read the same syntax
and refuse what Go refuses, with Go's messages.
"""

from __future__ import annotations

import argparse
import re

__all__ = ["format_go_duration", "non_negative_duration", "parse_go_duration"]

_UNITS = {
    "ns": 1e-9,
    "us": 1e-6,
    "\u00b5s": 1e-6,  # micro sign
    "\u03bcs": 1e-6,  # Greek mu
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
_PART = re.compile(r"(\d*)(?:\.(\d*))?([^\d.]*)")
# Go's limit: a duration is an int64 of nanoseconds.
_MAX_SECONDS = (1 << 63) / 1e9


def parse_go_duration(text: str) -> float:
    """Seconds in `text`, or ValueError with the message `time.ParseDuration` gives."""
    quoted = '"' + text + '"'
    rest = text
    sign = 1.0
    if rest[:1] in ("-", "+"):
        sign = -1.0 if rest[0] == "-" else 1.0
        rest = rest[1:]
    if rest == "0":
        return 0.0
    if not rest:
        raise ValueError(f"time: invalid duration {quoted}")
    total = 0.0
    while rest:
        match = _PART.match(rest)
        assert match is not None  # every group may be empty
        whole, fraction, unit = match.groups()
        if not whole and not fraction:
            raise ValueError(f"time: invalid duration {quoted}")
        if not unit:
            raise ValueError(f"time: missing unit in duration {quoted}")
        # The unit runs until the next digit or dot; Go then looks it up whole.
        if unit not in _UNITS:
            raise ValueError(f'time: unknown unit "{unit}" in duration {quoted}')
        value = float(f"{whole or '0'}.{fraction or '0'}")
        total += value * _UNITS[unit]
        rest = rest[match.end() :]
    if total > _MAX_SECONDS:
        raise ValueError(f"time: invalid duration {quoted}")
    return sign * total


def format_go_duration(seconds: float) -> str:
    """`time.Duration.String` for whole milliseconds and up: `1m30s`, `10s`, `500ms`."""
    if seconds == 0:
        return "0s"
    if abs(seconds) < 1:
        return f"{round(seconds * 1000)}ms"
    sign = "-" if seconds < 0 else ""
    whole = abs(seconds)
    hours, whole = divmod(whole, 3600)
    minutes, secs = divmod(whole, 60)
    text = f"{secs:.3f}".rstrip("0").rstrip(".") + "s"
    if hours:
        return f"{sign}{int(hours)}h{int(minutes)}m{text}"
    if minutes:
        return f"{sign}{int(minutes)}m{text}"
    return sign + text


def non_negative_duration(text: str) -> float:
    """A flag's Go duration (`5m`, `90s`, `0`) as seconds: argparse's `type` for it."""
    try:
        seconds = parse_go_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if seconds < 0:
        raise argparse.ArgumentTypeError(f"must not be negative: {text!r}")
    return seconds
