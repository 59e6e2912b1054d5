"""DeviceTaintRules and admin access through kubectl, answered as kube-apiserver v1.37.2
answers (the messages below are its own): validation of rules, taints and tolerations, the
stamped `timeAdded`, the columns of `kubectl get`, and `adminAccess` allowed only in a
namespace labelled `resource.kubernetes.io/admin-access: "true"`."""

from __future__ import annotations

import json

import pytest

from drasim.common import errors
from drasim.common.api import meta_v1, resource_v1
from tests.http.conftest import Cluster

BAD_RULE = """\
apiVersion: resource.k8s.io/v1
kind: DeviceTaintRule
metadata: {name: bad}
spec:
  deviceSelector: {driver: "Bad_Driver", pool: "-x", device: "Foo"}
  taint: {key: "a b", value: "-", effect: PreferNoSchedule}
"""
RULE = """\
apiVersion: resource.k8s.io/v1
kind: DeviceTaintRule
metadata: {name: broken-gpu}
spec:
  deviceSelector: {driver: gpu.example.com, pool: dra-gpu-0, device: gpu-0}
  taint: {key: example.com/broken, value: "yes", effect: NoSchedule}
"""
TOLERATIONS = """\
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: tol}
spec:
  devices:
    requests:
    - name: r
      exactly:
        deviceClassName: gpu.example.com
        tolerations:
        - {operator: Exists, value: x}
        - {key: k, operator: Bad}
        - {value: v}
        - {key: "a b", effect: PreferNoSchedule}
        - {key: k, effect: None, tolerationSeconds: 5}
"""
ADMIN_CLAIM = """\
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: admin}
spec:
  devices:
    requests:
    - name: r
      exactly: {deviceClassName: gpu.example.com, adminAccess: true}
    - name: r2
      exactly: {deviceClassName: gpu.example.com, adminAccess: true}
"""
ADMIN_TEMPLATE = """\
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: admin}
spec:
  spec:
    devices:
      requests:
      - name: r
        exactly: {deviceClassName: gpu.example.com, adminAccess: true}
"""
ADMIN_REFUSED = (
    'The {kind} "admin" is invalid: spec.devices.requests[0].adminAccess: Forbidden: admin '
    "access to devices requires the `resource.kubernetes.io/admin-access: true` label on the "
    "containing namespace"
)


async def test_an_invalid_rule_is_refused_with_every_field_named(kubectl) -> None:
    refused = await kubectl("apply", "-f", "-", input=BAD_RULE, check=False)
    assert refused.returncode == 1
    lines = refused.stderr.splitlines()
    assert lines[0] == 'The DeviceTaintRule "bad" is invalid: '
    assert [line.split(": ")[0] for line in lines[1:]] == [
        "* spec.deviceSelector.driver",
        "* spec.deviceSelector.pool",
        "* spec.deviceSelector.device",
        "* spec.taint.key",
        "* spec.taint.value",
        "* spec.taint.effect",
    ]
    assert lines[-1] == (
        '* spec.taint.effect: Unsupported value: "PreferNoSchedule": supported values: '
        '"NoExecute", "NoSchedule", "None"'
    )
    assert lines[3].startswith(
        '* spec.deviceSelector.device: Invalid value: "Foo": a lowercase RFC 1123 label must'
    )
    empty = "apiVersion: resource.k8s.io/v1\nkind: DeviceTaintRule\nmetadata: {name: e}\n"
    refused = await kubectl("apply", "-f", "-", input=empty + "spec: {taint: {}}\n", check=False)
    assert refused.stderr.splitlines()[1:] == [
        '* spec.taint.key: Invalid value: "": name part must be non-empty',
        '* spec.taint.key: Invalid value: "": name part must consist of alphanumeric '
        "characters, '-', '_' or '.', and must start and end with an alphanumeric character "
        "(e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
        "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
        "* spec.taint.effect: Required value",
    ]


async def test_a_rule_is_stored_with_its_time_and_listed_with_upstreams_columns(
    kubectl, cluster: Cluster
) -> None:
    created = await kubectl("apply", "-f", "-", input=RULE)
    assert created.stdout.strip() == "devicetaintrule.resource.k8s.io/broken-gpu created"
    stored = json.loads(
        (await kubectl("get", "devicetaintrule", "broken-gpu", "-o", "json")).stdout
    )
    assert stored["metadata"]["generation"] == 1
    assert stored["spec"]["taint"]["timeAdded"].endswith("Z")
    listed = (await kubectl("get", "devicetaintrules")).stdout.splitlines()
    assert listed[0].split() == ["NAME", "KEY", "VALUE", "EFFECT", "TIMEADDED", "AGE"]
    assert listed[1].split()[:4] == ["broken-gpu", "example.com/broken", "yes", "NoSchedule"]

    # Changing the effect moves timeAdded when the client kept the old one (here: a time
    # long past, so the move is visible within the second).
    rule = await cluster.api.get(resource_v1.DeviceTaintRule, "broken-gpu")
    rule.spec.taint.time_added = "2020-01-01T00:00:00Z"
    rule = await cluster.api.update(rule)
    assert rule.spec.taint.time_added == "2020-01-01T00:00:00Z"  # given: kept
    patch = json.dumps({"spec": {"taint": {"effect": "None"}}})
    await kubectl("patch", "devicetaintrule", "broken-gpu", "--type=merge", "-p", patch)
    rule = await cluster.api.get(resource_v1.DeviceTaintRule, "broken-gpu")
    assert rule.spec.taint.effect == "None"
    assert rule.spec.taint.time_added != "2020-01-01T00:00:00Z"
    assert rule.metadata.generation == 3


