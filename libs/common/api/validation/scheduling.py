"""Validation of scheduling.k8s.io/v1 PriorityClasses (`pkg/apis/scheduling/validation`)."""

from __future__ import annotations

from drasim.common.api import scheduling_v1
from drasim.common.api.meta_v1 import KubeObject
from drasim.common.api.validation import core, meta
from drasim.common.errors import FieldError, field_forbidden, field_invalid

__all__ = ["VALIDATORS"]

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
    errs += core.validate_preemption_policy(pc.preemption_policy, "preemptionPolicy")
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


VALIDATORS: dict[type[KubeObject], meta.Validator] = {
    scheduling_v1.PriorityClass: _validate_priority_class,
}
