"""Validation of policy/v1 PodDisruptionBudgets (`pkg/apis/policy/validation`)."""

from __future__ import annotations

import re

from drasim.common import codec
from drasim.common.api import policy_v1
from drasim.common.api.meta_v1 import KubeObject
from drasim.common.api.validation import meta
from drasim.common.errors import FieldError, field_invalid, field_not_supported

__all__ = ["STATUS_VALIDATORS", "VALIDATORS"]

_PERCENT_RE = re.compile(r"[0-9]+%")
_PERCENT_MESSAGE = (
    "a valid percent string must be a numeric string followed by an ending '%' "
    "(e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')"
)


_UNHEALTHY_POD_EVICTION_POLICIES = [policy_v1.ALWAYS_ALLOW, policy_v1.IF_HEALTHY_BUDGET]


def _validate_int_or_percent(value: int | str, path: str) -> list[FieldError]:
    """Upstream `ValidatePositiveIntOrPercent` and `IsNotMoreThan100Percent`."""
    if isinstance(value, str):
        if not _PERCENT_RE.fullmatch(value):
            return [field_invalid(path, value, _PERCENT_MESSAGE)]
        if int(value[:-1]) > 100:
            return [field_invalid(path, value, "must not be greater than 100%")]
        return []
    return meta.nonnegative_int32(path, value)


def _validate_pod_disruption_budget(
    pdb: policy_v1.PodDisruptionBudget, old: KubeObject | None
) -> list[FieldError]:
    """Upstream `ValidatePodDisruptionBudgetSpec`: at most one of minAvailable and
    maxUnavailable, each a non-negative integer or a percentage up to 100%."""
    spec = pdb.spec
    errs = []
    if spec.min_available is not None and spec.max_unavailable is not None:
        errs.append(
            field_invalid(
                "spec",
                codec.to_builtins(spec),
                "minAvailable and maxUnavailable cannot be both set",
            )
        )
    if spec.min_available is not None:
        errs += _validate_int_or_percent(spec.min_available, "spec.minAvailable")
    if spec.max_unavailable is not None:
        errs += _validate_int_or_percent(spec.max_unavailable, "spec.maxUnavailable")
    if spec.selector is not None:
        errs += meta.validate_label_selector(spec.selector, "spec.selector")
    policy = spec.unhealthy_pod_eviction_policy
    if policy is not None and policy not in _UNHEALTHY_POD_EVICTION_POLICIES:
        errs.append(
            field_not_supported(
                "spec.unhealthyPodEvictionPolicy", policy, _UNHEALTHY_POD_EVICTION_POLICIES
            )
        )
    return errs


def _validate_pod_disruption_budget_status(
    pdb: policy_v1.PodDisruptionBudget, old: KubeObject | None
) -> list[FieldError]:
    """Upstream `ValidatePodDisruptionBudgetStatusUpdate`: the counts are never negative."""
    status = pdb.status
    errs = []
    for name, value in (
        ("disruptionsAllowed", status.disruptions_allowed),
        ("currentHealthy", status.current_healthy),
        ("desiredHealthy", status.desired_healthy),
        ("expectedPods", status.expected_pods),
    ):
        errs += meta.nonnegative_int32(f"status.{name}", value)
    return errs


VALIDATORS: dict[type[KubeObject], meta.Validator] = {
    policy_v1.PodDisruptionBudget: _validate_pod_disruption_budget,
}
STATUS_VALIDATORS: dict[type[KubeObject], meta.Validator] = {
    policy_v1.PodDisruptionBudget: _validate_pod_disruption_budget_status,
}
