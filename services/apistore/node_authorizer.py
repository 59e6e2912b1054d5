"""The Node authorizer's part for reads: what a kubelet may read of the API.

Writes by a node are `node_restriction`'s. For reads, as upstream's
`plugin/pkg/auth/authorizer/node` with `AuthorizeNodeWithSelectors` (on since 1.32), a
node may read:

- its own Node (get by name, list or watch with `metadata.name=<node>`) and its own Lease;
- pods bound to it: get one, or list with the field selector `spec.nodeName=<node>`;
- ResourceSlices of its own (`spec.nodeName`): get one, or list with that field selector;
- a ResourceClaim a pod bound to it names (upstream's graph edges pod → claim: the pod's
  `spec.resourceClaims`, `status.resourceClaimStatuses` and
  `status.extendedResourceClaimStatus`), reserved for it or not;

and nothing else: not other nodes' objects, not the event log. Where upstream decides by
its graph, this decides by the object read: a missing object has no relationship either
(403, as upstream, not 404). A refusal is the authorizer's 403 with upstream's reason.

`review` answers a node's SelfSubjectAccessReview (`kubectl auth can-i`) as upstream's
authorizer does, writes included: the verbs NodeRestriction then narrows are allowed, and
kinds the authorizer does not subdivide go by upstream's `NodeRules`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any

import msgspec

from drasim.apistore import rbac
from drasim.common import errors
from drasim.common.api import rbac_v1, registry
from drasim.common.bus import messages
from drasim.common.nats_auth import NODE_USER_PREFIX, node_identity

__all__ = ["authorize_get", "authorize_list", "node_of", "refuse_event_log"]

NODE_LEASE_NAMESPACE = "kube-node-lease"
NODES_GROUP = "system:nodes"


class _PodClaim(msgspec.Struct):
    resource_claim_name: str | None = msgspec.field(default=None, name="resourceClaimName")


class _Spec(msgspec.Struct):
    node_name: str = msgspec.field(default="", name="nodeName")
    resource_claims: list[_PodClaim] = msgspec.field(default_factory=list, name="resourceClaims")


class _ExtendedClaim(msgspec.Struct):
    resource_claim_name: str = msgspec.field(default="", name="resourceClaimName")


class _Status(msgspec.Struct):
    resource_claim_statuses: list[_PodClaim] = msgspec.field(
        default_factory=list, name="resourceClaimStatuses"
    )
    extended_resource_claim_status: _ExtendedClaim | None = msgspec.field(
        default=None, name="extendedResourceClaimStatus"
    )


class _Object(msgspec.Struct):
    """What deciding needs of a pod or slice."""

    spec: _Spec = msgspec.field(default_factory=_Spec)
    status: _Status = msgspec.field(default_factory=_Status)

    def claims(self) -> set[str]:
        """The ResourceClaims a pod names."""
        names = {c.resource_claim_name for c in self.spec.resource_claims}
        names |= {c.resource_claim_name for c in self.status.resource_claim_statuses}
        if self.status.extended_resource_claim_status is not None:
            names.add(self.status.extended_resource_claim_status.resource_claim_name)
        return {n for n in names if n}


class _Listed(msgspec.Struct):
    items: list[_Object] = msgspec.field(default_factory=list)


_decode = msgspec.json.Decoder(_Object).decode
_decode_list = msgspec.json.Decoder(_Listed).decode

GetObject = Callable[[str, str, str], Awaitable[bytes]]
"""Reads (resource, namespace, name); raises `NotFound`."""
ListPods = Callable[[str, str], Awaitable[bytes]]
"""Lists the pods of (namespace, node)."""


def node_of(user: str, groups: Sequence[str] | None) -> str | None:
    """The node a user is (upstream's `NodeIdentity`: `system:node:<name>` in the group
    `system:nodes`), else None. `groups` None: an actor NATS vouched for, whose name alone
    says it (only a kubelet's connection may act as a node)."""
    if not user.startswith(NODE_USER_PREFIX):
        return None
    if groups is not None and NODES_GROUP not in groups:
        return None
    return user.removeprefix(NODE_USER_PREFIX) or None


def _refusal(
    node: str, info: registry.ResourceInfo, verb: str, namespace: str, name: str, why: str
) -> errors.Forbidden:
    attrs = rbac.Attributes(
        verb,
        namespace=namespace if info.namespaced else "",
        group=info.group,
        resource=info.plural,
        name=name,
    )
    return rbac.refusal(attrs, node_identity(node), why)


def _no_relationship(node: str) -> str:
    return f"no relationship found between node '{node}' and this object"


async def authorize_get(
    node: str,
    info: registry.ResourceInfo,
    req: messages.Get,
    data: GetObject,
    pods: ListPods,
) -> bytes:
    """The object `req` asks for, if `node` may read it; `data` reads it, `pods` lists the
    pods bound to a node."""
    namespace = req.namespace or ("default" if info.namespaced else "")
    rule = _GET_RULES.get(info.plural)
    if rule is None:
        raise _refusal(node, info, "get", namespace, req.name, "")
    return await rule(node, info, namespace, req.name, data, pods)


async def _get_node(
    node: str, info: registry.ResourceInfo, namespace: str, name: str, data: GetObject, _: ListPods
) -> bytes:
    if name != node:
        why = f"node '{node}' cannot read '{name}', only its own Node object"
        raise _refusal(node, info, "get", "", name, why)
    return await data(info.plural, "", name)


async def _get_lease(
    node: str, info: registry.ResourceInfo, namespace: str, name: str, data: GetObject, _: ListPods
) -> bytes:
    if namespace != NODE_LEASE_NAMESPACE or name != node:
        why = "can only access node lease with the same name as the requesting node"
        raise _refusal(node, info, "get", namespace, name, why)
    return await data(info.plural, namespace, name)


async def _get_bound(
    node: str, info: registry.ResourceInfo, namespace: str, name: str, data: GetObject, _: ListPods
) -> bytes:
    """A pod or ResourceSlice: one whose `spec.nodeName` is the node's."""
    denied = _refusal(node, info, "get", namespace, name, _no_relationship(node))
    try:
        body = await data(info.plural, namespace, name)
    except errors.NotFound:
        raise denied from None
    if _decode(body).spec.node_name != node:
        raise denied
    return body


async def _get_claim(
    node: str,
    info: registry.ResourceInfo,
    namespace: str,
    name: str,
    data: GetObject,
    pods: ListPods,
) -> bytes:
    """A ResourceClaim a pod bound to the node names."""
    denied = _refusal(node, info, "get", namespace, name, _no_relationship(node))
    listed = _decode_list(await pods(namespace, node))
    if not any(name in pod.claims() for pod in listed.items):
        raise denied
    try:
        return await data(info.plural, namespace, name)
    except errors.NotFound:
        raise denied from None


_GET_RULES: dict[
    str,
    Callable[
        [str, registry.ResourceInfo, str, str, GetObject, ListPods], Coroutine[Any, Any, bytes]
    ],
] = {
    "nodes": _get_node,
    "leases": _get_lease,
    "pods": _get_bound,
    "resourceslices": _get_bound,
    "resourceclaims": _get_claim,
}
# What a node may list (or watch) of each resource: the field selector term it must give,
# and why a list without it is refused.
_LIST_RULES: dict[str, tuple[str, str]] = {
    "nodes": ("metadata.name", "node '{node}' cannot read all nodes, only its own Node object"),
    "pods": ("spec.nodeName", "can only list/watch pods with spec.nodeName field selector"),
    "resourceslices": (
        "spec.nodeName",
        "can only list/watch/deletecollection resourceslices with nodeName field selector",
    ),
}


def authorize_list(node: str, info: registry.ResourceInfo, req: messages.List) -> None:
    """403 unless `node` may list (or watch) what `req` asks for."""
    namespace = req.namespace if info.namespaced else ""
    field, why = _LIST_RULES.get(info.plural, ("", ""))
    if field and _equalities(req.field_selector).get(field) == node:
        return
    raise _refusal(node, info, "list", namespace, "", why.format(node=node))


def refuse_event_log(node: str) -> errors.Forbidden:
    """The event log holds every object's history: no node's to read."""
    return rbac.event_log_refusal(node_identity(node))


def _equalities(selector: str) -> dict[str, str]:
    """The `field=value` (or `==`) terms of a field selector."""
    found = {}
    for term in selector.split(","):
        field, sep, value = term.partition("=")
        if sep and not field.endswith("!"):
            found[field.strip()] = value.removeprefix("=").strip()
    return found


# -- SelfSubjectAccessReview -------------------------------------------------------------------

_CORE, _RESOURCE, _COORDINATION = "", "resource.k8s.io", "coordination.k8s.io"
_READ = ["get", "list", "watch"]


def _rule(verbs: list[str], group: str, resources: list[str]) -> rbac_v1.PolicyRule:
    return rbac_v1.PolicyRule(verbs=verbs, api_groups=[group], resources=resources)


# Upstream's `NodeRules` (bootstrappolicy): what a node may do of the kinds the Node
# authorizer does not subdivide (events, services, reviews, ...).
NODE_RULES = (
    _rule(["create"], "authentication.k8s.io", ["tokenreviews"]),
    _rule(["create"], "authorization.k8s.io", ["subjectaccessreviews"]),
    _rule(["create"], "authorization.k8s.io", ["localsubjectaccessreviews"]),
    _rule(["get", "list", "watch"], _CORE, ["services"]),
    _rule(["create", "update", "patch"], _CORE, ["events"]),
    _rule(["create", "update", "patch"], "events.k8s.io", ["events"]),
    _rule(["get"], _CORE, ["endpoints"]),
    _rule(["create", *_READ], "certificates.k8s.io", ["certificatesigningrequests"]),
    _rule(["get", "update", "patch"], _CORE, ["persistentvolumeclaims/status"]),
    _rule(["get", "watch", "list"], "storage.k8s.io", ["csidrivers"]),
    _rule(["get", "list", "watch"], "node.k8s.io", ["runtimeclasses"]),
    _rule(["deletecollection"], _RESOURCE, ["resourceslices"]),
)  # fmt: skip

Verdict = tuple[bool, str]
"""(allowed, why not): the Node authorizer's Allow, or its NoOpinion with its reason."""


async def review(
    node: str, attrs: rbac.Attributes, field_selector: str, data: GetObject, pods: ListPods
) -> Verdict:
    """Upstream `NodeAuthorizer.Authorize` for a review's attributes: what `node` may do
    and, when not, why (RBAC decides next). Where upstream asks its graph whether the node
    has a relationship to a named object, this reads the object as `authorize_get` does."""
    if not attrs.resource_request:
        return False, ""
    subdivided = _REVIEW_RULES.get((attrs.group, attrs.resource))
    if subdivided is not None:
        return await subdivided(node, attrs, field_selector, data, pods)
    return any(rbac.rule_allows(attrs, rule) for rule in NODE_RULES), ""


async def _related(node: str, attrs: rbac.Attributes, data: GetObject, pods: ListPods) -> Verdict:
    """Upstream `authorize`: a named object the node has a relationship to."""
    if not attrs.name:
        return False, "No Object name found"
    info = registry.by_plural(attrs.resource)
    namespace = attrs.namespace if info.namespaced else ""
    try:
        await _GET_RULES[attrs.resource](node, info, namespace, attrs.name, data, pods)
    except errors.Forbidden:
        return False, _no_relationship(node)
    return True, ""


async def _review_node(node: str, attrs: rbac.Attributes, *_: object) -> Verdict:
    if attrs.subresource == "" and attrs.verb in ("create", "update", "patch"):
        return True, ""  # NodeRestriction holds the node to its own object
    if attrs.subresource == "" and attrs.verb in ("get", "list", "watch"):
        if attrs.name == node:
            return True, ""
        if not attrs.name:
            return False, f"node '{node}' cannot read all nodes, only its own Node object"
        return False, f"node '{node}' cannot read '{attrs.name}', only its own Node object"
    if attrs.subresource == "status" and attrs.verb in ("update", "patch"):
        return True, ""
    return False, ""


async def _review_pod(
    node: str, attrs: rbac.Attributes, field_selector: str, data: GetObject, pods: ListPods
) -> Verdict:
    verb, subresource = attrs.verb, attrs.subresource
    if subresource == "" and verb == "get":
        return await _related(node, attrs, data, pods)
    if subresource == "" and verb in ("list", "watch"):
        if _equalities(field_selector).get("spec.nodeName") == node:
            return True, ""
        if attrs.name:
            return await _related(node, attrs, data, pods)
        return False, "can only list/watch pods with spec.nodeName field selector"
    allowed = (
        (subresource == "" and verb in ("create", "delete"))
        or (subresource == "status" and verb in ("update", "patch"))
        or (subresource == "eviction" and verb == "create")
    )  # NodeRestriction holds the node to pods bound to it
    return allowed, ""


async def _review_claim(
    node: str, attrs: rbac.Attributes, _selector: str, data: GetObject, pods: ListPods
) -> Verdict:
    if attrs.verb != "get":
        return False, "can only get individual resources of this type"
    if attrs.subresource:
        return False, "cannot get subresource"
    return await _related(node, attrs, data, pods)


async def _review_slice(
    node: str, attrs: rbac.Attributes, field_selector: str, data: GetObject, pods: ListPods
) -> Verdict:
    if attrs.subresource:
        return False, "cannot authorize ResourceSlice subresources"
    if attrs.verb == "create":
        return True, ""  # NodeRestriction checks the new slice's node
    if attrs.verb in ("get", "update", "patch", "delete"):
        return await _related(node, attrs, data, pods)
    if attrs.verb in ("watch", "list", "deletecollection"):
        if _equalities(field_selector).get("spec.nodeName") == node:
            return True, ""
        return False, _LIST_RULES["resourceslices"][1]
    return False, (
        "only the following verbs are allowed for a ResourceSlice: get, watch, list, create, "
        "update, patch, delete, deletecollection"
    )


async def _review_lease(node: str, attrs: rbac.Attributes, *_: object) -> Verdict:
    if attrs.verb not in ("get", "create", "update", "patch", "delete"):
        return False, "can only get, create, update, patch, or delete a node lease"
    if attrs.namespace != NODE_LEASE_NAMESPACE:
        return False, f'can only access leases in the "{NODE_LEASE_NAMESPACE}" system namespace'
    if attrs.verb != "create" and attrs.name != node:
        return False, "can only access node lease with the same name as the requesting node"
    return True, ""


_REVIEW_RULES: dict[
    tuple[str, str],
    Callable[[str, rbac.Attributes, str, GetObject, ListPods], Coroutine[Any, Any, Verdict]],
] = {
    (_CORE, "nodes"): _review_node,
    (_CORE, "pods"): _review_pod,
    (_RESOURCE, "resourceclaims"): _review_claim,
    (_RESOURCE, "resourceslices"): _review_slice,
    (_COORDINATION, "leases"): _review_lease,
}
