"""Upstream's bootstrap policy, the part that matters to drasim: the default ClusterRoles
and ClusterRoleBindings kube-apiserver creates when missing
(`plugin/pkg/auth/authorizer/rbac/bootstrappolicy`: `policy.go`, `controller_policy.go`,
and their testdata `cluster-roles.yaml`, `controller-roles.yaml`).

`BOOTSTRAP` lists them as (resource, object) pairs, which the apistore creates at start:
`cluster-admin`; the aggregated `admin`, `edit` and `view` with the
`system:aggregate-to-*` roles they gather; discovery's and basic users' roles; and the
control plane's own, for the scheduler, the controller manager and each of its controllers
(which act on the bus as upstream's identities and are held to these roles,
`drasim.apistore.nats_authz`).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from drasim.apistore import rbac
from drasim.common import codec, nats_auth, rbac_aggregation
from drasim.common.api import rbac_v1, registry

__all__ = ["BOOTSTRAP", "bootstrap_watchable"]

ALL = rbac.ALL
_READ = ["get", "list", "watch"]
_WRITE = ["create", "update", "patch", "delete", "deletecollection"]
_READ_WRITE = _READ + _WRITE


def _rule(
    verbs: list[str], groups: list[str], resources: list[str], *, names: list[str] | None = None
) -> dict[str, Any]:
    rule: dict[str, Any] = {"apiGroups": groups, "resources": resources, "verbs": verbs}
    if names:
        rule["resourceNames"] = names
    return rule


def _urls(verbs: list[str], urls: list[str]) -> dict[str, Any]:
    return {"nonResourceURLs": urls, "verbs": verbs}


# `view`: reading what a namespace holds (upstream's aggregate-to-view, for the kinds
# drasim serves).
_VIEW = [
    _rule(
        _READ,
        [""],
        [
            "pods",
            "pods/log",
            "pods/status",
            "events",
            "resourcequotas",
            "resourcequotas/status",
            "namespaces",
            "namespaces/status",
        ],
    ),  # fmt: skip
    _rule(
        _READ,
        ["apps"],
        [
            "deployments",
            "deployments/scale",
            "deployments/status",
            "replicasets",
            "replicasets/scale",
            "replicasets/status",
            "daemonsets",
            "daemonsets/status",
            "statefulsets",
            "statefulsets/scale",
            "statefulsets/status",
        ],
    ),  # fmt: skip
    _rule(_READ, ["batch"], ["cronjobs", "cronjobs/status", "jobs", "jobs/status"]),
    _rule(_READ, ["policy"], ["poddisruptionbudgets", "poddisruptionbudgets/status"]),
    _rule(
        _READ,
        ["resource.k8s.io"],
        ["resourceclaims", "resourceclaims/status", "resourceclaimtemplates"],
    ),  # fmt: skip
]
# `edit`: view, and writing the workloads of a namespace (not its roles or quotas).
_EDIT = [
    _rule(_WRITE, [""], ["pods"]),
    _rule(["create"], [""], ["pods/eviction"]),
    _rule(
        _WRITE,
        ["apps"],
        [
            "daemonsets",
            "deployments",
            "deployments/scale",
            "replicasets",
            "replicasets/scale",
            "statefulsets",
            "statefulsets/scale",
        ],
    ),  # fmt: skip
    _rule(_WRITE, ["batch"], ["cronjobs", "jobs"]),
    _rule(_WRITE, ["policy"], ["poddisruptionbudgets"]),
    _rule(_WRITE, ["resource.k8s.io"], ["resourceclaims", "resourceclaimtemplates"]),
    *_VIEW,
]
# `admin`: edit, and the namespace's Roles and RoleBindings.
_ADMIN = [
    _rule(_READ_WRITE, [rbac_v1.GROUP], ["roles", "rolebindings"]),
    _rule(["create"], ["authorization.k8s.io"], ["localsubjectaccessreviews"]),
    *_EDIT,
]


def _own(rules: list[dict[str, Any]], inherited: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rules of `rules` that are not `inherited`."""
    return [r for r in rules if r not in inherited]


