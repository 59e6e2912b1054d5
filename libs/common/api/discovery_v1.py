"""discovery.k8s.io/v1: EndpointSlice, the addresses behind a Service (upstream
`staging/src/k8s.io/api/discovery/v1/types.go`)."""

from __future__ import annotations

from typing import Any, ClassVar

import msgspec

from drasim.common.api.core_v1 import ObjectReference
from drasim.common.api.meta_v1 import KubeObject, KubeStruct

__all__ = ["ADDRESS_TYPES", "Endpoint", "EndpointConditions", "EndpointPort", "EndpointSlice"]

ADDRESS_TYPES = ["FQDN", "IPv4", "IPv6"]


class EndpointConditions(KubeStruct):
    ready: bool | None = None
    serving: bool | None = None
    terminating: bool | None = None


class Endpoint(KubeStruct):
    addresses: list[str] = []
    conditions: EndpointConditions = msgspec.field(default_factory=EndpointConditions)
    hostname: str | None = None
    target_ref: ObjectReference | None = None
    deprecated_topology: dict[str, str] = {}
    node_name: str | None = None
    zone: str | None = None
    hints: dict[str, Any] | None = None


class EndpointPort(KubeStruct):
    name: str | None = None
    protocol: str | None = None
    port: int | None = None
    app_protocol: str | None = None


class EndpointSlice(KubeObject):
    """EndpointSlice represents a set of service endpoints."""

    API_VERSION: ClassVar[str] = "discovery.k8s.io/v1"
    KIND: ClassVar[str] = "EndpointSlice"

    address_type: str = ""
    endpoints: list[Endpoint] = []
    ports: list[EndpointPort] = []
