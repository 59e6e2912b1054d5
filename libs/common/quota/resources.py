"""Arithmetic on resource lists as quota does it (upstream `k8s.io/apiserver/pkg/quota/v1`
`resources.go`): usage and limits are `{name: Quantity}` maps, added, masked and compared
name by name.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from drasim.common.quantity import Quantity

__all__ = [
    "ResourceList",
    "add",
    "equals",
    "is_negative",
    "less_than_or_equal",
    "mask",
    "pretty_print",
    "remove_zeros",
    "subtract_non_negative",
]

ResourceList = dict[str, Quantity]

_ZERO = Quantity(0)


def add(a: Mapping[str, Quantity], b: Mapping[str, Quantity]) -> ResourceList:
    """a + b for every name in either."""
    result = dict(a)
    for name, quantity in b.items():
        result[name] = result[name] + quantity if name in result else quantity
    return result


def subtract_non_negative(a: Mapping[str, Quantity], b: Mapping[str, Quantity]) -> ResourceList:
    """a - b for every name in either, never below zero (`SubtractWithNonNegativeResult`):
    an update is charged what it adds, never credited what it gives back."""
    result: ResourceList = {}
    for name, quantity in a.items():
        diff = quantity - b[name] if name in b else quantity
        result[name] = diff if diff > _ZERO else _ZERO
    for name in b:
        result.setdefault(name, _ZERO)
    return result


def mask(resources: Mapping[str, Quantity], names: Iterable[str]) -> ResourceList:
    """Only the named entries."""
    wanted = set(names)
    return {name: q for name, q in resources.items() if name in wanted}


def less_than_or_equal(
    a: Mapping[str, Quantity], b: Mapping[str, Quantity]
) -> tuple[bool, list[str]]:
    """Whether a <= b for every name of b that a has, and the names where it is not."""
    exceeded = [name for name, limit in b.items() if name in a and a[name] > limit]
    return not exceeded, exceeded


def equals(a: Mapping[str, Quantity], b: Mapping[str, Quantity]) -> bool:
    """Same names, equal values (`1k` equals `1000`)."""
    return a.keys() == b.keys() and all(a[name] == b[name] for name in a)


def remove_zeros(a: Mapping[str, Quantity]) -> ResourceList:
    return {name: q for name, q in a.items() if not q.is_zero()}


def is_negative(a: Mapping[str, Quantity]) -> list[str]:
    """The names whose value is below zero."""
    return [name for name, q in a.items() if q < _ZERO]


def pretty_print(resources: Mapping[str, Quantity]) -> str:
    """`name=value` pairs sorted by name, comma-separated, as quota's messages show them."""
    return ",".join(f"{name}={resources[name]}" for name in sorted(resources))
