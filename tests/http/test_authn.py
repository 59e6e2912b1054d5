"""Who an HTTP request is: its bearer token's user (or whom RBAC lets it impersonate),
recorded as the actor of its writes; what a user without RBAC bindings may do; `kubectl
auth whoami` and `kubectl auth can-i` truthful."""

from __future__ import annotations

from pathlib import Path

import aiohttp
import msgspec
import pytest

from drasim.apistore.http import authn
from drasim.common.bus import messages
from tests.http.conftest import JANE_TOKEN, TOKEN, Cluster, session

POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "p"},
    "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]},
}


async def _actors(cluster: Cluster) -> list[str]:
    body = await cluster.api.request(messages.EventLog(resource="pods"))
    return [e.actor for e in messages.event_log_decoder.decode(body).events]


async def test_the_actor_is_the_tokens_user_not_what_the_client_says(
    cluster: Cluster, http: aiohttp.ClientSession
) -> None:
    response = await http.post(
        "/api/v1/namespaces/default/pods?fieldManager=someone-else",
        json=POD,
        headers={"User-Agent": "pretender/1.0"},
    )
    assert response.status == 201, await response.text()
    assert await _actors(cluster) == ["kubernetes-admin"]


async def test_an_admin_may_impersonate_and_the_write_is_the_impersonated_users(
    cluster: Cluster, http: aiohttp.ClientSession
) -> None:
    response = await http.post(
        "/api/v1/namespaces/default/pods",
        json=POD,
        headers={"Impersonate-User": "jane", "Impersonate-Group": "system:masters"},
    )
    assert response.status == 201, await response.text()
    assert await _actors(cluster) == ["jane"]


async def test_a_user_without_bindings_may_discover_and_nothing_else(
    users_cluster: str, certs
) -> None:
    async with session(users_cluster, certs, JANE_TOKEN) as jane:
        assert (await jane.get("/api")).status == 200
        assert (await jane.get("/apis/resource.k8s.io/v1")).status == 200
        response = await jane.get("/api/v1/namespaces/default/pods")
        assert response.status == 403
        status = await response.json()
        assert status["reason"] == "Forbidden"
        assert status["message"] == (
            'pods is forbidden: User "jane" cannot list resource "pods" in API group "" in the '
            'namespace "default"'
        )
        response = await jane.get("/apis/resource.k8s.io/v1/deviceclasses/gpu")
        assert (await response.json())["message"] == (
            'deviceclasses.resource.k8s.io "gpu" is forbidden: User "jane" cannot get resource '
            '"deviceclasses" in API group "resource.k8s.io" at the cluster scope'
        )
        response = await jane.post(
            "/api/v1/namespaces/default/pods", json=POD, headers={"Impersonate-User": "admin"}
        )
        assert response.status == 403
        assert (await response.json())["message"] == (
            'users "admin" is forbidden: User "jane" cannot impersonate resource "users" in API '
            'group "" at the cluster scope'
        )
    async with session(users_cluster, certs, "not-a-token") as nobody:
        assert (await nobody.get("/api")).status == 401


def _view_binding(namespace: str, subject: dict[str, str]) -> dict[str, object]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "jane-views", "namespace": namespace},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
        "subjects": [subject],
    }


async def test_a_role_binding_of_view_lets_jane_read_its_namespace_only(
    users_cluster: str, certs
) -> None:
    async with (
        session(users_cluster, certs, TOKEN) as admin,
        session(users_cluster, certs, JANE_TOKEN) as jane,
    ):
        assert (await jane.get("/api/v1/namespaces/default/pods")).status == 403
        binding = _view_binding("default", {"kind": "User", "name": "jane"})
        response = await admin.post(
            "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings", json=binding
        )
        assert response.status == 201, await response.text()
        assert (await jane.get("/api/v1/namespaces/default/pods")).status == 200
        assert (await jane.get("/apis/apps/v1/namespaces/default/deployments")).status == 200
        response = await jane.post("/api/v1/namespaces/default/pods", json=POD)
        assert response.status == 403
        assert (await response.json())["message"] == (
            'pods is forbidden: User "jane" cannot create resource "pods" in API group "" in '
            'the namespace "default"'
        )
        response = await jane.get("/api/v1/namespaces/kube-system/pods")
        assert response.status == 403
        assert (await response.json())["message"] == (
            'pods is forbidden: User "jane" cannot list resource "pods" in API group "" in the '
            'namespace "kube-system"'
        )
        assert (await jane.get("/api/v1/pods")).status == 403  # all namespaces: cluster scope
        assert (await jane.get("/api/v1/namespaces/default/resourcequotas")).status == 200

        deleted = await admin.delete(
            "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings/jane-views"
        )
        assert deleted.status == 200
        assert (await jane.get("/api/v1/namespaces/default/pods")).status == 403


