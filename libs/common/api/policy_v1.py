"""policy/v1: PodDisruptionBudget, and Eviction (the body of the `pods/eviction` subresource)."""

from __future__ import annotations

from typing import ClassVar

import msgspec

from drasim.common.api.meta_v1 import Condition, KubeObject, KubeStruct, LabelSelector

__all__ = [
    "ALWAYS_ALLOW",
    "DISRUPTION_ALLOWED_CONDITION",
    "DISRUPTION_BUDGET_CAUSE",
    "IF_HEALTHY_BUDGET",
    "DeleteOptions",
    "Eviction",
    "PodDisruptionBudget",
    "PodDisruptionBudgetSpec",
    "PodDisruptionBudgetStatus",
    "Preconditions",
]

# `spec.unhealthyPodEvictionPolicy` values (upstream `policyv1.UnhealthyPodEvictionPolicyType`).
IF_HEALTHY_BUDGET = "IfHealthyBudget"
ALWAYS_ALLOW = "AlwaysAllow"

# The condition the disruption controller keeps and its reasons (upstream `policyv1`).
DISRUPTION_ALLOWED_CONDITION = "DisruptionAllowed"
SUFFICIENT_PODS_REASON = "SufficientPods"
INSUFFICIENT_PODS_REASON = "InsufficientPods"
SYNC_FAILED_REASON = "SyncFailed"

# The cause type of an eviction refused by a budget (upstream `policyv1.DisruptionBudgetCause`).
DISRUPTION_BUDGET_CAUSE = "DisruptionBudget"


class PodDisruptionBudgetSpec(KubeStruct):
    min_available: int | str | None = None  # IntOrString: 2 or "50%"
    selector: LabelSelector | None = None
    max_unavailable: int | str | None = None
    unhealthy_pod_eviction_policy: str | None = None  # IfHealthyBudget (default), AlwaysAllow


class PodDisruptionBudgetStatus(KubeStruct, omit_defaults=False):
    """Written in full, zeros too: upstream's four counts have no `omitempty`, and
    `kubectl get pdb -o jsonpath='{.status.disruptionsAllowed}'` expects a 0 to print."""

    observed_generation: int = 0
    # Pods the eviction API let go and the controller has not yet seen go: name → the
    # time of the eviction (RFC 3339). Left out when there are none, as upstream's
    # `omitempty` does (UNSET, which is falsy: read it as `disrupted_pods or {}`).
    disrupted_pods: dict[str, str] | msgspec.UnsetType = msgspec.UNSET
    disruptions_allowed: int = 0
    current_healthy: int = 0
    desired_healthy: int = 0
    expected_pods: int = 0
    conditions: list[Condition] = []


class PodDisruptionBudget(KubeObject):
    API_VERSION: ClassVar[str] = "policy/v1"
    KIND: ClassVar[str] = "PodDisruptionBudget"

    spec: PodDisruptionBudgetSpec = msgspec.field(default_factory=PodDisruptionBudgetSpec)
    status: PodDisruptionBudgetStatus = msgspec.field(default_factory=PodDisruptionBudgetStatus)


class Preconditions(KubeStruct):
    uid: str | None = None
    resource_version: str | None = None


class DeleteOptions(KubeStruct):
    """`metav1.DeleteOptions`, as an Eviction carries them."""

    grace_period_seconds: int | None = None
    preconditions: Preconditions | None = None
    orphan_dependents: bool | None = None
    propagation_policy: str | None = None
    dry_run: list[str] = []


class Eviction(KubeObject):
    """What `POST .../pods/<name>/eviction` carries: the pod's name and how to delete it."""

    API_VERSION: ClassVar[str] = "policy/v1"
    KIND: ClassVar[str] = "Eviction"

    delete_options: DeleteOptions | None = None
