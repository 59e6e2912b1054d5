"""Pods and their ResourceClaims, as upstream's `dynamic-resource-allocation/resourceclaim`.

Which claim a pod's `spec.resourceClaims` entry names, whether a claim belongs to a pod or
is reserved for it, and whether it is the scheduler's special claim. The annotation and
finalizer every party of KEP-5004 agrees on are in `resource_v1`, as upstream's are in
`staging/src/k8s.io/api/resource/v1/types.go`.
"""

from __future__ import annotations

from dataclasses import dataclass

from drasim.common.api import core_v1, resource_v1


@dataclass(frozen=True, slots=True)
class ClaimName:
    """The claim a pod claim resolves to; `name` None means none is needed."""

    name: str | None
    must_check_owner: bool


def claim_name(pod: core_v1.Pod, pod_claim: core_v1.PodResourceClaim) -> ClaimName | None:
    """`resourceclaim.Name`; None when a template's claim was not created (recorded) yet.

    A claim named directly is the user's; one made from a template is named in
    `pod.status.resourceClaimStatuses` and must be owned by the pod.
    """
    if pod_claim.resource_claim_name is not None:
        return ClaimName(pod_claim.resource_claim_name, must_check_owner=False)
    for status in pod.status.resource_claim_statuses:
        if status.name == pod_claim.name:
            return ClaimName(status.resource_claim_name, must_check_owner=True)
    return None


def owning_pod(claim: resource_v1.ResourceClaim) -> tuple[str, str]:
    """(name, uid) of the Pod that controls the claim, or ("", "")."""
    ref = claim.metadata.controller_ref()
    if ref is None or ref.api_version != "v1" or ref.kind != "Pod":
        return "", ""
    return ref.name, ref.uid


def is_for_pod(pod: core_v1.Pod, claim: resource_v1.ResourceClaim) -> bool:
    """`resourceclaim.IsForPod`: the pod is the claim's controlling owner."""
    return owning_pod(claim)[1] == pod.metadata.uid


def is_reserved_for_pod(pod: core_v1.Pod, claim: resource_v1.ResourceClaim) -> bool:
    return any(ref.uid == pod.metadata.uid for ref in claim.status.reserved_for)


def can_be_reserved(claim: resource_v1.ResourceClaim) -> bool:
    return len(claim.status.reserved_for) < resource_v1.RESERVED_FOR_MAX_SIZE


def is_extended_resource_claim(claim: resource_v1.ResourceClaim) -> bool:
    return claim.metadata.annotations.get(resource_v1.EXTENDED_RESOURCE_CLAIM_ANNOTATION) == "true"
