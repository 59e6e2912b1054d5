"""The reviews a user asks about itself: `kubectl auth whoami`, `kubectl auth can-i` and
`kubectl auth can-i --list`, answered by the authorizers its requests meet (a node's by
the Node authorizer before RBAC)."""

from __future__ import annotations

from typing import Any

import msgspec
from aiohttp import web

from drasim.apistore import node_authorizer, rbac
from drasim.apistore.core import ApiCore
from drasim.apistore.http import authn, keys, negotiation
from drasim.apistore.objectmeta import now_rfc3339
from drasim.common import errors
from drasim.common.api import rbac_v1


def _user_json(user: authn.UserInfo) -> dict[str, Any]:
    info: dict[str, Any] = {"username": user.name, "groups": list(user.groups)}
    if user.uid:
        info["uid"] = user.uid
    if user.extra:
        info["extra"] = {key: list(values) for key, values in user.extra.items()}
    return info


async def self_subject_review(request: web.Request) -> web.Response:
    """`kubectl auth whoami`: the request's own user, as authenticated (the body carries
    nothing to read; kubectl sends it as protobuf)."""
    review = {
        "kind": "SelfSubjectReview",
        "apiVersion": "authentication.k8s.io/v1",
        "metadata": {"creationTimestamp": now_rfc3339()},
        "status": {"userInfo": _user_json(request[keys.USER])},
    }
    return _json(review)


def _json(body: dict[str, Any]) -> web.Response:
    return web.Response(body=msgspec.json.encode(body), status=201, content_type="application/json")


async def self_subject_access_review(request: web.Request) -> web.Response:
    """`kubectl auth can-i`: whether the user may do what the spec's resourceAttributes or
    nonResourceAttributes describe, by the same authorizer as its requests (masters may
    do everything). kubectl sends it as protobuf."""
    user = request[keys.USER]
    body = await negotiation.read_body(request)
    spec = (body.get("spec") or {}) if isinstance(body, dict) else {}
    attrs = _attributes(spec)
    status = await _decide(request.app[keys.CORE], user, attrs, _field_selector(spec))
    review = {
        "kind": "SelfSubjectAccessReview",
        "apiVersion": "authorization.k8s.io/v1",
        "metadata": {"creationTimestamp": now_rfc3339()},
        "spec": spec,
        "status": status,
    }
    return _json(review)


async def _decide(
    core: ApiCore, user: authn.UserInfo, attrs: rbac.Attributes, field_selector: str
) -> dict[str, Any]:
    """The review's status, by upstream's authorizer chain: the privileged group, the Node
    authorizer (for a node), RBAC. A refusal gives the reasons of each authorizer that had
    one, prefixed with its name, as upstream's union authorizer does."""
    if user.is_master:
        return {"allowed": True, "reason": f'allowed by the "{authn.MASTERS}" group'}
    reasons = []
    node = node_authorizer.node_of(user.name, user.groups)
    if node is not None:
        allowed, why = await core.node_review(node, attrs, field_selector)
        if allowed:
            return {"allowed": True}
        if why:
            reasons.append(f"node: {why}")
    decision = core.rbac.authorize(user.name, user.groups, attrs)
    if decision.allowed:
        return {"allowed": True, **({"reason": decision.reason} if decision.reason else {})}
    if decision.reason:
        reasons.append(decision.reason)
    return {"allowed": False, **({"reason": "\n".join(reasons)} if reasons else {})}


def _field_selector(spec: dict[str, Any]) -> str:
    """The field selector of the review's resourceAttributes (`rawSelector`, or its
    `requirements` with one value each), as a request's `fieldSelector` reads."""
    selector = (spec.get("resourceAttributes") or {}).get("fieldSelector") or {}
    if selector.get("rawSelector"):
        return str(selector["rawSelector"])
    terms = []
    for requirement in selector.get("requirements") or ():
        values = requirement.get("values") or []
        if requirement.get("operator") == "In" and len(values) == 1:
            terms.append(f"{requirement.get('key', '')}={values[0]}")
    return ",".join(terms)


