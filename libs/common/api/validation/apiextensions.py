"""Validation of apiextensions.k8s.io/v1 CustomResourceDefinitions (upstream
`apiextensions-apiserver/pkg/apis/apiextensions/validation/validation.go`): the name, group,
names, scope, versions and the one storage version, and a schema for every version; the
schema's own structure is taken as written (drasim applies the constraints it knows)."""

from __future__ import annotations

from drasim.common.api import apiextensions_v1
from drasim.common.api.meta_v1 import KubeObject
from drasim.common.api.validation import meta, names
from drasim.common.errors import (
    FieldError,
    field_invalid,
    field_not_supported,
    field_required,
)

__all__ = ["NAME_RULES", "VALIDATORS"]

_SCOPES = ["Cluster", "Namespaced"]


def _validate_names(crd_names: apiextensions_v1.CustomResourceDefinitionNames) -> list[FieldError]:
    path = "spec.names"
    errs = []
    for field, value, required in (
        ("plural", crd_names.plural, True),
        ("singular", crd_names.singular, True),
        ("kind", crd_names.kind, True),
        ("listKind", crd_names.list_kind, True),
    ):
        if required and not value:
            errs.append(field_required(f"{path}.{field}"))
            continue
        found = names.is_dns1035_label(value.lower() if field in ("kind", "listKind") else value)
        if found:
            detail = ",".join(found)
            if field in ("kind", "listKind"):
                detail = "may have mixed case, but should otherwise match: " + detail
            errs.append(field_invalid(f"{path}.{field}", value, detail))
    for i, short in enumerate(crd_names.short_names):
        if found := names.is_dns1123_label(short):
            errs.append(field_invalid(f"{path}.shortNames[{i}]", short, ",".join(found)))
    if crd_names.kind and crd_names.kind == crd_names.list_kind:
        errs.append(
            field_invalid(
                f"{path}.listKind", crd_names.list_kind, "kind and listKind may not be the same"
            )
        )
    return errs


def _validate_crd(
    crd: apiextensions_v1.CustomResourceDefinition, old: KubeObject | None
) -> list[FieldError]:
    spec = crd.spec
    errs = []
    wanted = f"{spec.names.plural}.{spec.group}"
    if crd.metadata.name != wanted:
        errs.append(
            field_invalid(
                "metadata.name", crd.metadata.name, 'must be spec.names.plural+"."+spec.group'
            )
        )
    if not spec.group:
        errs.append(field_required("spec.group"))
    elif found := names.is_dns1123_subdomain(spec.group):
        errs.append(field_invalid("spec.group", spec.group, ",".join(found)))
    elif "." not in spec.group:
        errs.append(
            field_invalid("spec.group", spec.group, "should be a domain with at least one dot")
        )
    if not spec.scope:
        errs.append(field_required("spec.scope"))
    elif spec.scope not in _SCOPES:
        errs.append(field_not_supported("spec.scope", spec.scope, _SCOPES))
    if not spec.versions:
        errs.append(
            field_invalid(
                "spec.versions", [], "must have exactly one version marked as storage version"
            )
        )
    seen: set[str] = set()
    for i, version in enumerate(spec.versions):
        path = f"spec.versions[{i}]"
        if found := names.is_dns1123_label(version.name):
            errs.append(field_invalid(f"{path}.name", version.name, ",".join(found)))
        seen.add(version.name)
        if version.schema is None or version.schema.open_api_v3_schema is None:
            errs.append(field_required(f"{path}.schema.openAPIV3Schema"))
        elif version.schema.open_api_v3_schema.get("type") != "object":
            errs.append(
                field_invalid(
                    f"{path}.schema.openAPIV3Schema.type",
                    version.schema.open_api_v3_schema.get("type", ""),
                    "must be object at the root",
                )
            )
    if spec.versions and len(seen) != len(spec.versions):
        errs.append(
            field_invalid(
                "spec.versions",
                [v.name for v in spec.versions],
                "must contain unique version names",
            )
        )
    if spec.versions and sum(v.storage for v in spec.versions) != 1:
        errs.append(
            field_invalid(
                "spec.versions",
                [v.name for v in spec.versions],
                "must have exactly one version marked as storage version",
            )
        )
    errs += _validate_names(spec.names)
    if isinstance(old, apiextensions_v1.CustomResourceDefinition) and old.spec.scope != spec.scope:
        errs.append(field_invalid("spec.scope", spec.scope, "field is immutable"))
    return errs


def _crd_name(name: str, prefix: bool) -> list[str]:
    """Its name is checked against its names and group by `_validate_crd`."""
    return names.is_dns1123_subdomain(name)


VALIDATORS: dict[type[KubeObject], meta.Validator] = {
    apiextensions_v1.CustomResourceDefinition: _validate_crd,
}
NAME_RULES: dict[type[KubeObject], meta.NameRule] = {
    apiextensions_v1.CustomResourceDefinition: _crd_name,
}
