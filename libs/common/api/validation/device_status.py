"""Validation of a ResourceClaim's `status.devices` (KEP-4817): what drivers report about
the devices allocated to a claim, its conditions (binding conditions among them), opaque
`data` and `networkData`. The names of driver, pool and device are checked with the rest
of the claim's status in `resource`.

Upstream: `validateDeviceStatus`, `validateRawExtension`, `validateNetworkDeviceData` in
`pkg/apis/resource/validation/validation.go`; `ValidateConditions` in apimachinery's
`pkg/apis/meta/v1/validation`; `IsValidInterfaceAddress` in `pkg/util/validation/ip.go`.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Sequence
from typing import Any

from drasim.common import codec
from drasim.common.api import meta_v1, resource_v1
from drasim.common.api.validation import meta, names
from drasim.common.errors import (
    FieldError,
    GoValue,
    field_duplicate,
    field_invalid,
    field_not_supported,
    field_required,
    field_too_long,
    field_too_many,
)

__all__ = ["validate_binding_parameters", "validate_conditions", "validate_device_statuses"]

# Upstream `AllocatedDeviceStatusMaxConditions`, `AllocatedDeviceStatusDataMaxLength`,
# `NetworkDeviceDataMaxIPs`, `NetworkDeviceData{InterfaceName,HardwareAddress}MaxLength`.
MAX_CONDITIONS = 8
DATA_MAX_LENGTH = 10 * 1024
NETWORK_MAX_IPS = 16
INTERFACE_NAME_MAX_LENGTH = 256
HARDWARE_ADDRESS_MAX_LENGTH = 128

# Upstream `BindingConditionsMaxSize`, `BindingFailureConditionsMaxSize`.
BINDING_CONDITIONS_MAX_SIZE = 4

_CONDITION_STATUSES = ["False", "True", "Unknown"]
_REASON_MAX_LENGTH = 1024
_MESSAGE_MAX_LENGTH = 32 * 1024
_REASON_RE = re.compile(r"[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?")
_REASON_ERROR = (
    "a condition reason must start with alphabetic character, optionally followed by a "
    "string of alphanumeric characters or '_,:', and must end with an alphanumeric "
    "character or '_'"
)
_CIDR_ERROR = "must be a valid address in CIDR form, (e.g. 10.9.8.7/24 or 2001:db8::1/64)"
_UUID_RE = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def shared_device_id(driver: str, pool: str, device: str, share_id: str | None) -> dict[str, str]:
    """A device (and its share) as upstream's `SharedDeviceID` reads in a field error."""
    return {"Driver": driver, "Pool": pool, "Device": device, "ShareID": share_id or ""}


def validate_device_statuses(
    claim: resource_v1.ResourceClaim, path: str = "status.devices"
) -> list[FieldError]:
    """Each entry must name a device (and share) allocated to the claim, once, with valid
    conditions, data and network data."""
    allocation = claim.status.allocation
    allocated = []
    if allocation is not None:
        allocated = [
            shared_device_id(r.driver, r.pool, r.device, r.share_id)
            for r in allocation.devices.results
        ]
    errs: list[FieldError] = []
    seen: list[dict[str, str]] = []
    for i, device in enumerate(claim.status.devices):
        d_path = f"{path}[{i}]"
        key = shared_device_id(device.driver, device.pool, device.device, device.share_id)
        if device.share_id is not None:
            errs += _validate_uid(device.share_id, f"{d_path}.shareID")
        if key not in allocated:
            errs.append(field_invalid(d_path, key, "must be an allocated device in the claim"))
        if len(device.conditions) > MAX_CONDITIONS:
            errs.append(
                field_too_many(f"{d_path}.conditions", len(device.conditions), MAX_CONDITIONS)
            )
        errs += validate_conditions(device.conditions, f"{d_path}.conditions")
        if device.data is not None:
            errs += _validate_data(device.data, f"{d_path}.data")
        if device.network_data is not None:
            errs += _validate_network_data(device.network_data, f"{d_path}.networkData")
        if key in seen:
            errs.append(field_duplicate(d_path, key))
        else:
            seen.append(key)
    return errs


def validate_binding_parameters(
    conditions: Sequence[str], failure_conditions: Sequence[str], path: str
) -> list[FieldError]:
    """A device's (or allocation result's) binding conditions (KEP-5007): at most four of
    each, condition types, none twice, none in both lists, and each list needs the other
    (upstream `validateDeviceBindingParameters`)."""
    errs: list[FieldError] = []
    for field_name, values in (
        ("bindingConditions", conditions),
        ("bindingFailureConditions", failure_conditions),
    ):
        if len(values) > BINDING_CONDITIONS_MAX_SIZE:
            errs.append(
                field_too_many(f"{path}.{field_name}", len(values), BINDING_CONDITIONS_MAX_SIZE)
            )
            continue
        for i, value in enumerate(values):
            errs += meta.each(f"{path}.{field_name}[{i}]", value, names.is_qualified_name(value))
    for field_name, values in (
        ("bindingConditions", conditions),
        ("bindingFailureConditions", failure_conditions),
    ):
        seen: set[str] = set()
        for i, value in enumerate(values):
            if value in seen:
                errs.append(field_duplicate(f"{path}.{field_name}[{i}]", value))
            seen.add(value)
            if field_name == "bindingFailureConditions" and value in conditions:
                errs.append(
                    field_invalid(
                        f"{path}.{field_name}[{i}]",
                        value,
                        "bindingFailureConditions must not overlap with bindingConditions",
                    )
                )
    if failure_conditions and not conditions:
        errs.append(
            field_invalid(
                f"{path}.bindingConditions",
                None,
                "bindingConditions are required to use bindingFailureConditions",
            )
        )
    if conditions and not failure_conditions:
        errs.append(
            field_invalid(
                f"{path}.bindingFailureConditions",
                None,
                "bindingFailureConditions are required to use bindingConditions",
            )
        )
    return errs


