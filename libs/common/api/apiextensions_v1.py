"""apiextensions.k8s.io/v1: CustomResourceDefinition (upstream
`staging/src/k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1/types.go`).

A version's `openAPIV3Schema` stays raw JSON: `drasim.common.api.structural` reads it to
prune, default and validate the custom objects, and the OpenAPI documents publish it.
"""

from __future__ import annotations

from typing import Any, ClassVar

import msgspec

from drasim.common.api.meta_v1 import KubeObject, KubeStruct

__all__ = [
    "CustomResourceColumnDefinition",
    "CustomResourceDefinition",
    "CustomResourceDefinitionCondition",
    "CustomResourceDefinitionNames",
    "CustomResourceDefinitionSpec",
    "CustomResourceDefinitionStatus",
    "CustomResourceDefinitionVersion",
    "CustomResourceSubresources",
    "CustomResourceValidation",
]


class CustomResourceDefinitionNames(KubeStruct):
    plural: str = ""
    singular: str = ""
    short_names: list[str] = []
    kind: str = ""
    list_kind: str = ""
    categories: list[str] = []


class CustomResourceValidation(KubeStruct):
    open_api_v3_schema: dict[str, Any] | None = msgspec.field(default=None, name="openAPIV3Schema")


class CustomResourceSubresources(KubeStruct):
    status: dict[str, Any] | None = None
    scale: dict[str, Any] | None = None


class CustomResourceColumnDefinition(KubeStruct):
    name: str = ""
    type: str = ""
    format: str = ""
    description: str = ""
    priority: int = 0
    json_path: str = msgspec.field(default="", name="jsonPath")


class CustomResourceDefinitionVersion(KubeStruct):
    name: str = ""
    served: bool = False
    storage: bool = False
    deprecated: bool = False
    deprecation_warning: str | None = None
    schema: CustomResourceValidation | None = None
    subresources: CustomResourceSubresources | None = None
    additional_printer_columns: list[CustomResourceColumnDefinition] = []
    selectable_fields: list[dict[str, Any]] = []


class CustomResourceDefinitionSpec(KubeStruct):
    group: str = ""
    names: CustomResourceDefinitionNames = msgspec.field(
        default_factory=CustomResourceDefinitionNames
    )
    scope: str = ""
    versions: list[CustomResourceDefinitionVersion] = []
    conversion: dict[str, Any] | None = None
    preserve_unknown_fields: bool = False


class CustomResourceDefinitionCondition(KubeStruct):
    type: str = ""
    status: str = ""
    last_transition_time: str | None = None
    reason: str = ""
    message: str = ""
    observed_generation: int = 0


class CustomResourceDefinitionStatus(KubeStruct):
    conditions: list[CustomResourceDefinitionCondition] = []
    accepted_names: CustomResourceDefinitionNames = msgspec.field(
        default_factory=CustomResourceDefinitionNames
    )
    stored_versions: list[str] = []
    observed_generation: int = 0


class CustomResourceDefinition(KubeObject):
    """CustomResourceDefinition represents a resource that should be exposed on the API
    server.  Its name MUST be in the format <.spec.name>.<.spec.group>."""

    API_VERSION: ClassVar[str] = "apiextensions.k8s.io/v1"
    KIND: ClassVar[str] = "CustomResourceDefinition"

    spec: CustomResourceDefinitionSpec = msgspec.field(default_factory=CustomResourceDefinitionSpec)
    status: CustomResourceDefinitionStatus = msgspec.field(
        default_factory=CustomResourceDefinitionStatus
    )

    def storage_version(self) -> CustomResourceDefinitionVersion | None:
        return next((v for v in self.spec.versions if v.storage), None)

    def established(self) -> bool:
        return any(c.type == "Established" and c.status == "True" for c in self.status.conditions)
