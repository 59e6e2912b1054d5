"""Cron schedules as the CronJob API reads them: robfig/cron v3's standard parser
(`cron.ParseStandard`, which upstream's validation and CronJob controller call) and its
`Next`.

Five fields (minute, hour, day of month, month, day of week) with `*`, `?`, ranges, steps,
lists and month and weekday names; the descriptors `@yearly` (`@annually`), `@monthly`,
`@weekly`, `@daily` (`@midnight`), `@hourly` and `@every <Go duration>`; an optional
`TZ=<zone>` or `CRON_TZ=<zone>` prefix. Errors are robfig's messages, which the API
server's 422 repeats.
"""

from __future__ import annotations

import re
import zoneinfo
from dataclasses import dataclass
from datetime import date, datetime, timedelta, tzinfo

__all__ = ["CronError", "Schedule", "load_location", "parse", "parse_go_duration"]


class CronError(ValueError):
    """A schedule robfig/cron refuses; `str()` is its message."""


@dataclass(frozen=True, slots=True)
class _Bounds:
    low: int
    high: int
    names: dict[str, int]


_MINUTES = _Bounds(0, 59, {})
_HOURS = _Bounds(0, 23, {})
_DOM = _Bounds(1, 31, {})
_MONTH_NAMES = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_DAY_NAMES = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
_MONTHS = _Bounds(1, 12, {m: i + 1 for i, m in enumerate(_MONTH_NAMES)})
_DOW = _Bounds(0, 6, {d: i for i, d in enumerate(_DAY_NAMES)})
# How far `next_after` looks before it gives up, as robfig's `Next` (five years).
_YEAR_LIMIT = 5


@dataclass(frozen=True, slots=True)
class Schedule:
    """A parsed schedule: the matching values per field, or a constant delay (`@every`).

    `dom_star`/`dow_star` keep robfig's star bit: when either day field is `*`, a day must
    match both; when neither is, it may match either (cron's classic rule).
    """

    minutes: frozenset[int] = frozenset()
    hours: frozenset[int] = frozenset()
    dom: frozenset[int] = frozenset()
    months: frozenset[int] = frozenset()
    dow: frozenset[int] = frozenset()
    dom_star: bool = False
    dow_star: bool = False
    every: timedelta | None = None
    location: tzinfo | None = None  # from a TZ= prefix; None: the time given's own zone

    def next_after(self, when: datetime) -> datetime | None:
        """The first activation strictly after `when` (an aware datetime), in `when`'s zone;
        None when there is none within five years (robfig's zero time)."""
        if self.every is not None:
            return when.replace(microsecond=0) + self.every
        zone = self.location or when.tzinfo
        local = when.astimezone(zone)
        start = local.replace(second=0, microsecond=0) + timedelta(minutes=1)
        minutes, hours = sorted(self.minutes), sorted(self.hours)
        day = start.date()
        for _ in range(366 * _YEAR_LIMIT + 2):
            if day.month in self.months and self._day_matches(day):
                first_day = day == start.date()
                for hour in hours:
                    if first_day and hour < start.hour:
                        continue
                    for minute in minutes:
                        if first_day and hour == start.hour and minute < start.minute:
                            continue
                        found = datetime(day.year, day.month, day.day, hour, minute, tzinfo=zone)
                        return found.astimezone(when.tzinfo)
            day += timedelta(days=1)
        return None

    def _day_matches(self, day: date) -> bool:
        dom = day.day in self.dom
        dow = (day.isoweekday() % 7) in self.dow
        if self.dom_star or self.dow_star:
            return dom and dow
        return dom or dow


def _all(bounds: _Bounds) -> frozenset[int]:
    return frozenset(range(bounds.low, bounds.high + 1))


_DESCRIPTORS = {
    "@yearly": ("0", "0", "1", "1", "*"),
    "@annually": ("0", "0", "1", "1", "*"),
    "@monthly": ("0", "0", "1", "*", "*"),
    "@weekly": ("0", "0", "*", "*", "0"),
    "@daily": ("0", "0", "*", "*", "*"),
    "@midnight": ("0", "0", "*", "*", "*"),
    "@hourly": ("0", "*", "*", "*", "*"),
}


def load_location(name: str) -> tzinfo:
    """Go's `time.LoadLocation`: an IANA zone ("UTC" included); `CronError` naming it as
    Go does otherwise."""
    if name in ("", "UTC"):
        return zoneinfo.ZoneInfo("UTC")
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise CronError(f"unknown time zone {name}") from None


