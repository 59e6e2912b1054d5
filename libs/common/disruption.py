"""PodDisruptionBudget rules the eviction subresource and the disruption controller share
(upstream `pkg/apis/policy/helper` and the pod matching of `eviction.go`)."""

from __future__ import annotations

from drasim.common import labels
from drasim.common.api import core_v1, meta_v1, policy_v1


def selects(pdb: policy_v1.PodDisruptionBudget, pod: core_v1.Pod) -> bool:
    """Whether the budget covers the pod: same namespace, and a selector that matches its
    labels. A nil or empty selector matches nothing here, as in upstream's eviction handler
    ("If a PDB with a nil or empty selector creeps in, it should match nothing")."""
    selector = pdb.spec.selector
    if selector is None or pdb.metadata.namespace != pod.metadata.namespace:
        return False
    parsed = labels.from_label_selector(selector)
    return not parsed.empty() and parsed.matches(pod.metadata.labels)


def is_pod_ready(pod: core_v1.Pod) -> bool:
    """`podutil.IsPodReady`: the Ready condition is True (what a budget calls healthy)."""
    return any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions)


def set_condition(conditions: list[meta_v1.Condition], new: meta_v1.Condition, now: str) -> None:
    """`meta.SetStatusCondition`: replace the condition of `new.type`, keeping its
    lastTransitionTime unless the status changes."""
    for i, old in enumerate(conditions):
        if old.type == new.type:
            new.last_transition_time = (
                old.last_transition_time
                if old.status == new.status and old.last_transition_time
                else now
            )
            conditions[i] = new
            return
    new.last_transition_time = now
    conditions.append(new)


def update_disruption_allowed_condition(
    status: policy_v1.PodDisruptionBudgetStatus, now: str
) -> None:
    """`pdbhelper.UpdateDisruptionAllowedCondition`: True (SufficientPods) while disruptions
    are allowed, else False (InsufficientPods)."""
    allowed = status.disruptions_allowed > 0
    conditions = list(status.conditions)
    set_condition(
        conditions,
        meta_v1.Condition(
            type=policy_v1.DISRUPTION_ALLOWED_CONDITION,
            status="True" if allowed else "False",
            reason=(
                policy_v1.SUFFICIENT_PODS_REASON if allowed else policy_v1.INSUFFICIENT_PODS_REASON
            ),
            observed_generation=status.observed_generation,
        ),
        now,
    )
    status.conditions = conditions
