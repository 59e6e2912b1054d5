"""Quantity parsing, canonical strings and arithmetic, checked against upstream behaviour."""

from fractions import Fraction

import pytest

from drasim.common.quantity import Format, Quantity, parse_quantity

PARSE_CASES = [
    # (input, exact value, canonical string, format)
    ("1", 1, "1", Format.DECIMAL_SI),
    ("0", 0, "0", Format.DECIMAL_SI),
    ("0.5", Fraction(1, 2), "500m", Format.DECIMAL_SI),
    (".5", Fraction(1, 2), "500m", Format.DECIMAL_SI),
    ("1.", 1, "1", Format.DECIMAL_SI),
    ("+3", 3, "3", Format.DECIMAL_SI),
    ("-2", -2, "-2", Format.DECIMAL_SI),
    ("-0.25", Fraction(-1, 4), "-250m", Format.DECIMAL_SI),
    ("1500", 1500, "1500", Format.DECIMAL_SI),
    ("1000", 1000, "1k", Format.DECIMAL_SI),
    ("1.5", Fraction(3, 2), "1500m", Format.DECIMAL_SI),
    ("100m", Fraction(1, 10), "100m", Format.DECIMAL_SI),
    ("1000m", 1, "1", Format.DECIMAL_SI),
    ("250u", Fraction(1, 4000), "250u", Format.DECIMAL_SI),
    ("7n", Fraction(7, 10**9), "7n", Format.DECIMAL_SI),
    ("2k", 2000, "2k", Format.DECIMAL_SI),
    ("3M", 3 * 10**6, "3M", Format.DECIMAL_SI),
    ("4G", 4 * 10**9, "4G", Format.DECIMAL_SI),
    ("5T", 5 * 10**12, "5T", Format.DECIMAL_SI),
    ("6P", 6 * 10**15, "6P", Format.DECIMAL_SI),
    ("7E", 7 * 10**18, "7E", Format.DECIMAL_SI),
    ("1Ki", 1024, "1Ki", Format.BINARY_SI),
    ("1Mi", 2**20, "1Mi", Format.BINARY_SI),
    ("1.5Gi", 3 * 2**29, "1536Mi", Format.BINARY_SI),
    ("2048Ki", 2 * 2**20, "2Mi", Format.BINARY_SI),
    ("1Ti", 2**40, "1Ti", Format.BINARY_SI),
    ("1Pi", 2**50, "1Pi", Format.BINARY_SI),
    ("1Ei", 2**60, "1Ei", Format.BINARY_SI),
    ("0.5Ki", 512, "512", Format.BINARY_SI),
    ("1e3", 1000, "1e3", Format.DECIMAL_EXPONENT),
    ("1E3", 1000, "1e3", Format.DECIMAL_EXPONENT),
    ("2e-3", Fraction(2, 1000), "2e-3", Format.DECIMAL_EXPONENT),
    ("1.5e3", 1500, "1500", Format.DECIMAL_EXPONENT),
    ("12e+6", 12 * 10**6, "12e6", Format.DECIMAL_EXPONENT),
    # Below nano precision, magnitudes round up (away from zero).
    ("0.1n", Fraction(1, 10**9), "1n", Format.DECIMAL_SI),
    ("-1.5n", Fraction(-2, 10**9), "-2n", Format.DECIMAL_SI),
    (1, 1, "1", Format.DECIMAL_SI),
    (0.5, Fraction(1, 2), "500m", Format.DECIMAL_SI),
    (2.0, 2, "2", Format.DECIMAL_SI),
]


@pytest.mark.parametrize(
    ("text", "value", "canonical", "fmt"), PARSE_CASES, ids=[repr(c[0]) for c in PARSE_CASES]
)
def test_parse(text: str | int | float, value: Fraction, canonical: str, fmt: Format) -> None:
    q = parse_quantity(text)
    assert q.value == value
    assert str(q) == canonical
    assert q.format is fmt
    assert parse_quantity(str(q)) == q


BAD_INPUTS = ["", "abc", "1K", "1Kb", "1e", "1.2.3", "--1", "1 ", " 1", "Mi", ".", "1ee3", "0x10"]


@pytest.mark.parametrize("text", BAD_INPUTS, ids=[repr(t) for t in BAD_INPUTS])
def test_parse_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="invalid quantity"):
        parse_quantity(text)


