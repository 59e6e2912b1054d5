"""networking.k8s.io/v1: IPAddress, one per allocated Service cluster IP (upstream
`staging/src/k8s.io/api/networking/v1/types.go`; the allocator in
`pkg/registry/core/service/ipallocator/ipallocator.go` makes and removes them)."""

from __future__ import annotations

from typing import ClassVar

import msgspec

from drasim.common.api.meta_v1 import KubeObject, KubeStruct

__all__ = ["IPAddress", "IPAddressSpec", "ParentReference"]


class ParentReference(KubeStruct):
    group: str = ""
    resource: str = ""
    namespace: str = ""
    name: str = ""


class IPAddressSpec(KubeStruct):
    parent_ref: ParentReference | None = None


class IPAddress(KubeObject):
    """IPAddress represents a single IP of a single IP Family."""

    API_VERSION: ClassVar[str] = "networking.k8s.io/v1"
    KIND: ClassVar[str] = "IPAddress"

    spec: IPAddressSpec = msgspec.field(default_factory=IPAddressSpec)
