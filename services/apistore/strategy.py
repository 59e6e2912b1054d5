"""Per-kind rules of the write path, as Kubernetes' registry strategies have them.

Which kinds have a status subresource (so a main update keeps the old status and a status
update keeps the old spec), what a create resets, and which node an object's events are
routed to on the bus.
"""

from __future__ import annotations

from typing import Any

# Kinds whose status is written through the `status` subresource only.
STATUS_SUBRESOURCE = frozenset(
    {
        "namespaces",
        "nodes",
        "pods",
        "resourceclaims",
        "deployments",
        "replicasets",
        "resourcequotas",
        "poddisruptionbudgets",
    }
)

# Kinds whose `metadata.generation` counts spec changes.
GENERATION = frozenset(
    {
        "deployments",
        "replicasets",
        "deviceclasses",
        "resourceslices",
        "resourceclaims",
        "pods",
        "poddisruptionbudgets",
    }
)

# Namespaces that exist in every cluster.
BUILTIN_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")

# Kubernetes' generated-name limits: the base is cut to 58 characters, then 5 random ones.
GENERATE_NAME_BASE_MAX = 58
GENERATE_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
GENERATE_NAME_SUFFIX_LEN = 5


def reset_status_on_create(resource: str, obj: Any) -> None:
    """Status given on create is ignored for kinds whose controllers own it (not nodes and
    namespaces, whose creators report it); a new pod starts Pending."""
    if resource not in STATUS_SUBRESOURCE or resource in ("nodes", "namespaces"):
        return
    obj.status = type(obj.status)()
    if resource == "pods":
        obj.status.phase = "Pending"
    elif resource == "namespaces":
        obj.status.phase = "Active"


def node_of(resource: str, obj: Any) -> str:
    """The node whose kubelet cares about this object, for event subject routing."""
    if resource in ("pods", "resourceslices"):
        return obj.spec.node_name
    if resource == "nodes":
        return obj.metadata.name
    if resource == "leases" and obj.metadata.namespace == "kube-node-lease":
        return obj.metadata.name
    if resource == "resourceclaims":
        return allocated_node(obj)
    return ""


def allocated_node(claim: Any) -> str:
    """The single node an allocated claim is bound to (`matchFields metadata.name In [n]`)."""
    allocation = claim.status.allocation
    if allocation is None or allocation.node_selector is None:
        return ""
    for term in allocation.node_selector.node_selector_terms:
        for req in term.match_fields:
            if req.key == "metadata.name" and req.operator == "In" and len(req.values) == 1:
                return req.values[0]
    return ""
