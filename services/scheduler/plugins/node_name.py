"""NodeName: a pod that names its node (`spec.nodeName`) fits only that node.

Upstream: `pkg/scheduler/framework/plugins/nodename/node_name.go`.
"""

from __future__ import annotations

from typing import Any, ClassVar

from drasim.common.api import core_v1
from drasim.scheduler import framework
from drasim.scheduler.plugins import names

__all__ = ["ERR_REASON", "NodeName", "fits"]

ERR_REASON = "node(s) didn't match the requested node name"


def fits(pod: core_v1.Pod, node: core_v1.Node) -> bool:
    return not pod.spec.node_name or pod.spec.node_name == node.metadata.name


class NodeName:
    """Filter and EnqueueExtensions."""

    name: ClassVar[str] = names.NODE_NAME

    def sign_pod(self, state: framework.CycleState, pod: core_v1.Pod) -> str:
        """Filter reads only the pod's `nodeName` and the NodeInfo."""
        return pod.spec.node_name

    def filter(
        self, state: framework.CycleState, pod: core_v1.Pod, node_info: framework.NodeInfo
    ) -> framework.Status | None:
        if not fits(pod, node_info.node):
            # No other node can ever match, so preemption is pointless.
            return framework.Status.unresolvable(ERR_REASON)
        return None

    def events_to_register(self) -> list[framework.ClusterEventWithHint]:
        return [
            framework.ClusterEventWithHint(
                framework.ClusterEvent(framework.EventResource.NODE, framework.ActionType.ADD),
                self.is_schedulable_after_node_add,
            )
        ]

    def is_schedulable_after_node_add(
        self, pod: core_v1.Pod, old: Any, new: core_v1.Node
    ) -> framework.QueueingHint:
        """Only the arrival of the named node can help."""
        if fits(pod, new):
            return framework.QueueingHint.QUEUE
        return framework.QueueingHint.QUEUE_SKIP
