"""Kubernetes resource quantities (`resource.Quantity`), parsed and compared exactly.

Values are `fractions.Fraction`s, so `0.1 + 0.2 == 0.3` and `1Ki == 1024` hold without
floating-point error. As upstream, every non-zero value is rounded *away from zero* to
nano precision when it is made ("if you want some resources, you should get some"), and
each quantity remembers the format it was written in, which decides its canonical string.
"""

from __future__ import annotations

import enum
import functools
import math
import re
from fractions import Fraction

__all__ = ["Format", "Quantity", "parse_quantity"]


class Format(enum.StrEnum):
    """How a quantity is written back (`resource.Format`)."""

    DECIMAL_SI = "DecimalSI"  # 1500m, 2k, 3M
    BINARY_SI = "BinarySI"  # 512Ki, 3Gi
    DECIMAL_EXPONENT = "DecimalExponent"  # 1e3, 12e-3


_NANO = Fraction(1, 10**9)
_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1

_DECIMAL_SUFFIXES = {
    "n": -9,
    "u": -6,
    "m": -3,
    "": 0,
    "k": 3,
    "M": 6,
    "G": 9,
    "T": 12,
    "P": 15,
    "E": 18,
}
_BINARY_SUFFIXES = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_SUFFIX_FOR_DECIMAL_EXPONENT = {e: s for s, e in _DECIMAL_SUFFIXES.items()}
_SUFFIX_FOR_BINARY_POWER = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]

# Sign, digits with an optional fraction (at least one digit), then the suffix.
_QUANTITY_RE = re.compile(
    r"(?P<sign>[+-]?)(?P<number>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?P<suffix>[A-Za-z]*[+-]?[0-9]*)"
)
_EXPONENT_RE = re.compile(r"[eE](?P<exp>[+-]?[0-9]+)")
_FORMAT_HELP = (
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
)
# Upstream's parse errors (`ErrNumeric`, `ErrSuffix`), for numbers and suffixes it cannot use.
_NUMERIC_HELP = "unable to parse numeric part of quantity"
_SUFFIX_HELP = "unable to parse quantity's suffix"

# What a quantity may be, so that no quantity costs more than microseconds to parse, compare
# or print. Upstream rejects a decimal exponent outside int32 (kubernetes#141203) and rounds
# any value below 1n up to 1n; it bounds neither digits nor magnitude, but its parser builds
# a 10**exponent integer too (seconds for `1e200000`). drasim keeps exact Fractions, whose
# cost grows with the digits of the value, so it also refuses more than _MAX_DIGITS digits
# written and a magnitude of 10**_MAX_MAGNITUDE or more: far beyond int64 (about 9.2e18),
# where every consumer saturates anyway.
_MAX_EXPONENT = 2**31 - 1
_MAX_DIGITS = 1000
_MAX_MAGNITUDE = 1000


def _round_to_nano(value: Fraction) -> Fraction:
    """Round a non-zero magnitude up to the next nano unit, as `ParseQuantity` does."""
    scaled = value / _NANO
    if scaled.denominator == 1:
        return value
    magnitude = math.ceil(abs(scaled))
    return Fraction(magnitude if value > 0 else -magnitude) * _NANO


