"""Kubernetes API validation for every kind drasim serves.

`validate(obj, old=...)` checks a create or update of the main resource, `validate_status`
a write to the `status` subresource, as the API server does before storing. Rules, field
paths and messages follow upstream (`pkg/apis/*/validation`, apimachinery
`util/validation`), so `str(error)` reads like `kubectl`'s output. Values are checked as
stored: missing requests are read through limits (API defaulting), an unset
`allocationMode` as ExactCount and an unset `count` as 1.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import msgspec

from drasim.common import codec, dra_cel, labels
from drasim.common.api import (
    apps_v1,
    coordination_v1,
    core_v1,
    policy_v1,
    rbac_validation,
    registry,
    resource_v1,
    resources,
    scheduling_v1,
)
from drasim.common.api.meta_v1 import (
    KubeObject,
    LabelSelector,
    LabelSelectorRequirement,
    ObjectMeta,
)
from drasim.common.errors import (
    FieldError,
    field_duplicate,
    field_forbidden,
    field_invalid,
    field_not_found,
    field_not_supported,
    field_required,
    field_too_long,
    field_too_many,
)
from drasim.common.quantity import Quantity

__all__ = [
    "is_c_identifier",
    "is_dns1123_label",
    "is_dns1123_subdomain",
    "is_qualified_name",
    "is_valid_label_value",
    "validate",
    "validate_binding_target",
    "validate_pod_status",
    "validate_status",
]

# --- Name formats (apimachinery util/validation): each returns the reasons a value fails ---

_DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN_FMT = _DNS1123_LABEL_FMT + "(\\." + _DNS1123_LABEL_FMT + ")*"
_QUALIFIED_NAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_VALUE_FMT = "(" + _QUALIFIED_NAME_FMT + ")?"
_C_IDENTIFIER_FMT = "[A-Za-z_][A-Za-z0-9_]*"
_DNS1123_LABEL_RE = re.compile(_DNS1123_LABEL_FMT)
_DNS1123_SUBDOMAIN_RE = re.compile(_DNS1123_SUBDOMAIN_FMT)
_QUALIFIED_NAME_RE = re.compile(_QUALIFIED_NAME_FMT)
_LABEL_VALUE_RE = re.compile(_LABEL_VALUE_FMT)
_C_IDENTIFIER_RE = re.compile(_C_IDENTIFIER_FMT)
_SEMVER_RE = re.compile(
    r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?"
)

DNS1123_LABEL_MAX_LENGTH = 63
DNS1123_SUBDOMAIN_MAX_LENGTH = 253
QUALIFIED_NAME_MAX_LENGTH = 63
LABEL_VALUE_MAX_LENGTH = 63
TOTAL_ANNOTATION_SIZE_LIMIT = 256 * 1024


_MEMO_MAX = 4096


def _remembered(
    memo: dict[Any, tuple[Any, ...]], key: Any, check: Callable[..., list[Any]], *args: Any
) -> list[Any]:
    """`check(*args)`, answered from `memo` under `key` when asked before (the memo is
    emptied when full: the checks are pure, so forgetting costs only time)."""
    found = memo.get(key)
    if found is None:
        found = tuple(check(*args))
        if len(memo) >= _MEMO_MAX:
            memo.clear()
        memo[key] = found
    return list(found)


def _memoised(check: Callable[[str], list[str]]) -> Callable[[str], list[str]]:
    """Remember a pure string check's messages: a cluster repeats the same names, label keys
    and values in every object, and the write path validates each object it writes."""
    memo: dict[str, tuple[str, ...]] = {}

    @functools.wraps(check)
    def cached(value: str) -> list[str]:
        return _remembered(memo, value, check, value)

    return cached


def _memoised_by_content(
    check: Callable[[Any, str], list[FieldError]],
) -> Callable[[Any, str], list[FieldError]]:
    """Remember a pure check of a struct at a path, keyed by the struct's JSON: pods made
    from one template (a ReplicaSet's, a benchmark's) share their spec, and each write of
    each pod validates it again. Equal JSON means equal field values (quantities print
    canonically), so the answer is the same; `FieldError`s are frozen, so sharing them is
    safe."""
    memo: dict[tuple[str, bytes], tuple[FieldError, ...]] = {}

    @functools.wraps(check)
    def cached(value: Any, path: str) -> list[FieldError]:
        return _remembered(memo, (path, codec.encode(value)), check, value, path)

    return cached


def _memoised_by_items(
    check: Callable[[Mapping[str, str], str], list[FieldError]],
) -> Callable[[Mapping[str, str], str], list[FieldError]]:
    """Remember a pure check of a string map at a path, keyed by its items: objects made
    from one template carry the same labels and annotations, and one check of the whole
    map costs less than a memo lookup per key and value. `FieldError`s are frozen."""
    memo: dict[tuple[str, tuple[tuple[str, str], ...]], tuple[FieldError, ...]] = {}

    @functools.wraps(check)
    def cached(values: Mapping[str, str], path: str) -> list[FieldError]:
        if not values:
            return check(values, path)
        return _remembered(memo, (path, tuple(values.items())), check, values, path)

    return cached


def _max_len_error(length: int) -> str:
    return f"must be no more than {length} characters"


def _regex_error(message: str, fmt: str, *examples: str) -> str:
    shown = " or ".join(f"'{e}', " for e in examples)
    return f"{message} (e.g. {shown}regex used for validation is '{fmt}')"


def _length_and_format_errors(
    value: str, max_length: int, pattern: re.Pattern[str], format_error: str
) -> list[str]:
    """Upstream's `MaxLenError` then `RegexError`: the two reasons every bounded name
    format (DNS label, DNS subdomain, label value) gives, in that order."""
    errs = []
    if len(value) > max_length:
        errs.append(_max_len_error(max_length))
    if not pattern.fullmatch(value):
        errs.append(format_error)
    return errs


_DNS1123_LABEL_ERR = _regex_error(
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters "
    "or '-', and must start and end with an alphanumeric character",
    _DNS1123_LABEL_FMT,
    "my-name",
    "123-abc",
)
_DNS1123_SUBDOMAIN_ERR = _regex_error(
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
    "characters, '-' or '.', and must start and end with an alphanumeric character",
    _DNS1123_SUBDOMAIN_FMT,
    "example.com",
)
_QUALIFIED_NAME_ERR = _regex_error(
    "must consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character",
    _QUALIFIED_NAME_FMT,
    "MyName",
    "my.name",
    "123-abc",
)
_LABEL_VALUE_ERR = _regex_error(
    "a valid label must be an empty string or consist of alphanumeric characters, "
    "'-', '_' or '.', and must start and end with an alphanumeric character",
    _LABEL_VALUE_FMT,
    "MyValue",
    "my_value",
    "12345",
)


@_memoised
def is_dns1123_label(value: str) -> list[str]:
    """RFC 1123 label: lowercase alphanumerics and '-', at most 63 characters."""
    return _length_and_format_errors(
        value, DNS1123_LABEL_MAX_LENGTH, _DNS1123_LABEL_RE, _DNS1123_LABEL_ERR
    )


@_memoised
def is_dns1123_subdomain(value: str) -> list[str]:
    """RFC 1123 subdomain: dot-separated labels, at most 253 characters."""
    return _length_and_format_errors(
        value, DNS1123_SUBDOMAIN_MAX_LENGTH, _DNS1123_SUBDOMAIN_RE, _DNS1123_SUBDOMAIN_ERR
    )


@_memoised
def is_qualified_name(value: str) -> list[str]:
    """`[prefix/]name`: prefix a DNS subdomain, name at most 63 characters (label keys)."""
    errs = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            errs += [f"prefix part {msg}" for msg in is_dns1123_subdomain(prefix)]
    else:
        return [
            f"a qualified name {_QUALIFIED_NAME_ERR} with an optional DNS subdomain prefix "
            "and '/' (e.g. 'example.com/MyName')"
        ]
    if not name:
        errs.append("name part must be non-empty")
    elif len(name) > QUALIFIED_NAME_MAX_LENGTH:
        errs.append(f"name part {_max_len_error(QUALIFIED_NAME_MAX_LENGTH)}")
    if not _QUALIFIED_NAME_RE.fullmatch(name):
        errs.append(f"name part {_QUALIFIED_NAME_ERR}")
    return errs


@_memoised
def is_valid_label_value(value: str) -> list[str]:
    return _length_and_format_errors(
        value, LABEL_VALUE_MAX_LENGTH, _LABEL_VALUE_RE, _LABEL_VALUE_ERR
    )


def is_c_identifier(value: str) -> list[str]:
    if _C_IDENTIFIER_RE.fullmatch(value):
        return []
    return [
        _regex_error(
            "a valid C identifier must start with alphabetic character or '_', "
            "followed by a string of alphanumeric characters or '_'",
            _C_IDENTIFIER_FMT,
            "my_name",
            "MY_NAME",
            "MyName",
        )
    ]


def _each(path: str, value: Any, messages: Iterable[str]) -> list[FieldError]:
    if not messages:
        return []
    return [field_invalid(path, value, msg) for msg in messages]


def _validate_unique_name(name: str, path: str, seen: set[str]) -> list[FieldError]:
    """The `name` of an entry in a list keyed by name (containers, a pod's resource claims,
    a claim's requests and subrequests): required, a DNS label, and unique; `seen` collects
    the names met so far."""
    if not name:
        return [field_required(path)]
    errs = _each(path, name, is_dns1123_label(name))
    if name in seen:
        errs.append(field_duplicate(path, name))
    seen.add(name)
    return errs


def _validate_required_subdomain(name: str, path: str) -> list[FieldError]:
    """A required reference to another object by name (a device class, a claim): object
    names are DNS subdomains."""
    if not name:
        return [field_required(path)]
    return _each(path, name, is_dns1123_subdomain(name))


def _nonnegative(path: str, value: int) -> list[FieldError]:
    return [field_invalid(path, value, "must be greater than or equal to 0")] if value < 0 else []


INT32_MAX = 2**31 - 1


def _int32(path: str, value: int) -> list[FieldError]:
    """An `int32` field. Go refuses a larger number already when decoding (`cannot unmarshal
    number 2147483648 into Go struct field ... of type int32`); drasim decodes into Python
    ints, so the range is checked here, as its other decode errors are 422s with the path."""
    if value > INT32_MAX:
        return [field_invalid(path, value, f"must be less than or equal to {INT32_MAX}")]
    if value < -INT32_MAX - 1:
        return [field_invalid(path, value, f"must be greater than or equal to {-INT32_MAX - 1}")]
    return []


def _nonnegative_int32(path: str, value: int) -> list[FieldError]:
    return _nonnegative(path, value) or _int32(path, value)


def _builtins(obj: Any) -> Any:
    return codec.to_builtins(obj)


# --- Entry points --------------------------------------------------------------------------


def validate(obj: KubeObject, *, old: KubeObject | None = None) -> list[FieldError]:
    """Errors of a create (`old` None) or update of `obj`'s main resource; empty when valid."""
    validator = _VALIDATORS.get(type(obj))
    if validator is None:
        return []
    errs = _validate_object_meta(
        obj.metadata, namespaced=_is_namespaced(type(obj)), name_rule=_name_rule(type(obj))
    )
    if old is not None:
        errs += _validate_object_meta_update(obj.metadata, old.metadata)
    return errs + validator(obj, old)


def validate_status(obj: KubeObject, *, old: KubeObject | None = None) -> list[FieldError]:
    """Errors of a write to `obj`'s status subresource (its spec is the stored one)."""
    errs = _validate_object_meta_update(obj.metadata, old.metadata) if old is not None else []
    match obj:
        case core_v1.Pod():
            errs += _validate_pod_phase(obj.status.phase)
            errs += validate_pod_status(obj)
        case core_v1.Node():
            errs += _validate_node_resources(obj.status)
        case resource_v1.ResourceClaim():
            assert old is None or isinstance(old, resource_v1.ResourceClaim)
            errs += _validate_resource_claim_status(obj, old)
        case core_v1.ResourceQuota():
            errs += _validate_quota_resources(obj.status.hard, "status.hard")
            errs += _validate_quota_resources(obj.status.used, "status.used")
        case apps_v1.Deployment() | apps_v1.ReplicaSet():
            errs += _validate_replica_counts(obj.status)
        case policy_v1.PodDisruptionBudget():
            errs += _validate_pod_disruption_budget_status(obj.status)
    return errs


# --- ObjectMeta ----------------------------------------------------------------------------


def _name_is(check: Callable[[str], list[str]]) -> Callable[[str, bool], list[str]]:
    """A name rule; for a `generateName` prefix a trailing '-' is allowed (`maskTrailingDash`)."""

    def rule(name: str, prefix: bool) -> list[str]:
        if prefix and len(name) > 1 and name.endswith("-"):
            name = name[:-1]
        return check(name)

    return rule


_SUBDOMAIN_NAME = _name_is(is_dns1123_subdomain)
_LABEL_NAME = _name_is(is_dns1123_label)


def _validate_object_meta(
    meta: ObjectMeta, *, namespaced: bool, name_rule: Callable[[str, bool], list[str]]
) -> list[FieldError]:
    errs = []
    if meta.generate_name:
        errs += _each(
            "metadata.generateName", meta.generate_name, name_rule(meta.generate_name, True)
        )
    if meta.name:
        errs += _each("metadata.name", meta.name, name_rule(meta.name, False))
    elif not meta.generate_name:
        # The API server makes a name from generateName before it validates; drasim may validate
        # first, so an empty name is fine as long as one will be generated.
        errs.append(field_required("metadata.name", "name or generateName is required"))
    if namespaced:
        if not meta.namespace:
            errs.append(field_required("metadata.namespace"))
        else:
            errs += _each("metadata.namespace", meta.namespace, is_dns1123_label(meta.namespace))
    elif meta.namespace:
        errs.append(field_forbidden("metadata.namespace", "not allowed on this type"))
    errs += _nonnegative("metadata.generation", meta.generation)
    errs += _validate_labels(meta.labels, "metadata.labels")
    errs += _validate_annotations(meta.annotations, "metadata.annotations")
    errs += _validate_owner_references(meta, "metadata.ownerReferences")
    for i, finalizer in enumerate(meta.finalizers):
        errs += _each(f"metadata.finalizers[{i}]", finalizer, is_qualified_name(finalizer))
    return errs


def _validate_object_meta_update(new: ObjectMeta, old: ObjectMeta) -> list[FieldError]:
    return [
        field_invalid(f"metadata.{name}", new_value, "field is immutable")
        for name, new_value, old_value in (
            ("name", new.name, old.name),
            ("namespace", new.namespace, old.namespace),
            ("uid", new.uid, old.uid),
            ("creationTimestamp", new.creation_timestamp, old.creation_timestamp),
        )
        if new_value != old_value
    ]


@_memoised_by_items
def _validate_labels(values: Mapping[str, str], path: str) -> list[FieldError]:
    errs = []
    for key, value in values.items():
        errs += _each(path, key, is_qualified_name(key))
        errs += _each(path, value, is_valid_label_value(value))
    return errs


@_memoised_by_items
def _validate_annotations(annotations: Mapping[str, str], path: str) -> list[FieldError]:
    errs = []
    for key in annotations:
        # A qualified name, except that case does not matter.
        errs += _each(path, key, is_qualified_name(key.lower()))
    size = sum(len(k.encode()) + len(v.encode()) for k, v in annotations.items())
    if size > TOTAL_ANNOTATION_SIZE_LIMIT:
        errs.append(field_too_long(path, TOTAL_ANNOTATION_SIZE_LIMIT))
    return errs


def _validate_owner_references(meta: ObjectMeta, path: str) -> list[FieldError]:
    errs = []
    controllers = []
    for i, ref in enumerate(meta.owner_references):
        for field_name, value in (
            ("apiVersion", ref.api_version),
            ("kind", ref.kind),
            ("name", ref.name),
            ("uid", ref.uid),
        ):
            if not value:
                errs.append(
                    field_invalid(
                        f"{path}[{i}].{field_name}", value, f"{field_name} must not be empty"
                    )
                )
        if ref.controller:
            controllers.append(f"{ref.kind}/{ref.name}")
    if len(controllers) > 1:
        errs.append(
            field_invalid(
                path,
                _builtins(meta.owner_references),
                "Only one reference can have Controller set to true. "
                f'Found "true" in references for {", ".join(controllers)}',
            )
        )
    return errs


_LABEL_SELECTOR_OPERATORS = ["In", "NotIn", "Exists", "DoesNotExist"]


def _validate_selector_requirement(
    req: LabelSelectorRequirement | core_v1.NodeSelectorRequirement,
    path: str,
    operators: list[str],
) -> list[FieldError]:
    """The key and set-based operator rules that label-selector and node-selector
    requirements share: `values` needed for In/NotIn, forbidden for Exists/DoesNotExist.
    Any other operator must be one of `operators`; its own value rules are the caller's."""
    errs = _each(f"{path}.key", req.key, is_qualified_name(req.key))
    if req.operator in ("In", "NotIn"):
        if not req.values:
            errs.append(
                field_required(
                    f"{path}.values", "must be specified when `operator` is 'In' or 'NotIn'"
                )
            )
    elif req.operator in ("Exists", "DoesNotExist"):
        if req.values:
            errs.append(
                field_forbidden(
                    f"{path}.values",
                    "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                )
            )
    elif req.operator not in operators:
        errs.append(field_not_supported(f"{path}.operator", req.operator, operators))
    return errs


def _validate_label_selector(selector: LabelSelector, path: str) -> list[FieldError]:
    errs = _validate_labels(selector.match_labels, f"{path}.matchLabels")
    for i, req in enumerate(selector.match_expressions):
        errs += _validate_selector_requirement(
            req, f"{path}.matchExpressions[{i}]", _LABEL_SELECTOR_OPERATORS
        )
    return errs


# --- Resource names and quantities ----------------------------------------------------------

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
    errs = _each(path, name, is_qualified_name(name))
    if not errs and "/" not in name and name not in standard and not _is_hugepages(name):
        errs.append(
            field_invalid(path, name, "must be a standard resource type or fully qualified")
        )
    return errs


def _validate_container_resource_name(name: str, path: str) -> list[FieldError]:
    errs = _each(path, name, is_qualified_name(name))
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


def _validate_resource_requirements(
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


# --- Namespace, Node, Event, ResourceQuota, Lease ---------------------------------------------


def _validate_namespace(ns: core_v1.Namespace, old: KubeObject | None) -> list[FieldError]:
    errs = []
    for i, finalizer in enumerate(ns.spec.finalizers):
        errs += _each(f"spec.finalizers[{i}]", finalizer, is_qualified_name(finalizer))
    return errs


_TAINT_EFFECTS = ["NoSchedule", "PreferNoSchedule", "NoExecute"]


def _validate_taint(
    taint: core_v1.Taint | resource_v1.DeviceTaint, path: str, effects: list[str]
) -> list[FieldError]:
    """A node taint and a device taint follow the same rules but for the effects allowed
    (a device has no PreferNoSchedule)."""
    errs = _each(f"{path}.key", taint.key, is_qualified_name(taint.key))
    errs += _each(f"{path}.value", taint.value, is_valid_label_value(taint.value))
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
        errs += _validate_taint(taint, path, _TAINT_EFFECTS)
        if (taint.key, taint.effect) in seen:
            errs.append(field_duplicate(path, _builtins(taint)))
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
    errs += _nonnegative_int32("count", event.count)
    return errs


def _validate_resource_quota(
    quota: core_v1.ResourceQuota, old: KubeObject | None
) -> list[FieldError]:
    return _validate_quota_resources(quota.spec.hard, "spec.hard")


def _validate_lease(lease: coordination_v1.Lease, old: KubeObject | None) -> list[FieldError]:
    errs = []
    duration = lease.spec.lease_duration_seconds
    if duration is not None and duration <= 0:
        errs.append(field_invalid("spec.leaseDurationSeconds", duration, "must be greater than 0"))
    elif duration is not None:
        errs += _int32("spec.leaseDurationSeconds", duration)
    transitions = lease.spec.lease_transitions
    if transitions is not None:
        errs += _nonnegative_int32("spec.leaseTransitions", transitions)
    return errs


# --- PriorityClass -------------------------------------------------------------------------

_PREEMPTION_POLICIES = [scheduling_v1.PREEMPT_LOWER_PRIORITY, scheduling_v1.NEVER]
_SYSTEM_PREFIX = "system-"


def _validate_priority_class(
    pc: scheduling_v1.PriorityClass, old: KubeObject | None
) -> list[FieldError]:
    """Upstream `ValidatePriorityClass` and `ValidatePriorityClassUpdate`."""
    errs = []
    name = pc.metadata.name
    if name.startswith(_SYSTEM_PREFIX):
        known = _known_system_priority_class(pc)
        if known:
            errs.append(
                field_forbidden(
                    "metadata.name",
                    f"priority class names with '{_SYSTEM_PREFIX}' prefix are reserved for "
                    f"system use only. error: {known}",
                )
            )
    elif pc.value > scheduling_v1.HIGHEST_USER_DEFINABLE_PRIORITY:
        errs.append(
            field_forbidden(
                "value",
                "maximum allowed value of a user defined priority is "
                f"{scheduling_v1.HIGHEST_USER_DEFINABLE_PRIORITY}",
            )
        )
    errs += _validate_preemption_policy(pc.preemption_policy, "preemptionPolicy")
    if isinstance(old, scheduling_v1.PriorityClass):
        if pc.value != old.value:
            errs.append(field_forbidden("value", "may not be changed in an update."))
        if pc.preemption_policy != old.preemption_policy:
            policy = pc.preemption_policy
            errs.append(field_invalid("preemptionPolicy", policy, "field is immutable"))
    return errs


def _known_system_priority_class(pc: scheduling_v1.PriorityClass) -> str:
    """Upstream `IsKnownSystemPriorityClass`: "" when `pc` is one, else why not."""
    name = pc.metadata.name
    known = scheduling_v1.SYSTEM_PRIORITY_CLASSES.get(name)
    if known is None:
        return f"{name} is not a known system priority class"
    if pc.value != known[0]:
        return f"value of {name} PriorityClass must be {known[0]}"
    if pc.global_default:
        return f"globalDefault of {name} PriorityClass must be false"
    return ""


def _validate_preemption_policy(policy: str | None, path: str) -> list[FieldError]:
    if policy is None or policy in _PREEMPTION_POLICIES:
        return []
    return [field_not_supported(path, policy, _PREEMPTION_POLICIES)]


# --- Pod -----------------------------------------------------------------------------------

_POD_RESTART_POLICIES = ["Always", "OnFailure", "Never"]
_TOLERATION_OPERATORS = ["Exists", "Equal"]
_NODE_SELECTOR_OPERATORS = ["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]


def _validate_pod(pod: core_v1.Pod, old: KubeObject | None) -> list[FieldError]:
    errs = _validate_pod_spec(pod.spec, "spec")
    if isinstance(old, core_v1.Pod):
        errs += _validate_pod_spec_update(pod.spec, old.spec)
    return errs


@_memoised_by_content
def _validate_pod_spec(spec: core_v1.PodSpec, path: str) -> list[FieldError]:
    errs = []
    claim_names = {claim.name for claim in spec.resource_claims}
    names: set[str] = set()
    if not spec.containers:
        errs.append(field_required(f"{path}.containers"))
    for i, container in enumerate(spec.containers):
        c_path = f"{path}.containers[{i}]"
        errs += _validate_container(container, c_path, names, claim_names)
        if container.restart_policy is not None:
            errs.append(
                field_forbidden(f"{c_path}.restartPolicy", "may not be set for non-init containers")
            )
    for i, container in enumerate(spec.init_containers):
        c_path = f"{path}.initContainers[{i}]"
        errs += _validate_container(container, c_path, names, claim_names)
        if container.restart_policy is not None and container.restart_policy != "Always":
            errs.append(
                field_not_supported(f"{c_path}.restartPolicy", container.restart_policy, ["Always"])
            )
    for i, container in enumerate(spec.ephemeral_containers):
        c_path = f"{path}.ephemeralContainers[{i}]"
        errs += _validate_container(container, c_path, names, claim_names)
        # Ephemeral containers get no resources, so never devices either (spec §1.4.1).
        if container.resources != core_v1.ResourceRequirements():
            errs.append(
                field_forbidden(f"{c_path}.resources", "cannot be set for an Ephemeral Container")
            )
    errs += _validate_preemption_policy(spec.preemption_policy, f"{path}.preemptionPolicy")
    if spec.restart_policy and spec.restart_policy not in _POD_RESTART_POLICIES:
        errs.append(
            field_not_supported(f"{path}.restartPolicy", spec.restart_policy, _POD_RESTART_POLICIES)
        )
    if spec.node_name:
        errs += _each(f"{path}.nodeName", spec.node_name, is_dns1123_subdomain(spec.node_name))
    if spec.scheduler_name:
        errs += _each(
            f"{path}.schedulerName", spec.scheduler_name, is_dns1123_subdomain(spec.scheduler_name)
        )
    if spec.termination_grace_period_seconds is not None:
        errs += _nonnegative(
            f"{path}.terminationGracePeriodSeconds", spec.termination_grace_period_seconds
        )
    errs += _validate_labels(spec.node_selector, f"{path}.nodeSelector")
    errs += _validate_resource_requirements(
        core_v1.ResourceRequirements(limits=spec.overhead), f"{path}.overhead"
    )
    for i, toleration in enumerate(spec.tolerations):
        errs += _validate_toleration(toleration, f"{path}.tolerations[{i}]", _TAINT_EFFECTS)
    errs += _validate_pod_resource_claims(spec.resource_claims, f"{path}.resourceClaims")
    affinity = spec.affinity
    if affinity and affinity.node_affinity:
        required = affinity.node_affinity.required_during_scheduling_ignored_during_execution
        if required is not None:
            errs += _validate_node_selector(
                required,
                f"{path}.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution",
            )
        for i, term in enumerate(
            affinity.node_affinity.preferred_during_scheduling_ignored_during_execution
        ):
            term_path = (
                f"{path}.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[{i}]"
            )
            if not 1 <= term.weight <= 100:
                errs.append(
                    field_invalid(f"{term_path}.weight", term.weight, "must be in the range 1-100")
                )
            errs += _validate_node_selector_term(term.preference, f"{term_path}.preference")
    return errs


def _validate_container(
    container: core_v1.Container, path: str, names: set[str], claim_names: set[str]
) -> list[FieldError]:
    """Checks one container; `names` collects names across init, regular and ephemeral ones."""
    errs = _validate_unique_name(container.name, f"{path}.name", names)
    if not container.image:
        errs.append(field_required(f"{path}.image"))
    errs += _validate_resource_requirements(container.resources, f"{path}.resources")
    seen_claims = set()
    for i, claim in enumerate(container.resources.claims):
        claim_path = f"{path}.resources.claims[{i}]"
        if not claim.name:
            errs.append(field_required(claim_path))
            continue
        key = (claim.name, claim.request)
        if key in seen_claims:
            errs.append(field_duplicate(claim_path, claim.name))
        seen_claims.add(key)
        if claim.name not in claim_names:
            errs.append(
                field_not_found(
                    claim_path, claim.name, "must be one of the names in pod.spec.resourceClaims"
                )
            )
    return errs


def _validate_pod_resource_claims(
    claims: list[core_v1.PodResourceClaim], path: str
) -> list[FieldError]:
    errs = []
    seen = set()
    for i, claim in enumerate(claims):
        claim_path = f"{path}[{i}]"
        errs += _validate_unique_name(claim.name, f"{claim_path}.name", seen)
        sources = [
            (field_name, value)
            for field_name, value in (
                ("resourceClaimName", claim.resource_claim_name),
                ("resourceClaimTemplateName", claim.resource_claim_template_name),
            )
            if value is not None
        ]
        if not sources:
            errs.append(
                field_invalid(
                    claim_path,
                    _builtins(claim),
                    "must specify one of: `resourceClaimName`, `resourceClaimTemplateName`",
                )
            )
        elif len(sources) > 1:
            errs.append(
                field_invalid(
                    claim_path,
                    _builtins(claim),
                    "at most one of `resourceClaimName` or `resourceClaimTemplateName` "
                    "may be specified",
                )
            )
        for field_name, value in sources:
            errs += _each(f"{claim_path}.{field_name}", value, is_dns1123_subdomain(value))
    return errs


def _validate_toleration(
    toleration: core_v1.Toleration | resource_v1.DeviceToleration, path: str, effects: list[str]
) -> list[FieldError]:
    errs = []
    if toleration.key:
        errs += _each(f"{path}.key", toleration.key, is_qualified_name(toleration.key))
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
        errs += _each(f"{path}.value", toleration.value, is_valid_label_value(toleration.value))
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


def _validate_node_selector(selector: core_v1.NodeSelector, path: str) -> list[FieldError]:
    terms_path = f"{path}.nodeSelectorTerms"
    if not selector.node_selector_terms:
        return [field_required(terms_path, "must have at least one node selector term")]
    errs = []
    for i, term in enumerate(selector.node_selector_terms):
        errs += _validate_node_selector_term(term, f"{terms_path}[{i}]")
    return errs


def _validate_node_selector_term(term: core_v1.NodeSelectorTerm, path: str) -> list[FieldError]:
    errs = []
    for i, req in enumerate(term.match_expressions):
        req_path = f"{path}.matchExpressions[{i}]"
        errs += _validate_selector_requirement(req, req_path, _NODE_SELECTOR_OPERATORS)
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


def _validate_pod_spec_update(new: core_v1.PodSpec, old: core_v1.PodSpec) -> list[FieldError]:
    """A pod's spec is fixed once created, except images, the deadline and added tolerations.

    The node is set through `pods/binding` and ephemeral containers through their own
    subresource, neither of which is an update of the pod.
    """
    if not all(t in new.tolerations for t in old.tolerations):
        return [field_forbidden("spec.tolerations", "existing toleration can not be modified")]
    if _same_but_mutable_fields(new, old):
        return []
    return [
        field_forbidden(
            "spec",
            "pod updates may not change fields other than `spec.containers[*].image`,"
            "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,"
            "`spec.tolerations` (only additions to existing tolerations)",
        )
    ]


def _same_but_mutable_fields(new: core_v1.PodSpec, old: core_v1.PodSpec) -> bool:
    """`new == old` once `new` takes `old`'s images, deadline and tolerations.

    Upstream copies the new spec, overwrites those fields with the old ones and compares.
    Only the copy's top-level fields and its containers change, so shallow copies of those
    suffice (no deep copy of the whole spec). Images are paired in `all_containers()` order,
    init containers first; when the container lists differ in length the specs differ anyway.
    """
    if new == old:  # the usual update (labels, status): nothing of the spec changed
        return True
    if len(new.init_containers) != len(old.init_containers) or len(new.containers) != len(
        old.containers
    ):
        return False
    replace = msgspec.structs.replace
    comparable = replace(
        new,
        init_containers=[
            replace(mine, image=theirs.image)
            for mine, theirs in zip(new.init_containers, old.init_containers, strict=True)
        ],
        containers=[
            replace(mine, image=theirs.image)
            for mine, theirs in zip(new.containers, old.containers, strict=True)
        ],
        active_deadline_seconds=old.active_deadline_seconds,
        tolerations=old.tolerations,
    )
    return comparable == old


def validate_pod_status(pod: core_v1.Pod) -> list[FieldError]:
    """Errors of `status.extendedResourceClaimStatus` (spec §1.2.2 a–f).

    The mapping ties a container's extended resource to a request of the special claim; the
    kubelet trusts it to find the devices, so it must name real containers and requests.
    """
    status = pod.status.extended_resource_claim_status
    if status is None:
        return []
    path = "status.extendedResourceClaimStatus"
    mappings_path = f"{path}.requestMappings"
    errs = []
    if not status.request_mappings:
        errs.append(field_required(mappings_path, "at least one request mapping is required"))
    # Ephemeral containers are deliberately absent: they never get devices.
    containers = {c.name: c for c in pod.spec.all_containers()}
    seen = set()
    for i, mapping in enumerate(status.request_mappings):
        item = f"{mappings_path}[{i}]"
        container = containers.get(mapping.container_name)
        if container is None:
            errs.append(
                field_invalid(
                    f"{item}.containerName",
                    mapping.container_name,
                    "must match the name of an entry in `spec.initContainers` or `spec.containers`",
                )
            )
        elif mapping.resource_name not in resources.container_requests(container):
            errs.append(
                field_invalid(
                    f"{item}.resourceName",
                    mapping.resource_name,
                    "must match the name of an entry in `spec.initContainers.resources.requests` "
                    "or `spec.containers.resources.requests`",
                )
            )
        errs += _each(
            f"{item}.requestName", mapping.request_name, is_dns1123_label(mapping.request_name)
        )
        key = (mapping.container_name, mapping.resource_name, mapping.request_name)
        if key in seen:
            errs.append(field_duplicate(item, _builtins(mapping)))
        seen.add(key)
    errs += _validate_required_subdomain(status.resource_claim_name, f"{path}.resourceClaimName")
    return errs


POD_PHASES = ["Pending", "Running", "Succeeded", "Failed", "Unknown"]


def _validate_pod_phase(phase: str) -> list[FieldError]:
    """The phase a status write sets must be one of `PodPhase`'s values (empty: not yet set).
    Upstream's ValidatePodStatusUpdate leaves this to its writers; drasim's kubelets,
    controllers and scheduler all branch on the phase, so a status write may not invent one."""
    if phase and phase not in POD_PHASES:
        return [field_not_supported("status.phase", phase, POD_PHASES)]
    return []


def _validate_binding(binding: core_v1.Binding, old: KubeObject | None) -> list[FieldError]:
    errs = []
    if binding.target.kind not in ("", "Node"):
        errs.append(field_not_supported("target.kind", binding.target.kind, ["Node", "<empty>"]))
    return errs + validate_binding_target(binding.target.name)


def validate_binding_target(node_name: str) -> list[FieldError]:
    """The node a `pods/binding` names. Upstream takes any name; drasim checks it as the
    pod's `spec.nodeName` is checked on every later write of the pod (and a NUL could not be
    stored)."""
    if not node_name:
        return [field_required("target.name")]
    return _each("target.name", node_name, is_dns1123_subdomain(node_name))


# --- Deployment, ReplicaSet ----------------------------------------------------------------


def _validate_replica_counts(
    status: apps_v1.DeploymentStatus | apps_v1.ReplicaSetStatus,
) -> list[FieldError]:
    errs = []
    for field in msgspec.structs.fields(status):
        value = getattr(status, field.name)
        if type(value) is int:  # the replica counts (int32) and observedGeneration (int64)
            errs += _nonnegative(f"status.{field.encode_name}", value)
            if field.name != "observed_generation":
                errs += _int32(f"status.{field.encode_name}", value)
    return errs


def _validate_workload(
    spec: apps_v1.DeploymentSpec | apps_v1.ReplicaSetSpec, kind: str
) -> list[FieldError]:
    errs = []
    if spec.replicas is not None:
        errs += _nonnegative_int32("spec.replicas", spec.replicas)
    errs += _nonnegative_int32("spec.minReadySeconds", spec.min_ready_seconds)
    template = spec.template
    if spec.selector is None:
        errs.append(field_required("spec.selector"))
    else:
        errs += _validate_label_selector(spec.selector, "spec.selector")
        if not spec.selector.match_labels and not spec.selector.match_expressions:
            errs.append(field_invalid("spec.selector", {}, f"empty selector is invalid for {kind}"))
        elif not labels.from_label_selector(spec.selector).matches(template.metadata.labels):
            errs.append(
                field_invalid(
                    "spec.template.metadata.labels",
                    template.metadata.labels,
                    "`selector` does not match template `labels`",
                )
            )
    errs += _validate_labels(template.metadata.labels, "spec.template.metadata.labels")
    errs += _validate_annotations(
        template.metadata.annotations, "spec.template.metadata.annotations"
    )
    errs += _validate_pod_spec(template.spec, "spec.template.spec")
    if template.spec.restart_policy not in ("", "Always"):
        errs.append(
            field_not_supported(
                "spec.template.spec.restartPolicy", template.spec.restart_policy, ["Always"]
            )
        )
    return errs


def _validate_deployment(deploy: apps_v1.Deployment, old: KubeObject | None) -> list[FieldError]:
    errs = _validate_workload(deploy.spec, "deployment")
    strategy = deploy.spec.strategy
    if strategy.type and strategy.type not in ("RollingUpdate", "Recreate"):
        errs.append(
            field_not_supported("spec.strategy.type", strategy.type, ["Recreate", "RollingUpdate"])
        )
    if strategy.type == "Recreate" and strategy.rolling_update is not None:
        errs.append(
            field_forbidden(
                "spec.strategy.rollingUpdate",
                "may not be specified when strategy `type` is 'Recreate'",
            )
        )
    if deploy.spec.revision_history_limit is not None:
        errs += _nonnegative_int32("spec.revisionHistoryLimit", deploy.spec.revision_history_limit)
    return errs + _validate_selector_update(deploy, old)


def _validate_replica_set(rs: apps_v1.ReplicaSet, old: KubeObject | None) -> list[FieldError]:
    return _validate_workload(rs.spec, "replicaset") + _validate_selector_update(rs, old)


def _validate_selector_update(
    new: apps_v1.Deployment | apps_v1.ReplicaSet, old: KubeObject | None
) -> list[FieldError]:
    if isinstance(old, type(new)) and new.spec.selector != old.spec.selector:
        return [field_invalid("spec.selector", _builtins(new.spec.selector), "field is immutable")]
    return []


# --- policy/v1: PodDisruptionBudget ------------------------------------------------------------

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
    return _nonnegative_int32(path, value)


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
                "spec", _builtins(spec), "minAvailable and maxUnavailable cannot be both set"
            )
        )
    if spec.min_available is not None:
        errs += _validate_int_or_percent(spec.min_available, "spec.minAvailable")
    if spec.max_unavailable is not None:
        errs += _validate_int_or_percent(spec.max_unavailable, "spec.maxUnavailable")
    if spec.selector is not None:
        errs += _validate_label_selector(spec.selector, "spec.selector")
    policy = spec.unhealthy_pod_eviction_policy
    if policy is not None and policy not in _UNHEALTHY_POD_EVICTION_POLICIES:
        errs.append(
            field_not_supported(
                "spec.unhealthyPodEvictionPolicy", policy, _UNHEALTHY_POD_EVICTION_POLICIES
            )
        )
    return errs


def _validate_pod_disruption_budget_status(
    status: policy_v1.PodDisruptionBudgetStatus,
) -> list[FieldError]:
    """Upstream `ValidatePodDisruptionBudgetStatusUpdate`: the counts are never negative."""
    errs = []
    for name, value in (
        ("disruptionsAllowed", status.disruptions_allowed),
        ("currentHealthy", status.current_healthy),
        ("desiredHealthy", status.desired_healthy),
        ("expectedPods", status.expected_pods),
    ):
        errs += _nonnegative_int32(f"status.{name}", value)
    return errs


# --- resource.k8s.io: DeviceClass, ResourceSlice, ResourceClaim(Template) ---------------------

DRIVER_NAME_MAX_LENGTH = 63
POOL_NAME_MAX_LENGTH = 253
DEVICE_REQUESTS_MAX_SIZE = 32  # also constraints and configs per claim
FIRST_AVAILABLE_MAX_SIZE = 8
SELECTORS_MAX_SIZE = 32
DEVICE_CONFIG_MAX_SIZE = 32
ALLOCATION_RESULTS_MAX_SIZE = 32
RESERVED_FOR_MAX_SIZE = 256
RESOURCE_SLICE_MAX_DEVICES = 128
ATTRIBUTES_AND_CAPACITIES_MAX_PER_DEVICE = 32
DEVICE_ATTRIBUTE_MAX_VALUE_LENGTH = 64
DEVICE_TAINT_EFFECTS = ["NoSchedule", "NoExecute"]
ALLOCATION_MODES = [resource_v1.ALLOCATION_MODE_ALL, resource_v1.ALLOCATION_MODE_EXACT_COUNT]


def _validate_driver_name(driver: str, path: str) -> list[FieldError]:
    if not driver:
        return [field_required(path)]
    errs = []
    if len(driver) > DRIVER_NAME_MAX_LENGTH:
        errs.append(field_too_long(path, DRIVER_NAME_MAX_LENGTH))
    return errs + _each(path, driver, is_dns1123_subdomain(driver.lower()))


def _validate_pool_name(pool: str, path: str) -> list[FieldError]:
    if not pool:
        return [field_required(path)]
    errs = []
    if len(pool) > POOL_NAME_MAX_LENGTH:
        errs.append(field_too_long(path, POOL_NAME_MAX_LENGTH))
    for part in pool.split("/"):
        errs += _each(path, pool, is_dns1123_subdomain(part))
    return errs


def _validate_attribute_name(name: str, path: str) -> list[FieldError]:
    """`[domain/]identifier`: domain a DNS subdomain of at most 63, identifier a C name ≤32."""
    domain, _, identifier = name.rpartition("/")
    errs = []
    if "/" in name:
        if len(domain) > DRIVER_NAME_MAX_LENGTH:
            errs.append(field_too_long(path, DRIVER_NAME_MAX_LENGTH))
        errs += _each(path, domain, is_dns1123_subdomain(domain))
    if not identifier:
        errs.append(field_required(path, "name part must be non-empty"))
        return errs
    if len(identifier) > 32:
        errs.append(field_too_long(path, 32))
    return errs + _each(path, identifier, is_c_identifier(identifier))


def _validate_selectors(
    selectors: list[resource_v1.DeviceSelector], path: str, *, stored: bool
) -> list[FieldError]:
    """A class's or request's selectors. `stored`: the expressions are the ones already
    stored, so they compiled when written and are not compiled again (upstream's
    `deviceValidationOptions.stored`: an update then never fails on an expression that
    an older release accepted)."""
    errs = []
    if len(selectors) > SELECTORS_MAX_SIZE:
        errs.append(field_too_many(path, len(selectors), SELECTORS_MAX_SIZE))
    for i, selector in enumerate(selectors):
        if selector.cel is None:
            errs.append(field_required(f"{path}[{i}].cel"))
        elif not selector.cel.expression:
            errs.append(field_required(f"{path}[{i}].cel.expression"))
        elif not stored:
            errs += _validate_cel_expression(selector.cel.expression, f"{path}[{i}].cel.expression")
    return errs


@functools.lru_cache(maxsize=1024)
def _cel_expression_errors(expression: str, path: str) -> tuple[FieldError, ...]:
    if len(expression.encode()) > dra_cel.SELECTOR_EXPRESSION_MAX_LENGTH:
        # Too long expressions are not compiled at all, as upstream.
        return (field_too_long(path, dra_cel.SELECTOR_EXPRESSION_MAX_LENGTH),)
    try:
        dra_cel.compile_expression(expression, cost_limit=dra_cel.SELECTOR_EXPRESSION_MAX_COST)
    except dra_cel.CostLimitExceeded as err:
        return (field_forbidden(path, str(err)),)
    except dra_cel.CompileError as err:
        return (field_invalid(path, expression, str(err)),)
    return ()


def _validate_cel_expression(expression: str, path: str) -> list[FieldError]:
    """Upstream `validateCELSelector`: the expression must compile as the scheduler will
    compile it (a class that does not leaves every pod of its extended resource Pending),
    and its estimated worst-case cost must not exceed `CELSelectorExpressionMaxCost`."""
    return list(_cel_expression_errors(expression, path))


def _validate_opaque(
    opaque: resource_v1.OpaqueDeviceConfiguration | None, path: str
) -> list[FieldError]:
    if opaque is None:
        return [field_required(f"{path}.opaque")]
    errs = _validate_driver_name(opaque.driver, f"{path}.opaque.driver")
    if opaque.parameters is None:
        errs.append(field_required(f"{path}.opaque.parameters"))
    elif not isinstance(opaque.parameters, dict):
        errs.append(
            field_invalid(
                f"{path}.opaque.parameters", "<value omitted>", "must be a valid JSON object"
            )
        )
    return errs


def _validate_device_class(dc: resource_v1.DeviceClass, old: KubeObject | None) -> list[FieldError]:
    # Selectors exactly as stored are not compiled again; any change (even reordering) is.
    stored = isinstance(old, resource_v1.DeviceClass) and dc.spec.selectors == old.spec.selectors
    errs = _validate_selectors(dc.spec.selectors, "spec.selectors", stored=stored)
    if len(dc.spec.config) > DEVICE_CONFIG_MAX_SIZE:
        errs.append(field_too_many("spec.config", len(dc.spec.config), DEVICE_CONFIG_MAX_SIZE))
    for i, config in enumerate(dc.spec.config):
        errs += _validate_opaque(config.opaque, f"spec.config[{i}]")
    name = dc.spec.extended_resource_name
    # KEP-5004 (spec §1.1.2): never a `kubernetes.io/` name, so implicit names cannot clash.
    if name is not None and not resources.is_extended_resource_name(name):
        errs.append(
            field_invalid(
                "spec.extendedResourceName", name, "must be a valid extended resource name"
            )
        )
    return errs


def _validate_device_taints(taints: list[resource_v1.DeviceTaint], path: str) -> list[FieldError]:
    errs = []
    for i, taint in enumerate(taints):
        errs += _validate_taint(taint, f"{path}[{i}]", DEVICE_TAINT_EFFECTS)
    return errs


def _validate_slice_node_selector(selector: core_v1.NodeSelector, path: str) -> list[FieldError]:
    errs = _validate_node_selector(selector, path)
    if len(selector.node_selector_terms) > 1:
        errs.append(
            field_invalid(
                f"{path}.nodeSelectorTerms",
                _builtins(selector.node_selector_terms),
                "must have exactly one node selector term",
            )
        )
    return errs


def _validate_device(device: resource_v1.Device, path: str, per_device: bool) -> list[FieldError]:
    errs = []
    if not device.name:
        errs.append(field_required(f"{path}.name"))
    else:
        errs += _each(f"{path}.name", device.name, is_dns1123_label(device.name))
    for name, attribute in device.attributes.items():
        a_path = f"{path}.attributes[{name}]"
        errs += _validate_attribute_name(name, a_path)
        values = [
            v
            for v in (
                attribute.int_value,
                attribute.bool_value,
                attribute.string_value,
                attribute.version_value,
            )
            if v is not None
        ]
        if len(values) != 1:
            errs.append(
                field_invalid(a_path, _builtins(attribute), "exactly one value must be specified")
            )
        if (
            attribute.string_value is not None
            and len(attribute.string_value) > DEVICE_ATTRIBUTE_MAX_VALUE_LENGTH
        ):
            errs.append(field_too_long(f"{a_path}.string", DEVICE_ATTRIBUTE_MAX_VALUE_LENGTH))
        if attribute.version_value is not None:
            if len(attribute.version_value) > DEVICE_ATTRIBUTE_MAX_VALUE_LENGTH:
                errs.append(field_too_long(f"{a_path}.version", DEVICE_ATTRIBUTE_MAX_VALUE_LENGTH))
            if not _SEMVER_RE.fullmatch(attribute.version_value):
                errs.append(
                    field_invalid(
                        f"{a_path}.version",
                        attribute.version_value,
                        "must be a string compatible with semver.org spec 2.0.0",
                    )
                )
    for name, capacity in device.capacity.items():
        c_path = f"{path}.capacity[{name}]"
        errs += _validate_attribute_name(name, c_path)
        if capacity.value < 0:
            errs.append(
                field_invalid(
                    f"{c_path}.value", str(capacity.value), "must be greater than or equal to 0"
                )
            )
    combined = len(device.attributes) + len(device.capacity)
    if combined > ATTRIBUTES_AND_CAPACITIES_MAX_PER_DEVICE:
        errs.append(
            field_invalid(
                path,
                combined,
                "the total number of attributes and capacities must not exceed "
                f"{ATTRIBUTES_AND_CAPACITIES_MAX_PER_DEVICE}",
            )
        )
    errs += _validate_device_taints(device.taints, f"{path}.taints")
    placements = [
        p
        for p in (device.node_name, device.node_selector, device.all_nodes or None)
        if p is not None
    ]
    if per_device:
        if len(placements) != 1:
            errs.append(
                field_invalid(
                    path,
                    device.name,
                    "exactly one of `nodeName`, `nodeSelector`, or `allNodes` is required when "
                    "`perDeviceNodeSelection` is set to true in the ResourceSlice spec",
                )
            )
        if device.node_name:
            errs += _each(
                f"{path}.nodeName", device.node_name, is_dns1123_subdomain(device.node_name)
            )
        if device.node_selector is not None:
            errs += _validate_slice_node_selector(device.node_selector, f"{path}.nodeSelector")
    elif placements:
        errs.append(
            field_invalid(
                path,
                device.name,
                "`nodeName`, `nodeSelector` and `allNodes` can only be set if "
                "`perDeviceNodeSelection` is set to true in the ResourceSlice spec",
            )
        )
    return errs


def _validate_resource_slice(
    rs: resource_v1.ResourceSlice, old: KubeObject | None
) -> list[FieldError]:
    spec = rs.spec
    errs = _validate_driver_name(spec.driver, "spec.driver")
    errs += _validate_pool_name(spec.pool.name, "spec.pool.name")
    errs += _nonnegative("spec.pool.generation", spec.pool.generation)
    if spec.pool.resource_slice_count <= 0:
        errs.append(
            field_invalid(
                "spec.pool.resourceSliceCount",
                spec.pool.resource_slice_count,
                "must be greater than zero",
            )
        )
    selection = 0
    if spec.node_name is not None:
        selection += 1
        errs += _each("spec.nodeName", spec.node_name, is_dns1123_subdomain(spec.node_name))
    if spec.node_selector is not None:
        selection += 1
        errs += _validate_slice_node_selector(spec.node_selector, "spec.nodeSelector")
    if spec.all_nodes:
        selection += 1
    if spec.per_device_node_selection:
        selection += 1
    detail = (
        "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` "
        "is required"
    )
    if selection == 0:
        errs.append(field_required("spec", detail))
    elif selection > 1:
        errs.append(
            field_invalid(
                "spec", "{`nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection`}", detail
            )
        )
    if len(spec.devices) > RESOURCE_SLICE_MAX_DEVICES:
        errs.append(field_too_many("spec.devices", len(spec.devices), RESOURCE_SLICE_MAX_DEVICES))
    names = set()
    for i, device in enumerate(spec.devices):
        errs += _validate_device(device, f"spec.devices[{i}]", bool(spec.per_device_node_selection))
        if device.name in names:
            errs.append(field_duplicate(f"spec.devices[{i}].name", device.name))
        names.add(device.name)
    if isinstance(old, resource_v1.ResourceSlice):
        if spec.driver != old.spec.driver:
            errs.append(field_invalid("spec.driver", spec.driver, "field is immutable"))
        if spec.node_name != old.spec.node_name:
            errs.append(field_invalid("spec.nodeName", spec.node_name, "field is immutable"))
    return errs


def _request_names(claim: resource_v1.DeviceClaim) -> set[str]:
    """Names a constraint, config or result may refer to: `<request>` or `<request>/<sub>`."""
    names = set()
    for request in claim.requests:
        names.add(request.name)
        names.update(f"{request.name}/{sub.name}" for sub in request.first_available)
    return names


_UNKNOWN_REQUEST = (
    "must be the name of a request in the claim or the name of a request and a subrequest "
    "separated by '/'"
)


def _validate_request_references(refs: list[str], path: str, known: set[str]) -> list[FieldError]:
    return [
        field_invalid(f"{path}[{i}]", ref, _UNKNOWN_REQUEST)
        for i, ref in enumerate(refs)
        if ref not in known
    ]


def _validate_exact(
    request: resource_v1.ExactDeviceRequest | resource_v1.DeviceSubRequest,
    path: str,
    *,
    stored: bool,
) -> list[FieldError]:
    errs = _validate_required_subdomain(request.device_class_name, f"{path}.deviceClassName")
    errs += _validate_selectors(request.selectors, f"{path}.selectors", stored=stored)
    mode = request.allocation_mode or resource_v1.ALLOCATION_MODE_EXACT_COUNT
    if mode == resource_v1.ALLOCATION_MODE_ALL:
        if request.count != 0:
            errs.append(
                field_invalid(
                    f"{path}.count",
                    request.count,
                    "must not be specified when allocationMode is 'All'",
                )
            )
    elif mode == resource_v1.ALLOCATION_MODE_EXACT_COUNT:
        if request.count < 0:  # 0 means unset: defaulted to 1
            errs.append(field_invalid(f"{path}.count", request.count, "must be greater than zero"))
    else:
        errs.append(
            field_not_supported(f"{path}.allocationMode", request.allocation_mode, ALLOCATION_MODES)
        )
    for i, toleration in enumerate(request.tolerations):
        errs += _validate_toleration(toleration, f"{path}.tolerations[{i}]", DEVICE_TAINT_EFFECTS)
    return errs


def _validate_claim_spec(
    spec: resource_v1.ResourceClaimSpec, path: str, *, stored: bool
) -> list[FieldError]:
    """`stored`: the spec is the stored one (it is immutable), so its CEL expressions are
    not compiled again."""
    claim = spec.devices
    path = f"{path}.devices"
    errs = []
    if len(claim.requests) > DEVICE_REQUESTS_MAX_SIZE:
        errs.append(
            field_too_many(f"{path}.requests", len(claim.requests), DEVICE_REQUESTS_MAX_SIZE)
        )
    seen = set()
    for i, request in enumerate(claim.requests):
        r_path = f"{path}.requests[{i}]"
        errs += _validate_unique_name(request.name, f"{r_path}.name", seen)
        if request.exactly is not None and request.first_available:
            errs.append(
                field_forbidden(
                    r_path,
                    "exactly one of `exactly` or `firstAvailable` is required, "
                    "but multiple fields are set",
                )
            )
        elif request.exactly is not None:
            errs += _validate_exact(request.exactly, f"{r_path}.exactly", stored=stored)
        elif request.first_available:
            errs += _validate_subrequests(
                request.first_available, f"{r_path}.firstAvailable", stored=stored
            )
        else:
            errs.append(
                field_required(r_path, "exactly one of `exactly` or `firstAvailable` is required")
            )
    known = _request_names(claim)
    if len(claim.constraints) > DEVICE_REQUESTS_MAX_SIZE:
        errs.append(
            field_too_many(f"{path}.constraints", len(claim.constraints), DEVICE_REQUESTS_MAX_SIZE)
        )
    for i, constraint in enumerate(claim.constraints):
        c_path = f"{path}.constraints[{i}]"
        errs += _validate_request_references(constraint.requests, f"{c_path}.requests", known)
        attributes = [
            (field_name, value)
            for field_name, value in (
                ("matchAttribute", constraint.match_attribute),
                ("distinctAttribute", constraint.distinct_attribute),
            )
            if value is not None
        ]
        if len(attributes) != 1:
            errs.append(
                field_required(
                    f"{c_path}.matchAttribute", "exactly one constraint must be specified"
                )
            )
        for field_name, value in attributes:
            if "/" not in value:
                errs.append(
                    field_required(
                        f"{c_path}.{field_name}",
                        "a fully qualified name must be a domain and a name separated by a slash",
                    )
                )
            errs += _validate_attribute_name(value, f"{c_path}.{field_name}")
    if len(claim.config) > DEVICE_CONFIG_MAX_SIZE:
        errs.append(field_too_many(f"{path}.config", len(claim.config), DEVICE_CONFIG_MAX_SIZE))
    for i, config in enumerate(claim.config):
        errs += _validate_request_references(config.requests, f"{path}.config[{i}].requests", known)
        errs += _validate_opaque(config.opaque, f"{path}.config[{i}]")
    return errs


def _validate_subrequests(
    subrequests: list[resource_v1.DeviceSubRequest], path: str, *, stored: bool
) -> list[FieldError]:
    errs = []
    if len(subrequests) > FIRST_AVAILABLE_MAX_SIZE:
        errs.append(field_too_many(path, len(subrequests), FIRST_AVAILABLE_MAX_SIZE))
    seen = set()
    for i, sub in enumerate(subrequests):
        s_path = f"{path}[{i}]"
        errs += _validate_unique_name(sub.name, f"{s_path}.name", seen)
        errs += _validate_exact(sub, s_path, stored=stored)
    return errs


def _validate_resource_claim(
    claim: resource_v1.ResourceClaim, old: KubeObject | None
) -> list[FieldError]:
    stored = isinstance(old, resource_v1.ResourceClaim)
    errs = _validate_claim_spec(claim.spec, "spec", stored=stored)
    if isinstance(old, resource_v1.ResourceClaim) and claim.spec != old.spec:
        errs.append(field_invalid("spec", _builtins(claim.spec), "field is immutable"))
    return errs


def _validate_resource_claim_status(
    claim: resource_v1.ResourceClaim, old: resource_v1.ResourceClaim | None
) -> list[FieldError]:
    status = claim.status
    errs = []
    allocation = status.allocation
    if allocation is not None:
        results = allocation.devices.results
        results_path = "status.allocation.devices.results"
        if len(results) > ALLOCATION_RESULTS_MAX_SIZE:
            errs.append(field_too_many(results_path, len(results), ALLOCATION_RESULTS_MAX_SIZE))
        known = _request_names(claim.spec.devices)
        for i, result in enumerate(results):
            r_path = f"{results_path}[{i}]"
            if result.request not in known:
                errs.append(field_invalid(f"{r_path}.request", result.request, _UNKNOWN_REQUEST))
            errs += _validate_driver_name(result.driver, f"{r_path}.driver")
            errs += _validate_pool_name(result.pool, f"{r_path}.pool")
            errs += _each(f"{r_path}.device", result.device, is_dns1123_label(result.device))
        if allocation.node_selector is not None:
            errs += _validate_node_selector(
                allocation.node_selector, "status.allocation.nodeSelector"
            )
        if (
            old is not None
            and old.status.allocation is not None
            and allocation != old.status.allocation
        ):
            errs.append(
                field_invalid("status.allocation", _builtins(allocation), "field is immutable")
            )
    reserved_path = "status.reservedFor"
    if len(status.reserved_for) > RESERVED_FOR_MAX_SIZE:
        errs.append(field_too_many(reserved_path, len(status.reserved_for), RESERVED_FOR_MAX_SIZE))
    uids = set()
    for i, ref in enumerate(status.reserved_for):
        for field_name, value in (("resource", ref.resource), ("name", ref.name), ("uid", ref.uid)):
            if not value:
                errs.append(field_required(f"{reserved_path}[{i}].{field_name}"))
        if ref.uid in uids:
            errs.append(field_duplicate(f"{reserved_path}[{i}].uid", ref.uid))
        uids.add(ref.uid)
    if status.reserved_for and allocation is None:
        errs.append(
            field_forbidden(reserved_path, "may not be specified when `allocated` is not set")
        )
    # A claim being deleted may lose consumers but gain none: its devices are going away.
    if old is not None and claim.metadata.deletion_timestamp is not None:
        old_uids = {ref.uid for ref in old.status.reserved_for}
        if uids - old_uids:
            errs.append(
                field_forbidden(
                    reserved_path, "new entries may not be added while `deletionTimestamp` is set"
                )
            )
    return errs


def _validate_resource_claim_template(
    template: resource_v1.ResourceClaimTemplate, old: KubeObject | None
) -> list[FieldError]:
    errs = _validate_labels(template.spec.metadata.labels, "spec.metadata.labels")
    errs += _validate_annotations(template.spec.metadata.annotations, "spec.metadata.annotations")
    stored = isinstance(old, resource_v1.ResourceClaimTemplate)
    errs += _validate_claim_spec(template.spec.spec, "spec.spec", stored=stored)
    if isinstance(old, resource_v1.ResourceClaimTemplate) and template.spec != old.spec:
        errs.append(field_invalid("spec", _builtins(template.spec), "field is immutable"))
    return errs


# --- Dispatch ------------------------------------------------------------------------------

Validator = Callable[[Any, KubeObject | None], list[FieldError]]

_VALIDATORS: dict[type[KubeObject], Validator] = {
    core_v1.Namespace: _validate_namespace,
    core_v1.Node: _validate_node,
    core_v1.Pod: _validate_pod,
    core_v1.Binding: _validate_binding,
    core_v1.Event: _validate_event,
    core_v1.ResourceQuota: _validate_resource_quota,
    coordination_v1.Lease: _validate_lease,
    apps_v1.Deployment: _validate_deployment,
    apps_v1.ReplicaSet: _validate_replica_set,
    policy_v1.PodDisruptionBudget: _validate_pod_disruption_budget,
    scheduling_v1.PriorityClass: _validate_priority_class,
    resource_v1.DeviceClass: _validate_device_class,
    resource_v1.ResourceSlice: _validate_resource_slice,
    resource_v1.ResourceClaim: _validate_resource_claim,
    resource_v1.ResourceClaimTemplate: _validate_resource_claim_template,
    **rbac_validation.VALIDATORS,
}


def _is_namespaced(type_: type[KubeObject]) -> bool:
    # A Binding is the body of `pods/binding`, in its pod's namespace.
    return type_ is core_v1.Binding or registry.by_type(type_).namespaced


def _name_rule(type_: type[KubeObject]) -> Callable[[str, bool], list[str]]:
    """Namespaces are DNS labels (they become DNS names); RBAC names path segments; other
    names DNS subdomains."""
    if type_ in rbac_validation.VALIDATORS:
        return rbac_validation.path_segment_name
    return _LABEL_NAME if type_ is core_v1.Namespace else _SUBDOMAIN_NAME
