"""Custom resources: the kinds established CustomResourceDefinitions add to the registry,
as upstream's apiextensions-apiserver serves them (`pkg/apiserver/customresource_handler.go`:
one storage per served version, its schema's pruning, defaulting and validation, the
status subresource, printer columns).

`serve(crd)` builds each kind's type (a struct of its schema's top-level fields, which the
registry, codec and write path treat as any kind's) and registers it; `withdraw(name)` takes
it away. Only the storage version is served: drasim converts nothing. A CRD whose plural or
kind is already served (a built-in, or another CRD's) is not served, and says so in its
NamesAccepted condition.
"""

from __future__ import annotations

import copy
import keyword
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import msgspec

from drasim.common import codec, tables
from drasim.common.api import apiextensions_v1, defaults, registry, structural
from drasim.common.api.meta_v1 import KubeObject

__all__ = [
    "CustomResource",
    "by_plural",
    "conflict",
    "openapi_schema",
    "serve",
    "unknown_fields",
    "withdraw",
]

_ROOT_FIELDS = ("apiVersion", "kind", "metadata")


@dataclass(frozen=True, slots=True)
class CustomResource:
    """One served custom resource: its CRD's name, its kind's registry entry, its version."""

    crd_name: str
    info: registry.ResourceInfo
    schema: dict[str, Any]
    status_subresource: bool
    printer_columns: tuple[apiextensions_v1.CustomResourceColumnDefinition, ...]
    preserve_unknown_fields: bool


_SERVED: dict[str, CustomResource] = {}  # by plural


def by_plural(plural: str) -> CustomResource | None:
    return _SERVED.get(plural)


def _object_type(
    group: str, version: str, kind: str, schema: dict[str, Any], *, status: bool
) -> type:
    """A struct with the schema's top-level fields (and `status` with the subresource),
    each holding any JSON: pruning and validation below the top go by the schema itself."""
    rename = {"api_version": "apiVersion", "kind": "kind", "metadata": "metadata"}
    fields: list[tuple[str, Any, Any]] = []
    top = list(schema.get("properties") or {})
    for name in [*top, *(["status"] if status and "status" not in top else [])]:
        if name in _ROOT_FIELDS:
            continue
        attr = f"f_{len(fields)}" if not name.isidentifier() or keyword.iskeyword(name) else name
        if attr in rename:
            attr = f"f_{len(fields)}"
        rename[attr] = name
        fields.append((attr, Any, None))
    api_version = f"{group}/{version}"
    type_ = msgspec.defstruct(
        kind,
        fields,
        bases=(KubeObject,),
        rename=rename,
        kw_only=True,
        omit_defaults=True,
        module=__name__,
    )
    type_.API_VERSION = api_version
    type_.KIND = kind
    return type_


def conflict(crd: apiextensions_v1.CustomResourceDefinition) -> str:
    """Why the CRD's names cannot be served ("" when they can)."""
    names = crd.spec.names
    for taken in registry.RESOURCES:
        served = _SERVED.get(taken.plural)
        if served is not None and served.crd_name == crd.metadata.name:
            continue
        if taken.plural == names.plural:
            return f'"{names.plural}" is already in use'
        if taken.group == crd.spec.group and taken.kind == names.kind:
            return f'"{names.kind}" is already in use'
    return ""


def serve(crd: apiextensions_v1.CustomResourceDefinition) -> CustomResource | None:
    """Register the CRD's storage version (again, if it changed); None when it is not
    established or its names conflict."""
    version = crd.storage_version()
    if version is None or not crd.established() or conflict(crd):
        withdraw(crd.metadata.name)
        return None
    names = crd.spec.names
    schema = (version.schema.open_api_v3_schema if version.schema else None) or {}
    subresources = version.subresources or apiextensions_v1.CustomResourceSubresources()
    info = registry.ResourceInfo(
        kind=names.kind,
        plural=names.plural,
        singular=names.singular or names.kind.lower(),
        group=crd.spec.group,
        version=version.name,
        namespaced=crd.spec.scope == "Namespaced",
        type=_object_type(
            crd.spec.group,
            version.name,
            names.kind,
            schema,
            status=subresources.status is not None,
        ),
        short_names=tuple(names.short_names),
        subresources=("status",) if subresources.status is not None else (),
        categories=tuple(names.categories),
    )
    served = CustomResource(
        crd_name=crd.metadata.name,
        info=info,
        schema=schema,
        status_subresource=subresources.status is not None,
        printer_columns=tuple(version.additional_printer_columns),
        preserve_unknown_fields=crd.spec.preserve_unknown_fields,
    )
    withdraw(crd.metadata.name)
    _SERVED[names.plural] = served
    if not served.preserve_unknown_fields:
        defaults.register(info.type, lambda obj: _prune_and_default(obj, schema))
    tables.CUSTOM_COLUMNS[names.plural] = _columns(served.printer_columns)
    registry.register(info)
    return served


