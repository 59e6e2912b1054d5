"""Defaults of CustomResourceDefinitions (upstream `apiextensions-apiserver/pkg/apis/
apiextensions/v1/defaults.go`): the singular and list kind from the kind, no conversion,
and the storage version recorded as stored."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from drasim.common.api import apiextensions_v1

__all__ = ["DEFAULTERS"]


def _default_crd(crd: apiextensions_v1.CustomResourceDefinition) -> None:
    names = crd.spec.names
    names.singular = names.singular or names.kind.lower()
    if not names.list_kind and names.kind:
        names.list_kind = names.kind + "List"
    if crd.spec.conversion is None:
        crd.spec.conversion = {"strategy": "None"}
    if not crd.status.stored_versions:
        version = crd.storage_version()
        crd.status.stored_versions = [version.name] if version is not None else []


DEFAULTERS: dict[type, Callable[[Any], None]] = {
    apiextensions_v1.CustomResourceDefinition: _default_crd,
}
