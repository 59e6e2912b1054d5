"""RBAC privilege-escalation prevention: nobody grants permissions they do not hold.

As upstream's policy-based storage of the RBAC kinds (`pkg/registry/rbac/{role,clusterrole,
rolebinding,clusterrolebinding}/policybased`, `pkg/registry/rbac/escalation_check.go`,
`pkg/registry/rbac/validation/rule.go`):

- a Role or ClusterRole may be created or updated only by a user who already holds every
  permission in its rules (the rules of all bindings that apply to the user, in the role's
  namespace for a Role, cluster-wide for a ClusterRole), or who may `escalate` on that role
  resource (by the request's name: none for a create). A ClusterRole with an
  aggregationRule (given, or had before the update) needs full authority: it can gather
  anything;
- a RoleBinding or ClusterRoleBinding may be created or updated only by a user who may
  `bind` the role it references (resourceNames count), or who holds every permission of
  that role (in the binding's namespace);
- members of `system:masters` skip both (upstream `EscalationAllowed`), as do writes that
  change nothing but ownerReferences and finalizers (what the garbage collector touches).

Coverage is upstream's `Covers` (`component-helpers/auth/rbac/validation`): every rule is
broken down into one verb on one group's resource (and name), or one verb on one URL, and
each piece must be covered by one rule held. What is not is listed in the 403, compacted
and sorted as upstream's message has it. The writes of nodes and admins on NATS and the
apistore's own (no groups in their `Context`) are not RBAC's to judge; the scheduler's and
the controllers' are (`nats_authz`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

from drasim.apistore import rbac
from drasim.common import codec, errors
from drasim.common.api import rbac_v1

__all__ = ["admit_create", "admit_update", "compact_rules", "compact_string", "covers"]

ALL = "*"
_ROLES = ("roles", "clusterroles")
_BINDINGS = ("rolebindings", "clusterrolebindings")
# What `*` on everything is (upstream's `fullAuthority`).
_FULL_AUTHORITY = [
    rbac_v1.PolicyRule(verbs=[ALL], api_groups=[ALL], resources=[ALL]),
    rbac_v1.PolicyRule(verbs=[ALL], non_resource_urls=[ALL]),
]


# -- Covers -------------------------------------------------------------------------------


def breakdown(rule: rbac_v1.PolicyRule) -> Iterator[rbac_v1.PolicyRule]:
    """Upstream `BreakdownRule`: rules of at most one verb, resource and resource name
    (or one verb and one URL) that together allow what `rule` does."""
    for group in rule.api_groups:
        for resource in rule.resources:
            for verb in rule.verbs:
                if rule.resource_names:
                    for name in rule.resource_names:
                        yield rbac_v1.PolicyRule(
                            verbs=[verb],
                            api_groups=[group],
                            resources=[resource],
                            resource_names=[name],
                        )
                else:
                    yield rbac_v1.PolicyRule(verbs=[verb], api_groups=[group], resources=[resource])
    for url in rule.non_resource_urls:
        for verb in rule.verbs:
            yield rbac_v1.PolicyRule(verbs=[verb], non_resource_urls=[url])


def _resources_cover(owned: list[str], wanted: list[str]) -> bool:
    if ALL in owned:
        return True
    for resource in wanted:
        if resource in owned:
            continue
        parent, slash, sub = resource.partition("/")
        if not slash or f"*/{sub}" not in owned:
            return False
    return True


def _urls_cover(owned: list[str], wanted: list[str]) -> bool:
    return all(
        any(o == w or (o.endswith("*") and w.startswith(o.rstrip("*"))) for o in owned)
        for w in wanted
    )


def rule_covers(owner: rbac_v1.PolicyRule, sub: rbac_v1.PolicyRule) -> bool:
    """Upstream `ruleCovers`: whether `owner` allows everything `sub` does."""
    if not (ALL in owner.verbs or set(sub.verbs) <= set(owner.verbs)):
        return False
    if not (ALL in owner.api_groups or set(sub.api_groups) <= set(owner.api_groups)):
        return False
    if not _resources_cover(owner.resources, sub.resources):
        return False
    if not _urls_cover(owner.non_resource_urls, sub.non_resource_urls):
        return False
    if not sub.resource_names:
        return not owner.resource_names
    return not owner.resource_names or set(sub.resource_names) <= set(owner.resource_names)


def covers(
    owner: Sequence[rbac_v1.PolicyRule], servant: Sequence[rbac_v1.PolicyRule]
) -> tuple[bool, list[rbac_v1.PolicyRule]]:
    """Upstream `Covers`: whether the owner's rules allow all the servant's, and the pieces
    (see `breakdown`) they do not."""
    uncovered: list[rbac_v1.PolicyRule] = []
    for rule in servant:
        # A rule one owned rule covers whole has every piece covered: no need to break it
        # down (a rule of many groups, resources and verbs has their product of pieces).
        if any(rule_covers(o, rule) for o in owner):
            continue
        uncovered += (sub for sub in breakdown(rule) if not any(rule_covers(o, sub) for o in owner))
    return not uncovered, uncovered


# -- the message --------------------------------------------------------------------------


def compact_rules(rules: list[rbac_v1.PolicyRule]) -> list[rbac_v1.PolicyRule]:
    """Upstream `CompactRules`: rules of one group and one resource and nothing else (no
    names, no URLs) that differ only by verbs become one rule with all their verbs."""
    compacted: list[rbac_v1.PolicyRule] = []
    simple: dict[tuple[str, str], rbac_v1.PolicyRule] = {}
    for rule in rules:
        if (
            rule.resource_names
            or rule.non_resource_urls
            or len(rule.api_groups) != 1
            or len(rule.resources) != 1
        ):
            compacted.append(rule)
            continue
        key = (rule.api_groups[0], rule.resources[0])
        if key in simple:
            simple[key].verbs += rule.verbs
        else:
            simple[key] = codec.clone(rule)
    return compacted + list(simple.values())


def _go_quoted(values: list[str]) -> str:
    """Go's `%q` of a []string: `["a" "b"]`."""
    return "[" + " ".join(json.dumps(v, ensure_ascii=False) for v in values) + "]"


