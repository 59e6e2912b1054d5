"""TaintToleration: a node's NoSchedule and NoExecute taints keep off pods that do not
tolerate them.

Upstream: `pkg/scheduler/framework/plugins/tainttoleration/taint_toleration.go` and
`component-helpers/scheduling/corev1` (`FindMatchingUntoleratedTaint`). PreferNoSchedule
scoring is not implemented.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar

from drasim.common import codec, device_taints
from drasim.common.api import core_v1, resource_v1
from drasim.scheduler import framework
from drasim.scheduler.plugins import names

__all__ = [
    "ERR_REASON_UNTOLERATED",
    "TaintToleration",
    "find_matching_untolerated_taint",
    "taint_events",
    "toleration_tolerates_taint",
    "tolerations_tolerate_taint",
]

ERR_REASON_UNTOLERATED = "node(s) had untolerated taint {{{key}: {value}}}"
"""Formatted with the first untolerated taint's key and value."""

_DO_NOT_SCHEDULE = ("NoSchedule", "NoExecute")


def toleration_tolerates_taint(
    toleration: core_v1.Toleration | resource_v1.DeviceToleration,
    taint: core_v1.Taint | resource_v1.DeviceTaint,
) -> bool:
    """Upstream `ToleratesTaint` (a device's, `resourceclaim.ToleratesTaint`, keeps the same
    rule): see `device_taints.tolerates`."""
    return device_taints.tolerates(toleration, taint)


def tolerations_tolerate_taint(
    tolerations: Iterable[core_v1.Toleration], taint: core_v1.Taint
) -> bool:
    return any(toleration_tolerates_taint(t, taint) for t in tolerations)


def find_matching_untolerated_taint(
    taints: Iterable[core_v1.Taint], tolerations: list[core_v1.Toleration]
) -> core_v1.Taint | None:
    """The first NoSchedule/NoExecute taint, in node order, that no toleration tolerates."""
    for taint in taints:
        if taint.effect in _DO_NOT_SCHEDULE and not tolerations_tolerate_taint(tolerations, taint):
            return taint
    return None


def taint_events(
    after_node_change: framework.QueueingHintFn,
    after_pod_toleration_change: framework.QueueingHintFn,
) -> list[framework.ClusterEventWithHint]:
    """What may help a pod a node's taint kept off: a node added or its taints changed, or
    the pod's tolerations changed (NodeUnschedulable's taint included)."""
    return [
        framework.ClusterEventWithHint(
            framework.ClusterEvent(
                framework.EventResource.NODE,
                framework.ActionType.ADD | framework.ActionType.UPDATE_NODE_TAINT,
            ),
            after_node_change,
        ),
        framework.ClusterEventWithHint(
            framework.ClusterEvent(
                framework.EventResource.POD, framework.ActionType.UPDATE_POD_TOLERATION
            ),
            after_pod_toleration_change,
        ),
    ]


class TaintToleration:
    """Filter and EnqueueExtensions."""

    name: ClassVar[str] = names.TAINT_TOLERATION

    def sign_pod(self, state: framework.CycleState, pod: core_v1.Pod) -> bytes:
        """Filter and Score read only the pod's tolerations and the NodeInfo."""
        return codec.encode(pod.spec.tolerations)

    def filter(
        self, state: framework.CycleState, pod: core_v1.Pod, node_info: framework.NodeInfo
    ) -> framework.Status | None:
        taint = find_matching_untolerated_taint(node_info.node.spec.taints, pod.spec.tolerations)
        if taint is None:
            return None
        # Preemption cannot remove a taint.
        return framework.Status.unresolvable(
            ERR_REASON_UNTOLERATED.format(key=taint.key, value=taint.value)
        )

    def events_to_register(self) -> list[framework.ClusterEventWithHint]:
        return taint_events(
            self.is_schedulable_after_node_change, self.is_schedulable_after_pod_toleration_change
        )

    def is_schedulable_after_node_change(
        self, pod: core_v1.Pod, old: core_v1.Node | None, new: core_v1.Node
    ) -> framework.QueueingHint:
        """The node went from having an untolerated taint (or not existing) to having none."""
        tolerations = pod.spec.tolerations
        was_untolerated = (
            old is None or find_matching_untolerated_taint(old.spec.taints, tolerations) is not None
        )
        is_untolerated = find_matching_untolerated_taint(new.spec.taints, tolerations) is not None
        if was_untolerated and not is_untolerated:
            return framework.QueueingHint.QUEUE
        return framework.QueueingHint.QUEUE_SKIP

    def is_schedulable_after_pod_toleration_change(
        self, pod: core_v1.Pod, old: Any, new: core_v1.Pod
    ) -> framework.QueueingHint:
        """Only a new toleration on the rejected pod itself can help it."""
        if new.metadata.uid == pod.metadata.uid:
            return framework.QueueingHint.QUEUE
        return framework.QueueingHint.QUEUE_SKIP
