"""A claim's device status (KEP-4817) through kubectl: what a driver writes to
`status.devices` shows in `kubectl get -o yaml`, invalid status is refused with upstream's
422 naming the field, and a device's status goes with its allocation."""

from __future__ import annotations

import json

import yaml

from tests.http.conftest import Cluster

CLAIM = """\
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata:
  name: nic
spec:
  devices:
    requests:
    - name: nic
      exactly: {deviceClassName: nic.example.com}
"""
RESULT = {"request": "nic", "driver": "nic.example.com", "pool": "fabric", "device": "nic-0"}
ALLOCATION = {"status": {"allocation": {"devices": {"results": [RESULT]}}}}
DEVICE_STATUS = {
    "driver": "nic.example.com",
    "pool": "fabric",
    "device": "nic-0",
    "conditions": [
        {
            "type": "Ready",
            "status": "True",
            "reason": "InterfaceUp",
            "message": "net1 is up",
            "lastTransitionTime": "2026-01-01T00:00:00Z",
        }
    ],
    "data": {"vlan": 42},
    "networkData": {
        "interfaceName": "net1",
        "ips": ["10.9.8.7/24"],
        "hardwareAddress": "ea:9f:cb:40:b1:7b",
    },
}


async def _patch_status(kubectl, patch: dict, check: bool = True):  # noqa: ANN001, ANN202
    return await kubectl(
        "patch", "resourceclaim", "nic", "--subresource=status", "--type=merge",
        "-p", json.dumps(patch), check=check,
    )  # fmt: skip


async def test_device_status_is_shown_validated_and_dropped_with_the_allocation(
    kubectl, cluster: Cluster
) -> None:
    await kubectl("apply", "-f", "-", input=CLAIM)
    await _patch_status(kubectl, ALLOCATION)
    await _patch_status(kubectl, {"status": {"devices": [DEVICE_STATUS]}})
    shown = yaml.safe_load((await kubectl("get", "resourceclaim", "nic", "-o", "yaml")).stdout)
    assert shown["status"]["devices"] == [DEVICE_STATUS]

    not_canonical = {**DEVICE_STATUS, "networkData": {"ips": ["10.9.8.7"]}}
    refused = await _patch_status(kubectl, {"status": {"devices": [not_canonical]}}, check=False)
    assert refused.returncode == 1
    assert (
        'The ResourceClaim "nic" is invalid: status.devices[0].networkData.ips[0]: Invalid '
        'value: "10.9.8.7": must be a valid address in CIDR form, (e.g. 10.9.8.7/24 or '
        "2001:db8::1/64)"
    ) in refused.stderr
    other = {**DEVICE_STATUS, "device": "nic-1"}
    refused = await _patch_status(kubectl, {"status": {"devices": [other]}}, check=False)
    assert (
        'status.devices[0]: Invalid value: {"Driver":"nic.example.com","Pool":"fabric",'
        '"Device":"nic-1","ShareID":""}: must be an allocated device in the claim'
    ) in refused.stderr

    # Deallocation: the device's status goes too, whoever clears the allocation.
    await _patch_status(kubectl, {"status": {"allocation": None}})
    shown = json.loads((await kubectl("get", "resourceclaim", "nic", "-o", "json")).stdout)
    assert "devices" not in shown["status"]
