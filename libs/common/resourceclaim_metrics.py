"""The ResourceClaim create counter the scheduler and the controller manager share, as
upstream's `dynamic-resource-allocation/resourceclaim/metrics` (the subsystem is
`dynamic_resource_allocation` in both components, so one query sums them).

The scheduler counts the special claims it creates for extended resources (upstream
`createExtendedResourceClaimInAPI`),
the ResourceClaim controller the claims it makes from templates; each counts an attempt
once, by its outcome (`success` or `failure`), whether a request asks for admin access,
and the API group and kind of the claim's controlling owner (a Pod: group "").
"""

from __future__ import annotations

from drasim.common import errors, metrics
from drasim.common.api import resource_v1
from drasim.common.client import ApiClient

__all__ = ["RESOURCECLAIM_CREATES", "create_counted", "create_labels", "new_creates_counter"]

RESOURCECLAIM_CREATES = "dynamic_resource_allocation_resourceclaim_creates_total"
RESOURCECLAIM_CREATES_HELP = (
    "Number of ResourceClaims creation requests, categorized by creation status, admin "
    "access, and owning API group and kind (either Pod or scheduling.k8s.io/PodGroup)"
)
LABELS = ("status", "admin_access", "owner_api_group", "owner_api_kind")
SUCCESS = "success"
FAILURE = "failure"


def new_creates_counter() -> metrics.CounterVec:
    """A component's own counter, for its registry."""
    return metrics.CounterVec(RESOURCECLAIM_CREATES, RESOURCECLAIM_CREATES_HELP, LABELS)


def create_labels(status: str, claim: resource_v1.ResourceClaim) -> tuple[str, str, str, str]:
    """Upstream `getClaimCreateMetricLabels`: the labels of one create of `claim`."""
    admin_access = any(
        r.exactly is not None and r.exactly.admin_access for r in claim.spec.devices.requests
    )
    group = kind = ""
    for owner in claim.metadata.owner_references or ():
        if owner.controller:
            group = owner.api_version.split("/")[0] if "/" in owner.api_version else ""
            kind = owner.kind
            break
    return status, "true" if admin_access else "false", group, kind


async def create_counted(
    api: ApiClient, claim: resource_v1.ResourceClaim, creates: metrics.CounterVec
) -> resource_v1.ResourceClaim:
    """Create `claim`, counting the attempt in `creates` by its outcome; the API's refusal
    is raised on."""
    try:
        created = await api.create(claim)
    except errors.ApiError:
        creates.inc(create_labels(FAILURE, claim))
        raise
    creates.inc(create_labels(SUCCESS, claim))
    return created