def parse(spec: str) -> Schedule:
    """robfig's `ParseStandard`."""
    if not spec:
        raise CronError("empty spec string")
    location = None
    if spec.startswith(("TZ=", "CRON_TZ=")):
        space = spec.find(" ")
        zone = spec[spec.index("=") + 1 : space if space >= 0 else len(spec)]
        try:
            location = load_location(zone)
        except CronError as exc:
            raise CronError(f"provided bad location {zone}: {exc}") from None
        spec = spec[space:].strip() if space >= 0 else ""
    if spec.startswith("@"):
        return _descriptor(spec, location)
    fields = spec.split()
    if len(fields) != 5:
        raise CronError(f"expected exactly 5 fields, found {len(fields)}: [{' '.join(fields)}]")
    minute, hour, dom, month, dow = fields
    dom_values, dom_star = _field(dom, _DOM)
    dow_values, dow_star = _field(dow, _DOW)
    return Schedule(
        minutes=_field(minute, _MINUTES)[0],
        hours=_field(hour, _HOURS)[0],
        dom=dom_values,
        months=_field(month, _MONTHS)[0],
        dow=dow_values,
        dom_star=dom_star,
        dow_star=dow_star,
        location=location,
    )


def _descriptor(spec: str, location: tzinfo | None) -> Schedule:
    fields = _DESCRIPTORS.get(spec)
    if fields is not None:
        parsed = parse(" ".join(fields))
        return Schedule(
            minutes=parsed.minutes,
            hours=parsed.hours,
            dom=parsed.dom,
            months=parsed.months,
            dow=parsed.dow,
            dom_star=parsed.dom_star,
            dow_star=parsed.dow_star,
            location=location,
        )
    if spec.startswith("@every "):
        text = spec[len("@every ") :]
        try:
            delay = parse_go_duration(text)
        except ValueError as exc:
            raise CronError(f"failed to parse duration {spec}: {exc}") from None
        # robfig's `Every`: whole seconds, at least one.
        return Schedule(every=timedelta(seconds=max(1, int(delay.total_seconds()))))
    raise CronError(f"unrecognized descriptor: {spec}")


def _field(text: str, bounds: _Bounds) -> tuple[frozenset[int], bool]:
    """The values a comma-separated list of ranges matches, and robfig's star bit."""
    values: set[int] = set()
    star = False
    for expr in (part for part in text.split(",") if part):
        found, expr_star = _range(expr, bounds)
        values |= found
        star = star or expr_star
    return frozenset(values), star


def _range(expr: str, bounds: _Bounds) -> tuple[set[int], bool]:
    range_and_step = expr.split("/")
    low_and_high = range_and_step[0].split("-")
    star = False
    if low_and_high[0] in ("*", "?"):
        start, end, star = bounds.low, bounds.high, True
    else:
        start = _int_or_name(low_and_high[0], bounds)
        if len(low_and_high) == 1:
            end = start
        elif len(low_and_high) == 2:
            end = _int_or_name(low_and_high[1], bounds)
        else:
            raise CronError(f"too many hyphens: {expr}")
    if len(range_and_step) == 1:
        step = 1
    elif len(range_and_step) == 2:
        step = _int(range_and_step[1])
        if len(low_and_high) == 1:  # "N/step" is "N-max/step"
            end = bounds.high
        if step > 1:
            star = False
    else:
        raise CronError(f"too many slashes: {expr}")
    if start < bounds.low:
        raise CronError(f"beginning of range ({start}) below minimum ({bounds.low}): {expr}")
    if end > bounds.high:
        raise CronError(f"end of range ({end}) above maximum ({bounds.high}): {expr}")
    if start > end:
        raise CronError(f"beginning of range ({start}) beyond end of range ({end}): {expr}")
    if step == 0:
        raise CronError(f"step of range should be a positive number: {expr}")
    return set(range(start, end + 1, step)), star


def _int_or_name(expr: str, bounds: _Bounds) -> int:
    named = bounds.names.get(expr.lower())
    return named if named is not None else _int(expr)


def _int(expr: str) -> int:
    if not re.fullmatch(r"[+-]?\d+", expr):
        raise CronError(
            f'failed to parse int from {expr}: strconv.Atoi: parsing "{expr}": invalid syntax'
        )
    number = int(expr)
    if number < 0:
        raise CronError(f"negative number ({number}) not allowed: {expr}")
    return number


_DURATION_UNITS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "μs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
_DURATION_PART = re.compile(r"(\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h)")


def parse_go_duration(text: str) -> timedelta:
    """Go's `time.ParseDuration` ("1h30m", "90s", "1.5h"); ValueError with Go's message."""
    body = text[1:] if text[:1] in ("+", "-") else text
    if body == "0":
        return timedelta(0)
    position, seconds = 0, 0.0
    while position < len(body):
        match = _DURATION_PART.match(body, position)
        if match is None:
            raise ValueError(f'time: invalid duration "{text}"')
        seconds += float(match[1]) * _DURATION_UNITS[match[2]]
        position = match.end()
    if not body:
        raise ValueError(f'time: invalid duration "{text}"')
    return timedelta(seconds=-seconds if text.startswith("-") else seconds)