# The control plane's own roles, upstream's (`policy.go`, `controller_policy.go`; as their
# testdata `cluster-roles.yaml` and `controller-roles.yaml` list them) for the kinds drasim
# serves: no services, endpoints, secrets, volumes, controller revisions
# or replication controllers, no `events.k8s.io`, and no `finalizers` subresources (upstream's
# OwnerReferencesPermissionEnforcement, which drasim does not have). Where a drasim
# component needs more than upstream's role grants, a rule of its own follows, commented.
_EVENTS = _rule(["create", "patch", "update"], [""], ["events"])
_READ_UPDATE = [*_READ, "update", "patch"]
_DRA = "resource.k8s.io"
_CONTROLLER_ROLE_PREFIX = "system:controller:"  # upstream's `saRolePrefix`

_KUBE_SCHEDULER = [
    _EVENTS,
    # Leader election (drasim's scheduler runs alone and takes no lease).
    _rule(["create"], ["coordination.k8s.io"], ["leases"]),
    _rule(["get", "update"], ["coordination.k8s.io"], ["leases"], names=["kube-scheduler"]),
    _rule(_READ, [""], ["nodes"]),
    _rule(["delete", *_READ], [""], ["pods"]),  # delete: preemption's victims
    _rule(["create"], [""], ["pods/binding"]),
    _rule(["patch", "update"], [""], ["pods/status"]),
    _rule(_READ, ["apps"], ["replicasets"]),
    _rule(_READ, ["policy"], ["poddisruptionbudgets"]),
    _rule(_READ, [""], ["namespaces"]),
    # DynamicResources (policy.go's rules for DynamicResourceAllocation).
    _rule(_READ, [_DRA], ["deviceclasses"]),
    _rule(_READ_UPDATE, [_DRA], ["resourceclaims"]),
    _rule(_READ_UPDATE, [_DRA], ["resourceclaims/status"]),
    _rule(_READ, [_DRA], ["resourceslices"]),
    _rule(_READ, [_DRA], ["devicetaintrules"]),
    # The special ResourceClaim, made in PreBind and deleted in Unreserve and PostFilter
    # (KEP-5004; upstream's with DRAExtendedResource).
    _rule(["create", "delete"], [_DRA], ["resourceclaims"]),
    # Allocations and reservations (upstream's with
    # DRAResourceClaimGranularStatusAuthorization; inert while it is off).
    _rule(["update", "patch"], [_DRA], ["resourceclaims/binding"]),
]
_KUBE_CONTROLLER_MANAGER = [
    _EVENTS,
    _rule(["create"], ["coordination.k8s.io"], ["leases"]),
    _rule(
        ["get", "update"], ["coordination.k8s.io"], ["leases"], names=["kube-controller-manager"]
    ),
    _rule(["get"], [""], ["namespaces"]),
    # The shared informers, of every kind.
    _rule(["list", "watch"], [ALL], [ALL]),
]
# Each controller's role, `system:controller:<its service account>`.
_CONTROLLER_ROLES: dict[str, list[dict[str, Any]]] = {
    nats_auth.CLUSTERROLE_AGGREGATION_CONTROLLER: [
        _rule(
            ["escalate", "get", "list", "patch", "update", "watch"],
            [rbac_v1.GROUP],
            ["clusterroles"],
        ),
    ],
    nats_auth.DEPLOYMENT_CONTROLLER: [
        _rule(["get", "list", "update", "watch"], ["apps"], ["deployments"]),
        _rule(["update"], ["apps"], ["deployments/status"]),
        _rule(["create", "delete", *_READ_UPDATE], ["apps"], ["replicasets"]),
        _rule(["get", "list", "update", "watch"], [""], ["pods"]),
        _EVENTS,
        # drasim's own: its deployment controller patches where upstream's updates (the
        # revision annotation, and the status through its subresource).
        _rule(["patch"], ["apps"], ["deployments", "deployments/status"]),
    ],
    nats_auth.DEVICE_TAINT_EVICTION_CONTROLLER: [
        _rule(["delete", *_READ], [""], ["pods"]),
        _rule(["patch", "update"], [""], ["pods/status"]),
        _rule(_READ, [_DRA], ["resourceclaims"]),
        _rule(_READ, [_DRA], ["resourceslices"]),
        _rule(_READ, [_DRA], ["deviceclasses"]),
        _EVENTS,
        _rule(["patch", "update"], [_DRA], ["devicetaintrules/status"]),
        _rule(_READ, [_DRA], ["devicetaintrules"]),
    ],
    nats_auth.DISRUPTION_CONTROLLER: [
        _rule(_READ, ["apps"], ["deployments"]),
        _rule(_READ, ["apps"], ["replicasets"]),
        _rule(_READ, ["policy"], ["poddisruptionbudgets"]),
        _rule(["update"], ["policy"], ["poddisruptionbudgets/status"]),
        _rule(["patch", "update"], [""], ["pods/status"]),
        _rule(["get"], [ALL], ["*/scale"]),
        _EVENTS,
    ],
    nats_auth.REPLICASET_CONTROLLER: [
        _rule(["get", "list", "update", "watch"], ["apps"], ["replicasets"]),
        _rule(["update"], ["apps"], ["replicasets/status"]),
        _rule(["create", "delete", "list", "patch", "watch"], [""], ["pods"]),
        _EVENTS,
        # drasim's own: its ReplicaSet controller writes the status as a patch.
        _rule(["patch"], ["apps"], ["replicasets/status"]),
    ],
    nats_auth.JOB_CONTROLLER: [
        _rule(["get", "list", "patch", "update", "watch"], ["batch"], ["jobs"]),
        _rule(["update"], ["batch"], ["jobs/status"]),
        _rule(["create", "delete", "list", "patch", "watch"], [""], ["pods"]),
        _EVENTS,
        # drasim's own: its controllers write statuses as patches.
        _rule(["patch"], ["batch"], ["jobs/status"]),
    ],
    nats_auth.CRONJOB_CONTROLLER: [
        _rule(["get", "list", "update", "watch"], ["batch"], ["cronjobs"]),
        _rule(["create", "delete", *_READ_UPDATE], ["batch"], ["jobs"]),
        _rule(["update"], ["batch"], ["cronjobs/status"]),
        _rule(["delete", "list", "watch"], [""], ["pods"]),
        _EVENTS,
        _rule(["patch"], ["batch"], ["cronjobs/status"]),
    ],
    nats_auth.DAEMON_SET_CONTROLLER: [
        _rule(_READ, ["apps"], ["daemonsets"]),
        _rule(["update"], ["apps"], ["daemonsets/status"]),
        _rule(["list", "watch"], [""], ["nodes"]),
        _rule(["create", "delete", "list", "patch", "watch"], [""], ["pods"]),
        _rule(["create"], [""], ["pods/binding"]),
        _EVENTS,
        _rule(["patch"], ["apps"], ["daemonsets/status"]),
    ],
    nats_auth.STATEFULSET_CONTROLLER: [
        _rule(["list", "watch"], [""], ["pods"]),
        _rule(_READ, ["apps"], ["statefulsets"]),
        _rule(["update"], ["apps"], ["statefulsets/status"]),
        _rule(["create", "delete", "get", "patch", "update"], [""], ["pods"]),
        _rule(["create", *_READ], [""], ["persistentvolumeclaims"]),
        _rule(["delete", "update"], [""], ["persistentvolumeclaims"]),
        _EVENTS,
        _rule(["patch"], ["apps"], ["statefulsets/status"]),
    ],
    nats_auth.TTL_AFTER_FINISHED_CONTROLLER: [
        _rule(["delete", *_READ], ["batch"], ["jobs"]),
        _EVENTS,
    ],
    nats_auth.SERVICE_ACCOUNT_CONTROLLER: [
        _rule(["create"], [""], ["serviceaccounts"]),
        _EVENTS,
    ],
    nats_auth.ROOT_CA_CERT_PUBLISHER: [
        _rule(["create", "update"], [""], ["configmaps"]),
        _EVENTS,
    ],
    nats_auth.RESOURCEQUOTA_CONTROLLER: [
        # It counts whatever a quota names, so it may read every kind.
        _rule(["list", "watch"], [ALL], [ALL]),
        _rule(["update"], [""], ["resourcequotas/status"]),
        _EVENTS,
    ],
    nats_auth.RESOURCE_CLAIM_CONTROLLER: [
        _rule(_READ, [""], ["pods"]),
        _rule(["create", "delete", *_READ], [_DRA], ["resourceclaims"]),
        _rule(["patch", "update"], [_DRA], ["resourceclaims", "resourceclaims/status"]),
        _rule(["patch", "update"], [""], ["pods/status"]),
        _EVENTS,
        _rule(["update", "patch"], [_DRA], ["resourceclaims/binding"]),
    ],
}
_CLUSTER_ROLES: dict[str, list[dict[str, Any]]] = {
    "cluster-admin": [_rule([ALL], [ALL], [ALL]), _urls([ALL], [ALL])],
    # Aggregated, as upstream's (see `_AGGREGATED`): `admin` gathers edit and
    # system:aggregate-to-admin, `edit` view and system:aggregate-to-edit.
    "admin": [],
    "edit": [],
    "view": [],
    "system:aggregate-to-admin": _own(_ADMIN, _EDIT),
    "system:aggregate-to-edit": _own(_EDIT, _VIEW),
    "system:aggregate-to-view": _VIEW,
    "system:basic-user": [
        _rule(
            ["create"],
            ["authorization.k8s.io"],
            ["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
        ),
        _rule(["create"], ["authentication.k8s.io"], ["selfsubjectreviews"]),
    ],
    "system:discovery": [
        _urls(
            ["get"],
            [
                "/api",
                "/api/*",
                "/apis",
                "/apis/*",
                "/healthz",
                "/livez",
                "/openapi",
                "/openapi/*",
                "/readyz",
                "/version",
                "/version/",
            ],
        )  # fmt: skip
    ],
    "system:public-info-viewer": [
        _urls(["get"], ["/healthz", "/livez", "/readyz", "/version", "/version/"])
    ],
    # Each health check's own endpoint, and metrics (upstream's `monitoringRules`).
    "system:monitoring": [
        _urls(
            ["get"],
            [
                "/flagz",
                "/healthz",
                "/healthz/*",
                "/livez",
                "/livez/*",
                "/metrics",
                "/metrics/slis",
                "/readyz",
                "/readyz/*",
                "/statusz",
            ],
        ),  # fmt: skip
        _rule(["get"], [""], ["nodes/metrics"]),
    ],
    nats_auth.KUBE_SCHEDULER: _KUBE_SCHEDULER,
    nats_auth.KUBE_CONTROLLER_MANAGER: _KUBE_CONTROLLER_MANAGER,
    **{_CONTROLLER_ROLE_PREFIX + name: rules for name, rules in _CONTROLLER_ROLES.items()},
}


def _group(name: str) -> dict[str, Any]:
    return {"apiGroup": rbac_v1.GROUP, "kind": rbac_v1.GROUP_KIND, "name": name}


def _user(name: str) -> dict[str, Any]:
    return {"apiGroup": rbac_v1.GROUP, "kind": rbac_v1.USER_KIND, "name": name}


def _service_account(namespace: str, name: str) -> dict[str, Any]:
    return {"kind": rbac_v1.SERVICE_ACCOUNT_KIND, "name": name, "namespace": namespace}


# ClusterRoleBinding name → (ClusterRole, subjects).
_CLUSTER_ROLE_BINDINGS: dict[str, tuple[str, list[dict[str, Any]]]] = {
    "cluster-admin": ("cluster-admin", [_group("system:masters")]),
    "system:basic-user": ("system:basic-user", [_group("system:authenticated")]),
    "system:discovery": ("system:discovery", [_group("system:authenticated")]),
    "system:public-info-viewer": (
        "system:public-info-viewer",
        [_group("system:authenticated"), _group("system:unauthenticated")],
    ),
    "system:monitoring": ("system:monitoring", [_group("system:monitoring")]),
    nats_auth.KUBE_SCHEDULER: (nats_auth.KUBE_SCHEDULER, [_user(nats_auth.KUBE_SCHEDULER)]),
    nats_auth.KUBE_CONTROLLER_MANAGER: (
        nats_auth.KUBE_CONTROLLER_MANAGER,
        [_user(nats_auth.KUBE_CONTROLLER_MANAGER)],
    ),
    # Upstream's `addControllerRole`: each controller's role to its service account.
    **{
        _CONTROLLER_ROLE_PREFIX + name: (
            _CONTROLLER_ROLE_PREFIX + name,
            [_service_account(nats_auth.CONTROLLERS_NAMESPACE, name)],
        )
        for name in _CONTROLLER_ROLES
    },
}
# What upstream marks its bootstrap objects with.
_METADATA = {
    "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"},
    "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"},
}
# Upstream's aggregated ClusterRoles: each selects the ClusterRoles labelled
# `aggregate-to-<its name>`; and which role each bootstrap role is aggregated into.
_AGGREGATE_TO = "rbac.authorization.k8s.io/aggregate-to-"
_AGGREGATED = ("admin", "edit", "view")
_AGGREGATED_INTO = {
    "edit": "admin",
    "view": "edit",
    "system:aggregate-to-admin": "admin",
    "system:aggregate-to-edit": "edit",
    "system:aggregate-to-view": "view",
}


