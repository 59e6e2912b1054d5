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
scheduler's requests pass here thousands of times a second. The default roles and bindings
the apistore creates are upstream's bootstrap policy, in `drasim.apistore.bootstrappolicy`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import msgspec

from drasim.common import codec, errors, nats_auth
from drasim.common.api import rbac_v1

if TYPE_CHECKING:
    from drasim.apistore.store import EventRow

__all__ = [
    "RESOURCES",
    "SYSTEM_PRIVILEGED_GROUP",
    "Attributes",
    "Decision",
    "Policy",
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
        """A policy of these (resource, object) pairs, e.g. `bootstrappolicy.BOOTSTRAP`."""
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
                if sa_namespace and user == nats_auth.service_account(sa_namespace, s.name):
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
