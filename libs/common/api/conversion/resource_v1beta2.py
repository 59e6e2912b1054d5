"""Conversion between resource.k8s.io/v1beta2 and the stored v1.

v1beta2 has v1's shape field for field (upstream's `pkg/apis/resource/v1beta2/` converts
with generated code only, and `staging/src/k8s.io/api/resource/v1beta2/types.go` has the
fields of v1's types), so an object changes only its `apiVersion`, and the v1 types
describe its bodies; its OpenAPI schemas carry v1beta2's names.
"""

from __future__ import annotations

from typing import Any

from drasim.common.api import resource_v1
from drasim.common.version import Version

__all__ = ["GROUP_VERSION", "LIFECYCLE", "TYPES", "from_storage", "to_storage"]

GROUP_VERSION = "resource.k8s.io/v1beta2"
# Deprecated in 1.36 and no longer served from 1.39; DeviceTaintRule, added to v1beta2 in
# 1.36, in 1.39 and 1.42 (upstream's prerelease-lifecycle tags).
LIFECYCLE = {
    **dict.fromkeys(
        ("DeviceClass", "ResourceSlice", "ResourceClaim", "ResourceClaimTemplate"),
        (Version(1, 36), Version(1, 39)),
    ),
    "DeviceTaintRule": (Version(1, 39), Version(1, 42)),
}
# Kinds whose bodies another type describes than the stored one: none, v1's shape is v1beta2's.
TYPES: dict[str, type] = {}


def to_storage(kind: str, obj: dict[str, Any]) -> dict[str, Any]:
    """The v1 form of a v1beta2 object (a new dict)."""
    return dict(obj, apiVersion=resource_v1.GROUP_VERSION)


def from_storage(kind: str, obj: dict[str, Any]) -> dict[str, Any]:
    """The v1beta2 form of a stored v1 object (a new dict)."""
    return dict(obj, apiVersion=GROUP_VERSION)
