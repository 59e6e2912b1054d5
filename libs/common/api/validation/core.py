"""Validation of the core group (`pkg/apis/core/validation`), but for pods (`pod`):
resource names and quantities, Namespaces, Nodes, Events, ResourceQuotas, and the taints,
tolerations and node selectors that pods and devices share.

Values are checked as stored: missing requests are read through limits (API defaulting).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping

from drasim.common import codec
from drasim.common.api import core_v1, resource_v1, resources, scheduling_v1
from drasim.common.api.meta_v1 import KubeObject
from drasim.common.api.validation import meta, names
from drasim.common.errors import (
    FieldError,
    GoValue,
    field_duplicate,
    field_invalid,
    field_not_supported,
    field_required,
)
from drasim.common.quantity import Quantity

__all__ = [
    "STATUS_VALIDATORS",
    "TAINT_EFFECTS",
    "VALIDATORS",
    "validate_node_selector",
    "validate_node_selector_term",
    "validate_preemption_policy",
    "validate_resource_requirements",
    "validate_taint",
    "validate_toleration",
]

_STANDARD_CONTAINER_RESOURCES = frozenset({"cpu", "memory", "ephemeral-storage"})
_HUGEPAGES_PREFIX = "hugepages-"
# Single-segment names counted in whole units (upstream `integerResources`).
_INTEGER_RESOURCES = frozenset(
    {
        "pods",
        "services",
        "replicationcontrollers",
        "resourcequotas",
        "secrets",
        "configmaps",
        "persistentvolumeclaims",
        "services.nodeports",
        "services.loadbalancers",
    }
)
_STANDARD_RESOURCES = _STANDARD_CONTAINER_RESOURCES | _INTEGER_RESOURCES | {"storage"}
_STANDARD_QUOTA_RESOURCES = (
    _STANDARD_RESOURCES
    | {
        f"{kind}.{name}"
        for kind in ("requests", "limits")
        for name in ("cpu", "memory", "ephemeral-storage")
    }
    | {"requests.storage"}
)


def _is_hugepages(name: str) -> bool:
    return name.startswith(_HUGEPAGES_PREFIX)


def _is_overcommit_allowed(name: str) -> bool:
    """Only native, non-hugepages resources may request less than their limit."""
    return resources.is_native_resource(name) and not _is_hugepages(name)


def _is_integer_resource(name: str) -> bool:
    return name in _INTEGER_RESOURCES or resources.is_extended_resource_name(name)


def _validate_resource_name(name: str, path: str, *, standard: frozenset[str]) -> list[FieldError]:
    errs = meta.each(path, name, names.is_qualified_name(name))
    if not errs and "/" not in name and name not in standard and not _is_hugepages(name):
        errs.append(
            field_invalid(path, name, "must be a standard resource type or fully qualified")
        )
    return errs


def _validate_container_resource_name(name: str, path: str) -> list[FieldError]:
    errs = meta.each(path, name, names.is_qualified_name(name))
    if "/" not in name:
        if name not in _STANDARD_CONTAINER_RESOURCES and not _is_hugepages(name):
            errs.append(field_invalid(path, name, "must be a standard resource for containers"))
    elif not resources.is_native_resource(name) and not resources.is_extended_resource_name(name):
        # `deviceclass.resource.kubernetes.io/<class>` passes here as a native-prefixed name.
        errs.append(field_invalid(path, name, "doesn't follow extended resource name standard"))
    return errs


def _validate_quantity(name: str, quantity: Quantity, path: str) -> list[FieldError]:
    errs = []
    value = quantity.value
    if value < 0:
        errs.append(field_invalid(path, str(quantity), "must be greater than or equal to 0"))
    if (
        value.denominator != 1  # whole numbers are integers in milli units too
        and _is_integer_resource(name)
        and quantity.milli_value() % 1000 != 0
    ):
        errs.append(field_invalid(path, str(quantity), "must be an integer"))
    return errs


def validate_resource_requirements(
    requirements: core_v1.ResourceRequirements, path: str
) -> list[FieldError]:
    errs = []
    for name, quantity in requirements.limits.items():
        key_path = f"{path}.limits[{name}]"
        errs += _validate_container_resource_name(name, key_path)
        errs += _validate_quantity(name, quantity, key_path)
    for name, quantity in requirements.requests.items():
        key_path = f"{path}.requests[{name}]"
        errs += _validate_container_resource_name(name, key_path)
        errs += _validate_quantity(name, quantity, key_path)
        limit = requirements.limits.get(name)
        if limit is not None:
            # Extended resources and hugepages cannot be overcommitted: request == limit.
            if quantity != limit and not _is_overcommit_allowed(name):
                errs.append(
                    field_invalid(
                        f"{path}.requests",
                        str(quantity),
                        f"must be equal to {name} limit of {limit}",
                    )
                )
            elif quantity > limit:
                errs.append(
                    field_invalid(
                        f"{path}.requests",
                        str(quantity),
                        f"must be less than or equal to {name} limit of {limit}",
                    )
                )
        elif not _is_overcommit_allowed(name):
            errs.append(
                field_required(
                    f"{path}.limits", "Limit must be set for non overcommitable resources"
                )
            )
    return errs


def _validate_node_resources(status: core_v1.NodeStatus) -> list[FieldError]:
    errs = []
    for field_name, values in (("capacity", status.capacity), ("allocatable", status.allocatable)):
        for name, quantity in values.items():
            key_path = f"status.{field_name}[{name}]"
            errs += _validate_resource_name(name, key_path, standard=_STANDARD_RESOURCES)
            errs += _validate_quantity(name, quantity, key_path)
    return errs


def _validate_quota_resources(values: Mapping[str, Quantity], path: str) -> list[FieldError]:
    errs = []
    for name, quantity in values.items():
        key_path = f"{path}[{name}]"
        errs += _validate_resource_name(name, key_path, standard=_STANDARD_QUOTA_RESOURCES)
        errs += _validate_quantity(name, quantity, key_path)
    return errs


def _validate_namespace(ns: core_v1.Namespace, old: KubeObject | None) -> list[FieldError]:
    errs = []
    for i, finalizer in enumerate(ns.spec.finalizers):
        errs += meta.each(f"spec.finalizers[{i}]", finalizer, names.is_qualified_name(finalizer))
    return errs


TAINT_EFFECTS = ["NoSchedule", "PreferNoSchedule", "NoExecute"]


def validate_taint(
    taint: core_v1.Taint | resource_v1.DeviceTaint, path: str, effects: list[str]
) -> list[FieldError]:
    """A node taint and a device taint follow the same rules but for the effects allowed
    (a device has no PreferNoSchedule)."""
    errs = meta.each(f"{path}.key", taint.key, names.is_qualified_name(taint.key))
    errs += meta.each(f"{path}.value", taint.value, names.is_valid_label_value(taint.value))
    if not taint.effect:
        errs.append(field_required(f"{path}.effect"))
    elif taint.effect not in effects:
        errs.append(field_not_supported(f"{path}.effect", taint.effect, effects))
    return errs


def _validate_node(node: core_v1.Node, old: KubeObject | None) -> list[FieldError]:
    errs = []
    seen = set()
    for i, taint in enumerate(node.spec.taints):
        path = f"spec.taints[{i}]"
        errs += validate_taint(taint, path, TAINT_EFFECTS)
        if (taint.key, taint.effect) in seen:
            errs.append(field_duplicate(path, codec.to_builtins(taint)))
        seen.add((taint.key, taint.effect))
    errs += _validate_node_resources(node.status)
    return errs


def _validate_event(event: core_v1.Event, old: KubeObject | None) -> list[FieldError]:
    errs = []
    involved_ns = event.involved_object.namespace
    if involved_ns and involved_ns != event.metadata.namespace:
        errs.append(
            field_invalid("involvedObject.namespace", involved_ns, "does not match event.namespace")
        )
    if event.type and event.type not in ("Normal", "Warning"):
        errs.append(field_not_supported("type", event.type, ["Normal", "Warning"]))
    errs += meta.nonnegative_int32("count", event.count)
    return errs


# Upstream's `standardResourceQuotaScopes` and CrossNamespacePodAffinity.
_QUOTA_SCOPES = frozenset(
    {
        "Terminating",
        "NotTerminating",
        "BestEffort",
        "NotBestEffort",
        "PriorityClass",
        "VolumeAttributesClass",
        "CrossNamespacePodAffinity",
    }
)
_POD_QUOTA_RESOURCES = frozenset(
    {"pods", "cpu", "memory", "limits.cpu", "limits.memory", "requests.cpu", "requests.memory"}
)
_CONFLICTING_SCOPES = (("BestEffort", "NotBestEffort"), ("Terminating", "NotTerminating"))
_EXISTS_ONLY_SCOPES = ("BestEffort", "NotBestEffort", "Terminating", "NotTerminating",
                       "CrossNamespacePodAffinity")  # fmt: skip


def _scope_valid_for(scope: str, resource: str) -> bool:
    """Whether a standard resource may be limited within a scope
    (`IsResourceQuotaScopeValidForResource`)."""
    if scope == "BestEffort":
        return resource == "pods"
    if scope == "VolumeAttributesClass":
        return resource in ("persistentvolumeclaims", "requests.storage")
    if scope in _QUOTA_SCOPES:
        return resource in _POD_QUOTA_RESOURCES
    return True


def _scope_errors(
    spec: core_v1.ResourceQuotaSpec,
    scopes: list[str],
    path: str,
    value: object,
    unsupported: Callable[[str], FieldError],
) -> list[FieldError]:
    """What the scopes of `spec.scopes` or of the selector share: known scopes, standard
    resources each allows, no contradicting pair. Upstream names the whole of `value`
    for a bad pairing, and `spec.scopes` for a conflict, from the selector too."""
    errs = []
    standard = [n for n in sorted(spec.hard) if n in _STANDARD_QUOTA_RESOURCES or _is_hugepages(n)]
    for scope in scopes:
        if scope not in _QUOTA_SCOPES:
            errs.append(unsupported(scope))
        for _ in (n for n in standard if not _scope_valid_for(scope, n)):
            errs.append(field_invalid(path, value, "unsupported scope applied to resource"))
    for pair in _CONFLICTING_SCOPES:
        if set(pair) <= set(scopes):
            errs.append(field_invalid(path, _go_list(spec.scopes), "conflicting scopes"))
    return errs


def _go_list(values: list[str]) -> GoValue:
    """A list of strings as a field error shows it (JSON; `null` when empty)."""
    return GoValue(json.dumps(values, separators=(",", ":")) if values else "null")


_EXISTS_DETAIL = (
    "must be 'Exists' when scope is any of ResourceQuotaScopeTerminating, "
    "ResourceQuotaScopeNotTerminating, ResourceQuotaScopeBestEffort, "
    "ResourceQuotaScopeNotBestEffort or ResourceQuotaScopeCrossNamespacePodAffinity"
)


def _validate_quota_scopes(spec: core_v1.ResourceQuotaSpec) -> list[FieldError]:
    """`validateResourceQuotaScopes` and `validateScopeSelector`."""
    errs = []
    if spec.scopes:
        scopes = _go_list(spec.scopes)
        errs += _scope_errors(
            spec,
            spec.scopes,
            "spec.scopes",
            scopes,
            lambda _: field_invalid("spec.scopes", scopes, "unsupported scope"),
        )
    if spec.scope_selector is None:
        return errs
    path = "spec.scopeSelector.matchExpressions"
    selector = GoValue(json.dumps(codec.to_builtins(spec.scope_selector), separators=(",", ":")))
    terms = spec.scope_selector.match_expressions
    errs += _scope_errors(
        spec,
        [t.scope_name for t in terms],
        path,
        selector,
        lambda scope: field_invalid(f"{path}.scopeName", scope, "unsupported scope"),
    )
    for term in terms:
        if term.scope_name in _EXISTS_ONLY_SCOPES and term.operator != "Exists":
            errs.append(field_invalid(f"{path}.operator", term.operator, _EXISTS_DETAIL))
        if term.operator in ("In", "NotIn"):
            if not term.values:
                errs.append(
                    field_required(
                        f"{path}.values",
                        "must be at least one value when `operator` is 'In' or 'NotIn' for "
                        "scope selector",
                    )
                )
        elif term.operator in ("Exists", "DoesNotExist"):
            if term.values:
                errs.append(
                    field_invalid(
                        f"{path}.values",
                        _go_list(term.values),
                        "must be no value when `operator` is 'Exist' or 'DoesNotExist' for "
                        "scope selector",
                    )
                )
        else:
            detail = "not a valid selector operator"
            errs.append(field_invalid(f"{path}.operator", term.operator, detail))
    return errs


def _validate_resource_quota(
    quota: core_v1.ResourceQuota, old: KubeObject | None
) -> list[FieldError]:
    errs = _validate_quota_resources(quota.spec.hard, "spec.hard")
    errs += _validate_quota_scopes(quota.spec)
    if isinstance(old, core_v1.ResourceQuota) and set(old.spec.scopes) != set(quota.spec.scopes):
        errs.append(field_invalid("spec.scopes", _go_list(quota.spec.scopes), "field is immutable"))
    return errs


_TOLERATION_OPERATORS = ["Exists", "Equal"]


def validate_toleration(
    toleration: core_v1.Toleration | resource_v1.DeviceToleration, path: str, effects: list[str]
) -> list[FieldError]:
    errs = []
    if toleration.key:
        errs += meta.each(f"{path}.key", toleration.key, names.is_qualified_name(toleration.key))
    elif toleration.operator != "Exists":
        errs.append(
            field_invalid(
                f"{path}.operator",
                toleration.operator,
                "operator must be Exists when `key` is empty, "
                'which means "match all values and all keys"',
            )
        )
    if toleration.operator == "Exists":
        if toleration.value:
            errs.append(
                field_invalid(
                    f"{path}.operator",
                    toleration.value,
                    "value must be empty when `operator` is 'Exists'",
                )
            )
    elif toleration.operator in ("", "Equal"):
        errs += meta.each(
            f"{path}.value", toleration.value, names.is_valid_label_value(toleration.value)
        )
    else:
        errs.append(
            field_not_supported(f"{path}.operator", toleration.operator, _TOLERATION_OPERATORS)
        )
    if toleration.effect and toleration.effect not in effects:
        errs.append(field_not_supported(f"{path}.effect", toleration.effect, effects))
    if toleration.toleration_seconds is not None and toleration.effect != "NoExecute":
        errs.append(
            field_invalid(
                f"{path}.effect",
                toleration.effect,
                "effect must be 'NoExecute' when `tolerationSeconds` is set",
            )
        )
    return errs


_NODE_SELECTOR_OPERATORS = ["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]


def validate_node_selector(selector: core_v1.NodeSelector, path: str) -> list[FieldError]:
    terms_path = f"{path}.nodeSelectorTerms"
    if not selector.node_selector_terms:
        return [field_required(terms_path, "must have at least one node selector term")]
    errs = []
    for i, term in enumerate(selector.node_selector_terms):
        errs += validate_node_selector_term(term, f"{terms_path}[{i}]")
    return errs


def validate_node_selector_term(term: core_v1.NodeSelectorTerm, path: str) -> list[FieldError]:
    errs = []
    for i, req in enumerate(term.match_expressions):
        req_path = f"{path}.matchExpressions[{i}]"
        errs += meta.validate_selector_requirement(req, req_path, _NODE_SELECTOR_OPERATORS)
        if req.operator in ("Gt", "Lt") and (
            len(req.values) != 1 or not req.values[0].lstrip("-").isdigit()
        ):
            errs.append(
                field_required(
                    f"{req_path}.values",
                    "must be specified single value when `operator` is 'Lt' or 'Gt'",
                )
            )
    for i, req in enumerate(term.match_fields):
        req_path = f"{path}.matchFields[{i}]"
        if req.key != "metadata.name":
            errs.append(field_not_supported(f"{req_path}.key", req.key, ["metadata.name"]))
        if req.operator not in ("In", "NotIn"):
            errs.append(field_not_supported(f"{req_path}.operator", req.operator, ["In", "NotIn"]))
        elif len(req.values) != 1:
            errs.append(
                field_required(
                    f"{req_path}.values",
                    "must be only one value when `operator` is 'In' or 'NotIn' "
                    "for node field selector",
                )
            )
    return errs


_PREEMPTION_POLICIES = [scheduling_v1.PREEMPT_LOWER_PRIORITY, scheduling_v1.NEVER]


def validate_preemption_policy(policy: str | None, path: str) -> list[FieldError]:
    if policy is None or policy in _PREEMPTION_POLICIES:
        return []
    return [field_not_supported(path, policy, _PREEMPTION_POLICIES)]


def _validate_node_status(node: core_v1.Node, old: KubeObject | None) -> list[FieldError]:
    return _validate_node_resources(node.status)


def _validate_resource_quota_status(
    quota: core_v1.ResourceQuota, old: KubeObject | None
) -> list[FieldError]:
    return _validate_quota_resources(quota.status.hard, "status.hard") + (
        _validate_quota_resources(quota.status.used, "status.used")
    )


VALIDATORS: dict[type[KubeObject], meta.Validator] = {
    core_v1.Namespace: _validate_namespace,
    core_v1.Node: _validate_node,
    core_v1.Event: _validate_event,
    core_v1.ResourceQuota: _validate_resource_quota,
}
STATUS_VALIDATORS: dict[type[KubeObject], meta.Validator] = {
    core_v1.Node: _validate_node_status,
    core_v1.ResourceQuota: _validate_resource_quota_status,
}
