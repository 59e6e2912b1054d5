"""The worst-case cost estimate of DRA selectors: upstream's numbers, from upstream's own
tests where they have one and derived from cel-go's `checker/cost.go` rules otherwise."""

from __future__ import annotations

import pytest

from drasim.common import cel_ast, cel_cost

MAX = cel_cost.MAX_COST


def estimate(expression: str) -> int:
    return cel_cost.estimate_max_cost(cel_ast.parse(expression))


# kubernetes `staging/src/k8s.io/dynamic-resource-allocation/cel/compile_test.go`, `expectCost`
# (the environment drasim's selectors see: device type of 1.34+, scalar attributes).
UPSTREAM_DRA = [
    ('device.attributes["no-such-domain"].noSuchAttr.isGreaterThan(quantity("0"))', 6),
    ('device.attributes["no-such-domain"]["noSuchAttr"].isGreaterThan(quantity("0"))', 6),
    ('"no-such-domain" in device.attributes', 3),
    ('device.driver == ""', 2),
    ('device.driver == "dra.example.com"', 4),
    ('device.attributes["dra.example.com"].name', 4),
    ('device.attributes["dra.example.com"]["name"]', 4),
    ('device.attributes["dra.example.com"].name > 0', 5),
    ('device.attributes["dra.example.com"].name == "fish"', 5),
    ('device.attributes["dra.example.com"].name.isGreaterThan(semver("0.0.1"))', 6),
    ('device.attributes["dra.example.com"].name.isGreaterThan(semver("v0.0.1", true))'
     ' && isSemver("v1.0.0", true)', 7),
    # An attribute value (at most 64 long) as a range: 5 + (3 + 3) * 64.
    ('device.attributes["dra.example.com"].name.exists(x, x > 0)', 389),
    ('device.capacity["dra.example.com"].name.isGreaterThan(quantity("1Ki"))', 6),
    ('"name" in device.capacity["dra.example.com"]'
     ' && device.capacity["dra.example.com"].name.isGreaterThan(quantity("1Ki"))', 10),
    ('!("name" in device.capacity["dra.example.com"])'
     ' || device.capacity["dra.example.com"].name.isGreaterThan(quantity("1Ki"))', 11),
    ("""
device.capacity["dra.example.com"].quantity.isGreaterThan(quantity("1Ki")) &&
device.attributes["dra.example.com"].bool &&
device.attributes["dra.example.com"].int > 0 &&
device.attributes["dra.example.com"].string == "fish" &&
device.attributes["dra.example.com"].version.isGreaterThan(semver("0.0.1")) &&
device.capacity["dra.example.com"]["quantity"].isGreaterThan(quantity("1Ki")) &&
device.attributes["dra.example.com"]["bool"] &&
device.attributes["dra.example.com"]["int"] > 0 &&
device.attributes["dra.example.com"]["string"] == "fish" &&
device.attributes["dra.example.com"]["version"].isGreaterThan(semver("0.0.1"))
""", 52),
    ('device.attributes["dra.example.com"].a && device.attributes["dra.example.com"].b'
     ' && device.attributes["dra.example.com"].c', 12),
    # 32 domains of at most 63 characters; 32 identifiers of at most 32.
    ('device.attributes.exists_one(x, x == "dra.example.com")', 164),
    ('device.attributes["dra.example.com"].exists_one(x, x == "services")', 133),
    ('device.capacity.exists_one(x, x == "dra.example.com")', 164),
    ('device.capacity["dra.example.com"].exists_one(x, x == "memory")', 133),
    ('device.attributes["dra.example.com"].services.matches("[^a]?sym")', 18),
    ("device.allowMultipleAllocations == true", 3),
    ("true", 0),
]  # fmt: skip


@pytest.mark.parametrize(("expression", "cost"), UPSTREAM_DRA, ids=[e for e, _ in UPSTREAM_DRA])
def test_upstream_dra_costs(expression: str, cost: int) -> None:
    assert estimate(expression) == cost


# cel-go `checker/cost_test.go`, `wanted.Max`, the cases that need no variables.
UPSTREAM_CEL_GO = [
    ('"Hello World!"', 0),
    ("[1, 2, 3]", 10),
    ('{"a": 1, "b": 2, "c": 3}', 30),
    ("[1, 2, 3].all(x, true)", 20),
    ("'123'.matches('[0-9]')", 2),
    ("true || false", 0),
    ("1 < 2", 1),
    ("2 in [1, 2, 3]", 13),
    ("true ? 1 : 2", 0),
    ('size(b"123")', 1),
    ("string(1)", 1),
    ("((5 != 6) == (1 == 2)) == ((3 <= 4) == (9 != 9))", 7),
    ("[1,2,3,4,5].filter(x, x % 2 == 0)", 101),
    ("[1,2,3,4,5].map(x, x)", 86),
    ("[1,2,3,4,5].map(x, x).filter(x, x % 2 == 0)", 177),
    ("[1,2,3,4,5].map(x, x).exists(x, x == 5) == true", 118),
    ("[1,2,3,4,5].map(x, x)[4]", 87),
    ("[[1,2],[1,2],[1,2],[1,2],[1,2]][4]", 61),
    ("{'a': [1,2], 'b': [1,2], 'c': [1,2], 'd': [1,2], 'e': [1,2]}.b", 81),
    ("[[1, 1], [2, 2], [3, 3], [4, 4], [5, 5]].all(y, y.all(y, y == 1))", 136),
    ("[1,2,3,4,5].map(x, [x, x]).all(y, y.all(y, y == 1))", 217),
    ('["a", "ab", "abc", "abcd", "abcde"].map(x, [x, x]).all(y, y.all(y, y.startsWith("a")))', 217),
    ("[1,2,3,4,5].map(x, x).map(x, x) + [1]", 173),
    ("[1,2,3].all(i, i in [1,2,3].map(j, j + j))", 230),
    ("dyn([1,2,3]).all(i, i in dyn([1,2,3]).map(j, j + j))", 234),
    ("{'hello': 'hi'}['hello'] != {'hello': 'bye'}['hello']", 63),
    ("['hello', 'hi'][0] != ['hello', 'bye'][1]", 23),
    ("type(1) == int", 1844674407370955266),  # a type's size is unknown: 2^64-1 / 10
]


