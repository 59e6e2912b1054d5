"""The rbac.authorization.k8s.io/v1 kinds over the HTTP API, with kubectl."""

from __future__ import annotations

from tests.http.conftest import Cluster

ROLE_AND_BINDING = """\
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: pod-reader
  namespace: default
rules:
- apiGroups: [""]
  resources: ["pods", "pods/log"]
  verbs: ["get", "list", "watch"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: read-pods
  namespace: default
subjects:
- kind: User
  name: jane
  apiGroup: rbac.authorization.k8s.io
- kind: Group
  name: readers
- kind: ServiceAccount
  name: robot
  namespace: ci
roleRef:
  kind: Role
  name: pod-reader
  apiGroup: rbac.authorization.k8s.io
"""


async def test_kubectl_apply_and_get_roles_and_bindings(cluster: Cluster, kubectl) -> None:
    applied = await kubectl("apply", "-f", "-", input=ROLE_AND_BINDING)
    assert applied.stdout.splitlines() == [
        "role.rbac.authorization.k8s.io/pod-reader created",
        "rolebinding.rbac.authorization.k8s.io/read-pods created",
    ]
    roles = (await kubectl("get", "roles")).stdout.splitlines()
    assert roles[0].split() == ["NAME", "CREATED", "AT"]
    assert roles[1].split()[0] == "pod-reader" and roles[1].split()[1].endswith("Z")
    wide = (await kubectl("get", "rolebindings", "-o", "wide")).stdout.splitlines()
    assert wide[0].split() == ["NAME", "ROLE", "AGE", "USERS", "GROUPS", "SERVICEACCOUNTS"]
    cells = wide[1].split()
    assert cells[:2] == ["read-pods", "Role/pod-reader"]
    assert cells[3:] == ["jane", "readers", "ci/robot"]
    rules = await kubectl("get", "role", "pod-reader", "-o", "jsonpath={.rules[0].resources}")
    assert rules.stdout == '["pods","pods/log"]'
    explained = await kubectl("explain", "rolebinding.roleRef")
    assert "RoleRef can reference a Role in the current namespace" in explained.stdout


async def test_a_bindings_role_ref_cannot_change(cluster: Cluster, kubectl) -> None:
    await kubectl("apply", "-f", "-", input=ROLE_AND_BINDING)
    to_view = ROLE_AND_BINDING.replace(
        "roleRef:\n  kind: Role\n  name: pod-reader", "roleRef:\n  kind: ClusterRole\n  name: view"
    )
    changed = await kubectl("apply", "-f", "-", input=to_view, check=False)
    assert changed.returncode != 0
    assert (
        'roleRef: Invalid value: rbac.RoleRef{APIGroup:"rbac.authorization.k8s.io", '
        'Kind:"ClusterRole", Name:"view"}: cannot change roleRef' in changed.stderr
    )


async def test_a_namespaced_role_may_not_name_urls(cluster: Cluster, kubectl) -> None:
    role = ROLE_AND_BINDING.split("---")[0].replace(
        '- apiGroups: [""]\n  resources: ["pods", "pods/log"]', '- nonResourceURLs: ["/healthz"]'
    )
    refused = await kubectl("apply", "-f", "-", input=role, check=False)
    assert refused.returncode != 0
    assert (
        'The Role "pod-reader" is invalid: rules[0].nonResourceURLs: '
        'Invalid value: []string{"/healthz"}: namespaced rules cannot apply to non-resource '
        "URLs" in refused.stderr
    )


async def test_kubectl_create_rbac_objects_sends_protobuf(cluster: Cluster, kubectl) -> None:
    """`kubectl create role|clusterrole|rolebinding|clusterrolebinding` (typed clients,
    protobuf bodies)."""
    created = [
        await kubectl("create", "role", "reader", "--verb=get,list", "--resource=pods,pods/log"),
        await kubectl(
            "create", "clusterrole", "url-reader", "--verb=get", "--non-resource-url=/logs/*"
        ),
        await kubectl(
            "create",
            "rolebinding",
            "jane-views",
            "--clusterrole=view",
            "--user=jane",
            "--group=readers",
            "--serviceaccount=ci:robot",
            "-n",
            "default",
        ),  # fmt: skip
        await kubectl(
            "create", "clusterrolebinding", "jane-urls", "--clusterrole=url-reader", "--user=jane"
        ),
    ]
    assert [c.stdout.strip() for c in created] == [
        "role.rbac.authorization.k8s.io/reader created",
        "clusterrole.rbac.authorization.k8s.io/url-reader created",
        "rolebinding.rbac.authorization.k8s.io/jane-views created",
        "clusterrolebinding.rbac.authorization.k8s.io/jane-urls created",
    ]
    rules = await kubectl("get", "role", "reader", "-o", "jsonpath={.rules[0].resources}")
    assert rules.stdout == '["pods","pods/log"]'
    urls = await kubectl(
        "get", "clusterrole", "url-reader", "-o", "jsonpath={.rules[0].nonResourceURLs}"
    )
    assert urls.stdout == '["/logs/*"]'
    subjects = await kubectl(
        "get", "rolebinding", "jane-views", "-o", "jsonpath={.subjects[*].kind} {.roleRef.name}"
    )
    assert subjects.stdout == "User Group ServiceAccount view"
    listed = (await kubectl("get", "clusterrolebindings")).stdout
    assert "jane-urls" in listed and "cluster-admin" in listed  # with the defaults
