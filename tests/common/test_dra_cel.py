"""The DRA selector compiler shared by admission and the scheduler: what it refuses, and the
message it refuses with (upstream's `dynamic-resource-allocation/cel` compiler's words)."""

from __future__ import annotations

import pytest

from drasim.common import dra_cel
from drasim.common.api import resource_v1
from drasim.scheduler.plugins.dynamic_resources import cel_env

ACCEPTED = [
    'device.driver == "gpu.example.com"',
    'device.attributes["gpu.example.com"].model == "h100"',
    'device.attributes["gpu.example.com"].model',  # dyn: upstream's checker lets it pass
    "device.allowMultipleAllocations",
    'device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi")) >= 0',
    'device.attributes["d"].exists(k, k == "model") && [1, 2].all(x, x > 0)',
    "[1, 2].map(x, x * 2).filter(y, y > 2).size() == 1",
    'size(device.driver) > 0 && device.driver.startsWith("gpu")',
    '"device.nope" == device.driver',  # names inside strings are not references
    'device.driver in ["a", "b"] || isSemver("1.2.3")',
    'r"a\\b" == device.driver',
    'quantity("1")',  # a library function: the probe cannot tell its type
]


@pytest.mark.parametrize("expression", ACCEPTED)
def test_compiles(expression: str) -> None:
    dra_cel.compile_expression(expression)


REFUSED = [
    ("device.driver ==",
     "compilation failed: ERROR: <input>:1:17: Syntax error: mismatched input '<EOF>' expecting"),
    ("x == 1",
     "compilation failed: ERROR: <input>:1:1: undeclared reference to 'x' (in container '')\n"
     " | x == 1\n"
     " | ^"),
    ("device.nope == 1",
     "compilation failed: ERROR: <input>:1:7: undefined field 'nope'\n"
     " | device.nope == 1\n"
     " | ......^"),
    ("has(device.nope)", "undefined field 'nope'"),
    ("frobnicate(device.driver)",
     "compilation failed: ERROR: <input>:1:1: undeclared reference to 'frobnicate' "
     "(in container '')"),
    ('device.driver == "a" &&\n  other',
     "compilation failed: ERROR: <input>:2:3: undeclared reference to 'other' (in container '')\n"
     " |   other\n"
     " | ..^"),
    ("device.driver", "must evaluate to bool or the unknown type, not string"),
    ("1 + 2", "must evaluate to bool or the unknown type, not int"),
    ("[1, 2]", "must evaluate to bool or the unknown type, not list(int)"),
    ('{"a": 1}', "must evaluate to bool or the unknown type, not map(string, int)"),
    ("cel.bind(x, 1, x > 0)",
     "'cel.bind' is part of Kubernetes' CEL environment but not supported by drasim"),
    ('device.driver.replace("a", "b") == "a"',
     "compilation failed: ERROR: <input>:1:15: 'replace' is part of Kubernetes' CEL"),
    ("device.attributes.?x", "compilation failed: ERROR: <input>:1:18: unsupported syntax '.?'"),
]  # fmt: skip


@pytest.mark.parametrize(("expression", "message"), REFUSED, ids=[e for e, _ in REFUSED])
def test_refuses(expression: str, message: str) -> None:
    with pytest.raises(dra_cel.CompileError) as refused:
        dra_cel.compile_expression(expression)
    assert message in str(refused.value)


def test_scheduler_refuses_with_the_same_message() -> None:
    """A stored selector that no longer compiles fails in the scheduler as its create would."""
    with pytest.raises(cel_env.CELError) as refused:
        cel_env.compile_selector("device.nope == 1")
    with pytest.raises(dra_cel.CompileError) as admission:
        dra_cel.compile_expression("device.nope == 1")
    assert str(refused.value) == str(admission.value)


def test_library_functions_are_the_scheduler_environments() -> None:
    assert set(cel_env._FUNCTIONS) == dra_cel.LIBRARY_FUNCTIONS


def test_upstream_limits() -> None:
    # resource.k8s.io CELSelectorExpressionMaxLength and CELSelectorExpressionMaxCost.
    assert dra_cel.SELECTOR_EXPRESSION_MAX_LENGTH == 10 * 1024
    assert dra_cel.SELECTOR_EXPRESSION_MAX_COST == 1_000_000


# --- The estimated cost limit (upstream `validateCELSelector`) ------------------------------

LIMIT = dra_cel.SELECTOR_EXPRESSION_MAX_COST
# Upstream estimates 9,673,956 (32^4 iterations over attribute identifiers; test_cel_cost.py).
TOO_COMPLEX = (
    'device.attributes["d"].all(a, device.attributes["d"].all(b, device.attributes["d"]'
    '.all(c, device.attributes["d"].all(x, a == x))))'
)
# A string of 600 drivers (up to 63 characters each): the `+`s cost 1,137,354, and the tree
# nests 600 deep.
LONG_CHAIN = " + ".join(["device.driver"] * 600) + ' == "x"'


@pytest.mark.parametrize("expression", [TOO_COMPLEX, LONG_CHAIN], ids=["nested-all", "chain"])
def test_an_expression_over_the_cost_limit_is_refused(expression: str) -> None:
    with pytest.raises(dra_cel.CostLimitExceeded) as refused:
        dra_cel.compile_expression(expression, cost_limit=LIMIT)
    assert str(refused.value) == "too complex, exceeds cost limit"


@pytest.mark.parametrize("expression", ACCEPTED)
def test_accepted_expressions_are_estimated_below_the_limit(expression: str) -> None:
    cost = dra_cel.max_cost(expression)
    assert cost is not None and cost < 1000
    dra_cel.compile_expression(expression, cost_limit=LIMIT)


def test_deep_expressions_are_estimated() -> None:
    """As deep as the `cel` package parses: 94 parentheses, 2,500 terms of `+` in 10 KiB."""
    assert dra_cel.max_cost("(" * 94 + 'device.driver == "a"' + ")" * 94) == 3
    assert dra_cel.max_cost(" + ".join(["1"] * 2500) + " > 0") == 2500


def test_the_scheduler_does_not_estimate() -> None:
    """Upstream's scheduler compiles with cost estimation disabled: a stored selector over
    the limit still runs (it is refused when written, not when used)."""
    dra_cel.compile_expression(TOO_COMPLEX)
    assert cel_env.compile_selector(TOO_COMPLEX).expression == TOO_COMPLEX


@pytest.mark.parametrize(
    ("product", "matches"),
    [("NVIDIA A100-SXM4-40GB", True), ("NVIDIA H100 80GB HBM3", False), ("ÅA100", True)],
)
def test_ascii_case_functions_change_ascii_letters_only(product: str, matches: bool) -> None:
    """The NVIDIA quickstart's gpu-test6 selector: `lowerAscii()` leaves `Å` alone."""
    selector = cel_env.compile_selector(
        "device.attributes['gpu.nvidia.com'].productName.lowerAscii().matches('^.*a100.*$')"
        " && device.attributes['gpu.nvidia.com'].productName.upperAscii().startsWith('Å')"
        f" == {'true' if product.startswith('Å') else 'false'}"
    )
    device = resource_v1.Device(
        name="gpu-0", attributes={"productName": resource_v1.DeviceAttribute(string_value=product)}
    )
    assert cel_env.DeviceVariables("gpu.nvidia.com", device).matches(selector) is matches
