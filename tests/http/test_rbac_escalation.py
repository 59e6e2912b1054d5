"""RBAC privilege-escalation prevention over the HTTP API: a user may write a role, or
bind one, only with permissions it holds, or when allowed to `escalate` or `bind`."""

from __future__ import annotations

from typing import Any

import aiohttp

from tests.http.conftest import JANE_TOKEN, TOKEN, Cluster, session

RBAC = "/apis/rbac.authorization.k8s.io/v1"
GRANTING = (
    ' is forbidden: user "jane" (groups=["system:authenticated"]) is attempting to grant RBAC '
    "permissions not currently held:\n"
)


def role(name: str, *rules: dict[str, Any], kind: str = "Role", **metadata: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, **metadata}
    if kind == "Role":
        meta.setdefault("namespace", "default")
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": kind,
        "metadata": meta,
        "rules": list(rules),
    }


def rule(verbs: list[str], groups: list[str], resources: list[str], **more: Any) -> dict[str, Any]:
    return {"verbs": verbs, "apiGroups": groups, "resources": resources, **more}


def binding(
    name: str, role_kind: str, role_name: str, subject: str, *, kind: str = "RoleBinding"
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if kind == "RoleBinding":
        meta["namespace"] = "default"
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": kind,
        "metadata": meta,
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role_name},
        "subjects": [{"kind": "User", "name": subject}],
    }


async def _post(client: aiohttp.ClientSession, obj: dict[str, Any]) -> aiohttp.ClientResponse:
    plural = obj["kind"].lower() + "s"
    namespace = obj["metadata"].get("namespace")
    path = f"{RBAC}/namespaces/{namespace}/{plural}" if namespace else f"{RBAC}/{plural}"
    return await client.post(path, json=obj)


async def _created(client: aiohttp.ClientSession, obj: dict[str, Any]) -> None:
    response = await _post(client, obj)
    assert response.status == 201, await response.text()


async def _refused(client: aiohttp.ClientSession, obj: dict[str, Any], code: int = 403) -> str:
    response = await _post(client, obj)
    assert response.status == code, await response.text()
    status = await response.json()
    assert status["reason"] == ("Forbidden" if code == 403 else "NotFound")
    return status["message"]


async def test_a_role_may_hold_only_what_its_writer_holds_in_its_namespace(
    users_cluster: str, certs
) -> None:
    async with (
        session(users_cluster, certs, TOKEN) as admin,
        session(users_cluster, certs, JANE_TOKEN) as jane,
    ):
        await _created(admin, binding("jane-admin", "ClusterRole", "admin", "jane"))
        # admin in `default` holds reading and writing pods there.
        await _created(jane, role("pod-writer", rule(["get", "create"], [""], ["pods"])))
        escalating = role(
            "node-reader",
            rule(["get", "list"], [""], ["nodes", "pods"]),
            rule(["get"], ["storage.k8s.io"], ["storageclasses"], resourceNames=["fast"]),
        )
        assert await _refused(jane, escalating) == (
            'roles.rbac.authorization.k8s.io "node-reader"'
            + GRANTING
            + '{APIGroups:[""], Resources:["nodes"], Verbs:["get" "list"]}\n'
            '{APIGroups:["storage.k8s.io"], Resources:["storageclasses"], ResourceNames:["fast"], '
            'Verbs:["get"]}'
        )
        # Updates are checked the same way (a merge patch adding a rule).
        patch = {
            "rules": [rule(["get", "create"], [""], ["pods"]), rule(["list"], [""], ["nodes"])]
        }
        response = await jane.patch(
            f"{RBAC}/namespaces/default/roles/pod-writer",
            json=patch,
            headers={"Content-Type": "application/merge-patch+json"},
        )
        assert response.status == 403
        assert (await response.json())["message"] == (
            'roles.rbac.authorization.k8s.io "pod-writer"'
            + GRANTING
            + '{APIGroups:[""], Resources:["nodes"], Verbs:["list"]}'
        )
        # A ClusterRole is checked against cluster-wide rules: jane's RoleBinding is not.
        cluster_writer = role(
            "clusterrole-writer",
            rule(["create", "update"], ["rbac.authorization.k8s.io"], ["clusterroles"]),
            kind="ClusterRole",
        )
        await _created(admin, cluster_writer)
        await _created(
            admin,
            binding(
                "jane-writes-clusterroles",
                "ClusterRole",
                "clusterrole-writer",
                "jane",
                kind="ClusterRoleBinding",
            ),
        )
        pod_getter = role("pod-getter", rule(["get"], [""], ["pods"]), kind="ClusterRole")
        assert await _refused(jane, pod_getter) == (
            'clusterroles.rbac.authorization.k8s.io "pod-getter"'
            + GRANTING
            + '{APIGroups:[""], Resources:["pods"], Verbs:["get"]}'
        )
        # An aggregationRule gathers anything: it takes every permission.
        aggregated = role(
            "gatherer",
            rule(["create"], ["rbac.authorization.k8s.io"], ["clusterroles"]),
            kind="ClusterRole",
        )
        aggregated["aggregationRule"] = {"clusterRoleSelectors": [{"matchLabels": {"a": "b"}}]}
        assert await _refused(jane, aggregated) == (
            'clusterroles.rbac.authorization.k8s.io "gatherer" is forbidden: must have '
            "cluster-admin privileges to use the aggregationRule"
        )
        # system:masters write what they please.
        await _created(admin, escalating)