def compact_string(rule: rbac_v1.PolicyRule) -> str:
    """Upstream `CompactString`: `{APIGroups:[""], Resources:["pods"], Verbs:["get"]}`."""
    parts = [
        f"{label}:{_go_quoted(values)}"
        for label, values in (
            ("APIGroups", rule.api_groups),
            ("Resources", rule.resources),
            ("NonResourceURLs", rule.non_resource_urls),
            ("ResourceNames", rule.resource_names),
            ("Verbs", rule.verbs),
        )
        if values
    ]
    return "{" + ", ".join(parts) + "}"


def _role_not_found(ref: rbac_v1.RoleRef) -> errors.NotFound:
    """What the registry answers for a missing role (upstream's rule resolver reads the
    roles' storage)."""
    plural = "clusterroles" if ref.kind == "ClusterRole" else "roles"
    return errors.not_found(plural, ref.name, group=rbac_v1.GROUP)


def confirm_no_escalation(
    policy: rbac.Policy,
    user: str,
    groups: Sequence[str],
    namespace: str,
    rules: Sequence[rbac_v1.PolicyRule],
) -> str | None:
    """Upstream `ConfirmNoEscalation`: None when the user's rules in `namespace` cover
    `rules`, else why not."""
    owned, missing_roles = policy.rules_for(user, groups, namespace)
    covered, missing = covers(owned, rules)
    if covered:
        return None
    descriptions = sorted({compact_string(r) for r in compact_rules(missing)})
    message = (
        f"user {json.dumps(user, ensure_ascii=False)} (groups={_go_quoted(list(groups))}) is "
        "attempting to grant RBAC permissions not currently held:\n" + "\n".join(descriptions)
    )
    if missing_roles:
        found = [_role_not_found(r).message for r in missing_roles]
        message += f"; resolution errors: [{_aggregate(found)}]"
    return message


