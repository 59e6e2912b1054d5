"""resource.k8s.io/v1beta1: the shapes in which v1beta1 differs from v1, and its kinds.

v1beta1 (upstream `staging/src/k8s.io/api/resource/v1beta1/types.go`) has every field of v1
in two other places: a device's fields other than its name sit in `basic` (`BasicDevice`),
and a request's `exactly` fields sit in the request itself. Everything else is v1's
(ResourceSliceSpec's `nodeName` and `allNodes` are values there, not pointers, which JSON
cannot tell apart). `BasicDevice` and `DeviceRequest` are made from v1's `Device` and
`ExactDeviceRequest`, so a field added to those in v1 is in v1beta1 too, as upstream adds
new fields to every served version. These types describe bodies (unknown-field checks,
type errors, OpenAPI); objects are converted by `drasim.common.api.conversion`.
"""

from __future__ import annotations

from typing import Any, ClassVar

import msgspec

from drasim.common.api import resource_v1
from drasim.common.api.meta_v1 import KubeObject, KubeStruct

__all__ = [
    "BASIC_DEVICE_FIELDS",
    "BasicDevice",
    "Device",
    "DeviceClaim",
    "DeviceClass",
    "DeviceRequest",
    "EXACT_REQUEST_FIELDS",
    "GROUP_VERSION",
    "ResourceClaim",
    "ResourceClaimSpec",
    "ResourceClaimTemplate",
    "ResourceClaimTemplateSpec",
    "ResourceSlice",
    "ResourceSliceSpec",
]

GROUP_VERSION = "resource.k8s.io/v1beta1"


def _fields(cls: type[msgspec.Struct], *, without: tuple[str, ...] = ()) -> list[Any]:
    """`cls`'s fields as `msgspec.defstruct` takes them, JSON names and defaults kept."""
    out = []
    for f in msgspec.structs.fields(cls):
        if f.name in without:
            continue
        if f.default is not msgspec.NODEFAULT:
            default = msgspec.field(default=f.default, name=f.encode_name)
        else:
            default = msgspec.field(default_factory=f.default_factory, name=f.encode_name)
        out.append((f.name, f.type, default))
    return out


BasicDevice = msgspec.defstruct(
    "BasicDevice",
    _fields(resource_v1.Device, without=("name",)),
    bases=(KubeStruct,),
    module=__name__,
)
# JSON names of what v1 has in a Device and v1beta1 in its `basic`.
BASIC_DEVICE_FIELDS = frozenset(f.encode_name for f in msgspec.structs.fields(BasicDevice))


class Device(KubeStruct):
    name: str = ""
    basic: BasicDevice | None = None  # type: ignore[valid-type]


# JSON names of what v1 has in `exactly` and v1beta1 in the request itself.
EXACT_REQUEST_FIELDS = frozenset(
    f.encode_name for f in msgspec.structs.fields(resource_v1.ExactDeviceRequest)
)
DeviceRequest = msgspec.defstruct(
    "DeviceRequest",
    [
        *_fields(resource_v1.DeviceRequest, without=("exactly", "first_available")),
        *_fields(resource_v1.ExactDeviceRequest),
        *_fields(resource_v1.DeviceRequest, without=("name", "exactly")),
    ],
    bases=(KubeStruct,),
    module=__name__,
)


class ResourceSliceSpec(resource_v1.ResourceSliceSpec):
    devices: list[Device] = []


class ResourceSlice(KubeObject):
    API_VERSION: ClassVar[str] = GROUP_VERSION
    KIND: ClassVar[str] = "ResourceSlice"

    spec: ResourceSliceSpec = msgspec.field(default_factory=ResourceSliceSpec)


class DeviceClaim(resource_v1.DeviceClaim):
    requests: list[DeviceRequest] = []  # type: ignore[valid-type]


class ResourceClaimSpec(KubeStruct):
    devices: DeviceClaim = msgspec.field(default_factory=DeviceClaim)


class ResourceClaim(KubeObject):
    API_VERSION: ClassVar[str] = GROUP_VERSION
    KIND: ClassVar[str] = "ResourceClaim"

    spec: ResourceClaimSpec = msgspec.field(default_factory=ResourceClaimSpec)
    status: resource_v1.ResourceClaimStatus = msgspec.field(
        default_factory=resource_v1.ResourceClaimStatus
    )


class ResourceClaimTemplateSpec(resource_v1.ResourceClaimTemplateSpec):
    spec: ResourceClaimSpec = msgspec.field(default_factory=ResourceClaimSpec)


class ResourceClaimTemplate(KubeObject):
    API_VERSION: ClassVar[str] = GROUP_VERSION
    KIND: ClassVar[str] = "ResourceClaimTemplate"

    spec: ResourceClaimTemplateSpec = msgspec.field(default_factory=ResourceClaimTemplateSpec)


class DeviceClass(KubeObject):
    API_VERSION: ClassVar[str] = GROUP_VERSION
    KIND: ClassVar[str] = "DeviceClass"

    spec: resource_v1.DeviceClassSpec = msgspec.field(default_factory=resource_v1.DeviceClassSpec)