@pytest.mark.parametrize("value", [True, None, [1], float("inf"), float("nan")], ids=repr)
def test_parse_rejects_non_quantities(value: object) -> None:
    with pytest.raises(ValueError, match="invalid quantity"):
        parse_quantity(value)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("a", "b", "cmp"),
    [
        ("1k", "1000", 0),
        ("1Ki", "1024", 0),
        ("1Ki", "1k", 1),
        ("500m", "0.5", 0),
        ("1e3", "1k", 0),
        ("-1", "0", -1),
        ("999m", "1", -1),
    ],
    ids=["k-eq-plain", "Ki-eq-plain", "Ki-gt-k", "milli-eq-decimal", "exp-eq-k", "neg", "milli"],
)
def test_ordering_and_hash(a: str, b: str, cmp: int) -> None:
    qa, qb = parse_quantity(a), parse_quantity(b)
    assert (qa > qb) - (qa < qb) == cmp
    assert (qa == qb) == (cmp == 0)
    if cmp == 0:
        assert hash(qa) == hash(qb)
        assert len({qa, qb}) == 1


@pytest.mark.parametrize(
    ("a", "b", "total", "difference"),
    [
        ("1", "500m", "1500m", "500m"),
        ("1Gi", "512Mi", "1536Mi", "512Mi"),
        ("0", "1Gi", "1Gi", "-1Gi"),
        ("100m", "200m", "300m", "-100m"),
        ("1e3", "1", "1001", "999"),
    ],
    ids=["decimal", "binary", "zero-takes-other-format", "milli", "exponent"],
)
def test_add_sub(a: str, b: str, total: str, difference: str) -> None:
    qa, qb = parse_quantity(a), parse_quantity(b)
    assert str(qa + qb) == total
    assert str(qa - qb) == difference


def test_sum_and_int_operands() -> None:
    quantities = [parse_quantity(s) for s in ("1", "2", "500m")]
    assert sum(quantities) == parse_quantity("3500m")
    assert parse_quantity("2") + 1 == 3
    assert 5 - parse_quantity("2") == 3
    assert parse_quantity("1") > 0
    assert -parse_quantity("1") == -1


@pytest.mark.parametrize(
    ("text", "int64", "milli", "ceil"),
    [
        ("3", 3, 3000, 3),
        ("1500m", None, 1500, 2),
        ("1Gi", 2**30, 2**30 * 1000, 2**30),
        ("1n", None, 1, 1),
        ("-1500m", None, -1500, -1),
        ("10E", None, 10 * 10**21, 10 * 10**18),
    ],
    ids=["int", "fraction", "binary", "nano", "negative", "overflow"],
)
def test_integer_views(text: str, int64: int | None, milli: int, ceil: int) -> None:
    q = parse_quantity(text)
    assert q.as_int64() == int64
    assert q.milli_value() == milli
    assert q.int_value() == ceil


def test_immutable_and_repr() -> None:
    q = parse_quantity("2Gi")
    with pytest.raises(AttributeError):
        q.value = Fraction(1)  # type: ignore[misc]
    assert repr(q) == "Quantity('2Gi')"
    assert Quantity(Fraction(3, 2)) == parse_quantity("1500m")
    assert parse_quantity(q) is q


BOUNDED = [
    # (input, the error's detail): upstream's int32 exponent, drasim's digits and magnitude.
    ("1e2147483648", "unable to parse quantity's suffix"),
    ("1e-2147483648", "unable to parse quantity's suffix"),
    ("1" * 1001, "unable to parse numeric part of quantity: more than 1000 digits"),
    ("0." + "0" * 1000 + "1", "unable to parse numeric part of quantity: more than 1000 digits"),
    (10**1300, "unable to parse numeric part of quantity: more than 1000 digits"),
    ("1e1000", "must be less than 1e1000"),
    ("1e200000", "must be less than 1e1000"),
    ("0.1e1001", "must be less than 1e1000"),
]


@pytest.mark.parametrize(("text", "detail"), BOUNDED, ids=[str(c[0])[:16] for c in BOUNDED])
def test_parse_bounds(text: str | int, detail: str) -> None:
    with pytest.raises(ValueError, match="invalid quantity") as raised:
        parse_quantity(text)
    assert str(raised.value).endswith(detail)


EXTREMES = [
    # (input, canonical string): within the bounds, without building huge numbers.
    ("1e999", "1e999"),
    ("9" * 1000, "9" * 1000),
    ("1e19", "10e18"),
    ("1e-2147483647", "1e-9"),  # below 1n rounds up to 1n, however small
    ("-2e-30", "-1e-9"),
    ("0e-2147483647", "0"),
    ("16Ei", "9223372036854775807"),  # BinarySI is capped at 2^63-1, as upstream
    ("-16Ei", "-9223372036854775807"),
]


@pytest.mark.parametrize(("text", "canonical"), EXTREMES, ids=[c[0][:16] for c in EXTREMES])
def test_parse_extremes(text: str, canonical: str) -> None:
    assert str(parse_quantity(text)) == canonical


def test_saturated_int64() -> None:
    """Upstream's Value() saturates at the int64 rails instead of wrapping."""
    assert parse_quantity("1e19").saturated_int64() == 2**63 - 1
    assert parse_quantity("-1e19").saturated_int64() == -(2**63)
    assert parse_quantity("1.5").saturated_int64() == 2
