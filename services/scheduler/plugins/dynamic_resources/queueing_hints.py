"""Which cluster events may make a pod DynamicResources rejected schedulable, and the
hints that tell, per pod, whether one does (upstream `EventsToRegister` and
`isSchedulableAfterClaimChange` in `dynamicresources.go`).

Upstream: `EventsToRegister`, `isSchedulableAfterClaimChange` and
`isSchedulableAfterPodChange` in
`pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go`.
"""

from __future__ import annotations

from drasim.common.api import core_v1, resource_v1
from drasim.scheduler import framework
from drasim.scheduler.dra_manager import DraManager
from drasim.scheduler.plugins.dynamic_resources import claims, extended

__all__ = [
    "events_to_register",
    "is_schedulable_after_claim_change",
    "is_schedulable_after_pod_change",
]


def events_to_register(
    after_claim_change: framework.QueueingHintFn, after_pod_change: framework.QueueingHintFn
) -> list[framework.ClusterEventWithHint]:
    """Upstream `EventsToRegister`, with queueing hints (so no UpdateNodeTaint)."""
    action = framework.ActionType
    resource = framework.EventResource
    return [
        # Node labels matter for allocation; allocatable for device plugin vs DRA.
        framework.ClusterEventWithHint(
            framework.ClusterEvent(
                resource.NODE,
                action.ADD | action.UPDATE_NODE_LABEL | action.UPDATE_NODE_ALLOCATABLE,
            )
        ),
        framework.ClusterEventWithHint(
            framework.ClusterEvent(
                resource.RESOURCE_CLAIM, action.ADD | action.UPDATE | action.DELETE
            ),
            after_claim_change,
        ),
        # The claim controller wrote the name of a claim made from a template.
        framework.ClusterEventWithHint(
            framework.ClusterEvent(resource.POD, action.UPDATE_POD_GENERATED_RESOURCE_CLAIM),
            after_pod_change,
        ),
        framework.ClusterEventWithHint(
            framework.ClusterEvent(resource.DEVICE_CLASS, action.ADD | action.UPDATE)
        ),
        framework.ClusterEventWithHint(
            framework.ClusterEvent(resource.RESOURCE_SLICE, action.ADD | action.UPDATE)
        ),
    ]


def is_schedulable_after_claim_change(
    dra_manager: DraManager,
    pod: core_v1.Pod,
    old: resource_v1.ResourceClaim | None,
    new: resource_v1.ResourceClaim | None,
) -> framework.QueueingHint:
    """Upstream `isSchedulableAfterClaimChange`: freed devices (deallocation, or deletion
    of an allocated claim) may
    help any pod; otherwise only a change of the pod's own claims matters, or the deletion
    of its special claim, which PostFilter asked for."""
    try:
        pod_claims = claims.pod_resource_claims(dra_manager, pod)
    except claims.NotSchedulable:
        return framework.QueueingHint.QUEUE_SKIP
    if new is None:
        assert old is not None
        if old.status.allocation is not None or extended.is_special_claim_for(old, pod):
            return framework.QueueingHint.QUEUE
        return framework.QueueingHint.QUEUE_SKIP
    if old is not None and old.status.allocation is not None and new.status.allocation is None:
        return framework.QueueingHint.QUEUE
    if not any(claim.metadata.uid == new.metadata.uid for claim in pod_claims):
        return framework.QueueingHint.QUEUE_SKIP
    if old is None or old.status != new.status:
        return framework.QueueingHint.QUEUE
    # Same status: e.g. a driver added a finalizer.
    return framework.QueueingHint.QUEUE_SKIP


def is_schedulable_after_pod_change(
    dra_manager: DraManager, pod: core_v1.Pod, old: core_v1.Pod | None, new: core_v1.Pod
) -> framework.QueueingHint:
    """The pod itself got the names of its generated claims, and they all exist."""
    if pod.metadata.uid != new.metadata.uid:
        return framework.QueueingHint.QUEUE_SKIP
    try:
        claims.pod_resource_claims(dra_manager, new)
    except claims.NotSchedulable:
        return framework.QueueingHint.QUEUE_SKIP
    return framework.QueueingHint.QUEUE
