"""admissionregistration.k8s.io/v1: ValidatingAdmissionPolicy and its binding (upstream
`staging/src/k8s.io/api/admissionregistration/v1/types.go`).

Stored and served so that charts shipping them (DRA drivers guard their ResourceSlices
with one) apply; drasim does not evaluate the policies. The CEL parts stay raw JSON.
"""

from __future__ import annotations

from typing import Any, ClassVar

import msgspec

from drasim.common.api.meta_v1 import Condition, KubeObject, KubeStruct

__all__ = [
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
    "ValidatingAdmissionPolicyBindingSpec",
    "ValidatingAdmissionPolicySpec",
    "ValidatingAdmissionPolicyStatus",
]


class ValidatingAdmissionPolicySpec(KubeStruct):
    param_kind: dict[str, Any] | None = None
    match_constraints: dict[str, Any] | None = None
    validations: list[dict[str, Any]] = []
    failure_policy: str | None = None
    audit_annotations: list[dict[str, Any]] = []
    match_conditions: list[dict[str, Any]] = []
    variables: list[dict[str, Any]] = []


class ValidatingAdmissionPolicyStatus(KubeStruct):
    observed_generation: int = 0
    type_checking: dict[str, Any] | None = None
    conditions: list[Condition] = []


class ValidatingAdmissionPolicy(KubeObject):
    """ValidatingAdmissionPolicy describes the definition of an admission validation
    policy that accepts or rejects an object without changing it."""

    API_VERSION: ClassVar[str] = "admissionregistration.k8s.io/v1"
    KIND: ClassVar[str] = "ValidatingAdmissionPolicy"

    spec: ValidatingAdmissionPolicySpec = msgspec.field(
        default_factory=ValidatingAdmissionPolicySpec
    )
    status: ValidatingAdmissionPolicyStatus = msgspec.field(
        default_factory=ValidatingAdmissionPolicyStatus
    )


class ValidatingAdmissionPolicyBindingSpec(KubeStruct):
    policy_name: str = ""
    param_ref: dict[str, Any] | None = None
    match_resources: dict[str, Any] | None = None
    validation_actions: list[str] = []


class ValidatingAdmissionPolicyBinding(KubeObject):
    """ValidatingAdmissionPolicyBinding binds the ValidatingAdmissionPolicy with
    paramerized resources."""

    API_VERSION: ClassVar[str] = "admissionregistration.k8s.io/v1"
    KIND: ClassVar[str] = "ValidatingAdmissionPolicyBinding"

    spec: ValidatingAdmissionPolicyBindingSpec = msgspec.field(
        default_factory=ValidatingAdmissionPolicyBindingSpec
    )
