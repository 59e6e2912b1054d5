"""NodeRestriction (and the Node authorizer's part for writes): a kubelet writes only what
belongs to its node.

A request acts as `system:node:<name>` only when the bus let its connection publish as that
node (`drasim.common.nats_auth`: a kubelet process as each node it hosts), so here the
actor is the node's identity. As upstream's `plugin/pkg/admission/noderestriction` and
`plugin/pkg/auth/authorizer/node`, a node may write:

- its own Node (not its taints) and its own Lease in `kube-node-lease`;
- the status of pods bound to it (not their labels nor `status.resourceClaimStatuses`),
  delete pods bound to it, create only mirror pods bound to it;
- ResourceSlices whose `spec.nodeName` is itself (its DRA drivers publish as the node);
- Events.

drasim's kubelet also records what it gave each container in the pod annotation
`drasim.io/container-devices`: so a node may change `drasim.io/` annotations of pods bound
to it, and nothing else of them (upstream nodes cannot update pods at all; that
annotation is the emulator's own). Every other write by a node is refused with 403, as
the authorizer refuses what no rule allows.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from drasim.common import errors
from drasim.common.api import registry
from drasim.common.nats_auth import NODE_USER_PREFIX, node_identity

NODE_LEASE_NAMESPACE = "kube-node-lease"
MIRROR_POD_ANNOTATION = "kubernetes.io/config.mirror"
_EMULATOR_ANNOTATIONS = "drasim.io/"


def node_of(actor: str) -> str | None:
    """The node an actor is, or None for anyone else."""
    return actor.removeprefix(NODE_USER_PREFIX) if actor.startswith(NODE_USER_PREFIX) else None


def _deny(info: registry.ResourceInfo, name: str, why: str) -> errors.Forbidden:
    return errors.forbidden(info.plural, name, why, group=info.group)


def _unauthorized(info: registry.ResourceInfo, name: str, node: str, verb: str) -> errors.Forbidden:
    """The authorizer's 403: no rule lets this node do this."""
    scope = "at the cluster scope" if not info.namespaced else "in the namespace"
    group = info.group or ""
    return _deny(
        info,
        name,
        f'User "{node_identity(node)}" cannot {verb} resource "{info.plural}" in API group '
        f"\"{group}\" {scope}: no relationship found between node '{node}' and this object",
    )


def _node_name(obj: Any) -> str:
    return obj.spec.node_name or "" if getattr(obj, "spec", None) is not None else ""


def admit_create(actor: str, info: registry.ResourceInfo, obj: Any) -> None:
    node = node_of(actor)
    if node is not None:
        _admit_own(info, obj, node, "create")


def admit_update(
    actor: str, info: registry.ResourceInfo, old: Any, new: Any, subresource: str
) -> None:
    node = node_of(actor)
    if node is None:
        return
    rule = _UPDATE_RULES.get(info.plural)
    if rule is None:
        raise _unauthorized(info, old.metadata.name or "", node, "update")
    rule(info, old, new, subresource, node)


def admit_delete(actor: str, info: registry.ResourceInfo, obj: Any) -> None:
    node = node_of(actor)
    if node is not None:
        _admit_own(info, obj, node, "delete")


def _admit_own(info: registry.ResourceInfo, obj: Any, node: str, verb: str) -> None:
    """A create or delete by `node`: of what is its own alone."""
    rule = _OWN_RULES.get(info.plural)
    if rule is None:
        raise _unauthorized(info, obj.metadata.name or "", node, verb)
    rule(info, obj, node, verb)


def admit_binding(actor: str, info: registry.ResourceInfo, name: str) -> None:
    node = node_of(actor)
    if node is not None:
        raise _deny(
            info,
            name,
            "unexpected pod subresource \"binding\", only 'status' and 'eviction' are allowed",
        )


# -- per resource: what a node may create or delete (`verb`) of it ---------------------------


def _own_node(info: registry.ResourceInfo, obj: Any, node: str, verb: str) -> None:
    name = obj.metadata.name or ""
    if name != node:
        raise _deny(info, name, f'node "{node}" is not allowed to modify node "{name}"')


def _own_lease(info: registry.ResourceInfo, obj: Any, node: str, verb: str) -> None:
    _admit_lease(info, obj.metadata.namespace or "", obj.metadata.name or "", node)