def validate_conditions(conditions: Sequence[meta_v1.Condition], path: str) -> list[FieldError]:
    """apimachinery's `ValidateConditions`: unique types, each condition complete."""
    errs: list[FieldError] = []
    types: set[str] = set()
    for i, cond in enumerate(conditions):
        c_path = f"{path}[{i}]"
        if cond.type in types:
            errs.append(field_duplicate(c_path, cond.type))
        types.add(cond.type)
        if not cond.type:
            errs.append(field_required(f"{c_path}.type", "is required"))
        else:
            errs += meta.each(f"{c_path}.type", cond.type, names.is_qualified_name(cond.type))
        if not cond.status:
            errs.append(field_required(f"{c_path}.status"))
        elif cond.status not in _CONDITION_STATUSES:
            errs.append(field_not_supported(f"{c_path}.status", cond.status, _CONDITION_STATUSES))
        if cond.observed_generation < 0:
            errs.append(
                field_invalid(
                    f"{c_path}.observedGeneration",
                    cond.observed_generation,
                    "must be greater than or equal to zero",
                )
            )
        if not cond.last_transition_time:
            errs.append(field_required(f"{c_path}.lastTransitionTime"))
        if not cond.reason:
            errs.append(field_required(f"{c_path}.reason"))
        else:
            if not _REASON_RE.fullmatch(cond.reason):
                errs.append(field_invalid(f"{c_path}.reason", cond.reason, _REASON_ERROR))
            if len(cond.reason) > _REASON_MAX_LENGTH:
                errs.append(field_too_long(f"{c_path}.reason", _REASON_MAX_LENGTH))
        if len(cond.message) > _MESSAGE_MAX_LENGTH:
            errs.append(field_too_long(f"{c_path}.message", _MESSAGE_MAX_LENGTH))
    return errs


def _validate_uid(uid: str, path: str) -> list[FieldError]:
    if len(uid) == 36 and _UUID_RE.fullmatch(uid):
        return []
    if _UUID_RE.fullmatch(uid.lower()):
        detail = (
            "uid must be in RFC 4122 normalized form, `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` "
            "with lowercase hexadecimal characters"
        )
    else:
        detail = f"error validating uid: invalid UUID length: {len(uid)}"
    return [field_invalid(path, uid, detail)]


def _validate_data(data: Any, path: str) -> list[FieldError]:
    """Opaque driver data: a JSON object of at most DATA_MAX_LENGTH bytes."""
    if len(codec.encode(data)) > DATA_MAX_LENGTH:
        return [field_too_long(path, DATA_MAX_LENGTH)]
    if not isinstance(data, dict):
        return [field_invalid(path, GoValue("<value omitted>"), "must be a valid JSON object")]
    return []


def _validate_network_data(network: resource_v1.NetworkDeviceData, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    if len(network.interface_name.encode()) > INTERFACE_NAME_MAX_LENGTH:
        errs.append(field_too_long(f"{path}.interfaceName", INTERFACE_NAME_MAX_LENGTH))
    if len(network.hardware_address.encode()) > HARDWARE_ADDRESS_MAX_LENGTH:
        errs.append(field_too_long(f"{path}.hardwareAddress", HARDWARE_ADDRESS_MAX_LENGTH))
    if len(network.ips) > NETWORK_MAX_IPS:
        return [*errs, field_too_many(f"{path}.ips", len(network.ips), NETWORK_MAX_IPS)]
    seen: set[str] = set()
    for i, address in enumerate(network.ips):
        errs += _validate_interface_address(address, f"{path}.ips[{i}]")
    for i, address in enumerate(network.ips):
        if address in seen:
            errs.append(field_duplicate(f"{path}.ips[{i}]", address))
        seen.add(address)
    return errs


def _validate_interface_address(value: str, path: str) -> list[FieldError]:
    """An address with its prefix length, in canonical form (`10.9.8.7/24`)."""
    try:
        if "/" not in value:
            raise ValueError(value)
        interface = ipaddress.ip_interface(value)
    except ValueError:
        return [field_invalid(path, value, _CIDR_ERROR)]
    canonical = f"{interface.ip}/{interface.network.prefixlen}"
    if value != canonical:
        return [field_invalid(path, value, f'must be in canonical form ("{canonical}")')]
    return []
