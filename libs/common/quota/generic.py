"""What every quota evaluator answers, and the object counts (upstream
`k8s.io/apiserver/pkg/quota/v1`: `interfaces.go`, `generic/evaluator.go`).

An evaluator knows one kind: which writes of it quota looks at (`handles`), which of a
quota's resource names it measures (`matching_resources`), whether an object falls in a
quota's scopes, and what one object is charged (`usage`). Admission charges a write its
usage; the quota controller adds up the usage of every object of the namespace.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime

from drasim.common.api import core_v1
from drasim.common.quantity import Quantity
from drasim.common.quota import resources
from drasim.common.quota.resources import ResourceList

__all__ = [
    "CREATE",
    "UPDATE",
    "Clock",
    "Evaluator",
    "ObjectCountEvaluator",
    "calculate_usage",
    "matches",
    "object_count_name",
    "scope_selectors",
]

CREATE, UPDATE = "CREATE", "UPDATE"
# The time quota judges a pod's grace period by.
Clock = Callable[[], datetime]


def object_count_name(group: str, resource: str) -> str:
    """`count/<resource>` for the core group, `count/<resource>.<group>` for others."""
    return f"count/{resource}.{group}" if group else f"count/{resource}"


def scope_selectors(
    quota: core_v1.ResourceQuota,
) -> list[core_v1.ScopedResourceSelectorRequirement]:
    """A quota's scopes and scope selector as one list of requirements (a plain scope is
    `Exists`)."""
    selectors = [
        core_v1.ScopedResourceSelectorRequirement(scope_name=scope, operator="Exists")
        for scope in quota.spec.scopes
    ]
    if quota.spec.scope_selector is not None:
        selectors += quota.spec.scope_selector.match_expressions
    return selectors


class Evaluator:
    """One kind's part in quota; this base matches no scope and needs no field set."""

    group: str = ""
    resource: str = ""

    def handles(self, operation: str, obj: object, old: object | None) -> bool:
        """Whether a write of the main resource changes what quota counts (subresources
        never do: a status, a binding, an eviction)."""
        return operation == CREATE

    def matching_resources(self, names: Iterable[str]) -> list[str]:
        """The names, of those given, this evaluator measures."""
        raise NotImplementedError

    def matches_scope(
        self, selector: core_v1.ScopedResourceSelectorRequirement, obj: object
    ) -> bool:
        """Whether the object falls in one scope; kinds without scopes fall in none."""
        return False

    def constraints(self, required: Iterable[str], obj: object) -> str | None:
        """What the object lacks for a quota tracking `required`, or None."""
        return None

    def usage(self, obj: object) -> ResourceList:
        """What one object is charged."""
        raise NotImplementedError


class ObjectCountEvaluator(Evaluator):
    """Counts objects of a kind as `count/<resource>[.<group>]` (and a legacy alias, as
    `resourcequotas` for `count/resourcequotas`)."""

    def __init__(self, group: str, resource: str, alias: str = "") -> None:
        self.group = group
        self.resource = resource
        self._names = [object_count_name(group, resource), *([alias] if alias else [])]

    def matching_resources(self, names: Iterable[str]) -> list[str]:
        return sorted(set(names).intersection(self._names))

    def usage(self, obj: object) -> ResourceList:
        return dict.fromkeys(self._names, Quantity(1))


def matches(evaluator: Evaluator, quota: core_v1.ResourceQuota, obj: object) -> bool:
    """Whether the quota limits something the evaluator measures and the object falls in
    every one of its scopes."""
    if not evaluator.matching_resources(quota.status.hard):
        return False
    return all(evaluator.matches_scope(s, obj) for s in scope_selectors(quota))


def calculate_usage(
    quota: core_v1.ResourceQuota,
    evaluators: Iterable[Evaluator],
    objects_of: Callable[[Evaluator], Iterable[object]],
) -> ResourceList:
    """The usage of the quota's namespace, from scratch, for every name of `spec.hard` an
    evaluator measures (`CalculateUsage`); `objects_of` lists an evaluator's kind in the
    quota's namespace. Names nothing uses are 0."""
    hard = list(quota.spec.hard)
    selectors = scope_selectors(quota)
    matched: set[str] = set()
    used: ResourceList = {}
    for evaluator in evaluators:
        names = evaluator.matching_resources(hard)
        if not names:
            continue
        matched.update(names)
        used = resources.add(used, dict.fromkeys(names, Quantity(0)))
        for obj in objects_of(evaluator):
            if all(evaluator.matches_scope(s, obj) for s in selectors):
                used = resources.add(used, evaluator.usage(obj))
    # What an evaluator charges beyond its own names counts where another one measures it
    # (a claim's `requests.<extended resource>` where the pod evaluator matched it).
    return resources.mask(used, matched)
