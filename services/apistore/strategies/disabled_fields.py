"""The fields of resource.k8s.io that a disabled feature gate keeps out of storage, as
upstream's strategies drop them in PrepareForCreate and PrepareForUpdate
(`pkg/api/resourceclaimspec/util.go` `DropDisabledFields`; `dropDisabledFields` of
`pkg/registry/resource/{deviceclass,resourceslice,resourceclaimtemplate}/strategy.go`,
and `dropDisabledStatusFields` of `resourceclaim/strategy.go`).

Each rule is upstream's: with its gate off a field is cleared from the new object, unless
the old one (None on create) already uses it, so an object stored while the gate was on
survives unrelated updates.
"""

from __future__ import annotations

from drasim.common import features as gates
from drasim.common.api import resource_v1
from drasim.common.featuregate import FeatureGate

__all__ = [
    "drop_claim_spec_fields",
    "drop_claim_status_fields",
    "drop_device_class_fields",
    "drop_slice_fields",
]


def _off(features: FeatureGate, gate: str, in_use: bool) -> bool:
    """Whether to drop what `gate` guards: off, and not in use before."""
    return not features.enabled(gate) and not in_use


def drop_device_class_fields(
    new: resource_v1.DeviceClass, old: resource_v1.DeviceClass | None, features: FeatureGate
) -> None:
    in_use = old is not None and old.spec.extended_resource_name is not None
    if _off(features, gates.DRA_EXTENDED_RESOURCE, in_use):
        new.spec.extended_resource_name = None


# -- ResourceClaimSpec (claims and templates) ---------------------------------------------


def _requests(
    spec: resource_v1.ResourceClaimSpec | None,
) -> list[resource_v1.ExactDeviceRequest | resource_v1.DeviceSubRequest]:
    """Every exactly request and subrequest of a spec."""
    if spec is None:
        return []
    found: list[resource_v1.ExactDeviceRequest | resource_v1.DeviceSubRequest] = []
    for request in spec.devices.requests:
        if request.exactly is not None:
            found.append(request.exactly)
        found.extend(request.first_available)
    return found


def drop_claim_spec_fields(
    new: resource_v1.ResourceClaimSpec,
    old: resource_v1.ResourceClaimSpec | None,
    features: FeatureGate,
) -> None:
    """Upstream `resourceclaimspec.DropDisabledFields`, in its order (subrequests dropped
    first need no further look)."""
    old_requests = old.devices.requests if old is not None else []
    if _off(features, gates.DRA_PRIORITIZED_LIST, any(r.first_available for r in old_requests)):
        for request in new.devices.requests:
            request.first_available = []
    if _off(features, gates.DRA_DEVICE_TAINTS, any(r.tolerations for r in _requests(old))):
        for request in _requests(new):
            request.tolerations = []
    admin_in_use = any(
        r.exactly is not None and r.exactly.admin_access is not None for r in old_requests
    )
    if _off(features, gates.DRA_ADMIN_ACCESS, admin_in_use):
        for request in new.devices.requests:
            if request.exactly is not None:
                request.exactly.admin_access = None
    capacity_in_use = old is not None and (
        any(c.distinct_attribute is not None for c in old.devices.constraints)
        or any(r.capacity is not None for r in _requests(old))
    )
    if _off(features, gates.DRA_CONSUMABLE_CAPACITY, capacity_in_use):
        for constraint in new.devices.constraints:
            constraint.distinct_attribute = None
        for request in _requests(new):
            request.capacity = None


# -- ResourceClaim status -------------------------------------------------------------------


def _results(
    claim: resource_v1.ResourceClaim | None,
) -> list[resource_v1.DeviceRequestAllocationResult]:
    if claim is None or claim.status.allocation is None:
        return []
    return claim.status.allocation.devices.results


def drop_claim_status_fields(
    new: resource_v1.ResourceClaim,
    old: resource_v1.ResourceClaim | None,
    features: FeatureGate,
) -> None:
    """Upstream `dropDisabledStatusFields` of the claim status strategy."""
    old_devices = old.status.devices if old is not None else []
    if _off(features, gates.DRA_RESOURCE_CLAIM_DEVICE_STATUS, bool(old_devices)):
        new.status.devices = []
    admin_in_use = old is not None and (
        any(r.exactly is not None and r.exactly.admin_access is not None
            for r in old.spec.devices.requests)
        or any(r.admin_access is not None for r in _results(old))
    )  # fmt: skip
    if _off(features, gates.DRA_ADMIN_ACCESS, admin_in_use):
        for result in _results(new):
            result.admin_access = None
    capacity_in_use = old is not None and (
        any(c.distinct_attribute is not None for c in old.spec.devices.constraints)
        or any(r.capacity is not None for r in _requests(old.spec))
        or any(r.share_id is not None or r.consumed_capacity for r in _results(old))
        or any(d.share_id is not None for d in old_devices)
    )
    if _off(features, gates.DRA_CONSUMABLE_CAPACITY, capacity_in_use):
        for result in _results(new):
            result.share_id = None
            result.consumed_capacity = {}
        for device in new.status.devices:
            device.share_id = None
    binding_in_use = any(
        r.binding_conditions or r.binding_failure_conditions for r in _results(old)
    )
    if _off(features, gates.DRA_DEVICE_BINDING_CONDITIONS, binding_in_use):
        for result in _results(new):
            result.binding_conditions = []
            result.binding_failure_conditions = []


# -- ResourceSlice ----------------------------------------------------------------------------


def drop_slice_fields(
    new: resource_v1.ResourceSlice, old: resource_v1.ResourceSlice | None, features: FeatureGate
) -> None:
    """Upstream's ResourceSlice `dropDisabledFields`, for the gates drasim registers."""
    old_devices = old.spec.devices if old is not None else []
    if _off(features, gates.DRA_DEVICE_TAINTS, any(d.taints for d in old_devices)):
        for device in new.spec.devices:
            device.taints = []
    partitionable_in_use = old is not None and (
        bool(old.spec.shared_counters)
        or old.spec.per_device_node_selection is not None
        or any(
            d.consumes_counters
            or d.node_name is not None
            or d.node_selector is not None
            or d.all_nodes is not None
            for d in old_devices
        )
    )
    if _off(features, gates.DRA_PARTITIONABLE_DEVICES, partitionable_in_use):
        new.spec.shared_counters = []
        new.spec.per_device_node_selection = None
        for device in new.spec.devices:
            device.consumes_counters = []
            device.node_name = None
            device.node_selector = None
            device.all_nodes = None
    binding_in_use = any(
        d.binding_conditions or d.binding_failure_conditions or d.binds_to_node is not None
        for d in old_devices
    )
    binding_on = features.enabled(gates.DRA_DEVICE_BINDING_CONDITIONS) and features.enabled(
        gates.DRA_RESOURCE_CLAIM_DEVICE_STATUS
    )
    if not binding_on and not binding_in_use:
        for device in new.spec.devices:
            device.binding_conditions = []
            device.binding_failure_conditions = []
            device.binds_to_node = None
    capacity_in_use = any(
        d.allow_multiple_allocations is not None
        or any(c.request_policy is not None for c in d.capacity.values())
        for d in old_devices
    )
    if _off(features, gates.DRA_CONSUMABLE_CAPACITY, capacity_in_use):
        for device in new.spec.devices:
            device.allow_multiple_allocations = None
            for capacity in device.capacity.values():
                capacity.request_policy = None
