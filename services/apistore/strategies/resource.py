"""Strategies of resource.k8s.io/v1: DeviceClasses, ResourceSlices, ResourceClaims and
ResourceClaimTemplates (upstream `pkg/registry/resource/<kind>/strategy.go`); the fields
each drops while a feature gate is off are in `disabled_fields`."""

from __future__ import annotations

from typing import ClassVar

from drasim.apistore.strategies import disabled_fields
from drasim.apistore.strategies.base import Strategy
from drasim.common.api import resource_v1
from drasim.common.featuregate import FeatureGate

__all__ = ["STRATEGIES"]


class DeviceClassStrategy(Strategy):
    generation = True

    def drop_disabled_fields(
        self,
        new: resource_v1.DeviceClass,
        old: resource_v1.DeviceClass | None,
        features: FeatureGate,
    ) -> None:
        disabled_fields.drop_device_class_fields(new, old, features)


class ResourceSliceStrategy(Strategy):
    """A slice of one node's devices goes to that node's kubelet (its DRA drivers)."""

    generation = True
    node_field: ClassVar[str] = "spec.nodeName"

    def node_name(self, obj: resource_v1.ResourceSlice) -> str:
        return obj.spec.node_name or ""

    def drop_disabled_fields(
        self,
        new: resource_v1.ResourceSlice,
        old: resource_v1.ResourceSlice | None,
        features: FeatureGate,
    ) -> None:
        disabled_fields.drop_slice_fields(new, old, features)


class ResourceClaimStrategy(Strategy):
    """The scheduler and the claim controller write the status (allocation, reservations);
    an allocated claim goes to the kubelet of the node it is allocated on. Its spec never
    changes, and as upstream's strategy it has no `metadata.generation`."""

    status_subresource = True

    def node_name(self, obj: resource_v1.ResourceClaim) -> str:
        return _allocated_node(obj)

    def drop_disabled_fields(
        self,
        new: resource_v1.ResourceClaim,
        old: resource_v1.ResourceClaim | None,
        features: FeatureGate,
    ) -> None:
        disabled_fields.drop_claim_spec_fields(
            new.spec, old.spec if old is not None else None, features
        )

    def drop_disabled_status_fields(
        self, new: resource_v1.ResourceClaim, old: resource_v1.ResourceClaim, features: FeatureGate
    ) -> None:
        disabled_fields.drop_claim_status_fields(new, old, features)


class ResourceClaimTemplateStrategy(Strategy):
    def drop_disabled_fields(
        self,
        new: resource_v1.ResourceClaimTemplate,
        old: resource_v1.ResourceClaimTemplate | None,
        features: FeatureGate,
    ) -> None:
        disabled_fields.drop_claim_spec_fields(
            new.spec.spec, old.spec.spec if old is not None else None, features
        )


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
    "resourceclaimtemplates": ResourceClaimTemplateStrategy(),
}
