"""Strategy of policy/v1 PodDisruptionBudgets (upstream
`pkg/registry/policy/poddisruptionbudget/strategy.go`)."""

from __future__ import annotations

from drasim.apistore.strategies.base import Strategy

__all__ = ["STRATEGIES"]


class PodDisruptionBudgetStrategy(Strategy):
    """The disruption controller writes the status, for the generation it observed."""

    status_subresource = True
    generation = True


STRATEGIES: dict[str, Strategy] = {"poddisruptionbudgets": PodDisruptionBudgetStrategy()}
