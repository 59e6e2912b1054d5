"""The CEL environment of DRA device selectors (`DeviceClass.spec.selectors[].cel`,
`exactly.selectors`), as upstream's `dynamic-resource-allocation/cel` package builds it.

A selector sees one variable, `device`:

- `device.driver`: the driver name;
- `device.attributes["<domain>"].<id>`: int, bool, string or semver values, keyed by the
  qualified attribute name; a name without a domain belongs to the driver's domain;
- `device.capacity["<domain>"].<id>`: quantities, keyed the same way;
- `device.allowMultipleAllocations`: bool.

Looking up a domain the device does not have yields an empty map (upstream's
`newStringInterfaceMapWithDefault`), so `"x" in device.attributes["other.com"]` is false
rather than an error. The `cel` package converts plain Python values only, so this holds for
domains written as string literals in the expression, the form every example uses.

Quantities and semantic versions are not native CEL types here. They travel as one-key maps
(`{"@quantity": "<value in nano units>"}`, `{"@semver": "<version>"}`) with Kubernetes' CEL
library functions on top: `quantity`, `isQuantity`, `compareTo`, `isGreaterThan`,
`isLessThan`, `add`, `sub`, `sign`, `isInteger`, `asInteger`, `asApproximateFloat`, `semver`,
`isSemver`, `major`, `minor`, `patch` (and the strings library's `lowerAscii`,
`upperAscii`, on plain strings). So `device.capacity["d"].memory.compareTo(quantity("40Gi"))
>= 0` works, and `==` compares values (`quantity("1Gi") == quantity("1024Mi")`). Ordering
operators (`<`) on quantities fail, as upstream, where they do not type-check.

Expressions compile with `drasim.common.dra_cel`, as admission compiles them; what it does
not support (`cel.bind`, the optional-value syntax) is said there. As upstream's scheduler,
compiling here estimates no cost: a stored selector runs whatever its estimate.

Upstream also bounds each evaluation at run time (`cel.CostLimit(CELSelectorExpressionMaxCost)`:
an evaluation that exceeds it stops with `operation cancelled: actual cost limit exceeded`, a
CEL runtime error for the allocation). drasim cannot: the `cel` package evaluates in one call
that neither counts its steps nor can be interrupted. What keeps evaluation bounded instead is
admission: the estimate is an upper bound of the actual cost, so a selector admitted under the
estimated limit never reaches the runtime one. Only selectors stored before the estimate was
enforced (or that `dra_cel` could not estimate) run unbounded.
"""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import cel

from drasim.common import dra_cel
from drasim.common.api import resource_v1
from drasim.common.quantity import Quantity, parse_quantity

__all__ = ["CELError", "DeviceVariables", "Selector", "compile_selector"]

_QUANTITY = "@quantity"
_SEMVER = "@semver"
_NANO = 10**9
_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1

# Domains written as string literals: `device.attributes["gpu.example.com"]`, either quote.
_DOMAIN_LOOKUP = re.compile(
    r"""device\s*\.\s*(attributes|capacity)\s*\[\s*(?:"([^"\\]*)"|'([^'\\]*)')\s*\]"""
)
# semver.org 2.0.0; build metadata is accepted and ignored by comparisons.
_SEMVER_RE = re.compile(
    r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?"
)


class CELError(Exception):
    """A selector that does not compile, fails at runtime or does not yield a bool."""


# --- Quantity and semver values ------------------------------------------------------------


def _quantity_value(q: Quantity) -> dict[str, str]:
    """A quantity as CEL sees it: its value in nano units (quantities are exact to 1n), so
    equal values give equal maps whatever the format, and the functions below work on
    integers without building Quantity objects."""
    return {_QUANTITY: str(int(q.value * _NANO))}


def _nanos(value: Any) -> int:
    if isinstance(value, dict) and _QUANTITY in value:
        return int(value[_QUANTITY])
    raise TypeError(f"expected a quantity, got {value!r}")


def _nanos_value(nanos: int) -> dict[str, str]:
    return {_QUANTITY: str(nanos)}


def _parse_semver(text: str) -> tuple[int, int, int, tuple[str, ...]]:
    match = _SEMVER_RE.fullmatch(text)
    if match is None:
        raise ValueError(f"invalid semantic version {text!r}")
    pre = tuple(match[4].split(".")) if match[4] else ()
    return int(match[1]), int(match[2]), int(match[3]), pre


def _semver_value(text: str) -> dict[str, str]:
    """A version as CEL sees it; build metadata is dropped because it never affects order."""
    major, minor, patch, pre = _parse_semver(text)
    core = f"{major}.{minor}.{patch}"
    return {_SEMVER: f"{core}-{'.'.join(pre)}" if pre else core}