def _aggregate(messages: list[str]) -> str:
    """`utilerrors.NewAggregate(...).Error()`: one message as it is, several deduplicated
    in brackets."""
    unique = list(dict.fromkeys(messages))
    return unique[0] if len(unique) == 1 else "[" + ", ".join(unique) + "]"


# -- the write path -----------------------------------------------------------------------


def _forbidden(resource: str, name: str, why: str) -> errors.Forbidden:
    """Upstream `NewForbidden` (a name not yet generated is none)."""
    return errors.forbidden(resource, name, why, group=rbac_v1.GROUP)


def _governed(groups: Sequence[str] | None) -> bool:
    """Whether RBAC judges the writer: an HTTP user or a governed NATS identity, not of
    `system:masters`."""
    return groups is not None and rbac.SYSTEM_PRIVILEGED_GROUP not in groups


def admit_create(
    policy: rbac.Policy, user: str, groups: Sequence[str] | None, resource: str, obj: Any
) -> None:
    """Refuse a create of an RBAC object (of `resource`) that would grant more than its
    writer holds."""
    if not _governed(groups):
        return
    assert groups is not None
    _admit(policy, user, groups, resource, obj, None, request_name="")


def admit_update(
    policy: rbac.Policy,
    user: str,
    groups: Sequence[str] | None,
    resource: str,
    old: Any,
    new: Any,
    name: str,
) -> None:
    """Refuse an update of an RBAC object that would grant more than its writer holds."""
    if not _governed(groups):
        return
    assert groups is not None
    if _only_gc_fields(old, new):
        return
    _admit(policy, user, groups, resource, new, old, request_name=name)


def _only_gc_fields(old: Any, new: Any) -> bool:
    """Upstream `IsOnlyMutatingGCFields`: the update changes ownerReferences and
    finalizers at most."""
    copied = codec.clone(new)
    copied.metadata.owner_references = old.metadata.owner_references
    copied.metadata.finalizers = old.metadata.finalizers
    copied.metadata.resource_version = old.metadata.resource_version
    return bool(copied == old)


def _admit(
    policy: rbac.Policy,
    user: str,
    groups: Sequence[str],
    resource: str,
    obj: Any,
    old: Any,
    *,
    request_name: str,
) -> None:
    namespace = obj.metadata.namespace or ""
    name = obj.metadata.name or ""
    if resource in _ROLES:
        escalate = rbac.Attributes(
            "escalate",
            namespace=namespace,
            group=rbac_v1.GROUP,
            resource=resource,
            name=request_name,
        )
        if policy.authorize(user, groups, escalate).allowed:
            return
        why = confirm_no_escalation(policy, user, groups, namespace, obj.rules)
        if why is not None:
            raise _forbidden(resource, name, why)
        aggregated = _has_aggregation_rule(obj) or (old is not None and _has_aggregation_rule(old))
        if aggregated and confirm_no_escalation(policy, user, groups, "", _FULL_AUTHORITY):
            raise _forbidden(
                resource, name, "must have cluster-admin privileges to use the aggregationRule"
            )
        return
    assert resource in _BINDINGS
    ref = obj.role_ref
    if ref.kind in ("ClusterRole", "Role"):
        bind = rbac.Attributes(
            "bind",
            namespace=namespace,
            group=ref.api_group,
            resource="clusterroles" if ref.kind == "ClusterRole" else "roles",
            name=ref.name,
        )
        if policy.authorize(user, groups, bind).allowed:
            return
    rules = policy.role_reference_rules(ref, namespace)
    if rules is None:
        if ref.kind not in ("ClusterRole", "Role"):
            raise errors.InternalError(
                f'Internal error occurred: unsupported role reference kind: "{ref.kind}"'
            )
        raise _role_not_found(ref)
    why = confirm_no_escalation(policy, user, groups, namespace, rules)
    if why is not None:
        raise _forbidden(resource, name, why)


def _has_aggregation_rule(role: Any) -> bool:
    rule = getattr(role, "aggregation_rule", None)
    return rule is not None and bool(rule.cluster_role_selectors)
