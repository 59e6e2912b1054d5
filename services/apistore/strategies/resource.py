"""Strategies of resource.k8s.io/v1: DeviceClasses, ResourceSlices, ResourceClaims,
ResourceClaimTemplates and DeviceTaintRules (upstream `pkg/registry/resource/<kind>/
strategy.go`); the fields each drops while a feature gate is off are in `disabled_fields`.

A device taint without `timeAdded` gets the time of the write (upstream's
`SetDefaults_DeviceTaint`): the eviction controller counts `tolerationSeconds` from it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from drasim.apistore import objectmeta
from drasim.apistore.strategies import disabled_fields, resource_authz
from drasim.apistore.strategies.base import Admission, Strategy
from drasim.common import features as gates
from drasim.common.api import resource_v1
from drasim.common.errors import FieldError, field_forbidden
from drasim.common.featuregate import FeatureGate

if TYPE_CHECKING:
    from drasim.apistore.request import Context

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

    def prepare_for_create(self, obj: resource_v1.ResourceSlice) -> None:
        super().prepare_for_create(obj)
        _stamp_taints(obj.spec.devices)

    def prepare_for_update(
        self, new: resource_v1.ResourceSlice, old: resource_v1.ResourceSlice
    ) -> None:
        super().prepare_for_update(new, old)
        _stamp_taints(new.spec.devices)

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
    reads_namespace = True  # a status update granting admin access is checked too

    def node_name(self, obj: resource_v1.ResourceClaim) -> str:
        return _allocated_node(obj)

    def validate_in_namespace(
        self,
        new: resource_v1.ResourceClaim,
        old: resource_v1.ResourceClaim | None,
        subresource: str,
        batch: Admission,
    ) -> list[FieldError]:
        if subresource != "status":  # the spec is immutable: checked once, on create
            return (
                _authorized_for_admin(new.spec.devices.requests, new, batch) if old is None else []
            )
        # Upstream's `AuthorizedForAdminStatus`: only an allocation that newly grants it.
        if old is not None and _admin_result(old) is not None:
            return []
        path = _admin_result(new)
        return _admin_namespace_errors(path, new, batch) if path else []

    def authorize_status_update(
        self,
        new: resource_v1.ResourceClaim,
        old: resource_v1.ResourceClaim,
        verb: str,
        ctx: Context,
        batch: Admission,
    ) -> list[FieldError]:
        """DRAResourceClaimGranularStatusAuthorization (`resource_authz`); a driver's
        entries only while allocated (all of them go with the allocation)."""
        if not batch.features.enabled(gates.DRA_RESOURCE_CLAIM_GRANULAR_STATUS_AUTHORIZATION):
            return []
        errs = resource_authz.authorized_for_binding(new, old, verb, ctx, batch.policy)
        if new.status.allocation is not None and batch.features.enabled(
            gates.DRA_RESOURCE_CLAIM_DEVICE_STATUS
        ):
            errs += resource_authz.authorized_for_device_status(new, old, verb, ctx, batch.policy)
        return errs

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
        _drop_deallocated_status_devices(new, old)  # after the gates: nothing left if off


class ResourceClaimTemplateStrategy(Strategy):
    def validate_in_namespace(
        self,
        new: resource_v1.ResourceClaimTemplate,
        old: resource_v1.ResourceClaimTemplate | None,
        subresource: str,
        batch: Admission,
    ) -> list[FieldError]:
        if old is not None:  # the spec is immutable: checked once, on create
            return []
        return _authorized_for_admin(new.spec.spec.devices.requests, new, batch)

    def drop_disabled_fields(
        self,
        new: resource_v1.ResourceClaimTemplate,
        old: resource_v1.ResourceClaimTemplate | None,
        features: FeatureGate,
    ) -> None:
        disabled_fields.drop_claim_spec_fields(
            new.spec.spec, old.spec.spec if old is not None else None, features
        )


class DeviceTaintRuleStrategy(Strategy):
    """Users write the spec, the device taint eviction controller the status. The taint's
    `timeAdded` moves whenever its effect changes and the client kept the old time, so it
    says since when the effect holds (what `tolerationSeconds` count from)."""

    generation = True
    status_subresource = True

    def prepare_for_create(self, obj: resource_v1.DeviceTaintRule) -> None:
        super().prepare_for_create(obj)
        _stamp_taints_of([obj.spec.taint])

    def prepare_for_update(
        self, new: resource_v1.DeviceTaintRule, old: resource_v1.DeviceTaintRule
    ) -> None:
        taint, old_taint = new.spec.taint, old.spec.taint
        if taint.effect != old_taint.effect and taint.time_added == old_taint.time_added:
            taint.time_added = None
        _stamp_taints_of([taint])
        super().prepare_for_update(new, old)


def _stamp_taints(devices: list[resource_v1.Device]) -> None:
    for device in devices:
        _stamp_taints_of(device.taints)


def _stamp_taints_of(taints: list[resource_v1.DeviceTaint]) -> None:
    for taint in taints:
        if taint.time_added is None:
            taint.time_added = objectmeta.now_rfc3339()


def _authorized_for_admin(
    requests: list[resource_v1.DeviceRequest], obj: Any, batch: Admission
) -> list[FieldError]:
    """Upstream `AuthorizedForAdmin`: the first request asking for admin access needs the
    namespace labelled `resource.kubernetes.io/admin-access: "true"`."""
    for i, request in enumerate(requests):
        if request.exactly is not None and request.exactly.admin_access:
            return _admin_namespace_errors(f"spec.devices.requests[{i}].adminAccess", obj, batch)
    return []


def _admin_result(claim: resource_v1.ResourceClaim) -> str | None:
    """The path of the first allocation result granting admin access, if any."""
    allocation = claim.status.allocation
    for i, result in enumerate(allocation.devices.results if allocation else ()):
        if result.admin_access:
            return f"status.allocation.devices.results[{i}].adminAccess"
    return None


def _admin_namespace_errors(path: str, obj: Any, batch: Admission) -> list[FieldError]:
    namespace = batch.namespace(obj.metadata.namespace or "")
    if namespace is None:  # the write fails for the missing namespace itself
        return []
    label = resource_v1.DRA_ADMIN_NAMESPACE_LABEL_KEY
    if namespace.metadata.labels.get(label) == "true":
        return []
    detail = (
        f"admin access to devices requires the `{label}: true` label on the containing namespace"
    )
    return [field_forbidden(path, detail)]


def _shared_device_ids(claim: resource_v1.ResourceClaim) -> set[tuple[str, str, str, str]]:
    allocation = claim.status.allocation
    if allocation is None:
        return set()
    return {(r.driver, r.pool, r.device, r.share_id or "") for r in allocation.devices.results}


def _drop_deallocated_status_devices(
    new: resource_v1.ResourceClaim, old: resource_v1.ResourceClaim
) -> None:
    """A device's status goes with its allocation: entries of devices the old allocation
    had and the new one has not are dropped (upstream `dropDeallocatedStatusDevices`)."""
    deallocated = _shared_device_ids(old) - _shared_device_ids(new)
    if deallocated:
        new.status.devices = [
            d
            for d in new.status.devices
            if (d.driver, d.pool, d.device, d.share_id or "") not in deallocated
        ]


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
    "devicetaintrules": DeviceTaintRuleStrategy(),
}