def _semver_key(value: Any) -> tuple[int, int, int, int, tuple[tuple[int, int, str], ...]]:
    """Sort key with semver precedence: numeric identifiers sort numerically and before
    alphanumeric ones, and a release sorts after its pre-releases."""
    if not (isinstance(value, dict) and _SEMVER in value):
        raise TypeError(f"expected a semver, got {value!r}")
    major, minor, patch, pre = _parse_semver(value[_SEMVER])
    ids = tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in pre)
    return major, minor, patch, 0 if pre else 1, ids


def _ordered(a: Any, b: Any) -> tuple[Any, Any]:
    if isinstance(a, dict) and _SEMVER in a:
        return _semver_key(a), _semver_key(b)
    return _nanos(a), _nanos(b)


def _compare_to(a: Any, b: Any) -> int:
    x, y = _ordered(a, b)
    return (x > y) - (x < y)


def _is_greater_than(a: Any, b: Any) -> bool:
    x, y = _ordered(a, b)
    return x > y


def _is_less_than(a: Any, b: Any) -> bool:
    x, y = _ordered(a, b)
    return x < y


def _operand(value: Any) -> int:
    """A quantity, or a plain integer as `add`/`sub` also accept."""
    return value * _NANO if isinstance(value, int) else _nanos(value)


def _add(a: Any, b: Any) -> dict[str, str]:
    return _nanos_value(_nanos(a) + _operand(b))


def _sub(a: Any, b: Any) -> dict[str, str]:
    return _nanos_value(_nanos(a) - _operand(b))


def _sign(a: Any) -> int:
    nanos = _nanos(a)
    return (nanos > 0) - (nanos < 0)


def _integer(a: Any) -> int | None:
    """The value as an int64, if it is one (upstream `AsInt64`)."""
    units, rest = divmod(_nanos(a), _NANO)
    return units if rest == 0 and _INT64_MIN <= units <= _INT64_MAX else None


def _is_integer(a: Any) -> bool:
    return _integer(a) is not None


def _as_integer(a: Any) -> int:
    value = _integer(a)
    if value is None:
        raise ValueError("cannot convert value to integer")
    return value


def _as_approximate_float(a: Any) -> float:
    return _nanos(a) / _NANO


@functools.lru_cache(maxsize=1024)
def _parsed_quantity(text: str) -> str:
    # Selectors repeat the same literals (`quantity("40Gi")`) for every device.
    return _quantity_value(parse_quantity(text))[_QUANTITY]


def _quantity(text: str) -> dict[str, str]:
    return {_QUANTITY: _parsed_quantity(text)}


def _is_quantity(text: str) -> bool:
    try:
        parse_quantity(text)
    except ValueError:
        return False
    return True


def _is_semver(text: str) -> bool:
    return _SEMVER_RE.fullmatch(text) is not None


def _semver_part(index: int) -> Callable[[Any], int]:
    def part(value: Any) -> int:
        return _semver_key(value)[index]

    return part


# `EnhanceRuntimeError` in dynamic-resource-allocation/cel: what upstream adds to cel-go's
# "no such key" so the user learns how to guard an optional attribute.
_NO_SUCH_KEY_HINT = (
    ". consider using CEL optional chaining (.? followed by orValue()) or guarding the check"
    " with has() for optional fields"
)
_TO_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
_TO_UPPER = str.maketrans("abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ")


def _lower_ascii(text: Any) -> str:
    """cel-go ext.Strings: only ASCII letters change case."""
    return str(text).translate(_TO_LOWER)


def _upper_ascii(text: Any) -> str:
    return str(text).translate(_TO_UPPER)


_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "lowerAscii": _lower_ascii,
    "upperAscii": _upper_ascii,
    "quantity": _quantity,
    "isQuantity": _is_quantity,
    "compareTo": _compare_to,
    "isGreaterThan": _is_greater_than,
    "isLessThan": _is_less_than,
    "add": _add,
    "sub": _sub,
    "sign": _sign,
    "isInteger": _is_integer,
    "asInteger": _as_integer,
    "asApproximateFloat": _as_approximate_float,
    "semver": _semver_value,
    "isSemver": _is_semver,
    "major": _semver_part(0),
    "minor": _semver_part(1),
    "patch": _semver_part(2),
}


# --- Compiled selectors --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Selector:
    """A compiled expression and the domains it looks up by literal name."""

    expression: str
    program: cel.Program
    attribute_domains: frozenset[str]
    capacity_domains: frozenset[str]


_compiled: dict[str, Selector | CELError] = {}


def compile_selector(expression: str) -> Selector:
    """Compile once per distinct expression text for the life of the process (there are few:
    one per class and per claim selector); a compile error is cached and raised again."""
    found = _compiled.get(expression)
    if found is None:
        found = _compile(expression)
        _compiled[expression] = found
    if isinstance(found, CELError):
        raise found
    return found


