"""Cluster events and queueing hints: which changes may make a rejected pod schedulable,
and the events an update of a Node or Pod carries.

Upstream: `staging/src/k8s.io/kube-scheduler/framework/events.go` (`ActionType`,
`EventResource`, `ClusterEvent`, `QueueingHint`) and `pkg/scheduler/framework/events.go`.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable
from typing import Any

from drasim.common.api import core_v1, resources
from drasim.common.quantity import Quantity

__all__ = [
    "ActionType",
    "ClusterEvent",
    "ClusterEventWithHint",
    "EventResource",
    "QueueingHint",
    "QueueingHintFn",
    "node_scheduling_properties_change",
    "pod_scheduling_properties_change",
]


class ActionType(enum.IntFlag):
    """What changed on an object; flags combine, and the specific update flags let the
    queue run a hint only for the change that matters."""

    ADD = enum.auto()
    DELETE = enum.auto()
    UPDATE_NODE_ALLOCATABLE = enum.auto()
    UPDATE_NODE_LABEL = enum.auto()
    UPDATE_NODE_TAINT = enum.auto()  # taints or spec.unschedulable
    UPDATE_NODE_CONDITION = enum.auto()
    UPDATE_NODE_ANNOTATION = enum.auto()
    UPDATE_NODE_DECLARED_FEATURE = enum.auto()
    UPDATE_POD_LABEL = enum.auto()
    UPDATE_POD_SCALE_DOWN = enum.auto()
    UPDATE_POD_TOLERATION = enum.auto()
    UPDATE_POD_SCHEDULING_GATES_ELIMINATED = enum.auto()
    # resourceClaimStatuses or extendedResourceClaimStatus changed (upstream
    # `extractPodGeneratedResourceClaimChange`, `pkg/scheduler/framework/events.go`).
    UPDATE_POD_GENERATED_RESOURCE_CLAIM = enum.auto()
    UPDATE = (
        UPDATE_NODE_ALLOCATABLE
        | UPDATE_NODE_LABEL
        | UPDATE_NODE_TAINT
        | UPDATE_NODE_CONDITION
        | UPDATE_NODE_ANNOTATION
        | UPDATE_NODE_DECLARED_FEATURE
        | UPDATE_POD_LABEL
        | UPDATE_POD_SCALE_DOWN
        | UPDATE_POD_TOLERATION
        | UPDATE_POD_SCHEDULING_GATES_ELIMINATED
        | UPDATE_POD_GENERATED_RESOURCE_CLAIM
    )
    ALL = ADD | DELETE | UPDATE


class EventResource(enum.StrEnum):
    """The kinds whose events may requeue pods, named as upstream."""

    POD = "Pod"
    NODE = "Node"
    RESOURCE_CLAIM = "resource.k8s.io/ResourceClaim"
    RESOURCE_SLICE = "resource.k8s.io/ResourceSlice"
    DEVICE_CLASS = "resource.k8s.io/DeviceClass"
    WILDCARD = "*"


class QueueingHint(enum.IntEnum):
    QUEUE_SKIP = 0
    """The event cannot make the pod schedulable; it stays in the unschedulable pool."""
    QUEUE = 1
    """The event may make the pod schedulable; move it to backoff or activeQ."""


QueueingHintFn = Callable[[core_v1.Pod, Any, Any], QueueingHint]
"""`(pod, old, new)`: `old` is None for Add, `new` is None for Delete. A hint that raises
counts as QUEUE, so a buggy hint never strands a pod."""


@dataclasses.dataclass(frozen=True, slots=True)
class ClusterEvent:
    resource: EventResource
    action_type: ActionType

    def label(self) -> str:
        """For logs and metrics, e.g. `NodeAdd` (upstream `Label()`)."""
        return f"{self.resource}{_action_label(self.action_type)}"


def _action_label(action: ActionType) -> str:
    """`UpdateNodeTaint` for one flag, `All`/`Update` for those unions, else empty (as Go)."""
    if action == ActionType.ALL:
        return "All"
    if action == ActionType.UPDATE:
        return "Update"
    if action.name is None or "|" in action.name:
        return ""
    return "".join(part.title() for part in action.name.split("_"))


@dataclasses.dataclass(frozen=True, slots=True)
class ClusterEventWithHint:
    """An event that may help pods this plugin rejected; no hint means always requeue."""

    event: ClusterEvent
    queueing_hint_fn: QueueingHintFn | None = None


def node_scheduling_properties_change(new: core_v1.Node, old: core_v1.Node) -> list[ClusterEvent]:
    """The Node update events a change carries, one per kind of change that may matter to
    scheduling; heartbeats and status noise give none (upstream
    `NodeSchedulingPropertiesChange`). An uncordon counts as a taint change, as upstream."""
    changes = {
        ActionType.UPDATE_NODE_TAINT: new.spec.taints != old.spec.taints
        or (old.spec.unschedulable and not new.spec.unschedulable),
        ActionType.UPDATE_NODE_ALLOCATABLE: new.status.allocatable != old.status.allocatable,
        ActionType.UPDATE_NODE_LABEL: new.metadata.labels != old.metadata.labels,
        ActionType.UPDATE_NODE_CONDITION: _condition_statuses(new) != _condition_statuses(old),
        ActionType.UPDATE_NODE_ANNOTATION: new.metadata.annotations != old.metadata.annotations,
    }
    return [ClusterEvent(EventResource.NODE, action) for action, yes in changes.items() if yes]


def _condition_statuses(node: core_v1.Node) -> dict[str, str]:
    """Condition type → status; heartbeat and transition times are not a change."""
    return {c.type: c.status for c in node.status.conditions}


def pod_scheduling_properties_change(new: core_v1.Pod, old: core_v1.Pod) -> list[ClusterEvent]:
    """The Pod update events a change carries (upstream `PodSchedulingPropertiesChange`).

    Upstream falls back to an "other update" event that only plugins registering a bare
    Pod/Update see; no plugin here does, so other changes give no event.
    """
    actions = []
    if new.metadata.labels != old.metadata.labels:
        actions.append(ActionType.UPDATE_POD_LABEL)
    if _requests_decreased(new, old):
        actions.append(ActionType.UPDATE_POD_SCALE_DOWN)
    if new.spec.tolerations != old.spec.tolerations:
        actions.append(ActionType.UPDATE_POD_TOLERATION)
    if old.spec.scheduling_gates and not new.spec.scheduling_gates:
        actions.append(ActionType.UPDATE_POD_SCHEDULING_GATES_ELIMINATED)
    if (
        new.status.resource_claim_statuses != old.status.resource_claim_statuses
        or new.status.extended_resource_claim_status != old.status.extended_resource_claim_status
    ):
        actions.append(ActionType.UPDATE_POD_GENERATED_RESOURCE_CLAIM)
    return [ClusterEvent(EventResource.POD, action) for action in actions]


def _requests_decreased(new: core_v1.Pod, old: core_v1.Pod) -> bool:
    """A bound pod resized down frees resources (upstream `extractPodScaleDown`)."""
    if not new.spec.node_name or resources.same_request_inputs(new, old):
        return False
    before, after = resources.pod_requests(old), resources.pod_requests(new)
    return any(after.get(name, Quantity()) < quantity for name, quantity in before.items())
