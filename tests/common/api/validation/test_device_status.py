"""A ResourceClaim's `status.devices` (KEP-4817), validated as upstream's
`validateDeviceStatus` does: only allocated devices, once each; conditions as
`metav1.Condition`s; data a JSON object; network data within its limits."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from drasim.common import codec
from drasim.common.api import resource_v1
from drasim.common.api.validation import validate, validate_status

DEVICE = {"driver": "nic.example.com", "pool": "fabric", "device": "nic-0"}
CONDITION = {
    "type": "nic.example.com/attached",
    "status": "True",
    "reason": "Attached",
    "message": "",
    "lastTransitionTime": "2026-01-01T00:00:00Z",
}


def _claim(*devices: dict[str, Any]) -> resource_v1.ResourceClaim:
    return codec.convert(
        {
            "metadata": {"name": "c", "namespace": "default"},
            "spec": {
                "devices": {"requests": [{"name": "nic", "exactly": {"deviceClassName": "nic"}}]}
            },
            "status": {
                "allocation": {"devices": {"results": [{"request": "nic", **DEVICE}]}},
                "devices": list(devices),
            },
        },
        resource_v1.ResourceClaim,
    )


def _errors(*devices: dict[str, Any]) -> list[str]:
    claim = _claim(*devices)
    return [str(e) for e in validate_status(claim, old=claim)]


def test_a_full_device_status_is_valid() -> None:
    assert (
        _errors(
            {
                **DEVICE,
                "conditions": [CONDITION],
                "data": {"vendor": {"port": 3}},
                "networkData": {
                    "interfaceName": "eth1",
                    "ips": ["10.9.8.7/24", "2001:db8::1/64"],
                    "hardwareAddress": "ea:9f:cb:40:b1:7b",
                },
            }
        )
        == []
    )


def _condition(**changes: Any) -> dict[str, Any]:
    return {**DEVICE, "conditions": [{**CONDITION, **changes}]}


@pytest.mark.parametrize(
    ("device", "expected"),
    [
        (
            {**DEVICE, "device": "nic-9"},
            'status.devices[0]: Invalid value: {"Driver":"nic.example.com","Pool":"fabric",'
            '"Device":"nic-9","ShareID":""}: must be an allocated device in the claim',
        ),
        (
            {**DEVICE, "driver": "NIC_example"},
            "status.devices[0].driver: Invalid value: ",
        ),
        (
            _condition(status="Maybe"),
            'status.devices[0].conditions[0].status: Unsupported value: "Maybe": supported '
            'values: "False", "True", "Unknown"',
        ),
        (_condition(reason=""), "status.devices[0].conditions[0].reason: Required value"),
        (
            _condition(reason="not ok"),
            'status.devices[0].conditions[0].reason: Invalid value: "not ok": a condition '
            "reason must start with alphabetic character",
        ),
        (
            _condition(lastTransitionTime=None),
            "status.devices[0].conditions[0].lastTransitionTime: Required value",
        ),
        (
            _condition(type="bad type!"),
            'status.devices[0].conditions[0].type: Invalid value: "bad type!": name part must',
        ),
        (
            {**DEVICE, "data": ["not", "an", "object"]},
            "status.devices[0].data: Invalid value: <value omitted>: must be a valid JSON object",
        ),
        (
            {**DEVICE, "data": {"blob": "x" * 10240}},
            "status.devices[0].data: Too long: may not be more than 10240 bytes",
        ),
        (
            {**DEVICE, "networkData": {"ips": ["10.9.8.7"]}},
            'status.devices[0].networkData.ips[0]: Invalid value: "10.9.8.7": must be a valid '
            "address in CIDR form, (e.g. 10.9.8.7/24 or 2001:db8::1/64)",
        ),
        (
            {**DEVICE, "networkData": {"ips": ["2001:DB8::1/64"]}},
            'status.devices[0].networkData.ips[0]: Invalid value: "2001:DB8::1/64": must be in '
            'canonical form ("2001:db8::1/64")',
        ),
        (
            {**DEVICE, "networkData": {"ips": [f"10.0.0.{i}/8" for i in range(17)]}},
            "status.devices[0].networkData.ips: Too many: 17: must have at most 16 items",
        ),
        (
            {**DEVICE, "networkData": {"interfaceName": "e" * 257}},
            "status.devices[0].networkData.interfaceName: Too long: may not be more than 256 bytes",
        ),
        (
            {**DEVICE, "networkData": {"hardwareAddress": "a" * 129}},
            "status.devices[0].networkData.hardwareAddress: Too long: may not be more than 128 "
            "bytes",
        ),
        (
            {**DEVICE, "conditions": [CONDITION] * 9},
            "status.devices[0].conditions: Too many: 9: must have at most 8 items",
        ),
    ],
    ids=[
        "not-allocated",
        "driver",
        "condition-status",
        "condition-reason-required",
        "condition-reason-format",
        "condition-time",
        "condition-type",
        "data-not-object",
        "data-too-long",
        "ip-not-cidr",
        "ip-not-canonical",
        "too-many-ips",
        "interface-name",
        "hardware-address",
        "too-many-conditions",
    ],
)
def test_invalid_device_status(device: dict[str, Any], expected: str) -> None:
    errors = _errors(device)
    assert any(e.startswith(expected) for e in errors), errors


def test_each_device_and_condition_type_once() -> None:
    twice = copy.deepcopy({**DEVICE, "conditions": [CONDITION, CONDITION]})
    errors = _errors(twice, DEVICE)
    assert 'status.devices[0].conditions[1]: Duplicate value: "nic.example.com/attached"' in errors
    assert (
        'status.devices[1]: Duplicate value: {"Driver":"nic.example.com","Pool":"fabric",'
        '"Device":"nic-0","ShareID":""}' in errors
    )


def _slice_errors(**device: Any) -> list[str]:
    resource_slice = codec.convert(
        {
            "metadata": {"name": "s"},
            "spec": {
                "driver": "nic.example.com",
                "allNodes": True,
                "pool": {"name": "fabric", "generation": 1, "resourceSliceCount": 1},
                "devices": [{"name": "nic-0", **device}],
            },
        },
        resource_v1.ResourceSlice,
    )
    return [str(e) for e in validate(resource_slice)]


@pytest.mark.parametrize(
    ("device", "expected"),
    [
        ({"bindingConditions": ["a"], "bindingFailureConditions": ["b"]}, []),
        (
            {"bindingConditions": ["attached"]},
            [
                "spec.devices[0].bindingFailureConditions: Invalid value: null: "
                "bindingFailureConditions are required to use bindingConditions"
            ],
        ),
        (
            {"bindingFailureConditions": ["failed"]},
            [
                "spec.devices[0].bindingConditions: Invalid value: null: "
                "bindingConditions are required to use bindingFailureConditions"
            ],
        ),
        (
            {"bindingConditions": ["a", "a"], "bindingFailureConditions": ["a"]},
            [
                'spec.devices[0].bindingConditions[1]: Duplicate value: "a"',
                'spec.devices[0].bindingFailureConditions[0]: Invalid value: "a": '
                "bindingFailureConditions must not overlap with bindingConditions",
            ],
        ),
        (
            {"bindingConditions": list("abcde"), "bindingFailureConditions": ["f"]},
            ["spec.devices[0].bindingConditions: Too many: 5: must have at most 4 items"],
        ),
    ],
    ids=["valid", "no-failure-conditions", "no-conditions", "duplicate-overlap", "too-many"],
)
def test_binding_conditions_of_a_device(device: dict[str, Any], expected: list[str]) -> None:
    assert _slice_errors(**device) == expected