def _compile(expression: str) -> Selector | CELError:
    # The same compiler as admission's, so a stored selector that fails here fails with
    # the message its create would get now.
    try:
        program = dra_cel.compile_expression(expression)
    except dra_cel.CompileError as err:
        return CELError(str(err))
    attribute_domains: set[str] = set()
    capacity_domains: set[str] = set()
    for match in _DOMAIN_LOOKUP.finditer(expression):
        domains = attribute_domains if match[1] == "attributes" else capacity_domains
        domains.add(match[2] if match[2] is not None else match[3])
    return Selector(expression, program, frozenset(attribute_domains), frozenset(capacity_domains))


# --- Devices as CEL input ------------------------------------------------------------------


def _split_qualified_name(name: str, driver: str) -> tuple[str, str]:
    """`domain/id`, or the driver's domain for a bare id (upstream `parseQualifiedName`)."""
    domain, sep, ident = name.partition("/")
    return (domain, ident) if sep else (driver, name)


def _attribute_value(name: str, attribute: resource_v1.DeviceAttribute) -> Any:
    if attribute.version_value is not None:
        try:
            return _semver_value(attribute.version_value)
        except ValueError as err:
            raise CELError(f"attribute {name}: parse semantic version: {err}") from None
    value = attribute.value
    if value is None:
        raise CELError(f"attribute {name}: unsupported attribute value")
    return value


class DeviceVariables:
    """One device's `device` variable, converted from the API's Device for evaluation.

    Holds Python values only. Evaluation hands them to one `cel.Context` per thread
    (`_evaluation_context`), which converts them into the extension's own values: a context
    per device kept about 11 KB of native memory each (tracemalloc does not see it), 88 KB
    per 8-GPU node, so the scheduler's memory grew with every node its pods' filtering
    visited. A result is cached per (expression, device) by the allocator's Snapshot
    instead, so a device is converted once per distinct expression.
    """

    __slots__ = ("_device", "_attribute_domains", "_capacity_domains")

    def __init__(self, driver: str, device: resource_v1.Device) -> None:
        attributes: dict[str, dict[str, Any]] = {}
        for name, attribute in device.attributes.items():
            domain, ident = _split_qualified_name(name, driver)
            attributes.setdefault(domain, {})[ident] = _attribute_value(name, attribute)
        capacity: dict[str, dict[str, Any]] = {}
        for name, cap in device.capacity.items():
            domain, ident = _split_qualified_name(name, driver)
            capacity.setdefault(domain, {})[ident] = _quantity_value(cap.value)
        self._device: dict[str, Any] = {
            "driver": driver,
            "attributes": attributes,
            "capacity": capacity,
            "allowMultipleAllocations": bool(device.allow_multiple_allocations),
        }
        self._attribute_domains = frozenset(attributes)
        self._capacity_domains = frozenset(capacity)

    def matches(self, selector: Selector) -> bool:
        """Evaluate the selector for this device; errors and non-bool results raise CELError."""
        context = _evaluation_context()
        context.add_variable("device", self._value(selector))
        try:
            result = selector.program.execute(context)
        except KeyError as err:  # a map lookup: cel-go's words, with Kubernetes' hint
            key = err.args[0] if err.args else ""
            raise CELError(f"no such key: {key}{_NO_SUCH_KEY_HINT}") from None
        except Exception as err:  # ValueError, TypeError, RuntimeError, ...
            raise CELError(f"{type(err).__name__}: {err}") from None
        if type(result) is not bool:
            raise CELError(f"CEL result of type {type(result).__name__} is not a bool")
        return result

    def _value(self, selector: Selector) -> dict[str, Any]:
        # Domains the expression names but the device lacks read as empty maps (see module doc).
        missing_attributes = selector.attribute_domains - self._attribute_domains
        missing_capacity = selector.capacity_domains - self._capacity_domains
        device = self._device
        if missing_attributes or missing_capacity:
            device = {
                **device,
                "attributes": _with_empty(device["attributes"], missing_attributes),
                "capacity": _with_empty(device["capacity"], missing_capacity),
            }
        return device


_contexts = threading.local()


def _evaluation_context() -> cel.Context:
    """This thread's context with the library functions, registered once: each evaluation
    replaces its `device` variable, so no device's converted values outlive it."""
    context: cel.Context | None = getattr(_contexts, "context", None)
    if context is None:
        context = _contexts.context = cel.Context(functions=_FUNCTIONS)
    return context


def _with_empty(
    maps: Mapping[str, dict[str, Any]], domains: frozenset[str]
) -> dict[str, dict[str, Any]]:
    return {**maps, **{domain: {} for domain in domains}}
