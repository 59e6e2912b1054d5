"""The reviews a user asks about itself: `kubectl auth whoami`, `kubectl auth can-i` and
`kubectl auth can-i --list`."""

from __future__ import annotations

from typing import Any

import msgspec
from aiohttp import web

from drasim.apistore import rbac
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
    if user.is_master:
        status: dict[str, Any] = {
            "allowed": True,
            "reason": f'allowed by the "{authn.MASTERS}" group',
        }
    else:
        decision = request.app[keys.CORE].rbac.authorize(user.name, user.groups, attrs)
        status = {"allowed": decision.allowed}
        if decision.reason:
            status["reason"] = decision.reason
    review = {
        "kind": "SelfSubjectAccessReview",
        "apiVersion": "authorization.k8s.io/v1",
        "metadata": {"creationTimestamp": now_rfc3339()},
        "spec": spec,
        "status": status,
    }
    return _json(review)


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
        "SelfSubjectAccessReview", "", [error], group="authorization.k8s.io", qualified=True
    )


async def self_subject_rules_review(request: web.Request) -> web.Response:
    """`kubectl auth can-i --list`: the rules RBAC gives the user in the spec's namespace
    (upstream's `selfsubjectrulesreview` REST over the RBAC authorizer's `RulesFor`): the
    cluster-wide ones and those of the namespace, each resource rule and each URL rule as
    it is in its role. Roles that bindings name but that do not exist are the
    evaluationError (what was found still counts); the list is complete. kubectl sends it
    as protobuf."""
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
    if missing:
        # The authorizer's resolver reads informers, whose NotFound names the kind.
        found = [f'{r.kind.lower()}.{rbac_v1.GROUP} "{r.name}" not found' for r in missing]
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
