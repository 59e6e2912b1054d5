"""Who may change which part of a claim's status (`strategies.resource_authz`): the checks
on their own, for what kubectl cannot send (a service account's node-name extra) and the
cases that need no permission."""

from __future__ import annotations

from typing import Any

import pytest

from drasim.apistore import rbac
from drasim.apistore.request import Context
from drasim.apistore.strategies import resource_authz
from drasim.common import codec
from drasim.common.api import resource_v1

SA = "system:serviceaccount:dra:nic-plugin"
SA_GROUPS = ("system:serviceaccounts", "system:serviceaccounts:dra", "system:authenticated")
ON_NODE_0 = {resource_authz.NODE_NAME_EXTRA: ("node-0",)}


def _policy(verbs: list[str]) -> rbac.Policy:
    """The plugin's service account may use `verbs` on `resourceclaims/driver` for
    nic.example.com in namespace default."""
    role = {
        "metadata": {"name": "nic-plugin"},
        "rules": [
            {
                "apiGroups": ["resource.k8s.io"],
                "resources": ["resourceclaims/driver"],
                "verbs": verbs,
                "resourceNames": ["nic.example.com"],
            }
        ],
    }
    binding = {
        "metadata": {"name": "nic-plugin", "namespace": "default"},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": "nic-plugin",
        },
        "subjects": [{"kind": "ServiceAccount", "name": "nic-plugin", "namespace": "dra"}],
    }
    return rbac.Policy.of([("clusterroles", role), ("rolebindings", binding)])


def _claim(node: str | None, devices: list[dict[str, Any]]) -> resource_v1.ResourceClaim:
    allocation: dict[str, Any] = {
        "devices": {
            "results": [
                {"request": "r", "driver": "nic.example.com", "pool": "p", "device": "nic-0"}
            ]
        }
    }
    if node is not None:
        term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
        allocation["nodeSelector"] = {"nodeSelectorTerms": [term]}
    raw = {
        "metadata": {"name": "c", "namespace": "default"},
        "status": {"allocation": allocation, "devices": devices},
    }
    return codec.convert(raw, resource_v1.ResourceClaim)


READY = {
    "type": "Ready",
    "status": "True",
    "reason": "Up",
    "lastTransitionTime": "2026-01-01T00:00:00Z",
}
ENTRY = {"driver": "nic.example.com", "pool": "p", "device": "nic-0", "conditions": [READY]}


@pytest.mark.parametrize(
    ("verbs", "extra", "node", "allowed"),
    [
        (["associated-node:update"], ON_NODE_0, "node-0", True),
        (["associated-node:update"], ON_NODE_0, "node-1", False),  # another node's claim
        (["associated-node:update"], {}, "node-0", False),  # a token bound to no node
        (["associated-node:update"], ON_NODE_0, None, False),  # a claim on no one node
        (["arbitrary-node:update"], ON_NODE_0, "node-1", True),
        (["arbitrary-node:update"], {}, None, True),
        (["update"], {}, None, False),  # the plain verb is not it
    ],
    ids=[
        "same-node",
        "other-node",
        "no-extra",
        "no-node",
        "arbitrary",
        "arbitrary-anywhere",
        "plain",
    ],
)
def test_device_status_by_a_driver_plugin(
    verbs: list[str], extra: dict[str, tuple[str, ...]], node: str | None, allowed: bool
) -> None:
    old, new = _claim(node, []), _claim(node, [ENTRY])
    ctx = Context(actor=SA, groups=SA_GROUPS, extra=extra)
    errs = resource_authz.authorized_for_device_status(new, old, "update", ctx, _policy(verbs))
    assert (not errs) == allowed
    if errs:
        (err,) = errs
        # The verbs tried: associated-node first when the account is on the claim's node.
        tried = (
            "[associated-node:update arbitrary-node:update]"
            if extra and node == "node-0"
            else "[arbitrary-node:update]"
        )
        assert f'verb="{tried}" permission: ' in err.message


def test_unchanged_entries_and_other_actors_need_nothing() -> None:
    nobody = rbac.Policy()
    claim = _claim("node-0", [ENTRY])
    as_sa = Context(actor=SA, groups=SA_GROUPS)
    assert resource_authz.authorized_for_device_status(claim, claim, "patch", as_sa, nobody) == []
    assert resource_authz.authorized_for_binding(claim, claim, "patch", as_sa, nobody) == []
    # An admin connection on the bus (no groups) and system:masters are not asked.
    changed = _claim(None, [])
    for ctx in (Context(actor="drasim"), Context(actor="root", groups=("system:masters",))):
        assert resource_authz.authorized_for_binding(changed, claim, "patch", ctx, nobody) == []
        assert (
            resource_authz.authorized_for_device_status(changed, claim, "patch", ctx, nobody) == []
        )
    # A removed entry is a change of its driver's entries too.
    (err,) = resource_authz.authorized_for_device_status(changed, claim, "patch", as_sa, nobody)
    assert err.field == "status.devices"
