"""`kubectl auth can-i` and `kubectl auth whoami` with a node's token (a token-auth-file
user `system:node:<name>` in `system:nodes`): answered by the Node authorizer, then RBAC,
as upstream's chain answers them. Every expected line is kube-apiserver v1.37.2's answer
to the same question."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from drasim.cli import kubeconfig
from tests.http.conftest import (
    KUBECTL,
    KUBECTL_TIMEOUT,
    TOKEN,
    kubectl_env,
    session,
    start_with_users,
)

NODE = "dra-gpu-0"
NODE_TOKEN = "node-token"
JANE_TOKEN = "jane-token"


def _node(name: str) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}


def _pod(name: str, node: str) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "pause"}]},
    }


@pytest.fixture
async def kubeconfig_path(fresh, certs, tmp_path: Path) -> AsyncIterator[Path]:
    """An apistore knowing the admin, jane and the node, with the nodes and two pods, one
    bound to the node; a kubeconfig for it (the admin's token, which `--token` replaces)."""
    server, url = await start_with_users(
        fresh,
        certs,
        tmp_path,
        f'{NODE_TOKEN},system:node:{NODE},uid-node,"system:nodes"',
        f"{JANE_TOKEN},jane,uid-jane",
    )
    try:
        async with session(url, certs, TOKEN) as admin:
            for path, obj in (
                ("/api/v1/nodes", _node(NODE)),
                ("/api/v1/nodes", _node("dp-gpu-0")),
                ("/api/v1/namespaces/default/pods", _pod("bound", NODE)),
                ("/api/v1/namespaces/default/pods", _pod("elsewhere", "dp-gpu-0")),
            ):
                async with admin.post(path, json=obj) as response:
                    assert response.status == 201, await response.text()
        path = tmp_path / "kubeconfig"
        kubeconfig.write(path, url, TOKEN, certs.ca_cert, name="drasim-test")
        yield path
    finally:
        await server.stop()


async def kubectl(config: Path, token: str, *args: str) -> str:
    assert KUBECTL is not None
    process = await asyncio.create_subprocess_exec(
        KUBECTL, "--kubeconfig", str(config), "--token", token, *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=kubectl_env(),
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(), KUBECTL_TIMEOUT)
    # kubectl warns that a cluster-scoped kind was asked about in a namespace: not an answer.
    lines = [line for line in (err + out).decode().splitlines() if "namespace scoped" not in line]
    return "\n".join(lines).strip()


NO_RELATION = "no - node: no relationship found between node 'dra-gpu-0' and this object"
ALL_NODES = "no - node: node 'dra-gpu-0' cannot read all nodes, only its own Node object"
OTHER_NODE = "no - node: node 'dra-gpu-0' cannot read 'dp-gpu-0', only its own Node object"
LEASE_VERBS = "no - node: can only get, create, update, patch, or delete a node lease"
SLICE_LISTS = (
    "no - node: can only list/watch/deletecollection resourceslices with nodeName field selector"
)
# (question, kube-apiserver v1.37.2's answer to the node)
NODE_ANSWERS = [
    ("get nodes/dra-gpu-0", "yes"),
    ("get nodes/dp-gpu-0", OTHER_NODE),
    ("list nodes", ALL_NODES),
    ("watch nodes", ALL_NODES),
    ("create nodes", "yes"),
    ("update nodes --subresource status", "yes"),
    ("get pods/bound", "yes"),
    ("get pods/elsewhere", NO_RELATION),
    ("get pods/missing", NO_RELATION),
    ("get pods", "no - node: No Object name found"),
    ("list pods", "no - node: can only list/watch pods with spec.nodeName field selector"),
    ("list pods/bound", "yes"),
    ("create pods", "yes"),
    ("delete pods", "yes"),
    ("patch pods --subresource status", "yes"),
    ("create pods --subresource eviction", "yes"),
    ("get leases/dra-gpu-0 -n kube-node-lease", "yes"),
    ("list leases -n kube-node-lease", LEASE_VERBS),
    ("get resourceclaims/x", NO_RELATION),
    ("list resourceclaims", "no - node: can only get individual resources of this type"),
    ("create resourceslices", "yes"),
    ("delete resourceslices", "no - node: No Object name found"),
    ("list resourceslices", SLICE_LISTS),
    ("list deviceclasses", "no"),
    ("create events", "yes"),
    ("create selfsubjectaccessreviews", "yes"),
    ("get /healthz", "yes"),
    ("get /readyz/etcd", "no"),
]


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed on this machine")
async def test_a_node_token_gets_the_node_authorizers_answers(kubeconfig_path: Path) -> None:
    got = [
        (question, await kubectl(kubeconfig_path, NODE_TOKEN, "auth", "can-i", *question.split()))
        for question, _ in NODE_ANSWERS
    ]
    assert got == NODE_ANSWERS
    whoami = json.loads(await kubectl(kubeconfig_path, NODE_TOKEN, "auth", "whoami", "-o", "json"))
    assert whoami["status"]["userInfo"] == {
        "username": f"system:node:{NODE}",
        "uid": "uid-node",
        "groups": ["system:nodes", "system:authenticated"],
    }
    listed = await kubectl(kubeconfig_path, NODE_TOKEN, "auth", "can-i", "--list")
    assert listed.splitlines()[0] == (
        "Warning: the list may be incomplete: node authorizer does not support user rule resolution"
    )


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed on this machine")
async def test_a_users_token_gets_rbacs_answers(kubeconfig_path: Path) -> None:
    """jane, of the token file and in no group, may ask and read discovery, nothing else;
    and she is no node, whatever she asks about nodes."""
    for question, answer in [
        ("create pods", "no"),
        ("get nodes/dra-gpu-0", "no"),
        ("get pods/bound", "no"),
        ("create selfsubjectaccessreviews", "yes"),
        ("get /apis", "yes"),
    ]:
        assert await kubectl(kubeconfig_path, JANE_TOKEN, "auth", "can-i", *question.split()) == (
            answer
        ), question
    whoami = json.loads(await kubectl(kubeconfig_path, JANE_TOKEN, "auth", "whoami", "-o", "json"))
    assert whoami["status"]["userInfo"] == {
        "username": "jane",
        "uid": "uid-jane",
        "groups": ["system:authenticated"],
    }
