"""Validation of admissionregistration.k8s.io/v1 ValidatingAdmissionPolicies and their
bindings (upstream `pkg/apis/admissionregistration/validation/validation.go`): the failure
policy, the resources matched, at least one validation, the binding's policy and actions.
The CEL expressions are stored unchecked: drasim does not evaluate the policies."""

from __future__ import annotations

from drasim.common.api import admissionregistration_v1 as v1
from drasim.common.api.meta_v1 import KubeObject
from drasim.common.api.validation import meta
from drasim.common.errors import (
    FieldError,
    field_duplicate,
    field_invalid,
    field_not_supported,
    field_required,
)

__all__ = ["VALIDATORS"]

_FAILURE_POLICIES = ["Fail", "Ignore"]
_ACTIONS = ["Audit", "Deny", "Warn"]


def _validate_policy(
    policy: v1.ValidatingAdmissionPolicy, old: KubeObject | None
) -> list[FieldError]:
    spec = policy.spec
    errs = []
    if spec.failure_policy is not None and spec.failure_policy not in _FAILURE_POLICIES:
        errs.append(
            field_not_supported("spec.failurePolicy", spec.failure_policy, _FAILURE_POLICIES)
        )
    if spec.match_constraints is None:
        errs.append(field_required("spec.matchConstraints"))
    elif not spec.match_constraints.get("resourceRules"):
        errs.append(field_required("spec.matchConstraints.resourceRules"))
    if not spec.validations and not spec.audit_annotations:
        detail = "validations or auditAnnotations must contain at least one item"
        errs += [
            field_required("spec.validations", detail),
            field_required("spec.auditAnnotations", detail),
        ]
    for i, validation in enumerate(spec.validations):
        if not validation.get("expression"):
            errs.append(field_required(f"spec.validations[{i}].expression"))
    return errs


def _validate_binding(
    binding: v1.ValidatingAdmissionPolicyBinding, old: KubeObject | None
) -> list[FieldError]:
    """Upstream `validateValidatingAdmissionPolicyBindingSpec` and
    `validateValidationActions`."""
    spec = binding.spec
    errs = [] if spec.policy_name else [field_required("spec.policyName")]
    seen: set[str] = set()
    for i, action in enumerate(spec.validation_actions):
        path = f"spec.validationActions[{i}]"
        if action not in _ACTIONS:
            errs.append(field_not_supported(path, action, _ACTIONS))
        if action in seen:
            errs.append(field_duplicate(path, action))
        seen.add(action)
    if {"Deny", "Warn"} <= seen:
        errs.append(
            field_invalid(
                "spec.validationActions",
                spec.validation_actions,
                "must not contain both Deny and Warn (repeating the same validation failure "
                "information in the API response and headers serves no purpose)",
            )
        )
    if not seen:
        errs.append(
            field_required("spec.validationActions", "at least one validation action is required")
        )
    return errs


VALIDATORS: dict[type[KubeObject], meta.Validator] = {
    v1.ValidatingAdmissionPolicy: _validate_policy,
    v1.ValidatingAdmissionPolicyBinding: _validate_binding,
}
