"""Strategies of resource.k8s.io/v1: DeviceClasses, ResourceSlices, ResourceClaims and
ResourceClaimTemplates (upstream `pkg/registry/resource/<kind>/strategy.go`)."""

from __future__ import annotations

from typing import ClassVar

from drasim.apistore.strategies.base import Strategy
from drasim.common.api import resource_v1

__all__ = ["STRATEGIES"]


class DeviceClassStrategy(Strategy):
    generation = True


class ResourceSliceStrategy(Strategy):
    """A slice of one node's devices goes to that node's kubelet (its DRA drivers)."""

    generation = True
    node_field: ClassVar[str] = "spec.nodeName"

    def node_name(self, obj: resource_v1.ResourceSlice) -> str:
        return obj.spec.node_name or ""


class ResourceClaimStrategy(Strategy):
    """The scheduler and the claim controller write the status (allocation, reservations);
    an allocated claim goes to the kubelet of the node it is allocated on. Its spec never
    changes, and as upstream's strategy it has no `metadata.generation`."""

    status_subresource = True

    def node_name(self, obj: resource_v1.ResourceClaim) -> str:
        return _allocated_node(obj)


def _allocated_node(claim: resource_v1.ResourceClaim) -> str:
    """The single node an allocated claim is bound to (`matchFields metadata.name In [n]`)."""
    allocation = claim.status.allocation
    if allocation is None or allocation.node_selector is None:
        return ""
    for term in allocation.node_selector.node_selector_terms:
        for req in term.match_fields:
            if req.key == "metadata.name" and req.operator == "In" and len(req.values) == 1:
                return req.values[0]
    return ""


STRATEGIES: dict[str, Strategy] = {
    "deviceclasses": DeviceClassStrategy(),
    "resourceslices": ResourceSliceStrategy(),
    "resourceclaims": ResourceClaimStrategy(),
    "resourceclaimtemplates": Strategy(),
}
