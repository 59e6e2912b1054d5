"""The RBAC authorizer: what a user may do, by the Roles and bindings stored.

As upstream's (`plugin/pkg/auth/authorizer/rbac`, `pkg/registry/rbac/validation/rule.go`):
a request is allowed when a rule of a role bound to the user, or to one of its groups,
covers it: every ClusterRoleBinding, then the RoleBindings of the request's namespace
(a RoleBinding's rules apply in its namespace alone). A rule matches a resource request
by verb, API group, resource (`pods`, `pods/log`, `*/scale`), and resource name when it
lists names; a non-resource request (`/healthz`, `/apis/*`) by verb and URL. `*` matches
every verb, group, resource or URL; a URL ending in `*` every URL it starts. Nothing
denies: no rule, no access.

`Policy` plays the part of upstream's informers: the apistore loads every role and
binding at start, follows each committed batch (before the batch's answers go out, so a
client that saw its binding created is allowed by it), and reloads now and then for other
replicas' writes. Its decisions are kept until the roles or bindings change: the
scheduler's requests pass here thousands of times a second. `BOOTSTRAP` holds upstream's
default roles and bindings that matter here (`plugin/pkg/auth/authorizer/rbac/
bootstrappolicy`), which the apistore creates when missing, as kube-apiserver does: among
them those of the scheduler and the controller manager's controllers, which act on the bus
as upstream's identities and are held to them (`drasim.apistore.nats_authz`).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import msgspec

from drasim.common import codec, errors, nats_auth, rbac_aggregation
from drasim.common.api import rbac_v1, registry

if TYPE_CHECKING:
    from drasim.apistore.store import EventRow

__all__ = [
    "BOOTSTRAP",
    "RESOURCES",
    "SYSTEM_PRIVILEGED_GROUP",
    "Attributes",
    "Decision",
    "Policy",
    "bootstrap_watchable",
    "event_log_refusal",
    "refusal",
    "rule_allows",
]

RESOURCES = ("clusterroles", "clusterrolebindings", "roles", "rolebindings")
_TYPES: dict[str, type[Any]] = {
    "clusterroles": rbac_v1.ClusterRole,
    "clusterrolebindings": rbac_v1.ClusterRoleBinding,
    "roles": rbac_v1.Role,
    "rolebindings": rbac_v1.RoleBinding,
}
ALL = "*"
SERVICE_ACCOUNT_PREFIX = nats_auth.SERVICE_ACCOUNT_PREFIX
# Upstream `user.SystemPrivilegedGroup`: its members may do everything, ahead of RBAC.
SYSTEM_PRIVILEGED_GROUP = "system:masters"


@dataclass(frozen=True, slots=True)
class Attributes:
    """What a request does (upstream `authorizer.Attributes`): a resource request names
    a verb (`get`, `list`, `create`, ...), group, resource and maybe subresource, name and
    namespace; any other request a verb (the HTTP method, lower-cased) and a path."""

    verb: str
    resource_request: bool = True
    namespace: str = ""
    group: str = ""
    resource: str = ""
    subresource: str = ""
    name: str = ""
    path: str = ""


@dataclass(frozen=True, slots=True)
class Decision:
    allowed: bool
    reason: str = ""  # what allowed it, as upstream words it ("RBAC: allowed by ...")


def refusal(attrs: Attributes, user: str, why: str = "") -> errors.Forbidden:
    """The authorizer's 403, phrased as upstream's for a resource request (its verb,
    resource, group and scope, and the reason an authorizer gave) or for any other path."""
    if not attrs.resource_request:
        return errors.Forbidden(f'forbidden: User "{user}" cannot {attrs.verb} path "{attrs.path}"')
    scope = f'in the namespace "{attrs.namespace}"' if attrs.namespace else "at the cluster scope"
    qualified = f"{attrs.resource}.{attrs.group}" if attrs.group else attrs.resource
    what = f'{qualified} "{attrs.name}"' if attrs.name else qualified
    full = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
    reason = f": {why}" if why else ""
    return errors.Forbidden(
        f'{what} is forbidden: User "{user}" cannot {attrs.verb} resource "{full}" in API '
        f'group "{attrs.group}" {scope}{reason}',
        kind=attrs.resource,
        name=attrs.name,
        group=attrs.group,
    )


def event_log_refusal(user: str) -> errors.Forbidden:
    """The event log holds every object's history: only an admin reads it (it is
    drasim's own, no Kubernetes resource a role could grant)."""
    return errors.Forbidden(f'forbidden: User "{user}" cannot read the event log')


def rule_allows(attrs: Attributes, rule: rbac_v1.PolicyRule) -> bool:
    """Upstream `RuleAllows`."""
    if not (ALL in rule.verbs or attrs.verb in rule.verbs):
        return False
    if not attrs.resource_request:
        return any(
            url in (ALL, attrs.path)
            or (url.endswith("*") and attrs.path.startswith(url.rstrip("*")))
            for url in rule.non_resource_urls
        )
    if not (ALL in rule.api_groups or attrs.group in rule.api_groups):
        return False
    combined = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
    matching = {ALL, combined, f"*/{attrs.subresource}"} if attrs.subresource else {ALL, combined}
    if matching.isdisjoint(rule.resources):
        return False
    return not rule.resource_names or attrs.name in rule.resource_names