def _cluster_role(name: str, rules: list[dict[str, Any]]) -> dict[str, Any]:
    labels = dict(_METADATA["labels"])
    if name in _AGGREGATED_INTO:
        labels[_AGGREGATE_TO + _AGGREGATED_INTO[name]] = "true"
    role: dict[str, Any] = {
        "apiVersion": rbac_v1.ClusterRole.API_VERSION,
        "kind": "ClusterRole",
        "metadata": {"name": name, **_METADATA, "labels": labels},
        "rules": rules,
    }
    if name in _AGGREGATED:
        selector = {"matchLabels": {_AGGREGATE_TO + name: "true"}}
        role["aggregationRule"] = {"clusterRoleSelectors": [selector]}
    return role


def _aggregate(roles: list[dict[str, Any]]) -> None:
    """Give the aggregated roles the rules the aggregation controller would (until nothing
    changes: edit's go on to admin), so that they grant from the start, with or without a
    controller manager running."""
    typed = [codec.convert(r, rbac_v1.ClusterRole) for r in roles]
    changed = True
    while changed:
        changed = False
        for role in typed:
            rules = rbac_aggregation.aggregated_rules(role, typed)
            if role.aggregation_rule is not None and rules != role.rules:
                role.rules, changed = rules, True
    for obj, role in zip(roles, typed, strict=True):
        if role.aggregation_rule is not None:
            obj["rules"] = codec.to_builtins(role.rules)