async def test_device_tolerations_are_checked_as_upstream_checks_them(kubectl) -> None:
    refused = await kubectl("create", "-f", "-", input=TOLERATIONS, check=False)
    path = "spec.devices.requests[0].exactly.tolerations"
    assert refused.stderr.splitlines() == [
        'The ResourceClaim "tol" is invalid: ',
        f'* {path}[0].value: Invalid value: "x": must be empty for operator `Exists`',
        f'* {path}[1].operator: Unsupported value: "Bad": supported values: "Equal", "Exists"',
        f'* {path}[3].key: Invalid value: "a b": name part must consist of alphanumeric '
        "characters, '-', '_' or '.', and must start and end with an alphanumeric character "
        "(e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
        "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
        f'* {path}[3].effect: Unsupported value: "PreferNoSchedule": supported values: '
        '"NoExecute", "NoSchedule", "None"',
    ]


async def test_admin_access_needs_the_namespace_label(kubectl) -> None:
    for manifest, kind in (
        (ADMIN_CLAIM, "ResourceClaim"),
        (ADMIN_TEMPLATE, "ResourceClaimTemplate"),
    ):
        refused = await kubectl("create", "-f", "-", input=manifest, check=False)
        assert refused.returncode == 1
        assert refused.stderr.strip() == ADMIN_REFUSED.format(kind=kind)

    await kubectl("create", "namespace", "admins")
    await kubectl("label", "namespace", "admins", "resource.kubernetes.io/admin-access=True")
    refused = await kubectl("create", "-n", "admins", "-f", "-", input=ADMIN_CLAIM, check=False)
    assert refused.stderr.strip() == ADMIN_REFUSED.format(kind="ResourceClaim")  # not "true"

    label = "resource.kubernetes.io/admin-access=true"
    await kubectl("label", "namespace", "admins", label, "--overwrite")
    for manifest, kind in (
        (ADMIN_CLAIM, "resourceclaim"),
        (ADMIN_TEMPLATE, "resourceclaimtemplate"),
    ):
        created = await kubectl("create", "-n", "admins", "-f", "-", input=manifest)
        assert created.stdout.strip() == f"{kind}.resource.k8s.io/admin created"


async def test_an_allocation_granting_admin_access_needs_the_label_too(
    kubectl, cluster: Cluster
) -> None:
    """Upstream `AuthorizedForAdminStatus`: the status may not grant what the spec could not
    ask for (here a claim made before the namespace lost its label)."""
    await kubectl("create", "namespace", "admins")
    await kubectl("label", "namespace", "admins", "resource.kubernetes.io/admin-access=true")
    await kubectl("create", "-n", "admins", "-f", "-", input=ADMIN_CLAIM)
    await kubectl("label", "namespace", "admins", "resource.kubernetes.io/admin-access-")
    claim = await cluster.api.get(resource_v1.ResourceClaim, "admin", namespace="admins")
    result = resource_v1.DeviceRequestAllocationResult(
        request="r", driver="gpu.example.com", pool="p", device="gpu-0", admin_access=True
    )
    claim.status.allocation = resource_v1.AllocationResult(
        devices=resource_v1.DeviceAllocationResult(results=[result])
    )
    with pytest.raises(errors.Invalid) as refused:
        await cluster.api.update_status(claim)
    assert str(refused.value) == (
        'ResourceClaim.resource.k8s.io "admin" is invalid: status.allocation.devices.results[0]'
        ".adminAccess: Forbidden: admin access to devices requires the "
        "`resource.kubernetes.io/admin-access: true` label on the containing namespace"
    )


async def test_the_status_of_a_rule_is_written_apart_from_its_spec(
    kubectl, cluster: Cluster
) -> None:
    await kubectl("apply", "-f", "-", input=RULE)
    rule = await cluster.api.get(resource_v1.DeviceTaintRule, "broken-gpu")
    rule.spec.taint.effect = "NoExecute"  # ignored by a status write
    rule.status.conditions = [
        meta_v1.Condition(
            type="EvictionInProgress",
            status="False",
            reason="NotStarted",
            observed_generation=1,
            last_transition_time="2026-01-01T00:00:00Z",
        )
    ]
    written = await cluster.api.update_status(rule)
    assert written.spec.taint.effect == "NoSchedule"
    assert [c.reason for c in written.status.conditions] == ["NotStarted"]
    written.status.conditions[0].reason = "not a reason"
    with pytest.raises(errors.Invalid) as refused:
        await cluster.api.update_status(written)
    assert [c.field for c in refused.value.causes] == ["status.conditions[0].reason"]