class _Listed(msgspec.Struct):
    """The part of the apistore's own list answer the index reads."""

    resource_version: int = 0
    items: list[msgspec.Raw] = []


# Decisions kept at most (the cache starts over beyond): users times what they do.
MAX_DECISIONS = 65536


class Policy:
    """Every Role, ClusterRole and binding, indexed for `authorize`."""

    def __init__(self) -> None:
        self._objects: dict[str, dict[tuple[str, str], Any]] = {r: {} for r in RESOURCES}
        self._observed: dict[str, int] = dict.fromkeys(RESOURCES, 0)
        # Decisions by (user, groups, what was asked): valid until a role or binding
        # changes. A name counts only for resources that some rule names objects of
        # (`_named`, None until computed; ALL in it: every resource's names count).
        self._decisions: dict[tuple[Any, ...], Decision] = {}
        self._named: frozenset[str] | None = None

    @classmethod
    def of(cls, objects: Iterable[tuple[str, dict[str, Any]]]) -> Policy:
        """A policy of these (resource, object) pairs, e.g. `BOOTSTRAP`."""
        policy = cls()
        for resource, obj in objects:
            o = codec.convert(obj, _TYPES[resource])
            policy._objects[resource][(o.metadata.namespace, o.metadata.name)] = o
        return policy

    def replace(self, resource: str, answer: bytes) -> None:
        """Take a list answer of every object of `resource`, unless a write this index
        already took is newer than the list (the next reload brings both)."""
        listed = codec.decode(answer, _Listed)
        if self._observed[resource] > listed.resource_version:
            return
        type_ = _TYPES[resource]
        objects = (codec.decode(raw, type_) for raw in listed.items)
        self._objects[resource] = {(o.metadata.namespace, o.metadata.name): o for o in objects}
        self._changed()

    def observe(self, events: Iterable[EventRow]) -> None:
        """Follow a committed batch's writes."""
        for ev in events:
            type_ = _TYPES.get(ev.resource)
            if type_ is None:
                continue
            self._observed[ev.resource] = ev.seq
            key = (ev.namespace, ev.name)
            if ev.type == "DELETED":
                self._objects[ev.resource].pop(key, None)
            else:
                self._objects[ev.resource][key] = codec.decode(ev.object, type_)
            self._changed()

    def _changed(self) -> None:
        self._decisions.clear()
        self._named = None

    def authorize(self, user: str, groups: Sequence[str], attrs: Attributes) -> Decision:
        """Upstream `RBACAuthorizer.Authorize`: the first binding whose role has a rule
        that allows the request, else no. Decided once per user and request until the
        policy changes."""
        named = self._named
        if named is None:
            named = self._named = self._named_resources()
        name = attrs.name if ALL in named or attrs.resource in named else ""
        key = (
            user,
            tuple(groups),
            attrs.verb,
            attrs.resource_request,
            attrs.namespace,
            attrs.group,
            attrs.resource,
            attrs.subresource,
            name,
            attrs.path,
        )
        decision = self._decisions.get(key)
        if decision is None:
            decision = self._authorize(user, groups, attrs)
            if len(self._decisions) >= MAX_DECISIONS:
                self._decisions.clear()
            self._decisions[key] = decision
        return decision

    def _named_resources(self) -> frozenset[str]:
        """The resources (without subresource) of every rule that lists resource names;
        ALL when such a rule names any group or resource by a wildcard."""
        named: set[str] = set()
        for resource in ("clusterroles", "roles"):
            for role in self._objects[resource].values():
                for rule in role.rules:
                    if not rule.resource_names:
                        continue
                    for r in rule.resources:
                        base = r.partition("/")[0]
                        named.add(ALL if ALL in rule.api_groups else base)
        return frozenset(named)

    def _authorize(self, user: str, groups: Sequence[str], attrs: Attributes) -> Decision:
        for binding in self._objects["clusterrolebindings"].values():
            subject = _applies_to(binding.subjects, user, groups, "")
            if subject is None:
                continue
            if any(rule_allows(attrs, r) for r in self._rules(binding.role_ref, "")):
                return Decision(True, f"RBAC: allowed by {_describe(binding, subject)}")
        if not attrs.namespace:
            return Decision(False)
        for (namespace, _), binding in self._objects["rolebindings"].items():
            if namespace != attrs.namespace:
                continue
            subject = _applies_to(binding.subjects, user, groups, namespace)
            if subject is None:
                continue
            if any(rule_allows(attrs, r) for r in self._rules(binding.role_ref, namespace)):
                return Decision(True, f"RBAC: allowed by {_describe(binding, subject)}")
        return Decision(False)

    def rules_for(
        self, user: str, groups: Sequence[str], namespace: str
    ) -> tuple[list[rbac_v1.PolicyRule], list[rbac_v1.RoleRef]]:
        """Upstream `RulesFor`: the rules of every ClusterRoleBinding that applies to the
        user, then of every RoleBinding of `namespace` that does (bindings in name order),
        and the roles those bindings name that do not exist (upstream's resolution
        errors: the rules found still count)."""
        rules: list[rbac_v1.PolicyRule] = []
        missing: list[rbac_v1.RoleRef] = []
        bindings: list[tuple[str, Any]] = [
            ("", b) for _, b in sorted(self._objects["clusterrolebindings"].items())
        ]
        if namespace:
            bindings += [
                (namespace, b)
                for (ns, _), b in sorted(self._objects["rolebindings"].items())
                if ns == namespace
            ]
        for binding_namespace, binding in bindings:
            if _applies_to(binding.subjects, user, groups, binding_namespace) is None:
                continue
            found = self.role_reference_rules(binding.role_ref, binding_namespace)
            if found is None:
                missing.append(binding.role_ref)
            else:
                rules += found
        return rules, missing

    def role_reference_rules(
        self, ref: rbac_v1.RoleRef, namespace: str
    ) -> list[rbac_v1.PolicyRule] | None:
        """Upstream `GetRoleReferenceRules`: the rules of the role a binding in `namespace`
        ("" for a ClusterRoleBinding) names; None when that role does not exist."""
        if ref.kind == "ClusterRole":
            role = self._objects["clusterroles"].get(("", ref.name))
        elif ref.kind == "Role" and namespace:
            role = self._objects["roles"].get((namespace, ref.name))
        else:
            role = None
        return role.rules if role is not None else None

    def _rules(self, ref: rbac_v1.RoleRef, namespace: str) -> list[rbac_v1.PolicyRule]:
        """The rules of the role a binding names (none when it does not exist)."""
        return self.role_reference_rules(ref, namespace) or []


