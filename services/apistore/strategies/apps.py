"""Strategies of apps/v1: Deployments, ReplicaSets, DaemonSets and StatefulSets (upstream
`pkg/registry/apps/{deployment,replicaset,daemonset,statefulset}/strategy.go`)."""

from __future__ import annotations

from drasim.apistore.strategies.base import Strategy

__all__ = ["STRATEGIES", "WorkloadStrategy"]


class WorkloadStrategy(Strategy):
    """Their controllers write the status; `metadata.generation` tells them a spec moved
    (`status.observedGeneration` answers it)."""

    status_subresource = True
    generation = True


STRATEGIES: dict[str, Strategy] = {
    "deployments": WorkloadStrategy(),
    "replicasets": WorkloadStrategy(),
    "daemonsets": WorkloadStrategy(),
    "statefulsets": WorkloadStrategy(),
}
