"""Validation of coordination.k8s.io/v1 Leases (`pkg/apis/coordination/validation`)."""

from __future__ import annotations

from drasim.common.api import coordination_v1
from drasim.common.api.meta_v1 import KubeObject
from drasim.common.api.validation import meta
from drasim.common.errors import FieldError, field_invalid

__all__ = ["VALIDATORS"]


def _validate_lease(lease: coordination_v1.Lease, old: KubeObject | None) -> list[FieldError]:
    errs = []
    duration = lease.spec.lease_duration_seconds
    if duration is not None and duration <= 0:
        errs.append(field_invalid("spec.leaseDurationSeconds", duration, "must be greater than 0"))
    elif duration is not None:
        errs += meta.int32("spec.leaseDurationSeconds", duration)
    transitions = lease.spec.lease_transitions
    if transitions is not None:
        errs += meta.nonnegative_int32("spec.leaseTransitions", transitions)
    return errs


VALIDATORS: dict[type[KubeObject], meta.Validator] = {
    coordination_v1.Lease: _validate_lease,
}