def _applies_to(
    subjects: list[rbac_v1.Subject], user: str, groups: Sequence[str], namespace: str
) -> rbac_v1.Subject | None:
    """The first subject that is the user (upstream `appliesToUser`)."""
    for s in subjects:
        match s.kind:
            case rbac_v1.USER_KIND if s.name == user:
                return s
            case rbac_v1.GROUP_KIND if s.name in groups:
                return s
            case rbac_v1.SERVICE_ACCOUNT_KIND:
                sa_namespace = s.namespace or namespace
                if sa_namespace and user == f"{SERVICE_ACCOUNT_PREFIX}{sa_namespace}:{s.name}":
                    return s
    return None


def _describe(binding: Any, subject: rbac_v1.Subject) -> str:
    """Upstream's `clusterRoleBindingDescriber` and `roleBindingDescriber`."""
    namespace = binding.metadata.namespace
    if subject.kind == rbac_v1.SERVICE_ACCOUNT_KIND:
        who = f'{subject.kind} "{subject.name}/{subject.namespace or namespace}"'
    else:
        who = f'{subject.kind} "{subject.name}"'
    ref = binding.role_ref
    if isinstance(binding, rbac_v1.RoleBinding):
        name = f"{binding.metadata.name}/{namespace}"
        return f'RoleBinding "{name}" of {ref.kind} "{ref.name}" to {who}'
    return f'ClusterRoleBinding "{binding.metadata.name}" of {ref.kind} "{ref.name}" to {who}'


# --- Upstream's bootstrap policy (the part that matters to drasim) ---------------------------

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
        ],
    ),  # fmt: skip
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
        _WRITE, ["apps"], ["deployments", "deployments/scale", "replicasets", "replicasets/scale"]
    ),
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
# serves: no services, endpoints, secrets, service accounts, volumes, statefulsets or
# replication controllers, no `events.k8s.io`, and no `finalizers` subresources (upstream's
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
    # drasim's own: the scheduler makes a pod's special ResourceClaim in PreBind and
    # deletes it in Unreserve and PostFilter (KEP-5004), which upstream's role, as far as
    # its newest bootstrap policy at hand shows, grants nobody but the claim controller.
    _rule(["create", "delete"], [_DRA], ["resourceclaims"]),
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
    nats_auth.RESOURCE_CLAIM_CONTROLLER: [
        _rule(_READ, [""], ["pods"]),
        _rule(["create", "delete", *_READ], [_DRA], ["resourceclaims"]),
        _rule(["patch", "update"], [_DRA], ["resourceclaims", "resourceclaims/status"]),
        _rule(["patch", "update"], [""], ["pods/status"]),
        _EVENTS,
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
def _bootstrap_policy() -> Policy:
    return Policy.of(BOOTSTRAP)


def bootstrap_watchable(user: str, groups: Sequence[str]) -> list[str]:
    """The resources the bootstrap policy lets `user` watch cluster-wide: those its NATS
    user may make consumers of (`drasim.common.nats_auth`), as a watch reads the event
    stream without asking the apistore."""
    policy = _bootstrap_policy()
    return [
        info.plural
        for info in registry.RESOURCES
        if policy.authorize(
            user, groups, Attributes("watch", group=info.group, resource=info.plural)
        ).allowed
    ]
