"""Conversion between resource.k8s.io/v1beta1 and the stored v1, as upstream's
`pkg/apis/resource/v1beta1/conversion.go`, on objects as builtins (dicts from JSON).

- A device's fields other than its name move between v1beta1's `basic` and the device
  itself; a device read in v1beta1 always has `basic` (`{}` when it has nothing else), and
  a v1beta1 device without `basic` has only its name in v1.
- A request's `exactly` fields move between v1's `exactly` and the v1beta1 request itself.
  A v1beta1 request gets `exactly` when any of them is set (`hasAnyMainRequestFieldsSet`:
  a non-empty class name or mode, a non-zero count, any other field present, even empty),
  so that validation reports what is wrong with it.
- ResourceSliceSpec's `nodeName: ""` and `allNodes: false` mean "unset" in v1beta1.
- A v1beta1 request always has `deviceClassName`, `""` in a request of alternatives.

Nothing is lost either way: every v1 field has a place in v1beta1. Which fields move is
read from the v1 types (`resource_v1beta1.BASIC_DEVICE_FIELDS`, `EXACT_REQUEST_FIELDS`),
so a field added to v1's Device or ExactDeviceRequest moves with the others.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from drasim.common.api import resource_v1, resource_v1beta1
from drasim.common.version import Version

__all__ = ["GROUP_VERSION", "LIFECYCLE", "TYPES", "from_storage", "to_storage"]

GROUP_VERSION = resource_v1beta1.GROUP_VERSION
# Deprecated in 1.35, no longer served from 1.38 (upstream's prerelease-lifecycle tags).
LIFECYCLE = dict.fromkeys(
    ("DeviceClass", "ResourceSlice", "ResourceClaim", "ResourceClaimTemplate"),
    (Version(1, 35), Version(1, 38)),
)
TYPES: dict[str, type] = {
    "DeviceClass": resource_v1beta1.DeviceClass,
    "ResourceSlice": resource_v1beta1.ResourceSlice,
    "ResourceClaim": resource_v1beta1.ResourceClaim,
    "ResourceClaimTemplate": resource_v1beta1.ResourceClaimTemplate,
}

_BASIC = resource_v1beta1.BASIC_DEVICE_FIELDS
_EXACT = resource_v1beta1.EXACT_REQUEST_FIELDS


def to_storage(kind: str, obj: dict[str, Any]) -> dict[str, Any]:
    """The v1 form of a v1beta1 object of `kind` (a new dict; `obj` is left alone)."""
    return _convert(kind, obj, resource_v1.GROUP_VERSION, _slice_spec_to_v1, _request_to_v1)


def from_storage(kind: str, obj: dict[str, Any]) -> dict[str, Any]:
    """The v1beta1 form of a stored v1 object of `kind` (a new dict)."""
    return _convert(kind, obj, GROUP_VERSION, _slice_spec_from_v1, _request_from_v1)


_Convert = Callable[[dict[str, Any]], dict[str, Any]]


def _convert(
    kind: str, obj: dict[str, Any], api_version: str, slice_spec: _Convert, request: _Convert
) -> dict[str, Any]:
    """`obj` in `api_version`, its slice spec or its claim's requests converted as given."""
    out = dict(obj, apiVersion=api_version)
    if kind == "ResourceSlice":
        out["spec"] = slice_spec(_dict(obj.get("spec")))
    elif kind == "ResourceClaim":
        out["spec"] = _claim_spec(_dict(obj.get("spec")), request)
    elif kind == "ResourceClaimTemplate":
        template = dict(_dict(obj.get("spec")))
        template["spec"] = _claim_spec(_dict(template.get("spec")), request)
        out["spec"] = template
    return out


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


# -- ResourceSlice ----------------------------------------------------------------------


def _slice_spec_to_v1(spec: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in spec.items() if k not in ("nodeName", "allNodes", "devices")}
    if spec.get("nodeName"):
        out["nodeName"] = spec["nodeName"]
    if spec.get("allNodes"):
        out["allNodes"] = spec["allNodes"]
    if "devices" in spec:
        out["devices"] = [_device_to_v1(_dict(d)) for d in _list(spec["devices"])]
    return out


def _device_to_v1(device: dict[str, Any]) -> dict[str, Any]:
    """Only the name and what `basic` holds: v1's fields at the top of a v1beta1 device
    are unknown there, and dropped."""
    out = {k: v for k, v in device.items() if k not in _BASIC and k != "basic"}
    out.update({k: v for k, v in _dict(device.get("basic")).items() if k in _BASIC})
    return out


def _slice_spec_from_v1(spec: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in spec.items() if k != "devices" and (k, v) != ("allNodes", False)}
    if "devices" in spec:
        out["devices"] = [_device_from_v1(d) for d in _list(spec["devices"])]
    return out


def _device_from_v1(device: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in device.items() if k not in _BASIC}
    out["basic"] = {k: v for k, v in device.items() if k in _BASIC}
    return out


# -- ResourceClaim and ResourceClaimTemplate ---------------------------------------------


def _claim_spec(spec: dict[str, Any], convert: _Convert) -> dict[str, Any]:
    devices = _dict(spec.get("devices"))
    if "requests" not in devices:
        return dict(spec)
    requests = [convert(_dict(r)) for r in _list(devices["requests"])]
    return dict(spec, devices=dict(devices, requests=requests))


def _is_set(value: Any) -> bool:
    """Whether Go sees the field as set: present, not null, and not an empty string or a
    zero count (the value fields; pointers, lists and structs count when present)."""
    if value is None or value == "":
        return False
    return not (type(value) is int and value == 0)


def _request_to_v1(request: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in request.items() if k not in _EXACT and k != "exactly"}
    if any(_is_set(request.get(k)) for k in _EXACT):
        out["exactly"] = {k: request[k] for k in _EXACT if k in request}
    return out


def _request_from_v1(request: dict[str, Any]) -> dict[str, Any]:
    """The request with its `exactly` fields inline; v1beta1 writes `deviceClassName` even
    when empty (a request of alternatives), as its Go field has no `omitempty`."""
    out = {k: v for k, v in request.items() if k != "exactly"}
    out["deviceClassName"] = ""
    out.update(_dict(request.get("exactly")))
    return out
