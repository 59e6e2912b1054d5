"""Kubernetes API validation for every kind drasim serves.

`validate(obj, old=...)` checks a create or update of the main resource, `validate_status`
a write to the `status` subresource, as the API server does before storing. Rules, field
paths and messages follow upstream, so `str(error)` reads like `kubectl`'s output. One
module per API group as upstream's `pkg/apis/<group>/validation` (`core`, `pod`, `apps`, `batch`,
`policy`, `scheduling`, `coordination`, `resource`, `rbac`), each with its kinds'
`VALIDATORS` (and `STATUS_VALIDATORS`); apimachinery's name formats are in `names`, its
ObjectMeta and label-selector rules in `meta`. A new kind adds its validator to its group's
table.
"""

from __future__ import annotations

from drasim.common.api import core_v1, registry
from drasim.common.api.meta_v1 import KubeObject
from drasim.common.api.validation import (
    admissionregistration,
    apiextensions,
    apps,
    batch,
    coordination,
    core,
    core_app,
    meta,
    pod,
    policy,
    rbac,
    resource,
    scheduling,
)
from drasim.common.errors import FieldError

__all__ = ["validate", "validate_status"]

_VALIDATORS: dict[type[KubeObject], meta.Validator] = {
    **core.VALIDATORS,
    **core_app.VALIDATORS,
    **apiextensions.VALIDATORS,
    **admissionregistration.VALIDATORS,
    **pod.VALIDATORS,
    **coordination.VALIDATORS,
    **apps.VALIDATORS,
    **batch.VALIDATORS,
    **policy.VALIDATORS,
    **scheduling.VALIDATORS,
    **resource.VALIDATORS,
    **rbac.VALIDATORS,
}
_STATUS_VALIDATORS: dict[type[KubeObject], meta.Validator] = {
    **core.STATUS_VALIDATORS,
    **pod.STATUS_VALIDATORS,
    **apps.STATUS_VALIDATORS,
    **batch.STATUS_VALIDATORS,
    **policy.STATUS_VALIDATORS,
    **resource.STATUS_VALIDATORS,
}
# Namespaces are DNS labels (they become DNS names), RBAC names path segments; other names
# DNS subdomains.
_NAME_RULES: dict[type[KubeObject], meta.NameRule] = {
    core_v1.Namespace: meta.LABEL_NAME,
    **rbac.NAME_RULES,
    **core_app.NAME_RULES,
    **apiextensions.NAME_RULES,
}


def validate(obj: KubeObject, *, old: KubeObject | None = None) -> list[FieldError]:
    """Errors of a create (`old` None) or update of `obj`'s main resource; empty when valid."""
    type_ = type(obj)
    validator = _VALIDATORS.get(type_)
    if validator is None:
        return []
    # A Binding is the body of `pods/binding`, in its pod's namespace.
    namespaced = type_ is core_v1.Binding or registry.by_type(type_).namespaced
    name_rule = _NAME_RULES.get(type_, meta.SUBDOMAIN_NAME)
    errs = meta.validate_object_meta(obj.metadata, namespaced=namespaced, name_rule=name_rule)
    if old is not None:
        errs += meta.validate_object_meta_update(obj.metadata, old.metadata)
    return errs + validator(obj, old)


def validate_status(obj: KubeObject, *, old: KubeObject | None = None) -> list[FieldError]:
    """Errors of a write to `obj`'s status subresource (its spec is the stored one)."""
    errs = meta.validate_object_meta_update(obj.metadata, old.metadata) if old is not None else []
    validator = _STATUS_VALIDATORS.get(type(obj))
    return errs + validator(obj, old) if validator is not None else errs