async def test_a_cluster_role_binding_to_a_group_applies_everywhere(
    users_cluster: str, certs
) -> None:
    async with (
        session(users_cluster, certs, TOKEN) as admin,
        session(users_cluster, certs, JANE_TOKEN) as jane,
    ):
        binding = _view_binding("", {"kind": "Group", "name": "system:authenticated"})
        binding["kind"] = "ClusterRoleBinding"
        binding["metadata"] = {"name": "everyone-views"}
        response = await admin.post(
            "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", json=binding
        )
        assert response.status == 201, await response.text()
        assert (await jane.get("/api/v1/namespaces/kube-system/pods")).status == 200
        assert (await jane.get("/api/v1/pods")).status == 200
        assert (await jane.get("/api/v1/nodes")).status == 403  # view has no cluster kinds


WHOAMI = "/apis/authentication.k8s.io/v1/selfsubjectreviews"
RBAC = "/apis/rbac.authorization.k8s.io/v1"


async def _whoami(client: aiohttp.ClientSession, **headers: str) -> dict[str, object]:
    response = await client.post(WHOAMI, json={}, headers=headers)
    assert response.status == 201, await response.text()
    return (await response.json())["status"]["userInfo"]


async def _refusal(client: aiohttp.ClientSession, **headers: str) -> str:
    response = await client.post(WHOAMI, json={}, headers=headers)
    assert response.status == 403, await response.text()
    return (await response.json())["message"]


async def _grant(admin: aiohttp.ClientSession, name: str, namespace: str, *rules: object) -> None:
    """A role of `rules` bound to jane: a ClusterRole and ClusterRoleBinding, or a Role and
    RoleBinding in `namespace`."""
    scope = f"{RBAC}/namespaces/{namespace}" if namespace else RBAC
    kind = "Role" if namespace else "ClusterRole"
    meta = {"name": name, "namespace": namespace} if namespace else {"name": name}
    role = {"kind": kind, "apiVersion": "rbac.authorization.k8s.io/v1", "metadata": meta}
    response = await admin.post(f"{scope}/{kind.lower()}s", json={**role, "rules": list(rules)})
    assert response.status == 201, await response.text()
    binding = {
        **role,
        "kind": f"{kind}Binding",
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": name},
        "subjects": [{"kind": "User", "name": "jane"}],
    }
    response = await admin.post(f"{scope}/{kind.lower()}bindings", json=binding)
    assert response.status == 201, await response.text()


def _impersonate(resource: str, *names: str, group: str = "") -> dict[str, object]:
    rule: dict[str, object] = {"verbs": ["impersonate"], "apiGroups": [group]}
    return {**rule, "resources": [resource], **({"resourceNames": list(names)} if names else {})}


async def test_rbac_decides_whom_a_user_may_impersonate(users_cluster: str, certs) -> None:
    async with (
        session(users_cluster, certs, TOKEN) as admin,
        session(users_cluster, certs, JANE_TOKEN) as jane,
    ):
        await _grant(
            admin,
            "impersonator",
            "",
            _impersonate("users", "bob"),
            _impersonate("groups", "devs"),
        )
        assert await _whoami(jane, **{"Impersonate-User": "bob"}) == {
            "username": "bob",
            "groups": ["system:authenticated"],
        }
        as_dev = await _whoami(jane, **{"Impersonate-User": "bob", "Impersonate-Group": "devs"})
        assert as_dev["groups"] == ["devs", "system:authenticated"]
        assert await _refusal(jane, **{"Impersonate-User": "alice"}) == (
            'users "alice" is forbidden: User "jane" cannot impersonate resource "users" in API '
            'group "" at the cluster scope'
        )
        assert await _refusal(
            jane, **{"Impersonate-User": "bob", "Impersonate-Group": "admins"}
        ) == (
            'groups "admins" is forbidden: User "jane" cannot impersonate resource "groups" in '
            'API group "" at the cluster scope'
        )
        # The request is then bob's, with bob's permissions.
        response = await jane.get(
            "/api/v1/namespaces/default/pods", headers={"Impersonate-User": "bob"}
        )
        assert response.status == 403
        assert (await response.json())["message"] == (
            'pods is forbidden: User "bob" cannot list resource "pods" in API group "" in the '
            'namespace "default"'
        )
        # Groups, extras or a uid need a user.
        response = await jane.post(WHOAMI, json={}, headers={"Impersonate-Group": "devs"})
        assert response.status == 400
        assert (await response.json())["message"] == (
            "requested [{Group  devs    }] without impersonating a user"
        )


