"""The ResourceClaim controller's gauge `resourceclaim_controller_resource_claims` (spec §8.2).

Upstream computes it at scrape time from the claim informer; drasim counts the same thing
incrementally from the informer's events, so it is a plain in-memory object that a
Prometheus exporter can read with `samples()`. Label values are Kubernetes': `"true"` /
`"false"`, and `source` is `extended_resource` (the scheduler's special claim, spec §1.3.1),
`resource_claim_template` (made by this controller) or empty (made by a user).
"""

from __future__ import annotations

from collections import Counter
from typing import NamedTuple

from drasim.common.api import resource_v1
from drasim.controllers import claimutil

RESOURCE_CLAIMS = "resourceclaim_controller_resource_claims"

SOURCE_EXTENDED_RESOURCE = "extended_resource"
SOURCE_RESOURCE_CLAIM_TEMPLATE = "resource_claim_template"


class ClaimLabels(NamedTuple):
    allocated: str
    admin_access: str
    source: str


def _flag(value: bool) -> str:
    return "true" if value else "false"


def source(claim: resource_v1.ResourceClaim) -> str:
    if claimutil.is_extended_resource_claim(claim):
        return SOURCE_EXTENDED_RESOURCE
    if claimutil.POD_CLAIM_NAME_ANNOTATION in claim.metadata.annotations:
        return SOURCE_RESOURCE_CLAIM_TEMPLATE
    return ""


def labels_of(claim: resource_v1.ResourceClaim) -> ClaimLabels:
    admin_access = any(
        r.exactly is not None and r.exactly.admin_access for r in claim.spec.devices.requests
    )
    return ClaimLabels(
        allocated=_flag(claim.status.allocation is not None),
        admin_access=_flag(admin_access),
        source=source(claim),
    )


class ResourceClaimGauge:
    """Number of ResourceClaims by (allocated, admin_access, source)."""

    name = RESOURCE_CLAIMS

    def __init__(self) -> None:
        self._counts: Counter[ClaimLabels] = Counter()

    def observe(
        self, old: resource_v1.ResourceClaim | None, new: resource_v1.ResourceClaim | None
    ) -> None:
        """Count one informer event: added (`old` None), updated, or deleted (`new` None)."""
        if old is not None:
            labels = labels_of(old)
            self._counts[labels] -= 1
            if self._counts[labels] <= 0:
                del self._counts[labels]
        if new is not None:
            self._counts[labels_of(new)] += 1

    def value(self, *, allocated: bool, admin_access: bool = False, source: str = "") -> int:
        return self._counts.get(ClaimLabels(_flag(allocated), _flag(admin_access), source), 0)

    def samples(self) -> dict[ClaimLabels, int]:
        """Every label set with at least one claim (a series with none is gone, not 0)."""
        return dict(self._counts)