def _bootstrap() -> list[tuple[str, dict[str, Any]]]:
    api_version = rbac_v1.ClusterRole.API_VERSION
    roles = [_cluster_role(name, rules) for name, rules in _CLUSTER_ROLES.items()]
    _aggregate(roles)
    objects: list[tuple[str, dict[str, Any]]] = [("clusterroles", role) for role in roles]
    objects += [
        (
            "clusterrolebindings",
            {
                "apiVersion": api_version,
                "kind": "ClusterRoleBinding",
                "metadata": {"name": name, **_METADATA},
                "roleRef": {"apiGroup": rbac_v1.GROUP, "kind": "ClusterRole", "name": role},
                "subjects": subjects,
            },
        )
        for name, (role, subjects) in _CLUSTER_ROLE_BINDINGS.items()
    ]
    return objects


# (resource, object) for each default role and binding, created at start when missing.
BOOTSTRAP: list[tuple[str, dict[str, Any]]] = _bootstrap()


@functools.cache
def _bootstrap_policy() -> rbac.Policy:
    return rbac.Policy.of(BOOTSTRAP)


def bootstrap_watchable(user: str, groups: Sequence[str]) -> list[str]:
    """The resources the bootstrap policy lets `user` watch cluster-wide: those its NATS
    user may make consumers of (`drasim.common.nats_auth`), as a watch reads the event
    stream without asking the apistore."""
    policy = _bootstrap_policy()
    return [
        info.plural
        for info in registry.RESOURCES
        if policy.authorize(
            user, groups, rbac.Attributes("watch", group=info.group, resource=info.plural)
        ).allowed
    ]
