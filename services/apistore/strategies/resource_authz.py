"""Who may write which part of a ResourceClaim's status
(DRAResourceClaimGranularStatusAuthorization, beta and on since 1.36). Besides `update` or
`patch` on `resourceclaims/status`, changing `status.allocation` or `status.reservedFor`
needs the same verb on the synthetic subresource `resourceclaims/binding` at the cluster
scope (the scheduler's and the claim controller's bootstrap roles have it); changing a
driver's entries in `status.devices` needs `arbitrary-node:<verb>` on
`resourceclaims/driver` named after the driver in the claim's namespace, or
`associated-node:<verb>` for a service account whose token is bound to the node the claim
is allocated on (a driver's kubelet plugin).

A refusal is a field error of the status update, so the write answers 422 Invalid, its
cause `Forbidden` with the authorizer's 403 message inside, as upstream's strategy puts it
in `ValidateUpdate`. The authorizer is the one requests pass: `system:masters` first, then
RBAC; identities RBAC does not govern (nodes, which NodeRestriction keeps off claim status,
and admin connections) are not asked.

Upstream: `AuthorizedForBinding`, `AuthorizedForDeviceStatus` and their helpers in
`pkg/registry/resource/utils.go`; `resourceclaimStatusStrategy.ValidateUpdate` in
`pkg/registry/resource/resourceclaim/strategy.go`; the names in
`staging/src/k8s.io/api/resource/v1/types.go` (`SubresourceBinding`, `SubresourceDriver`,
`VerbPrefixAssociatedNode`, `VerbPrefixArbitraryNode`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from drasim.apistore import rbac
from drasim.common import nats_auth
from drasim.common.api import resource_v1
from drasim.common.api.validation import names
from drasim.common.errors import FieldError, field_forbidden

if TYPE_CHECKING:
    from drasim.apistore.request import Context

__all__ = [
    "NODE_NAME_EXTRA",
    "SUBRESOURCE_BINDING",
    "SUBRESOURCE_DRIVER",
    "VERB_PREFIX_ARBITRARY_NODE",
    "VERB_PREFIX_ASSOCIATED_NODE",
    "authorized_for_binding",
    "authorized_for_device_status",
]

SUBRESOURCE_BINDING = "binding"
SUBRESOURCE_DRIVER = "driver"
VERB_PREFIX_ASSOCIATED_NODE = "associated-node:"
VERB_PREFIX_ARBITRARY_NODE = "arbitrary-node:"
# The extra a service account token bound to a pod carries: the pod's node
# (`serviceaccount.NodeNameKey`).
NODE_NAME_EXTRA = "authentication.kubernetes.io/node-name"
_GROUP = "resource.k8s.io"
_MASTERS = "system:masters"


def authorized_for_binding(
    new: resource_v1.ResourceClaim,
    old: resource_v1.ResourceClaim,
    verb: str,
    ctx: Context,
    policy: rbac.Policy,
) -> list[FieldError]:
    """Changing `status.allocation` or `status.reservedFor` needs `<verb>` on
    `resourceclaims/binding`, cluster-wide."""
    if (new.status.allocation, new.status.reserved_for) == (
        old.status.allocation,
        old.status.reserved_for,
    ):
        return []
    attrs = rbac.Attributes(
        verb, group=_GROUP, resource="resourceclaims", subresource=SUBRESOURCE_BINDING
    )
    refused = _refusal(attrs, ctx, policy)
    if refused is None:
        return []
    detail = (
        "changing status.allocation or status.reservedFor requires "
        f'resource="resourceclaims/{SUBRESOURCE_BINDING}", verb="{verb}" permission: {refused}'
    )
    return [field_forbidden("status.allocation", detail)]


def authorized_for_device_status(
    new: resource_v1.ResourceClaim,
    old: resource_v1.ResourceClaim,
    verb: str,
    ctx: Context,
    policy: rbac.Policy,
) -> list[FieldError]:
    """Each driver whose entries in `status.devices` were added, changed or removed needs
    `associated-node:<verb>` (a service account on the claim's node) or
    `arbitrary-node:<verb>` on `resourceclaims/driver` named after it."""
    drivers = _modified_drivers(new.status.devices, old.status.devices)
    if not drivers:
        return []
    verbs = [VERB_PREFIX_ARBITRARY_NODE + verb]
    if _associated_with_node(ctx, _allocated_node(new.status.allocation)):
        verbs.insert(0, VERB_PREFIX_ASSOCIATED_NODE + verb)
    errs = []
    for driver in sorted(drivers):
        first = None
        for each in verbs:  # any one of them will do
            attrs = rbac.Attributes(
                each,
                namespace=new.metadata.namespace or "",
                group=_GROUP,
                resource="resourceclaims",
                subresource=SUBRESOURCE_DRIVER,
                name=driver,
            )
            refused = _refusal(attrs, ctx, policy)
            if refused is None:
                break
            first = first or refused
        else:
            shown = "[" + " ".join(verbs) + "]"  # Go's %s of a []string
            detail = (
                f'changing status.devices requires resource="resourceclaims/{SUBRESOURCE_DRIVER}", '
                f'verb="{shown}" permission: {first}'
            )
            errs.append(field_forbidden("status.devices", detail))
    return errs


def _refusal(attrs: rbac.Attributes, ctx: Context, policy: rbac.Policy) -> str | None:
    """None when the request's user may do `attrs`, else the authorizer's 403 message."""
    if ctx.groups is None or _MASTERS in ctx.groups:
        return None
    if policy.authorize(ctx.actor, ctx.groups, attrs).allowed:
        return None
    return str(rbac.refusal(attrs, ctx.actor))


def _modified_drivers(
    new: list[resource_v1.AllocatedDeviceStatus], old: list[resource_v1.AllocatedDeviceStatus]
) -> set[str]:
    """The drivers of entries added, changed or removed (upstream `getModifiedDrivers`)."""

    def key(d: resource_v1.AllocatedDeviceStatus) -> tuple[str, str, str, str]:
        return (d.driver, d.pool, d.device, d.share_id or "")

    before = {key(d): d for d in old}
    drivers = set()
    for d in new:
        if before.pop(key(d), None) != d:
            drivers.add(d.driver)
    drivers.update(d.driver for d in before.values())
    return drivers


def _allocated_node(allocation: resource_v1.AllocationResult | None) -> str:
    """The node of an allocation selecting exactly one node by `metadata.name` (upstream
    `nodeNameFromAllocation`), else ""."""
    if allocation is None or allocation.node_selector is None:
        return ""
    terms = allocation.node_selector.node_selector_terms
    if len(terms) != 1 or terms[0].match_expressions or len(terms[0].match_fields) != 1:
        return ""
    (field,) = terms[0].match_fields
    if field.key != "metadata.name" or field.operator != "In" or len(field.values) != 1:
        return ""
    return field.values[0]


def _associated_with_node(ctx: Context, node: str) -> bool:
    """A service account whose one node-name extra is `node` (upstream
    `saAssociatedWithAllocatedNode`)."""
    if not node or not ctx.actor.startswith(nats_auth.SERVICE_ACCOUNT_PREFIX):
        return False
    namespace, sep, name = ctx.actor.removeprefix(nats_auth.SERVICE_ACCOUNT_PREFIX).partition(":")
    if not (namespace and sep and name) or ":" in name:
        return False
    nodes = ctx.extra.get(NODE_NAME_EXTRA, ())
    return len(nodes) == 1 and not names.is_dns1123_subdomain(nodes[0]) and nodes[0] == node
