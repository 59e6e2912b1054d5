"""The controller manager's metrics: the ResourceClaim gauge (upstream
`NumResourceClaimsDesc`, `pkg/controller/resourceclaim/metrics/metrics.go`) and the creates
of claims from templates.

`dynamic_resource_allocation_resource_claims{allocated,admin_access,source}` counts the
claims in the controller's claim informer, computed when Prometheus scrapes, as upstream's
custom collector does (`pkg/controller/resourceclaim/metrics`; before 1.37 it was
`resourceclaim_controller_resource_claims`). Label values are Kubernetes':
`"true"` / `"false"`, and `source` is `extended_resource` (the scheduler's special claim,
annotation `resource.kubernetes.io/extended-resource-claim: "true"`),
`resource_claim_template` (made by this controller from a template) or empty (made by a
user). A label set without claims is absent, not 0.

`dynamic_resource_allocation_resourceclaim_creates_total` counts the ResourceClaim
controller's creates, as the scheduler's (`drasim.common.resourceclaim_metrics`).
"""

from __future__ import annotations

from collections import Counter
from typing import NamedTuple

from prometheus_client.core import Metric

from drasim.common import metrics
from drasim.common.api import resource_v1
from drasim.common.informer import Informer
from drasim.controllers import claimutil

__all__ = [
    "RESOURCE_CLAIMS",
    "SOURCE_EXTENDED_RESOURCE",
    "SOURCE_RESOURCE_CLAIM_TEMPLATE",
    "ClaimLabels",
    "ControllerMetrics",
    "ResourceClaimGauge",
]

RESOURCE_CLAIMS = "dynamic_resource_allocation_resource_claims"
RESOURCE_CLAIMS_HELP = (
    "Number of ResourceClaims, categorized by allocation status, admin access, and source. "
    "Source can be 'resource_claim_template' (created from a template), 'extended_resource' "
    "(extended resources), or empty (manually created by a user)."
)

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
    if resource_v1.POD_CLAIM_NAME_ANNOTATION in claim.metadata.annotations:
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
    """Number of ResourceClaims by (allocated, admin_access, source), counted from the
    claim informer's cache whenever it is read."""

    name = RESOURCE_CLAIMS

    def __init__(self, claims: Informer[resource_v1.ResourceClaim]) -> None:
        self._claims = claims

    def samples(self) -> dict[ClaimLabels, int]:
        """Every label set with at least one claim (a series with none is gone, not 0)."""
        return dict(Counter(labels_of(claim) for claim in self._claims.list()))

    def value(self, *, allocated: bool, admin_access: bool = False, source: str = "") -> int:
        return self.samples().get(ClaimLabels(_flag(allocated), _flag(admin_access), source), 0)

    def describe(self) -> list[Metric]:
        return [metrics.gauge(RESOURCE_CLAIMS, RESOURCE_CLAIMS_HELP, ClaimLabels._fields)]

    def collect(self) -> list[Metric]:
        return [
            metrics.gauge(
                RESOURCE_CLAIMS, RESOURCE_CLAIMS_HELP, ClaimLabels._fields, self.samples().items()
            )
        ]


class ControllerMetrics:
    """The controller manager's registry."""

    def __init__(self, *, claims: ResourceClaimGauge, creates: metrics.CounterVec) -> None:
        self.registry = metrics.new_registry()
        self.registry.register(claims)
        self.registry.register(creates)