async def test_impersonating_service_accounts_extras_and_uids(users_cluster: str, certs) -> None:
    robot = "system:serviceaccount:default:robot"
    extras = {"Impersonate-User": "bob", "Impersonate-Extra-Scopes": "view"}
    async with (
        session(users_cluster, certs, TOKEN) as admin,
        session(users_cluster, certs, JANE_TOKEN) as jane,
    ):
        assert await _refusal(jane, **{"Impersonate-User": robot}) == (
            'serviceaccounts "robot" is forbidden: User "jane" cannot impersonate resource '
            '"serviceaccounts" in API group "" in the namespace "default"'
        )
        await _grant(admin, "robot-impersonator", "default", _impersonate("serviceaccounts"))
        groups = ["system:serviceaccounts", "system:serviceaccounts:default"]
        assert await _whoami(jane, **{"Impersonate-User": robot}) == {
            "username": robot,
            "groups": [*groups, "system:authenticated"],
        }

        await _grant(admin, "bob-impersonator", "", _impersonate("users", "bob"))
        assert await _refusal(jane, **extras) == (
            'userextras.authentication.k8s.io "view" is forbidden: User "jane" cannot '
            'impersonate resource "userextras/scopes" in API group "authentication.k8s.io" at '
            "the cluster scope"
        )
        assert await _refusal(jane, **{"Impersonate-User": "bob", "Impersonate-Uid": "u-1"}) == (
            'uids.authentication.k8s.io "u-1" is forbidden: User "jane" cannot impersonate '
            'resource "uids" in API group "authentication.k8s.io" at the cluster scope'
        )
        await _grant(
            admin,
            "extras-impersonator",
            "",
            _impersonate("userextras/scopes", group="authentication.k8s.io"),
            _impersonate("uids", "u-1", group="authentication.k8s.io"),
        )
        assert await _whoami(jane, **extras, **{"Impersonate-Uid": "u-1"}) == {
            "username": "bob",
            "uid": "u-1",
            "groups": ["system:authenticated"],
            "extra": {"scopes": ["view"]},
        }


async def test_kubectl_auth_whoami_and_can_i(cluster: Cluster, kubectl) -> None:
    whoami = await kubectl("auth", "whoami", "-o", "json")
    info = msgspec.json.decode(whoami.stdout)["status"]["userInfo"]
    assert info["username"] == "kubernetes-admin"
    assert "system:masters" in info["groups"]
    assert (await kubectl("auth", "can-i", "create", "pods")).stdout.strip() == "yes"

    as_jane = await kubectl("auth", "whoami", "--as", "jane", "-o", "json")
    assert msgspec.json.decode(as_jane.stdout)["status"]["userInfo"]["username"] == "jane"
    denied = await kubectl("auth", "can-i", "create", "pods", "--as", "jane", check=False)
    assert denied.stdout.strip() == "no"


async def test_kubectl_auth_can_i_answers_by_the_bindings(cluster: Cluster, kubectl) -> None:
    """kubectl sends its SelfSubjectAccessReview as protobuf; the answer is the
    authorizer's for the attributes asked about, for the impersonated user."""

    async def can_i(*args: str) -> str:
        done = await kubectl("auth", "can-i", *args, "--as", "jane", check=False)
        return done.stdout.strip()

    assert await can_i("list", "pods", "-n", "default") == "no"
    binding = _view_binding("default", {"kind": "User", "name": "jane"})
    await kubectl("apply", "-f", "-", input=msgspec.json.encode(binding).decode())
    assert await can_i("list", "pods", "-n", "default") == "yes"
    assert await can_i("get", "pods/log", "-n", "default") == "yes"
    assert await can_i("create", "pods", "-n", "default") == "no"
    assert await can_i("list", "pods", "-n", "kube-system") == "no"
    assert await can_i("list", "deployments.apps", "-n", "default") == "yes"
    assert await can_i("get", "/healthz") == "yes"
    assert await can_i("get", "/metrics") == "no"
    verbose = await kubectl(
        "auth", "can-i", "list", "pods", "-n", "default", "--as", "jane", "-v=8"
    )
    assert "Content-Type: application/vnd.kubernetes.protobuf" in verbose.stderr


