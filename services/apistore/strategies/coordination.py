"""Strategy of coordination.k8s.io/v1 Leases (upstream
`pkg/registry/coordination/lease/strategy.go`)."""

from __future__ import annotations

from drasim.apistore.strategies.base import Strategy
from drasim.common.api import coordination_v1

__all__ = ["STRATEGIES"]

NODE_LEASE_NAMESPACE = "kube-node-lease"


class LeaseStrategy(Strategy):
    """A node's heartbeat Lease (its own name in `kube-node-lease`) goes to its kubelet."""

    def node_name(self, obj: coordination_v1.Lease) -> str:
        return obj.metadata.name if obj.metadata.namespace == NODE_LEASE_NAMESPACE else ""


STRATEGIES: dict[str, Strategy] = {"leases": LeaseStrategy()}
