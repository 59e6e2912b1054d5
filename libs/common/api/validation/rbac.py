"""Validation of rbac.authorization.k8s.io/v1 objects, as upstream's
`pkg/apis/rbac/validation`: names are path segments (`system:basic-user` is fine), a rule
has verbs and either resources of API groups or non-resource URLs (those only in
ClusterRoles), a binding's roleRef names a role of this group and never changes, and its
subjects are Users, Groups or ServiceAccounts.

`validation.validate` dispatches here through `VALIDATORS` and takes `NAME_RULES` as these
kinds' name rule.
"""

from __future__ import annotations

from drasim.common.api import rbac_v1
from drasim.common.api.meta_v1 import KubeObject
from drasim.common.api.validation import meta, names
from drasim.common.errors import (
    FieldError,
    GoValue,
    field_invalid,
    field_not_supported,
    field_required,
)

__all__ = ["NAME_RULES", "VALIDATORS", "path_segment_name"]


def path_segment_name(name: str, prefix: bool = False) -> list[str]:
    """Upstream `IsValidPathSegmentName`: a name that can be one segment of a URL path."""
    if name in (".", ".."):
        return [f"may not be '{name}'"]
    return [f"may not contain '{c}'" for c in ("/", "%") if c in name]


def _go_strings(values: list[str]) -> str:
    """A string list as Go's `%#v` prints it (how upstream's field errors show one)."""
    return "[]string{" + ", ".join(f'"{v}"' for v in values) + "}"


def _validate_rules(rules: list[rbac_v1.PolicyRule], *, namespaced: bool) -> list[FieldError]:
    errs: list[FieldError] = []
    for i, rule in enumerate(rules):
        path = f"rules[{i}]"
        if not rule.verbs:
            errs.append(field_required(f"{path}.verbs", "verbs must contain at least one value"))
        if rule.non_resource_urls:
            shown = GoValue(_go_strings(rule.non_resource_urls))
            if namespaced:
                errs.append(
                    field_invalid(
                        f"{path}.nonResourceURLs",
                        shown,
                        "namespaced rules cannot apply to non-resource URLs",
                    )
                )
            if rule.api_groups or rule.resources or rule.resource_names:
                errs.append(
                    field_invalid(
                        f"{path}.nonResourceURLs",
                        shown,
                        "rules cannot apply to both regular resources and non-resource URLs",
                    )
                )
            continue
        if not rule.api_groups:
            errs.append(
                field_required(
                    f"{path}.apiGroups", "resource rules must supply at least one api group"
                )
            )
        if not rule.resources:
            errs.append(
                field_required(
                    f"{path}.resources", "resource rules must supply at least one resource"
                )
            )
        if rule.resource_names and len(rule.resources) > 1:
            errs.append(
                field_required(
                    f"{path}.resourceNames", "resource names cannot apply to multiple resources"
                )
            )
    return errs


def _validate_role(role: rbac_v1.Role, old: KubeObject | None) -> list[FieldError]:
    return _validate_rules(role.rules, namespaced=True)


def _validate_cluster_role(role: rbac_v1.ClusterRole, old: KubeObject | None) -> list[FieldError]:
    return _validate_rules(role.rules, namespaced=False)


def _validate_binding(
    binding: rbac_v1.RoleBinding | rbac_v1.ClusterRoleBinding, old: KubeObject | None
) -> list[FieldError]:
    """Upstream `ValidateRoleBinding`/`ValidateClusterRoleBinding` and their updates."""
    namespaced = isinstance(binding, rbac_v1.RoleBinding)
    ref = binding.role_ref
    errs: list[FieldError] = []
    if ref.api_group != rbac_v1.GROUP:
        errs.append(field_not_supported("roleRef.apiGroup", ref.api_group, [rbac_v1.GROUP]))
    kinds = ["Role", "ClusterRole"] if namespaced else ["ClusterRole"]
    if ref.kind not in kinds:
        errs.append(field_not_supported("roleRef.kind", ref.kind, kinds))
    if not ref.name:
        errs.append(field_required("roleRef.name"))
    else:
        errs += meta.each("roleRef.name", ref.name, path_segment_name(ref.name))
    for i, subject in enumerate(binding.subjects):
        errs += _validate_subject(subject, f"subjects[{i}]", namespaced=namespaced)
    if isinstance(old, type(binding)) and old.role_ref != ref:
        shown = GoValue(
            f'rbac.RoleRef{{APIGroup:"{ref.api_group}", Kind:"{ref.kind}", Name:"{ref.name}"}}'
        )
        errs.append(field_invalid("roleRef", shown, "cannot change roleRef"))
    return errs


_SUBJECT_KINDS = [rbac_v1.SERVICE_ACCOUNT_KIND, rbac_v1.USER_KIND, rbac_v1.GROUP_KIND]


def _validate_subject(subject: rbac_v1.Subject, path: str, *, namespaced: bool) -> list[FieldError]:
    errs: list[FieldError] = []
    if not subject.name:
        errs.append(field_required(f"{path}.name"))
    match subject.kind:
        case rbac_v1.SERVICE_ACCOUNT_KIND:
            if subject.name:
                errs += meta.each(
                    f"{path}.name", subject.name, names.is_dns1123_subdomain(subject.name)
                )
            if subject.api_group:
                errs.append(field_not_supported(f"{path}.apiGroup", subject.api_group, [""]))
            if not namespaced and not subject.namespace:
                errs.append(field_required(f"{path}.namespace"))
        case rbac_v1.USER_KIND | rbac_v1.GROUP_KIND:
            if not subject.name:
                what = "user" if subject.kind == rbac_v1.USER_KIND else "group"
                errs.append(field_invalid(f"{path}.name", "", f"{what} name cannot be empty"))
            if subject.api_group != rbac_v1.GROUP:
                errs.append(
                    field_not_supported(f"{path}.apiGroup", subject.api_group, [rbac_v1.GROUP])
                )
        case _:
            errs.append(field_not_supported(f"{path}.kind", subject.kind, _SUBJECT_KINDS))
    return errs


VALIDATORS: dict[type[KubeObject], meta.Validator] = {
    rbac_v1.Role: _validate_role,
    rbac_v1.ClusterRole: _validate_cluster_role,
    rbac_v1.RoleBinding: _validate_binding,
    rbac_v1.ClusterRoleBinding: _validate_binding,
}
NAME_RULES: dict[type[KubeObject], meta.NameRule] = dict.fromkeys(VALIDATORS, path_segment_name)
