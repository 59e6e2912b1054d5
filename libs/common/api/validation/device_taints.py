"""Validation of device taints and tolerations (`pkg/apis/resource/validation`), shared by
ResourceSlices, ResourceClaims and DeviceTaintRules: unlike a node's, a device taint may
have the effect None, and a device toleration's empty key goes with either operator.
"""

from __future__ import annotations

from drasim.common.api import resource_v1
from drasim.common.api.validation import meta, names
from drasim.common.errors import FieldError, field_invalid, field_not_supported, field_required

__all__ = ["validate_device_taint", "validate_device_toleration"]


def validate_device_taint(
    taint: resource_v1.DeviceTaint, old: resource_v1.DeviceTaint | None, path: str
) -> list[FieldError]:
    """A device's or a DeviceTaintRule's taint: unlike a node's, it may have the effect
    None; an effect already stored is not checked again (`old`)."""
    errs = meta.each(f"{path}.key", taint.key, names.is_qualified_name(taint.key))
    if taint.value:
        errs += meta.each(f"{path}.value", taint.value, names.is_valid_label_value(taint.value))
    if old is None or old.effect != taint.effect:
        if not taint.effect:
            errs.append(field_required(f"{path}.effect"))
        elif taint.effect not in resource_v1.DEVICE_TAINT_EFFECTS:
            effects = resource_v1.DEVICE_TAINT_EFFECTS
            errs.append(field_not_supported(f"{path}.effect", taint.effect, effects))
    return errs


def validate_device_toleration(
    toleration: resource_v1.DeviceToleration, path: str
) -> list[FieldError]:
    """Unlike a pod's toleration, an empty key goes with either operator."""
    errs = []
    if toleration.key:
        errs += meta.each(f"{path}.key", toleration.key, names.is_qualified_name(toleration.key))
    if toleration.operator == "Exists":
        if toleration.value:
            detail = "must be empty for operator `Exists`"
            errs.append(field_invalid(f"{path}.value", toleration.value, detail))
    elif toleration.operator == "Equal":
        errs += meta.each(
            f"{path}.value", toleration.value, names.is_valid_label_value(toleration.value)
        )
    elif not toleration.operator:
        errs.append(field_required(f"{path}.operator"))
    else:
        operators = ["Equal", "Exists"]
        errs.append(field_not_supported(f"{path}.operator", toleration.operator, operators))
    if toleration.effect and toleration.effect not in resource_v1.DEVICE_TAINT_EFFECTS:
        effects = resource_v1.DEVICE_TAINT_EFFECTS
        errs.append(field_not_supported(f"{path}.effect", toleration.effect, effects))
    return errs
