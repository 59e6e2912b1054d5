"""coordination.k8s.io/v1: Lease, used for leader election and node heartbeats."""

from __future__ import annotations

from typing import ClassVar

import msgspec

from drasim.common.api.meta_v1 import KubeObject, KubeStruct

__all__ = ["Lease", "LeaseSpec"]


class LeaseSpec(KubeStruct):
    holder_identity: str | None = None
    lease_duration_seconds: int | None = None
    acquire_time: str | None = None  # MicroTime, RFC 3339 with microseconds
    renew_time: str | None = None
    lease_transitions: int | None = None


class Lease(KubeObject):
    API_VERSION: ClassVar[str] = "coordination.k8s.io/v1"
    KIND: ClassVar[str] = "Lease"

    spec: LeaseSpec = msgspec.field(default_factory=LeaseSpec)