@functools.total_ordering
class Quantity:
    """An exact, immutable resource quantity.

    Equality, ordering and hashing use the value only (`1k == 1000`), as upstream's `Cmp`.
    """

    __slots__ = ("_value", "_format")

    _value: Fraction
    _format: Format

    def __init__(self, value: int | Fraction = 0, format: Format = Format.DECIMAL_SI) -> None:
        object.__setattr__(self, "_value", _round_to_nano(Fraction(value)))
        object.__setattr__(self, "_format", Format(format))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Quantity is immutable")

    def __reduce__(self) -> tuple[type[Quantity], tuple[Fraction, Format]]:
        return (Quantity, (self._value, self._format))

    @property
    def value(self) -> Fraction:
        return self._value

    @property
    def format(self) -> Format:
        return self._format

    def is_zero(self) -> bool:
        return self._value == 0

    def as_int64(self) -> int | None:
        """The value as an int64, or None when it is fractional or out of range (`AsInt64`)."""
        if self._value.denominator != 1 or not _INT64_MIN <= self._value <= _INT64_MAX:
            return None
        return self._value.numerator

    def saturated_int64(self) -> int:
        """The value rounded up to an integer and held within int64, as upstream's `Value()`
        saturates (kubernetes#141305) where it used to wrap."""
        return max(_INT64_MIN, min(_INT64_MAX, math.ceil(self._value)))

    def int_value(self) -> int:
        """The value rounded up to an integer (upstream `Value()`)."""
        return math.ceil(self._value)

    def milli_value(self) -> int:
        """The value in thousandths, rounded up (upstream `MilliValue()`)."""
        return math.ceil(self._value * 1000)

    # Arithmetic keeps the left operand's format unless it is zero (upstream `Add`/`Sub`).
    def _format_with(self, other: Quantity) -> Format:
        return other._format if self._value == 0 else self._format

    def __add__(self, other: object) -> Quantity:
        other_q = _coerce(other)
        if other_q is None:
            return NotImplemented
        return Quantity(self._value + other_q._value, self._format_with(other_q))

    def __radd__(self, other: object) -> Quantity:
        # Lets `sum(quantities)` start from int 0.
        other_q = _coerce(other)
        if other_q is None:
            return NotImplemented
        return other_q + self

    def __sub__(self, other: object) -> Quantity:
        other_q = _coerce(other)
        if other_q is None:
            return NotImplemented
        return Quantity(self._value - other_q._value, self._format_with(other_q))

    def __rsub__(self, other: object) -> Quantity:
        other_q = _coerce(other)
        if other_q is None:
            return NotImplemented
        return other_q - self

    def __neg__(self) -> Quantity:
        return Quantity(-self._value, self._format)

    def __eq__(self, other: object) -> bool:
        other_q = _coerce(other)
        if other_q is None:
            return NotImplemented
        return self._value == other_q._value

    def __lt__(self, other: object) -> bool:
        other_q = _coerce(other)
        if other_q is None:
            return NotImplemented
        return self._value < other_q._value

    def __hash__(self) -> int:
        return hash(self._value)

    def __repr__(self) -> str:
        return f"Quantity({str(self)!r})"

    def __str__(self) -> str:
        """The canonical form (upstream `String()`): e.g. `1500m`, `1k`, `1536Mi`, `1e3`."""
        if self._value == 0:
            return "0"
        fmt = self._format
        if fmt is Format.BINARY_SI:
            if -1024 < self._value < 1024 or self._value.denominator != 1:
                # Small or fractional binary values would round; show them as DecimalSI.
                fmt = Format.DECIMAL_SI
            else:
                return _binary_string(self._value.numerator)
        return _decimal_string(self._value, fmt)


def _coerce(other: object) -> Quantity | None:
    if isinstance(other, Quantity):
        return other
    if isinstance(other, int | Fraction) and not isinstance(other, bool):
        return Quantity(other)
    return None


def _decimal_string(value: Fraction, fmt: Format) -> str:
    """`mantissa + suffix` with the exponent a multiple of 3 and the mantissa an integer."""
    sign = "-" if value < 0 else ""
    mantissa = abs(value / _NANO).numerator  # integral: values are kept at nano precision
    mantissa, zeros = _remove_factors_of_ten(mantissa)
    exponent = zeros - 9
    shift = exponent % 3
    mantissa *= 10**shift
    exponent -= shift
    if fmt is Format.DECIMAL_EXPONENT:
        return f"{sign}{mantissa}" + (f"e{exponent}" if exponent else "")
    if exponent > 18:
        mantissa *= 10 ** (exponent - 18)
        exponent = 18
    return f"{sign}{mantissa}{_SUFFIX_FOR_DECIMAL_EXPONENT[exponent]}"


def _remove_factors_of_ten(mantissa: int) -> tuple[int, int]:
    """(m, k) with mantissa == m * 10**k and m not a multiple of 10, for mantissa > 0.

    Divides by 10, 10**2, 10**4, ... while they divide, then by the same powers downwards:
    a few big divisions where one division per trailing zero costs time quadratic in the
    digits of the value.
    """
    powers: list[int] = []
    power = 10
    while mantissa % power == 0:
        mantissa //= power
        powers.append(power)
        power *= power
    zeros = (1 << len(powers)) - 1
    for bit in reversed(range(len(powers))):
        if mantissa % powers[bit] == 0:
            mantissa //= powers[bit]
            zeros += 1 << bit
    return mantissa, zeros


