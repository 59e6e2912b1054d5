"""Validation of rbac.authorization.k8s.io/v1 objects, as upstream's
`pkg/apis/rbac/validation`, and the v1 defaults of roleRef and subject API groups."""

from __future__ import annotations

from typing import Any

import pytest

from drasim.common import codec
from drasim.common.api import rbac_v1, validation

RBAC = "rbac.authorization.k8s.io/v1"


def obj(kind: str, namespace: str = "default", **fields: Any) -> Any:
    meta = {"name": "system:reader", **({"namespace": namespace} if namespace else {})}
    return codec.convert(
        {"apiVersion": RBAC, "kind": kind, "metadata": meta, **fields}, getattr(rbac_v1, kind)
    )


def messages(o: Any, old: Any = None) -> list[str]:
    return [str(e) for e in validation.validate(o, old=old)]


def test_a_rule_needs_verbs_and_either_resources_or_urls() -> None:
    assert (
        messages(obj("Role", rules=[{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}]))
        == []
    )
    assert messages(obj("Role", rules=[{"apiGroups": [""]}])) == [
        "rules[0].verbs: Required value: verbs must contain at least one value",
        "rules[0].resources: Required value: resource rules must supply at least one resource",
    ]
    assert messages(obj("Role", rules=[{"verbs": ["get"], "nonResourceURLs": ["/healthz"]}])) == [
        'rules[0].nonResourceURLs: Invalid value: []string{"/healthz"}: namespaced rules cannot '
        "apply to non-resource URLs"
    ]
    assert (
        messages(
            obj(
                "ClusterRole", namespace="", rules=[{"verbs": ["get"], "nonResourceURLs": ["/x/*"]}]
            )
        )
        == []
    )
    assert messages(
        obj(
            "ClusterRole",
            namespace="",
            rules=[
                {
                    "verbs": ["get"],
                    "resources": ["pods", "nodes"],
                    "apiGroups": [""],
                    "resourceNames": ["a"],
                }
            ],
        )
    ) == [
        "rules[0].resourceNames: Required value: resource names cannot apply to multiple resources"
    ]


def test_names_are_path_segments() -> None:
    role = obj("ClusterRole", namespace="")
    role.metadata.name = "a/b"
    assert messages(role) == ["metadata.name: Invalid value: \"a/b\": may not contain '/'"]


def test_binding_defaults_and_subjects() -> None:
    binding = obj(
        "RoleBinding",
        roleRef={"kind": "ClusterRole", "name": "view"},
        subjects=[{"kind": "User", "name": "jane"}, {"kind": "ServiceAccount", "name": "default"}],
    )
    assert binding.role_ref.api_group == rbac_v1.GROUP
    assert [s.api_group for s in binding.subjects] == [rbac_v1.GROUP, ""]
    assert messages(binding) == []
    bad = obj(
        "ClusterRoleBinding",
        namespace="",
        roleRef={"kind": "Role", "name": "view"},
        subjects=[{"kind": "Robot", "name": "r2"}, {"kind": "ServiceAccount", "name": "sa"}],
    )
    assert messages(bad) == [
        'roleRef.kind: Unsupported value: "Role": supported values: "ClusterRole"',
        'subjects[0].kind: Unsupported value: "Robot": supported values: "ServiceAccount", '
        '"User", "Group"',
        "subjects[1].namespace: Required value",
    ]
    assert messages(obj("RoleBinding", roleRef={"kind": "Role"})) == [
        "roleRef.name: Required value"
    ]


def test_the_role_ref_cannot_change() -> None:
    old = obj("RoleBinding", roleRef={"kind": "ClusterRole", "name": "view"})
    new = obj("RoleBinding", roleRef={"kind": "ClusterRole", "name": "edit"})
    assert messages(new, old) == [
        'roleRef: Invalid value: rbac.RoleRef{APIGroup:"rbac.authorization.k8s.io", '
        'Kind:"ClusterRole", Name:"edit"}: cannot change roleRef'
    ]


@pytest.mark.parametrize("kind", ["Role", "RoleBinding"])
def test_namespaced_kinds_need_a_namespace(kind: str) -> None:
    fields = {"roleRef": {"kind": "Role", "name": "r"}} if kind == "RoleBinding" else {}
    assert any("metadata.namespace" in m for m in messages(obj(kind, namespace="", **fields)))
