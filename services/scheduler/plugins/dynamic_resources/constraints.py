"""Claim constraints: `matchAttribute` (every device of the named requests has the same value
of the attribute) and `distinctAttribute` (each has a different one, KEP-5075: e.g. shares
of distinct devices). Both are monotonic, so the search checks each device as it picks it
and undoes the check when it backs out.

Upstream: `matchAttributeConstraint` in `allocator_incubating.go`,
`distinctAttributeConstraint` in `constraint.go` and `lookupAttribute`, in
`staging/src/k8s.io/dynamic-resource-allocation/structured/internal/incubating/`.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field

from drasim.common.api import resource_v1
from drasim.scheduler.plugins.dynamic_resources.pools import AllocatorError, DeviceID

__all__ = ["Constraint", "claim_constraints"]


def _lookup(device: resource_v1.Device, device_id: DeviceID, name: str) -> Hashable | None:
    """The attribute's typed value (a qualified name, or the bare one when its domain is
    the driver), or None when the device lacks it or its type is unknown."""
    attribute = device.attributes.get(name)
    if attribute is None:
        domain, sep, identifier = name.partition("/")
        if not sep or domain != device_id[0]:
            return None
        attribute = device.attributes.get(identifier)
        if attribute is None:
            return None
    for kind, value in (
        ("string", attribute.string_value),
        ("int", attribute.int_value),
        ("bool", attribute.bool_value),
        ("version", attribute.version_value),
    ):
        if value is not None:
            return (kind, value)
    return None


@dataclass(slots=True)
class Constraint:
    """One constraint of one claim, with the values of the devices picked so far."""

    requests: frozenset[str]  # empty: every request of the claim
    attribute: str
    distinct: bool
    values: list[Hashable] = field(default_factory=list)

    def applies(self, request: str) -> bool:
        """`request` is "<request>" or "<request>/<subrequest>"; naming either counts."""
        if not self.requests:
            return True
        return request in self.requests or request.split("/", 1)[0] in self.requests

    def add(self, request: str, device: resource_v1.Device, device_id: DeviceID) -> bool:
        """Take the device into the constraint, or False if it would break it."""
        if not self.applies(request):
            return True
        value = _lookup(device, device_id, self.attribute)
        if value is None:
            return False
        if self.distinct:
            if value in self.values:
                return False
        elif self.values and value != self.values[0]:
            return False
        self.values.append(value)
        return True

    def remove(self, request: str) -> None:
        """Undo the last successful `add` for this request."""
        if self.applies(request):
            self.values.pop()


def claim_constraints(claim: resource_v1.ResourceClaim, ref: str) -> list[Constraint]:
    """Fresh constraints of the claim for one search; AllocatorError for one of a kind
    unknown here."""
    found = []
    for i, c in enumerate(claim.spec.devices.constraints):
        if c.match_attribute:
            found.append(Constraint(frozenset(c.requests), c.match_attribute, distinct=False))
        elif c.distinct_attribute:
            found.append(Constraint(frozenset(c.requests), c.distinct_attribute, distinct=True))
        else:
            raise AllocatorError(
                f"claim {ref}, constraint #{i}: empty constraint (unsupported constraint type?)"
            )
    return found
