"""SchedulingGates: a pod with `spec.schedulingGates` is not tried until the last gate is
removed (upstream `pkg/scheduler/framework/plugins/schedulinggates`).

Its PreEnqueue keeps the pod out of activeQ, gated in the queue's unschedulablePods, where
`scheduler_pending_pods{queue="gated"}` counts it; the update that removes the last gate
lets it in. The API server wrote the pod's PodScheduled=False SchedulingGated condition when
the pod was created; the scheduler writes nothing while the pod waits.
"""

from __future__ import annotations

from typing import Any

from drasim.common.api import core_v1
from drasim.scheduler import framework
from drasim.scheduler.plugins import names

__all__ = ["SchedulingGates"]


class SchedulingGates:
    name = names.SCHEDULING_GATES

    def pre_enqueue(self, pod: core_v1.Pod) -> framework.Status | None:
        gates = pod.spec.scheduling_gates
        if not gates:
            return None
        # Go's %v of a []string: the names in brackets, space-separated.
        listed = " ".join(gate.name for gate in gates)
        return framework.Status.unresolvable(f"waiting for scheduling gates: [{listed}]")

    def events_to_register(self) -> list[framework.ClusterEventWithHint]:
        return [
            framework.ClusterEventWithHint(
                framework.ClusterEvent(
                    framework.EventResource.POD,
                    framework.ActionType.UPDATE_POD_SCHEDULING_GATES_ELIMINATED,
                ),
                self.is_schedulable_after_scheduling_gates_eliminated,
            )
        ]

    def is_schedulable_after_scheduling_gates_eliminated(
        self, pod: core_v1.Pod, old: Any, new: Any
    ) -> framework.QueueingHint:
        """Only the pod's own gates matter (upstream registers the event on TargetPod)."""
        if isinstance(new, core_v1.Pod) and new.metadata.uid == pod.metadata.uid:
            return framework.QueueingHint.QUEUE
        return framework.QueueingHint.QUEUE_SKIP
