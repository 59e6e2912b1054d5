"""NodeUnschedulable: cordoned nodes (`spec.unschedulable`) take only pods that tolerate
the `node.kubernetes.io/unschedulable:NoSchedule` taint.

Upstream: `pkg/scheduler/framework/plugins/nodeunschedulable/node_unschedulable.go`.
"""

from __future__ import annotations

from typing import Any, ClassVar

from drasim.common.api import core_v1
from drasim.scheduler import framework
from drasim.scheduler.plugins import names, taint_toleration

__all__ = ["ERR_REASON_UNSCHEDULABLE", "TAINT_NODE_UNSCHEDULABLE", "NodeUnschedulable"]

ERR_REASON_UNSCHEDULABLE = "node(s) were unschedulable"
TAINT_NODE_UNSCHEDULABLE = "node.kubernetes.io/unschedulable"

# A pod tolerating this taint also tolerates `spec.unschedulable` (DaemonSet pods do).
_UNSCHEDULABLE_TAINT = core_v1.Taint(key=TAINT_NODE_UNSCHEDULABLE, effect="NoSchedule")


def _tolerates_unschedulable(pod: core_v1.Pod) -> bool:
    return taint_toleration.tolerations_tolerate_taint(pod.spec.tolerations, _UNSCHEDULABLE_TAINT)


class NodeUnschedulable:
    """Filter and EnqueueExtensions."""

    name: ClassVar[str] = names.NODE_UNSCHEDULABLE

    def sign_pod(self, state: framework.CycleState, pod: core_v1.Pod) -> bool:
        """Filter reads only whether the pod tolerates the unschedulable taint, and the
        NodeInfo."""
        return _tolerates_unschedulable(pod)

    def filter(
        self, state: framework.CycleState, pod: core_v1.Pod, node_info: framework.NodeInfo
    ) -> framework.Status | None:
        if node_info.node.spec.unschedulable and not _tolerates_unschedulable(pod):
            return framework.Status.unresolvable(ERR_REASON_UNSCHEDULABLE)
        return None

    def events_to_register(self) -> list[framework.ClusterEventWithHint]:
        return taint_toleration.taint_events(
            self.is_schedulable_after_node_change, self.is_schedulable_after_pod_toleration_change
        )

    def is_schedulable_after_node_change(
        self, pod: core_v1.Pod, old: core_v1.Node | None, new: core_v1.Node
    ) -> framework.QueueingHint:
        """A schedulable node was added, or a node was uncordoned."""
        was_unschedulable = old is None or old.spec.unschedulable
        if was_unschedulable and not new.spec.unschedulable:
            return framework.QueueingHint.QUEUE
        return framework.QueueingHint.QUEUE_SKIP

    def is_schedulable_after_pod_toleration_change(
        self, pod: core_v1.Pod, old: Any, new: core_v1.Pod
    ) -> framework.QueueingHint:
        """The rejected pod itself gained the toleration."""
        if new.metadata.uid == pod.metadata.uid and _tolerates_unschedulable(new):
            return framework.QueueingHint.QUEUE
        return framework.QueueingHint.QUEUE_SKIP