@pytest.mark.parametrize(
    ("expression", "cost"), UPSTREAM_CEL_GO, ids=[e for e, _ in UPSTREAM_CEL_GO]
)
def test_upstream_cel_go_costs(expression: str, cost: int) -> None:
    assert estimate(expression) == cost


# Derived from cel-go `checker/cost.go` and Kubernetes `library/cost.go` (module doc of
# `cel_cost` for the rules), for what selectors typically do.
DERIVED = [
    # 4 + (4 + 1): the typical selector is far below the limit.
    ('device.driver == "gpu.example.com" && device.attributes["gpu.example.com"].model == "X"', 9),
    # 2 + ceil(0.1 * 3)
    ('device.driver.startsWith("gpu")', 3),
    # Sizes count code points: ceil(0.1 * 11), not ceil(0.1 * 22 bytes).
    ('device.driver.endsWith("ééééééééééé")', 4),
    # 4 + ceil(0.1 * 64) * ceil(0.1 * 3)
    ('device.attributes["d"].model.contains("abc")', 11),
    # 2 + ceil(0.1 * (63 + 1)) * ceil(0.25 * 12)
    ('device.driver.matches("^gpu-[0-9]+$")', 23),
    # 4 + ceil(0.1 * 64) for lowerAscii, whose result is as long as the attribute, then
    # ceil(0.1 * (64 + 1)) * ceil(0.25 * 10): gpu-test6 of the NVIDIA driver's quickstart.
    ("device.attributes['d'].productName.lowerAscii().matches('^.*a100.*$')", 32),
    # 2 + 10 + the list's size
    ('device.driver in ["a.example.com", "b.example.com"]', 14),
    # Either string or bytes `+`: ceil(0.1 * 128) + 8, then ceil(0.1 * min(128, 2)).
    ('device.attributes["d"].a + device.attributes["d"].b == "xy"', 22),
    # bytes(): ceil(0.1 * 63) + 2, a result of at most 252 bytes; string(): ceil(0.1 * 3).
    ('bytes(device.driver) == b"abc"', 10),
    ('string(b"abc") == device.driver', 4),
    ('size(device.attributes["d"]) > 3', 5),
    # has() costs its operand only (PresenceTestHasCost(false)).
    ('has(device.attributes["d"].model)', 3),
    ('device.attributes["d"].model.matches("^[a-z]+$")'
     ' || device.capacity["d"].memory.compareTo(quantity("80Gi")) >= 0', 25),
    # Kubernetes prices == between quantities at 1; != has no such rule, and a quantity's
    # size is unknown, so it costs ceil(0.1 * (2^64 - 1)): refused upstream as too complex.
    ('device.capacity["d"].memory == quantity("1Gi")', 6),
    ('device.capacity["d"].memory != quantity("1Gi")', 1844674407370955269),
    # 3 + 1 + 32 * (2 + 1 + 6): 32 identifiers of at most 32 characters.
    ('device.attributes["d"].all(a, device.attributes["d"].all(b, a == b))', 9444),
    # Four levels: 32^4 iterations, above CELSelectorExpressionMaxCost.
    ('device.attributes["d"].all(a, device.attributes["d"].all(b, device.attributes["d"]'
     '.all(c, device.attributes["d"].all(x, a == x))))', 9673956),
    # Upstream's "expensive" case with int('1') for int('1'.find('[0-9]*')), which costs 2
    # more in each of the 10^7 innermost steps: 85,555,551 - 2 * 10^7.
    ("[1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(x, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(y, "
     "[1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(z, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(z2, "
     "[1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(z3, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(z4, "
     "[1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(z5, int('1') < 100)))))))", 65555551),
    # A range nothing bounds (a field of an attribute value) has 2^64 - 1 elements, and
    # costs saturate there instead of overflowing.
    ('device.attributes["d"].a.b.all(z, true)', MAX),
    ('device.attributes["d"].a.all(y, device.attributes["d"].a.b.all(z, true))', MAX),
]  # fmt: skip


@pytest.mark.parametrize(("expression", "cost"), DERIVED, ids=[e for e, _ in DERIVED])
def test_derived_costs(expression: str, cost: int) -> None:
    assert estimate(expression) == cost