def _attributes(spec: dict[str, Any]) -> rbac.Attributes:
    """The attributes a review asks about; exactly one of resourceAttributes and
    nonResourceAttributes, as upstream's `ValidateSelfSubjectAccessReviewSpec`."""
    resource = spec.get("resourceAttributes")
    non_resource = spec.get("nonResourceAttributes")
    if resource is not None and non_resource is not None:
        error = errors.field_invalid(
            "spec.nonResourceAttributes",
            non_resource,
            "cannot be specified in combination with resourceAttributes",
        )
    elif resource is None and non_resource is None:
        error = errors.field_invalid(
            "spec.resourceAttributes",
            None,
            "exactly one of nonResourceAttributes or resourceAttributes must be specified",
        )
    elif non_resource is not None:
        return rbac.Attributes(
            str(non_resource.get("verb", "")),
            resource_request=False,
            path=str(non_resource.get("path", "")),
        )
    else:
        return rbac.Attributes(
            str(resource.get("verb", "")),
            namespace=str(resource.get("namespace", "")),
            group=str(resource.get("group", "")),
            resource=str(resource.get("resource", "")),
            subresource=str(resource.get("subresource", "")),
            name=str(resource.get("name", "")),
        )
    # Upstream names the review "" (it has no name).
    raise errors.invalid(
        "SelfSubjectAccessReview", "", [error], group="authorization.k8s.io", keep_empty_name=True
    )


async def self_subject_rules_review(request: web.Request) -> web.Response:
    """`kubectl auth can-i --list`: the rules RBAC gives the user in the spec's namespace
    (upstream's `selfsubjectrulesreview` REST over the RBAC authorizer's `RulesFor`): the
    cluster-wide ones and those of the namespace, each resource rule and each URL rule as
    it is in its role. Roles that bindings name but that do not exist are the
    evaluationError (what was found still counts); the list is complete but for a node's,
    whose Node authorizer lists nothing (upstream's `incomplete`). kubectl sends it as
    protobuf."""
    user = request[keys.USER]
    body = await negotiation.read_body(request)
    spec = (body.get("spec") or {}) if isinstance(body, dict) else {}
    namespace = spec.get("namespace") if isinstance(spec, dict) else None
    if not namespace or not isinstance(namespace, str):
        raise errors.BadRequest("no namespace on request")
    rules, missing = request.app[keys.CORE].rbac.rules_for(user.name, user.groups, namespace)
    status: dict[str, Any] = {
        "resourceRules": [_resource_rule(r) for r in rules if r.resources],
        "nonResourceRules": [
            {"verbs": r.verbs, "nonResourceURLs": r.non_resource_urls}
            for r in rules
            if r.non_resource_urls
        ],
        "incomplete": False,
    }
    # Each authorizer's error, in chain order: the Node authorizer lists no rules for a
    # node (its answer is incomplete); RBAC's resolver reads informers, whose NotFound
    # names the kind of a role a binding names but that does not exist.
    found = []
    if node_authorizer.node_of(user.name, user.groups) is not None:
        status["incomplete"] = True
        found.append("node authorizer does not support user rule resolution")
    found += [f'{r.kind.lower()}.{rbac_v1.GROUP} "{r.name}" not found' for r in missing]
    if found:
        unique = list(dict.fromkeys(found))
        status["evaluationError"] = unique[0] if len(unique) == 1 else f"[{', '.join(unique)}]"
    review = {
        "kind": "SelfSubjectRulesReview",
        "apiVersion": "authorization.k8s.io/v1",
        "metadata": {},
        "spec": {},
        "status": status,
    }
    return _json(review)


def _resource_rule(rule: rbac_v1.PolicyRule) -> dict[str, Any]:
    """A ResourceRule: verbs always, the rest when given."""
    out: dict[str, Any] = {"verbs": rule.verbs}
    if rule.api_groups:
        out["apiGroups"] = rule.api_groups
    out["resources"] = rule.resources
    if rule.resource_names:
        out["resourceNames"] = rule.resource_names
    return out