async def test_a_self_subject_access_review_names_what_allowed_it(
    users_cluster: str, certs
) -> None:
    review = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
    async with session(users_cluster, certs, JANE_TOKEN) as jane:
        body = {"spec": {"nonResourceAttributes": {"path": "/apis/apps", "verb": "get"}}}
        response = await jane.post(review, json=body)
        assert response.status == 201
        assert (await response.json())["status"] == {
            "allowed": True,
            "reason": 'RBAC: allowed by ClusterRoleBinding "system:discovery" of ClusterRole '
            '"system:discovery" to Group "system:authenticated"',
        }
        response = await jane.post(review, json={"spec": {}})
        assert response.status == 422
        assert (await response.json())["message"] == (
            'SelfSubjectAccessReview.authorization.k8s.io "" is invalid: spec.resourceAttributes: '
            "Invalid value: null: exactly one of nonResourceAttributes or resourceAttributes "
            "must be specified"
        )


async def test_kubectl_auth_can_i_list_prints_the_rules_of_the_namespace(
    cluster: Cluster, kubectl
) -> None:
    """`kubectl auth can-i --list` posts a SelfSubjectRulesReview (as protobuf) and prints
    the rules: cluster-wide ones and the namespace's."""
    binding = _view_binding("default", {"kind": "User", "name": "jane"})
    await kubectl("apply", "-f", "-", input=msgspec.json.encode(binding).decode())

    async def can_i_list(namespace: str) -> list[list[str]]:
        done = await kubectl("auth", "can-i", "--list", "--as", "jane", "-n", namespace, "-v=8")
        assert "Content-Type: application/vnd.kubernetes.protobuf" in done.stderr
        return [line.split() for line in done.stdout.splitlines()]

    rows = await can_i_list("default")
    assert rows[0] == ["Resources", "Non-Resource", "URLs", "Resource", "Names", "Verbs"]
    assert ["pods", "[]", "[]", "[get", "list", "watch]"] in rows
    assert ["deployments.apps", "[]", "[]", "[get", "list", "watch]"] in rows
    assert ["selfsubjectrulesreviews.authorization.k8s.io", "[]", "[]", "[create]"] in rows
    assert ["[/healthz]", "[]", "[get]"] in rows
    assert ["*.*", "[]", "[]", "[*]"] not in rows
    elsewhere = await can_i_list("kube-system")
    assert ["pods", "[]", "[]", "[get", "list", "watch]"] not in elsewhere
    assert ["[/healthz]", "[]", "[get]"] in elsewhere
    admin = (await kubectl("auth", "can-i", "--list")).stdout.splitlines()
    assert admin[1].split() == ["*.*", "[]", "[]", "[*]"]  # cluster-admin's


async def test_a_self_subject_rules_review_lists_rules_as_their_roles_have_them(
    users_cluster: str, certs
) -> None:
    review = "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews"
    pod_p = {"verbs": ["get"], "apiGroups": [""], "resources": ["pods"], "resourceNames": ["p"]}
    async with (
        session(users_cluster, certs, TOKEN) as admin,
        session(users_cluster, certs, JANE_TOKEN) as jane,
    ):
        await _grant(admin, "pod-p", "default", pod_p)
        ghost = _view_binding("", {"kind": "User", "name": "jane"})
        ghost.update(kind="ClusterRoleBinding", metadata={"name": "a-ghost"})
        ghost["roleRef"] = {"kind": "ClusterRole", "name": "ghost"}
        response = await admin.post(f"{RBAC}/clusterrolebindings", json=ghost)
        assert response.status == 201, await response.text()

        response = await jane.post(review, json={"spec": {"namespace": "default"}})
        assert response.status == 201
        answer = await response.json()
        assert (answer["kind"], answer["apiVersion"]) == (
            "SelfSubjectRulesReview",
            "authorization.k8s.io/v1",
        )
        status = answer["status"]
        assert status["resourceRules"][0] == {
            "verbs": ["create"],
            "apiGroups": ["authorization.k8s.io"],
            "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
        }
        assert status["resourceRules"][-1] == pod_p  # the namespace's, after the cluster's
        assert {
            "verbs": ["get"],
            "nonResourceURLs": ["/healthz", "/livez", "/readyz", "/version", "/version/"],
        } in status["nonResourceRules"]
        assert status["incomplete"] is False
        assert status["evaluationError"] == (
            'clusterrole.rbac.authorization.k8s.io "ghost" not found'
        )
        response = await jane.post(review, json={"spec": {}})
        assert response.status == 400
        assert (await response.json())["message"] == "no namespace on request"


def test_a_bad_token_file_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "tokens.csv"
    path.write_text("# users\ngood,alice,uid-a\nonly-a-token\n")
    with pytest.raises(authn.TokenFileError, match=r"tokens\.csv:3: expected token,user,uid"):
        authn.Tokens.from_file(path)
