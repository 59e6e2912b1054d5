"""DRAResourceClaimGranularStatusAuthorization through kubectl: a user allowed to patch
`resourceclaims/status` still needs `resourceclaims/binding` to change a claim's allocation
or reservations and `arbitrary-node:patch` on `resourceclaims/driver` (named after the
driver) to change its device status, refused with kube-apiserver v1.37.2's 422 and the
authorizer's message inside; the gate off, the status permission is enough. The
scheduler and the drivers' controller keep working with their roles: the end-to-end tests
of claims, binding conditions and device status run under the same check."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest

from drasim.common import features
from tests.http.conftest import Cluster, open_cluster

CLAIM = """\
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: nic}
spec:
  devices:
    requests:
    - name: nic
      exactly: {deviceClassName: nic.example.com}
"""
STATUS_WRITER = """\
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: claim-status-writer}
rules:
- apiGroups: [resource.k8s.io]
  resources: [resourceclaims, resourceclaims/status]
  verbs: [get, patch, update]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: jane-writes-claim-status}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: claim-status-writer}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: jane}]
"""
BINDER = """\
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: claim-binder}
rules:
- apiGroups: [resource.k8s.io]
  resources: [resourceclaims/binding]
  verbs: [patch, update]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: jane-binds-claims}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: claim-binder}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: jane}]
"""
# A driver's role as upstream's hardening guide writes it, bound in the claim's namespace.
NIC_DRIVER = """\
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: nic-driver-status}
rules:
- apiGroups: [resource.k8s.io]
  resources: [resourceclaims/driver]
  verbs: ["arbitrary-node:patch", "arbitrary-node:update"]
  resourceNames: [nic.example.com]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: jane-reports-nics, namespace: default}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: nic-driver-status}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: jane}]
"""
RESULT = {"request": "nic", "driver": "nic.example.com", "pool": "fabric", "device": "nic-0"}
ALLOCATION = {"status": {"allocation": {"devices": {"results": [RESULT]}}}}
READY = {
    "type": "Ready",
    "status": "True",
    "reason": "Up",
    "message": "",
    "lastTransitionTime": "2026-01-01T00:00:00Z",
}
DEVICE = {k: v for k, v in RESULT.items() if k != "request"}
DEVICE_STATUS = {"status": {"devices": [{**DEVICE, "conditions": [READY]}]}}


@pytest.fixture
async def cluster(fresh, certs, tmp_path, request) -> AsyncIterator[Cluster]:  # noqa: ANN001
    """The HTTP cluster, with the feature gates a test's parameter sets (default: 1.37's)."""
    gate = features.new_gate(getattr(request, "param", ""))
    async with open_cluster(fresh, certs, tmp_path, features=gate) as opened:
        yield opened


def _patch(*extra: str, patch: dict) -> tuple[str, ...]:
    return (
        "patch", "resourceclaim", "nic", "--subresource=status", "--type=merge",
        "-p", json.dumps(patch), *extra,
    )  # fmt: skip


async def test_status_writers_need_the_binding_and_driver_permissions(
    kubectl, cluster: Cluster
) -> None:
    await kubectl("apply", "-f", "-", input=CLAIM + "---\n" + STATUS_WRITER)

    refused = await kubectl(*_patch("--as=jane", patch=ALLOCATION), check=False)
    assert refused.returncode == 1
    assert refused.stderr.strip() == (
        'The ResourceClaim "nic" is invalid: status.allocation: Forbidden: changing '
        'status.allocation or status.reservedFor requires resource="resourceclaims/binding", '
        'verb="patch" permission: resourceclaims.resource.k8s.io is forbidden: User "jane" '
        'cannot patch resource "resourceclaims/binding" in API group "resource.k8s.io" at the '
        "cluster scope"
    )
    await kubectl("apply", "-f", "-", input=BINDER)
    await kubectl(*_patch("--as=jane", patch=ALLOCATION))

    refused = await kubectl(*_patch("--as=jane", patch=DEVICE_STATUS), check=False)
    assert refused.stderr.strip() == (
        'The ResourceClaim "nic" is invalid: status.devices: Forbidden: changing status.devices '
        'requires resource="resourceclaims/driver", verb="[arbitrary-node:patch]" permission: '
        'resourceclaims.resource.k8s.io "nic.example.com" is forbidden: User "jane" cannot '
        'arbitrary-node:patch resource "resourceclaims/driver" in API group "resource.k8s.io" '
        'in the namespace "default"'
    )
    allowed = await kubectl(
        "auth", "can-i", "arbitrary-node:patch", "resourceclaims/driver", "--as=jane", check=False
    )
    assert allowed.stdout.strip() == "no"
    await kubectl("apply", "-f", "-", input=NIC_DRIVER)
    await kubectl(*_patch("--as=jane", patch=DEVICE_STATUS))
    shown = json.loads((await kubectl("get", "resourceclaim", "nic", "-o", "json")).stdout)
    assert [d["conditions"][0]["reason"] for d in shown["status"]["devices"]] == ["Up"]

    # A status write that changes neither needs nothing more than the status permission
    # (and the admin, in system:masters, is allowed everything).
    await kubectl("delete", "clusterrolebinding", "jane-binds-claims")
    await kubectl("delete", "rolebinding", "jane-reports-nics")
    await kubectl(*_patch("--as=jane", patch=ALLOCATION))  # the same allocation: no change
    await kubectl(*_patch(patch={"status": {"allocation": None}}))


async def test_the_bootstrap_roles_grant_binding_to_the_scheduler_and_claim_controller(
    kubectl, cluster: Cluster
) -> None:
    for subject in (
        "system:kube-scheduler",
        "system:serviceaccount:kube-system:resource-claim-controller",
    ):
        for verb in ("update", "patch"):
            answer = await kubectl(
                "auth", "can-i", verb, "resourceclaims/binding", f"--as={subject}", check=False
            )
            assert answer.stdout.strip() == "yes", (subject, verb)
    answer = await kubectl(
        "auth", "can-i", "patch", "resourceclaims/binding", "--as=jane", check=False
    )
    assert answer.stdout.strip() == "no"


@pytest.mark.parametrize(
    "cluster", ["DRAResourceClaimGranularStatusAuthorization=false"], indirect=True
)
async def test_with_the_gate_off_the_status_permission_is_enough(kubectl, cluster: Cluster) -> None:
    await kubectl("apply", "-f", "-", input=CLAIM + "---\n" + STATUS_WRITER)
    await kubectl(*_patch("--as=jane", patch=ALLOCATION))
    await kubectl(*_patch("--as=jane", patch=DEVICE_STATUS))
    shown = json.loads((await kubectl("get", "resourceclaim", "nic", "-o", "json")).stdout)
    assert shown["status"]["allocation"]["devices"]["results"] == [RESULT]
    assert [d["device"] for d in shown["status"]["devices"]] == ["nic-0"]