def _binary_string(value: int) -> str:
    sign = "-" if value < 0 else ""
    mantissa = abs(value)
    power = 0
    while mantissa % 1024 == 0 and power < len(_SUFFIX_FOR_BINARY_POWER) - 1:
        mantissa //= 1024
        power += 1
    return f"{sign}{mantissa}{_SUFFIX_FOR_BINARY_POWER[power]}"


def parse_quantity(s: str | int | float | Quantity) -> Quantity:
    """Parse a quantity as written in YAML or JSON (`"500m"`, `"1Gi"`, `2`, `0.5`, `"1e3"`).

    Raises ValueError naming the input when it is not a quantity, or one past the bounds
    above (`_MAX_EXPONENT`, `_MAX_DIGITS`, `_MAX_MAGNITUDE`). A BinarySI value is capped at
    2^63-1 in magnitude, as upstream's `ParseQuantity` caps it.
    """
    if isinstance(s, Quantity):
        return s
    if isinstance(s, bool) or not isinstance(s, str | int | float):
        raise ValueError(f"invalid quantity {s!r}: expected a string or a number")
    if isinstance(s, int) and s.bit_length() > 4 * _MAX_DIGITS:
        raise ValueError(f"invalid quantity: {_NUMERIC_HELP}: more than {_MAX_DIGITS} digits")
    text = s if isinstance(s, str) else repr(s)
    match = _QUANTITY_RE.fullmatch(text)
    if match is None:
        raise ValueError(f"invalid quantity {_shown(text)}: {_FORMAT_HELP}")
    whole, _, fraction = match["number"].partition(".")
    if len(whole) + len(fraction) > _MAX_DIGITS:
        raise ValueError(
            f"invalid quantity {_shown(text)}: {_NUMERIC_HELP}: more than {_MAX_DIGITS} digits"
        )
    suffix = match["suffix"]
    if suffix in _DECIMAL_SUFFIXES:
        fmt, base, power = Format.DECIMAL_SI, 10, _DECIMAL_SUFFIXES[suffix]
    elif suffix in _BINARY_SUFFIXES:
        fmt, base, power = Format.BINARY_SI, 2, _BINARY_SUFFIXES[suffix]
    else:
        exponent = _EXPONENT_RE.fullmatch(suffix)
        if exponent is None:
            raise ValueError(f"invalid quantity {_shown(text)}: unknown suffix {suffix!r}")
        # Compared as text first: int() of a long digit string is itself slow.
        exp = exponent["exp"].lstrip("+-").lstrip("0") or "0"
        if len(exp) > len(str(_MAX_EXPONENT)) or int(exp) > _MAX_EXPONENT:
            raise ValueError(f"invalid quantity {_shown(text)}: {_SUFFIX_HELP}")
        fmt, base, power = Format.DECIMAL_EXPONENT, 10, int(exponent["exp"])
    sign = -1 if match["sign"] == "-" else 1
    digits = (whole + fraction).lstrip("0")
    if not digits:
        return Quantity(0, fmt)
    if base == 10:
        # The power of ten of the leading digit: the value lies in [10**lead, 10**(lead+1)).
        lead = len(digits) - len(fraction) - 1 + power
        if lead >= _MAX_MAGNITUDE:
            raise ValueError(
                f"invalid quantity {_shown(text)}: must be less than 1e{_MAX_MAGNITUDE}"
            )
        if lead < -9:
            return Quantity(sign * _NANO, fmt)  # below 1n: rounds up to 1n, however small
        number = Fraction(int(digits), 10 ** len(fraction)) * Fraction(10) ** power
        return Quantity(sign * number, fmt)
    value = Fraction(int(digits), 10 ** len(fraction)) * 2**power
    return Quantity(sign * min(value, _INT64_MAX), fmt)


def _shown(text: str) -> str:
    """The input as an error names it; a long one is cut, as upstream's messages are short."""
    return repr(text) if len(text) <= 64 else repr(text[:60] + "...")