def _own_pod(info: registry.ResourceInfo, obj: Any, node: str, verb: str) -> None:
    name = obj.metadata.name or ""
    if verb == "create" and MIRROR_POD_ANNOTATION not in obj.metadata.annotations:
        raise _deny(
            info,
            name,
            f'pod does not have "{MIRROR_POD_ANNOTATION}" annotation, node "{node}" can only '
            "create mirror pods",
        )
    if _node_name(obj) != node:
        raise _deny(
            info, name, f'node "{node}" can only {verb} pods with spec.nodeName set to itself'
        )


def _own_resource_slice(info: registry.ResourceInfo, obj: Any, node: str, verb: str) -> None:
    if _node_name(obj) != node:
        raise _deny(
            info,
            obj.metadata.name or "",
            f"can only {verb} ResourceSlice with the same NodeName as the requesting node",
        )


def _own_any(info: registry.ResourceInfo, obj: Any, node: str, verb: str) -> None:
    """Events: any node writes them."""


_OWN_RULES: dict[str, Callable[[registry.ResourceInfo, Any, str, str], None]] = {
    "nodes": _own_node,
    "leases": _own_lease,
    "pods": _own_pod,
    "resourceslices": _own_resource_slice,
    "events": _own_any,
}


# -- per resource: what a node may update of it ------------------------------------------------


def _update_node(
    info: registry.ResourceInfo, old: Any, new: Any, subresource: str, node: str
) -> None:
    _own_node(info, old, node, "update")
    if old.spec.taints != new.spec.taints:
        raise _deny(info, old.metadata.name or "", f'node "{node}" is not allowed to modify taints')


def _update_lease(
    info: registry.ResourceInfo, old: Any, new: Any, subresource: str, node: str
) -> None:
    _own_lease(info, old, node, "update")


def _update_resource_slice(
    info: registry.ResourceInfo, old: Any, new: Any, subresource: str, node: str
) -> None:
    if _node_name(old) != node:
        raise _unauthorized(info, old.metadata.name or "", node, "update")


def _update_pod(
    info: registry.ResourceInfo, old: Any, new: Any, subresource: str, node: str
) -> None:
    name = old.metadata.name or ""
    if subresource == "status":
        if _node_name(old) != node:
            raise _deny(
                info,
                name,
                f'node "{node}" can only update pod status for pods with spec.nodeName set to '
                "itself",
            )
        if old.metadata.labels != new.metadata.labels:
            raise _deny(info, name, f'node "{node}" cannot update labels through pod status')
        if old.status.resource_claim_statuses != new.status.resource_claim_statuses:
            raise _deny(info, name, f'node "{node}" cannot update resource claim statues')
        return
    # The emulator's own record (see the module's docstring), on its own pods only.
    if _node_name(old) == node and _differs_only_in_emulator_annotations(old, new):
        return
    raise _deny(
        info,
        name,
        f'unexpected operation "UPDATE", node "{node}" can only create and delete mirror pods',
    )


def _update_any(
    info: registry.ResourceInfo, old: Any, new: Any, subresource: str, node: str
) -> None:
    """Events: any node writes them."""


_UPDATE_RULES: dict[str, Callable[[registry.ResourceInfo, Any, Any, str, str], None]] = {
    "nodes": _update_node,
    "leases": _update_lease,
    "pods": _update_pod,
    "resourceslices": _update_resource_slice,
    "events": _update_any,
}


def _admit_lease(info: registry.ResourceInfo, namespace: str, name: str, node: str) -> None:
    if namespace != NODE_LEASE_NAMESPACE:
        raise _deny(
            info, name, f'can only access leases in the "{NODE_LEASE_NAMESPACE}" system namespace'
        )
    if name != node:
        raise _deny(
            info, name, "can only access node lease with the same name as the requesting node"
        )


def _differs_only_in_emulator_annotations(old: Any, new: Any) -> bool:
    def without(annotations: dict[str, str]) -> dict[str, str]:
        return {k: v for k, v in annotations.items() if not k.startswith(_EMULATOR_ANNOTATIONS)}

    if without(old.metadata.annotations) != without(new.metadata.annotations):
        return False
    # The rest of the metadata compared as stored: the resourceVersion a write carries is
    # only its precondition.
    rest = {"annotations": {}, "resource_version": None}
    return (
        msgspec.structs.replace(old.metadata, **rest)
        == msgspec.structs.replace(new.metadata, **rest)
        and old.spec == new.spec
    )
