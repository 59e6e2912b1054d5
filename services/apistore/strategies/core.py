"""Strategies of the core group's kinds: Namespaces, Nodes, Pods, Events, ResourceQuotas
(upstream `pkg/registry/core/<kind>/strategy.go`)."""

from __future__ import annotations

from typing import Any, ClassVar

from drasim.apistore import admission
from drasim.apistore.strategies.base import Admission, Strategy
from drasim.common import features as gates
from drasim.common.api import core_v1, resources
from drasim.common.api.defaults import core as defaults
from drasim.common.featuregate import FeatureGate

__all__ = ["STRATEGIES"]

# The condition of a pod created with scheduling gates (upstream's pod strategy,
# `applySchedulingGatedCondition`); the scheduler leaves it until the last gate goes.
POD_REASON_SCHEDULING_GATED = "SchedulingGated"
SCHEDULING_GATED_MESSAGE = "Scheduling is blocked due to non-empty scheduling gates"


class NamespaceStrategy(Strategy):
    """Its status is written apart, but its creator's status stands."""

    status_subresource = True

    def prepare_for_create(self, obj: Any) -> None:
        pass


class NodeStrategy(Strategy):
    """As a Namespace: the kubelet that registers a node reports its status with it."""

    status_subresource = True

    def prepare_for_create(self, obj: Any) -> None:
        pass

    def node_name(self, obj: Any) -> str:
        return obj.metadata.name


class PodStrategy(Strategy):
    """A pod starts Pending, with its QoS class and, while scheduling gates hold it, a
    PodScheduled=False condition saying so; it takes its priority from its PriorityClass and
    tolerations of unready nodes (the mutating admission), and once bound to a node
    terminates gracefully: it stays until its kubelet confirms with a delete of grace
    period 0."""

    status_subresource = True
    generation = True
    node_field: ClassVar[str] = "spec.nodeName"

    def prepare_for_create(self, obj: core_v1.Pod) -> None:
        super().prepare_for_create(obj)
        obj.status.phase = "Pending"
        if obj.spec.scheduling_gates:
            obj.status.conditions = [
                core_v1.PodCondition(
                    type="PodScheduled",
                    status="False",
                    reason=POD_REASON_SCHEDULING_GATED,
                    message=SCHEDULING_GATED_MESSAGE,
                    last_transition_time=obj.metadata.creation_timestamp,
                )
            ]
        obj.status.qos_class = resources.pod_qos_class(obj)

    def prepare_for_update(self, new: core_v1.Pod, old: core_v1.Pod) -> None:
        admission.keep_pod_priority(new, old)
        # Mutating admission runs before validation upstream: a pod replaced by the
        # manifest it was made from gets the same tolerations again.
        admission.add_default_tolerations(new)
        super().prepare_for_update(new, old)

    def admit_create(self, obj: core_v1.Pod, batch: Admission) -> None:
        admission.admit_pod(obj, batch.priority_class, batch.default_priority_class())
        admission.add_default_tolerations(obj)

    def drop_disabled_fields(
        self, new: core_v1.Pod, old: core_v1.Pod | None, features: FeatureGate
    ) -> None:
        """Upstream `DropDisabledPodFields` (pkg/api/pod/util.go), for the gates drasim
        registers; its status part applies to creates and updates alike."""
        self.drop_disabled_status_fields(new, old, features)

    def drop_disabled_status_fields(
        self, new: core_v1.Pod, old: core_v1.Pod | None, features: FeatureGate
    ) -> None:
        """Upstream `dropDisabledPodStatusFields`: the special claim's status."""
        in_use = old is not None and old.status.extended_resource_claim_status is not None
        if not features.enabled(gates.DRA_EXTENDED_RESOURCE) and not in_use:
            new.status.extended_resource_claim_status = None

    def grace_period(self, obj: core_v1.Pod, asked: int | None) -> int | None:
        """A pod no node runs, or one that has finished, goes at once."""
        if not obj.spec.node_name or obj.status.phase in ("Succeeded", "Failed"):
            return 0
        if asked is not None:
            return max(asked, 0)
        default = obj.spec.termination_grace_period_seconds
        return defaults.DEFAULT_TERMINATION_GRACE_PERIOD_SECONDS if default is None else default

    def stays_while_terminating(self, obj: core_v1.Pod) -> bool:
        return bool(obj.spec.node_name) and (obj.metadata.deletion_grace_period_seconds or 0) > 0

    def node_name(self, obj: core_v1.Pod) -> str:
        return obj.spec.node_name


class ResourceQuotaStrategy(Strategy):
    status_subresource = True


STRATEGIES: dict[str, Strategy] = {
    "namespaces": NamespaceStrategy(),
    "nodes": NodeStrategy(),
    "pods": PodStrategy(),
    "events": Strategy(),
    "resourcequotas": ResourceQuotaStrategy(),
}