def withdraw(crd_name: str | None) -> None:
    """Stop serving what the CRD named `crd_name` served (None: every CRD's, as an
    apistore that stops leaves its process)."""
    for plural, served in list(_SERVED.items()):
        if crd_name is None or served.crd_name == crd_name:
            del _SERVED[plural]
            defaults.register(served.info.type, None)
            tables.CUSTOM_COLUMNS.pop(plural, None)
            registry.unregister(plural)


def _prune_and_default(obj: Any, schema: dict[str, Any]) -> None:
    """Upstream's decoding of a custom object: unknown fields dropped, defaults filled in
    (on what a client sends and on what is read back)."""
    data = structural.apply_defaults(structural.prune(codec.to_builtins(obj), schema), schema)
    fresh = codec.convert(data, type(obj))
    for field in obj.__struct_fields__:
        setattr(obj, field, getattr(fresh, field))


def unknown_fields(served: CustomResource, body: Any) -> list[str]:
    """The paths of a body's fields its schema prunes (for `fieldValidation`)."""
    if served.preserve_unknown_fields:
        return []
    removed: list[str] = []
    structural.prune(copy.deepcopy(body), served.schema, removed=removed)
    return sorted(removed)


def openapi_schema(served: CustomResource) -> tuple[str, dict[str, Any]]:
    """The kind's schema as upstream publishes it (named after the reversed group, e.g.
    `com.example.v1.Widget`), without `metadata`, which the caller refers to."""
    info = served.info
    name = ".".join([*reversed(info.group.split(".")), info.version, info.kind])
    schema = copy.deepcopy(served.schema) or {"type": "object"}
    properties = schema.setdefault("properties", {})
    properties["apiVersion"] = {"type": "string"}
    properties["kind"] = {"type": "string"}
    return name, schema


# -- printer columns ----------------------------------------------------------------------

# One step of a printer column's path: `.field`, `[0]` or `[?(@.key=="value")]`.
_STEP = re.compile(
    r"\.([A-Za-z0-9_-]+)|\[(\d+)\]|\[\?\(@\.([A-Za-z0-9_.-]+)==[\"']([^\"']*)[\"']\)\]"
)


def _json_path(data: Any, path: str) -> Any:
    """The value at a printer column's JSONPath (`.spec.size`, `.items[0]`,
    `.status.conditions[?(@.type=="Ready")].status`); None where there is none."""
    path = path.strip()
    if path.startswith("{") and path.endswith("}"):
        path = path[1:-1]
    values = [data]
    for step in _STEP.finditer(path):
        field, index, key, wanted = step.groups()
        found = []
        for value in values:
            if field is not None and isinstance(value, dict) and field in value:
                found.append(value[field])
            elif index is not None and isinstance(value, list) and int(index) < len(value):
                found.append(value[int(index)])
            elif key is not None and isinstance(value, list):
                found += [i for i in value if isinstance(i, dict) and str(i.get(key)) == wanted]
        values = found
    return values[0] if values else None


def _cell(column: apiextensions_v1.CustomResourceColumnDefinition) -> Any:
    def cell(obj: Any, now: datetime) -> str:
        value = _json_path(codec.to_builtins(obj), column.json_path)
        if value is None:
            return ""
        if column.type == "date":
            return tables.since(str(value), now)
        if isinstance(value, bool):
            return str(value).lower()
        if isinstance(value, dict | list):
            return msgspec.json.encode(value).decode()
        return str(value)

    return cell


def _columns(
    defined: tuple[apiextensions_v1.CustomResourceColumnDefinition, ...],
) -> list[tables.Column]:
    """Name, then the CRD's printer columns, or Age when it has none (upstream
    `serveDefaultColumnsIfEmpty`)."""
    if not defined:
        return [tables.NAME, tables.AGE]
    return [
        tables.NAME,
        *(
            tables.Column(
                c.name,
                _cell(c),
                priority=c.priority,
                type=c.type,
                description=c.description,
                format=c.format,
            )
            for c in defined
        ),
    ]