async def test_the_escalate_verb_lets_a_user_write_any_role(users_cluster: str, certs) -> None:
    async with (
        session(users_cluster, certs, TOKEN) as admin,
        session(users_cluster, certs, JANE_TOKEN) as jane,
    ):
        await _created(admin, binding("jane-admin", "ClusterRole", "admin", "jane"))
        nodes = role("node-reader", rule(["list"], [""], ["nodes"]))
        await _refused(jane, nodes)
        escalator = role("escalator", rule(["escalate"], ["rbac.authorization.k8s.io"], ["roles"]))
        await _created(admin, escalator)
        await _created(admin, binding("jane-escalates", "Role", "escalator", "jane"))
        await _created(jane, nodes)


async def test_a_binding_grants_only_what_its_writer_holds_or_may_bind(
    users_cluster: str, certs
) -> None:
    async with (
        session(users_cluster, certs, TOKEN) as admin,
        session(users_cluster, certs, JANE_TOKEN) as jane,
    ):
        await _created(admin, binding("jane-admin", "ClusterRole", "admin", "jane"))
        await _created(jane, binding("bob-views", "ClusterRole", "view", "bob"))
        everything = binding("bob-admin", "ClusterRole", "cluster-admin", "bob")
        assert await _refused(jane, everything) == (
            'rolebindings.rbac.authorization.k8s.io "bob-admin"'
            + GRANTING
            + '{APIGroups:["*"], Resources:["*"], Verbs:["*"]}\n'
            '{NonResourceURLs:["*"], Verbs:["*"]}'
        )
        assert await _refused(jane, binding("bob-x", "ClusterRole", "nope", "bob"), 404) == (
            'clusterroles.rbac.authorization.k8s.io "nope" not found'
        )
        # `bind` on the role, by its name, lets jane bind it.
        binder = role(
            "binder",
            rule(
                ["bind"],
                ["rbac.authorization.k8s.io"],
                ["clusterroles"],
                resourceNames=["cluster-admin"],
            ),
        )
        await _created(admin, binder)
        await _created(admin, binding("jane-binds", "Role", "binder", "jane"))
        await _created(jane, everything)
        nodes = role("node-reader", rule(["list"], [""], ["nodes"]), kind="ClusterRole")
        await _created(admin, nodes)
        assert await _refused(jane, binding("bob-nodes", "ClusterRole", "node-reader", "bob")) == (
            'rolebindings.rbac.authorization.k8s.io "bob-nodes"'
            + GRANTING
            + '{APIGroups:[""], Resources:["nodes"], Verbs:["list"]}'
        )


async def test_only_the_garbage_collectors_fields_may_change_unchecked(
    users_cluster: str, certs
) -> None:
    async with (
        session(users_cluster, certs, TOKEN) as admin,
        session(users_cluster, certs, JANE_TOKEN) as jane,
    ):
        await _created(admin, binding("jane-admin", "ClusterRole", "admin", "jane"))
        await _created(admin, role("node-reader", rule(["list"], [""], ["nodes"])))
        path = f"{RBAC}/namespaces/default/roles/node-reader"
        merge = {"Content-Type": "application/merge-patch+json"}
        finalizers = {"metadata": {"finalizers": ["example.com/keep"]}}
        response = await jane.patch(path, json=finalizers, headers=merge)
        assert response.status == 200, await response.text()
        response = await jane.patch(path, json={"metadata": {"labels": {"a": "b"}}}, headers=merge)
        assert response.status == 403


async def test_kubectl_shows_the_refusal(cluster: Cluster, kubectl) -> None:
    """Impersonated jane (by the admin) holds nothing beyond the defaults."""
    refused = await kubectl(
        "create",
        "clusterrolebinding",
        "jane-admin",
        "--clusterrole=cluster-admin",
        "--user=jane",
        "--as=jane",
        check=False,
    )
    assert refused.returncode == 1
    assert (
        'clusterrolebindings.rbac.authorization.k8s.io is forbidden: User "jane" cannot create '
        'resource "clusterrolebindings"' in refused.stderr
    )
    await kubectl(
        "create", "clusterrole", "crb-writer", "--verb=create", "--resource=clusterrolebindings"
    )
    await kubectl(
        "create", "clusterrolebinding", "jane-writes", "--clusterrole=crb-writer", "--user=jane"
    )
    refused = await kubectl(
        "create",
        "clusterrolebinding",
        "jane-admin",
        "--clusterrole=cluster-admin",
        "--user=jane",
        "--as=jane",
        check=False,
    )
    assert refused.returncode == 1
    assert (
        "error: failed to create clusterrolebinding: clusterrolebindings.rbac.authorization.k8s.io "
        '"jane-admin"' + GRANTING + '{APIGroups:["*"], Resources:["*"], Verbs:["*"]}\n'
        '{NonResourceURLs:["*"], Verbs:["*"]}'
    ) in refused.stderr
