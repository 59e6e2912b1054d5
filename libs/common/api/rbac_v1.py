"""rbac.authorization.k8s.io/v1: Role, ClusterRole, RoleBinding, ClusterRoleBinding.

Roles hold rules (verbs on resources of API groups, or on non-resource URLs); bindings
grant a role to users, groups and service accounts. The RBAC authorizer
(`drasim.apistore.rbac`) reads them. Decoding applies upstream's v1 defaults
(`pkg/apis/rbac/v1/defaults.go`): a roleRef, User and Group subject without `apiGroup`
get this group, a ServiceAccount subject the core group.
"""

from __future__ import annotations

from typing import ClassVar

import msgspec

from drasim.common.api.meta_v1 import KubeObject, KubeStruct, LabelSelector

__all__ = [
    "GROUP",
    "GROUP_KIND",
    "SERVICE_ACCOUNT_KIND",
    "USER_KIND",
    "AggregationRule",
    "ClusterRole",
    "ClusterRoleBinding",
    "PolicyRule",
    "Role",
    "RoleBinding",
    "RoleRef",
    "Subject",
]

GROUP = "rbac.authorization.k8s.io"
USER_KIND = "User"
GROUP_KIND = "Group"
SERVICE_ACCOUNT_KIND = "ServiceAccount"


class PolicyRule(KubeStruct):
    verbs: list[str] = []
    api_groups: list[str] = []
    resources: list[str] = []
    resource_names: list[str] = []
    non_resource_urls: list[str] = msgspec.field(default_factory=list, name="nonResourceURLs")


class AggregationRule(KubeStruct):
    """Which ClusterRoles an aggregated ClusterRole gathers its rules from (the controller
    manager's clusterrole-aggregation controller writes them)."""

    cluster_role_selectors: list[LabelSelector] = []


class Subject(KubeStruct):
    kind: str = ""
    api_group: str = ""
    name: str = ""
    namespace: str = ""

    def __post_init__(self) -> None:
        if not self.api_group and self.kind in (USER_KIND, GROUP_KIND):
            self.api_group = GROUP


class RoleRef(KubeStruct):
    api_group: str = ""
    kind: str = ""
    name: str = ""

    def __post_init__(self) -> None:
        if not self.api_group:
            self.api_group = GROUP


class Role(KubeObject):
    API_VERSION: ClassVar[str] = f"{GROUP}/v1"
    KIND: ClassVar[str] = "Role"

    rules: list[PolicyRule] = []


class ClusterRole(KubeObject):
    API_VERSION: ClassVar[str] = f"{GROUP}/v1"
    KIND: ClassVar[str] = "ClusterRole"

    rules: list[PolicyRule] = []
    aggregation_rule: AggregationRule | None = None


class RoleBinding(KubeObject):
    API_VERSION: ClassVar[str] = f"{GROUP}/v1"
    KIND: ClassVar[str] = "RoleBinding"

    subjects: list[Subject] = []
    role_ref: RoleRef = msgspec.field(default_factory=RoleRef)


class ClusterRoleBinding(KubeObject):
    API_VERSION: ClassVar[str] = f"{GROUP}/v1"
    KIND: ClassVar[str] = "ClusterRoleBinding"

    subjects: list[Subject] = []
    role_ref: RoleRef = msgspec.field(default_factory=RoleRef)
