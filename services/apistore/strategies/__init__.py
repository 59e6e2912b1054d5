"""Per-kind write rules, one strategy per kind as upstream's
`pkg/registry/<group>/<kind>/strategy.go`, in one module per API group; `base.Strategy`
says what a strategy decides. A new kind adds its strategy to its group's `STRATEGIES`.
"""

from __future__ import annotations

from drasim.apistore.strategies import (
    admissionregistration,
    apiextensions,
    apps,
    batch,
    coordination,
    core,
    core_app,
    policy,
    rbac,
    resource,
    scheduling,
)
from drasim.apistore.strategies.base import Admission, Strategy

__all__ = ["Admission", "Strategy", "for_resource"]

_STRATEGIES: dict[str, Strategy] = {
    **core.STRATEGIES,
    **core_app.STRATEGIES,
    **apiextensions.STRATEGIES,
    **admissionregistration.STRATEGIES,
    **coordination.STRATEGIES,
    **apps.STRATEGIES,
    **batch.STRATEGIES,
    **policy.STRATEGIES,
    **scheduling.STRATEGIES,
    **resource.STRATEGIES,
    **rbac.STRATEGIES,
}


def for_resource(plural: str) -> Strategy:
    """The strategy of the kind served at `.../<plural>` (a custom resource's included)."""
    strategy = _STRATEGIES.get(plural) or apiextensions.custom_resource_strategy(plural)
    if strategy is None:
        raise KeyError(plural)
    return strategy
