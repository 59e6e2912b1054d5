"""The rbac.authorization.k8s.io/v1 kinds over the HTTP API, with kubectl, and ClusterRole
aggregation by the controller manager."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from drasim.common.api import rbac_v1
from drasim.controllers import ControllerManager
from tests.controllers.conftest import Changes, running_controllers
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


@pytest.fixture
async def manager(cluster: Cluster, fresh) -> AsyncIterator[ControllerManager]:
    async with running_controllers(fresh) as manager:
        yield manager


SLICE_READER = """\
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: slice-reader
  labels:
    rbac.authorization.k8s.io/aggregate-to-edit: "true"
rules:
- apiGroups: ["resource.k8s.io"]
  resources: ["resourceslices"]
  verbs: ["get", "list"]
"""


async def test_a_cluster_role_labelled_aggregate_to_edit_extends_edit_and_admin(
    cluster: Cluster, kubectl, manager: ControllerManager
) -> None:
    changes = Changes(manager.cluster_roles)
    slices = rbac_v1.PolicyRule(
        verbs=["get", "list"], api_groups=["resource.k8s.io"], resources=["resourceslices"]
    )

    def aggregated() -> list[bool]:
        return [
            slices in getattr(manager.cluster_roles.get(name), "rules", [])
            for name in ("view", "edit", "admin")
        ]

    async def can_i() -> str:
        args = ("list", "resourceslices.resource.k8s.io", "--as", "jane", "-n", "default")
        return (await kubectl("auth", "can-i", *args, check=False)).stdout.strip()

    await kubectl("create", "rolebinding", "jane-edits", "--clusterrole=edit", "--user=jane")
    assert await can_i() == "no"
    await kubectl("apply", "-f", "-", input=SLICE_READER)
    await changes.until(lambda: aggregated() == [False, True, True])
    assert await can_i() == "yes"
    resources = await kubectl("get", "clusterrole", "edit", "-o", "jsonpath={.rules[*].resources}")
    assert '["resourceslices"]' in resources.stdout

    await kubectl("delete", "clusterrole", "slice-reader")
    await changes.until(lambda: aggregated() == [False, False, False])
    assert await can_i() == "no"
