"""apimachinery's object validation (`k8s.io/apimachinery/pkg/api/validation` and
`pkg/apis/meta/v1/validation`): ObjectMeta, labels, annotations, ownerReferences and label
selectors, and the small field checks every API group shares (a name in a keyed list,
non-negative and int32 numbers).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from drasim.common import codec
from drasim.common.api import core_v1
from drasim.common.api.meta_v1 import (
    TOTAL_ANNOTATION_SIZE_LIMIT,
    Condition,
    KubeObject,
    LabelSelector,
    LabelSelectorRequirement,
    ObjectMeta,
)
from drasim.common.api.validation import memo, names
from drasim.common.errors import (
    FieldError,
    field_duplicate,
    field_forbidden,
    field_invalid,
    field_not_supported,
    field_required,
    field_too_long,
)

__all__ = [
    "INT32_MAX",
    "LABEL_NAME",
    "SUBDOMAIN_NAME",
    "NameRule",
    "Validator",
    "each",
    "int32",
    "nonnegative",
    "nonnegative_int32",
    "set_fields",
    "validate_annotations",
    "validate_conditions",
    "validate_label_selector",
    "validate_labels",
    "validate_object_meta",
    "validate_object_meta_update",
    "validate_required_subdomain",
    "validate_selector_requirement",
    "validate_unique_name",
]

# A kind's validation of a create (old None) or an update: the errors, empty when valid.
Validator = Callable[[Any, KubeObject | None], list[FieldError]]
# A kind's name format: the reasons `name` fails; `prefix` for a `generateName`.
NameRule = Callable[[str, bool], list[str]]

INT32_MAX = 2**31 - 1


def each(path: str, value: Any, messages: Iterable[str]) -> list[FieldError]:
    """One `Invalid value` error of `value` at `path` per reason a name check gave."""
    if not messages:
        return []
    return [field_invalid(path, value, msg) for msg in messages]


def validate_unique_name(name: str, path: str, seen: set[str]) -> list[FieldError]:
    """The `name` of an entry in a list keyed by name (containers, a pod's resource claims,
    a claim's requests and subrequests): required, a DNS label, and unique; `seen` collects
    the names met so far."""
    if not name:
        return [field_required(path)]
    errs = each(path, name, names.is_dns1123_label(name))
    if name in seen:
        errs.append(field_duplicate(path, name))
    seen.add(name)
    return errs


def validate_required_subdomain(name: str, path: str) -> list[FieldError]:
    """A required reference to another object by name (a device class, a claim): object
    names are DNS subdomains."""
    if not name:
        return [field_required(path)]
    return each(path, name, names.is_dns1123_subdomain(name))


def nonnegative(path: str, value: int) -> list[FieldError]:
    return [field_invalid(path, value, "must be greater than or equal to 0")] if value < 0 else []


def int32(path: str, value: int) -> list[FieldError]:
    """An `int32` field. Go refuses a larger number already when decoding (`cannot unmarshal
    number 2147483648 into Go struct field ... of type int32`); drasim decodes into Python
    ints, so the range is checked here, as its other decode errors are 422s with the path."""
    if value > INT32_MAX:
        return [field_invalid(path, value, f"must be less than or equal to {INT32_MAX}")]
    if value < -INT32_MAX - 1:
        return [field_invalid(path, value, f"must be greater than or equal to {-INT32_MAX - 1}")]
    return []


def nonnegative_int32(path: str, value: int) -> list[FieldError]:
    return nonnegative(path, value) or int32(path, value)


def set_fields(**members: Any) -> list[tuple[str, Any]]:
    """The members of a union (or one-of) that are set, as (JSON name, value) in order."""
    return [(name, value) for name, value in members.items() if value is not None]


def _name_is(check: Callable[[str], list[str]]) -> NameRule:
    """A name rule; for a `generateName` prefix a trailing '-' is allowed (`maskTrailingDash`)."""

    def rule(name: str, prefix: bool) -> list[str]:
        if prefix and len(name) > 1 and name.endswith("-"):
            name = name[:-1]
        return check(name)

    return rule


SUBDOMAIN_NAME = _name_is(names.is_dns1123_subdomain)
LABEL_NAME = _name_is(names.is_dns1123_label)


def validate_object_meta(
    meta: ObjectMeta, *, namespaced: bool, name_rule: NameRule
) -> list[FieldError]:
    errs = []
    if meta.generate_name:
        errs += each(
            "metadata.generateName", meta.generate_name, name_rule(meta.generate_name, True)
        )
    if meta.name:
        errs += each("metadata.name", meta.name, name_rule(meta.name, False))
    elif not meta.generate_name:
        # The API server makes a name from generateName before it validates; drasim may validate
        # first, so an empty name is fine as long as one will be generated.
        errs.append(field_required("metadata.name", "name or generateName is required"))
    if namespaced:
        if not meta.namespace:
            errs.append(field_required("metadata.namespace"))
        else:
            errs += each(
                "metadata.namespace", meta.namespace, names.is_dns1123_label(meta.namespace)
            )
    elif meta.namespace:
        errs.append(field_forbidden("metadata.namespace", "not allowed on this type"))
    errs += nonnegative("metadata.generation", meta.generation)
    errs += validate_labels(meta.labels, "metadata.labels")
    errs += validate_annotations(meta.annotations, "metadata.annotations")
    errs += _validate_owner_references(meta, "metadata.ownerReferences")
    for i, finalizer in enumerate(meta.finalizers):
        errs += each(f"metadata.finalizers[{i}]", finalizer, names.is_qualified_name(finalizer))
    return errs


def validate_object_meta_update(new: ObjectMeta, old: ObjectMeta) -> list[FieldError]:
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


@memo.by_items
def validate_labels(values: Mapping[str, str], path: str) -> list[FieldError]:
    errs = []
    for key, value in values.items():
        errs += each(path, key, names.is_qualified_name(key))
        errs += each(path, value, names.is_valid_label_value(value))
    return errs


@memo.by_items
def validate_annotations(annotations: Mapping[str, str], path: str) -> list[FieldError]:
    errs = []
    for key in annotations:
        # A qualified name, except that case does not matter.
        errs += each(path, key, names.is_qualified_name(key.lower()))
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
                codec.to_builtins(meta.owner_references),
                "Only one reference can have Controller set to true. "
                f'Found "true" in references for {", ".join(controllers)}',
            )
        )
    return errs


_LABEL_SELECTOR_OPERATORS = ["In", "NotIn", "Exists", "DoesNotExist"]


def validate_selector_requirement(
    req: LabelSelectorRequirement | core_v1.NodeSelectorRequirement,
    path: str,
    operators: list[str],
) -> list[FieldError]:
    """The key and set-based operator rules that label-selector and node-selector
    requirements share: `values` needed for In/NotIn, forbidden for Exists/DoesNotExist.
    Any other operator must be one of `operators`; its own value rules are the caller's."""
    errs = each(f"{path}.key", req.key, names.is_qualified_name(req.key))
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


def validate_label_selector(selector: LabelSelector, path: str) -> list[FieldError]:
    errs = validate_labels(selector.match_labels, f"{path}.matchLabels")
    for i, req in enumerate(selector.match_expressions):
        errs += validate_selector_requirement(
            req, f"{path}.matchExpressions[{i}]", _LABEL_SELECTOR_OPERATORS
        )
    return errs


_CONDITION_STATUSES = ["True", "False", "Unknown"]
_CONDITION_REASON_FMT = "[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?"
_CONDITION_REASON_RE = re.compile(_CONDITION_REASON_FMT)
_CONDITION_REASON_ERR = (
    "a condition reason must start with alphabetic character, optionally followed by a "
    "string of alphanumeric characters or '_,:', and must end with an alphanumeric "
    f"character or '_' (regex used for validation is '{_CONDITION_REASON_FMT}')"
)
_CONDITION_REASON_MAX_LENGTH = 1024
_CONDITION_MESSAGE_MAX_LENGTH = 32768


def validate_conditions(conditions: list[Condition], path: str) -> list[FieldError]:
    """`metav1validation.ValidateConditions`: each condition well formed, types unique."""
    errs: list[FieldError] = []
    seen: set[str] = set()
    for i, condition in enumerate(conditions):
        c_path = f"{path}[{i}]"
        if not condition.type:
            errs.append(field_required(f"{c_path}.type"))
        else:
            errs += each(f"{c_path}.type", condition.type, names.is_qualified_name(condition.type))
        if condition.type in seen:
            errs.append(field_duplicate(f"{c_path}.type", condition.type))
        seen.add(condition.type)
        if not condition.status:
            errs.append(field_required(f"{c_path}.status"))
        elif condition.status not in _CONDITION_STATUSES:
            errs.append(
                field_not_supported(f"{c_path}.status", condition.status, _CONDITION_STATUSES)
            )
        if condition.observed_generation < 0:
            errs.append(
                field_invalid(
                    f"{c_path}.observedGeneration",
                    condition.observed_generation,
                    "must be greater than or equal to zero",
                )
            )
        if not condition.last_transition_time:
            errs.append(field_required(f"{c_path}.lastTransitionTime"))
        if not condition.reason:
            errs.append(field_required(f"{c_path}.reason"))
        elif not _CONDITION_REASON_RE.fullmatch(condition.reason):
            errs.append(field_invalid(f"{c_path}.reason", condition.reason, _CONDITION_REASON_ERR))
        if len(condition.reason) > _CONDITION_REASON_MAX_LENGTH:
            errs.append(field_too_long(f"{c_path}.reason", _CONDITION_REASON_MAX_LENGTH))
        if len(condition.message) > _CONDITION_MESSAGE_MAX_LENGTH:
            errs.append(field_too_long(f"{c_path}.message", _CONDITION_MESSAGE_MAX_LENGTH))
    return errs
