"""meta/v1: the base of every API type, object metadata and shared small types.

Field conventions for all API modules, following the Go types:
- a Go pointer (`*string`, `*int64`, `*Struct`) is `X | None = None`;
- a Go value struct (`ObjectMeta`, `PodSpec`) defaults to an empty instance and, as in Go,
  is written even when empty (`status: {}`);
- other scalars default to their zero value and lists/maps to empty, and are then left off
  the wire (`omitempty`);
- timestamps are RFC 3339 strings, optional because Kubernetes writes `null` for a zero time.
"""

from __future__ import annotations

from typing import Any, ClassVar

import msgspec

__all__ = [
    "Condition",
    "KubeObject",
    "KubeStruct",
    "LabelSelector",
    "LabelSelectorRequirement",
    "ObjectMeta",
    "OwnerReference",
    "TOTAL_ANNOTATION_SIZE_LIMIT",
]

# The most one object's annotations may hold, keys and values together (upstream's
# `TotalAnnotationSizeLimitB`).
TOTAL_ANNOTATION_SIZE_LIMIT = 256 * 1024


class KubeStruct(msgspec.Struct, kw_only=True, omit_defaults=True, rename="camel", gc=False):
    """Kubernetes JSON names on the wire; defaults stay off it.

    Not tracked by Python's cycle collector (`gc=False`): API objects are trees, never
    cycles, and the services hold many thousands of them, whose scans would make every full
    collection slow.
    """


class OwnerReference(KubeStruct):
    api_version: str = ""
    kind: str = ""
    name: str = ""
    uid: str = ""
    controller: bool | None = None
    block_owner_deletion: bool | None = None


class ObjectMeta(KubeStruct):
    name: str = ""
    generate_name: str = ""
    namespace: str = ""
    uid: str = ""
    resource_version: str = ""
    generation: int = 0
    creation_timestamp: str | None = None
    deletion_timestamp: str | None = None
    deletion_grace_period_seconds: int | None = None
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    owner_references: list[OwnerReference] = []
    finalizers: list[str] = []
    managed_fields: list[dict[str, Any]] = []

    def controller_ref(self) -> OwnerReference | None:
        """The owner reference with `controller: true`, if any (`metav1.GetControllerOf`)."""
        return next((ref for ref in self.owner_references if ref.controller), None)


class KubeObject(KubeStruct):
    """A top-level kind: `apiVersion`, `kind` and `metadata`.

    Subclasses set `API_VERSION` and `KIND`; they fill `apiVersion`/`kind` when absent, so
    the fields are always written, as every Kubernetes object carries them.
    """

    API_VERSION: ClassVar[str]
    KIND: ClassVar[str]

    api_version: str = ""
    kind: str = ""
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)

    def __post_init__(self) -> None:
        if not self.api_version:
            self.api_version = self.API_VERSION
        if not self.kind:
            self.kind = self.KIND


class Condition(KubeStruct):
    """`metav1.Condition`, used by newer APIs (ResourceClaim device status)."""

    type: str = ""
    status: str = ""
    observed_generation: int = 0
    last_transition_time: str | None = None
    reason: str = ""
    message: str = ""


class LabelSelectorRequirement(KubeStruct):
    key: str = ""
    operator: str = ""  # In, NotIn, Exists, DoesNotExist
    values: list[str] = []


class LabelSelector(KubeStruct):
    match_labels: dict[str, str] = {}
    match_expressions: list[LabelSelectorRequirement] = []
