"""Resource quota: what each object is charged, for the apistore's admission and the quota
controller alike (upstream `pkg/quota/v1/evaluator/core` and `k8s.io/apiserver/pkg/quota/v1`).

`evaluators` gives one evaluator per namespaced kind drasim serves: pods and
ResourceClaims with rules of their own, every other kind counted as `count/<resource>.<group>`
(Events are not quota'd, as upstream). `extended_resource_cache` is where both find which
DeviceClass an extended resource name stands for.
"""

from __future__ import annotations

from drasim.common.api import registry
from drasim.common.extended_resource_cache import ExtendedResourceCache
from drasim.common.quota import claims, generic, pods, resources
from drasim.common.quota.claims import ClaimEvaluator, DeviceClassCache, DeviceClassMapping
from drasim.common.quota.generic import CREATE, UPDATE, Evaluator, ObjectCountEvaluator
from drasim.common.quota.pods import PodEvaluator

__all__ = [
    "CREATE",
    "IGNORED",
    "UPDATE",
    "ClaimEvaluator",
    "DeviceClassCache",
    "DeviceClassMapping",
    "Evaluator",
    "ObjectCountEvaluator",
    "PodEvaluator",
    "claims",
    "evaluator_for",
    "evaluators",
    "extended_resource_cache",
    "generic",
    "pods",
    "resources",
]

# Kinds quota never counts (upstream's `ignoredResources` that drasim serves).
IGNORED = frozenset({"events"})
# Object counts kept under their old names as well (`legacyObjectCountAliases`).
_ALIASES = {"resourcequotas": "resourcequotas"}


def evaluator_for(
    plural: str,
    *,
    classes: DeviceClassMapping,
    pod_of: claims.PodGetter,
    owned_claims: claims.OwnedClaims,
    clock: generic.Clock,
    extended_resources: bool = True,
) -> Evaluator | None:
    """The evaluator of a namespaced resource, or None for one quota never counts;
    `extended_resources` is the DRAExtendedResource gate."""
    if plural == "pods":
        return PodEvaluator(clock)
    if plural == "resourceclaims":
        return ClaimEvaluator(
            classes=classes,
            pod_of=pod_of,
            owned_claims=owned_claims,
            clock=clock,
            extended_resources=extended_resources,
        )
    info = registry.by_plural(plural)
    if not info.namespaced or plural in IGNORED:
        return None
    return ObjectCountEvaluator(info.group, plural, _ALIASES.get(plural, ""))


def evaluators(
    *,
    classes: DeviceClassMapping,
    pod_of: claims.PodGetter,
    owned_claims: claims.OwnedClaims,
    clock: generic.Clock,
    extended_resources: bool = True,
) -> list[Evaluator]:
    """An evaluator for every namespaced resource quota covers."""
    found = (
        evaluator_for(
            info.plural,
            classes=classes,
            pod_of=pod_of,
            owned_claims=owned_claims,
            clock=clock,
            extended_resources=extended_resources,
        )
        for info in registry.RESOURCES
    )
    return [e for e in found if e is not None]


def extended_resource_cache() -> DeviceClassCache:
    """A new cache of DeviceClass → extended resource name mappings, the same the scheduler
    keeps: fed by `on_add(cls)`, `on_update(old, new)` and `on_delete(cls)`."""
    return ExtendedResourceCache()
