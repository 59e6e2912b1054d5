"""`as=Table` answers: `drasim.common.tables`' columns as a `meta.k8s.io/v1` Table.

Every column goes out with its priority; kubectl shows priority 0 and, with `-o wide`,
the rest. Each row carries the object's metadata (kubectl reads namespace and name from
it), the whole object, or nothing, as `includeObject` says.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import msgspec

from drasim.common import codec, tables
from drasim.common.api import registry
from drasim.common.api.meta_v1 import ObjectMeta


class TableColumnDefinition(msgspec.Struct, kw_only=True):
    name: str
    type: str
    format: str
    description: str
    priority: int


class PartialObjectMetadata(msgspec.Struct, kw_only=True, rename="camel"):
    metadata: ObjectMeta
    kind: str = "PartialObjectMetadata"
    api_version: str = "meta.k8s.io/v1"


class TableRow(msgspec.Struct, kw_only=True, omit_defaults=True):
    cells: list[Any]
    object: PartialObjectMetadata | msgspec.Raw | None = None


class ListMeta(msgspec.Struct, kw_only=True, omit_defaults=True, rename="camel"):
    resource_version: str = ""
    continue_: str = msgspec.field(default="", name="continue")
    remaining_item_count: int | None = None


class Table(msgspec.Struct, kw_only=True, rename="camel"):
    kind: str = "Table"
    api_version: str = "meta.k8s.io/v1"
    metadata: ListMeta
    column_definitions: list[TableColumnDefinition]
    rows: list[TableRow]


def table(
    info: registry.ResourceInfo,
    items: list[bytes],
    *,
    metadata: ListMeta | None = None,
    include_object: str = "Metadata",
    headers: bool = True,
    served: registry.ServedVersion | None = None,
) -> bytes:
    """The Table for these objects (JSON, as stored) of one resource; `headers=False` leaves
    out the column definitions, as watches do after their first event. Whole objects in
    rows are in the version `served` names (default: the stored one)."""
    columns = tables.columns_for(info.plural, wide=True)
    now = datetime.now(UTC)
    rows = []
    for data in items:
        obj = codec.decode(data, info.type)
        cells = [_cell(column, column.cell(obj, now)) for column in columns]
        row_object: PartialObjectMetadata | msgspec.Raw | None = None
        if include_object == "Metadata":
            row_object = PartialObjectMetadata(metadata=obj.metadata)
        elif include_object == "Object":
            row_object = msgspec.Raw(served.from_storage(data) if served else data)
        rows.append(TableRow(cells=cells, object=row_object))
    definitions = [
        TableColumnDefinition(
            name=column.name,
            type=column.type,
            format=column.format,
            description=column.description,
            priority=column.priority,
        )
        for column in columns
    ]
    return codec.encode(
        Table(
            metadata=metadata or ListMeta(),
            column_definitions=definitions if headers else [],
            rows=rows,
        )
    )


def _cell(column: tables.Column, text: str) -> Any:
    """Integer and boolean columns carry numbers and booleans, as Kubernetes' printers
    write them."""
    if column.type == "integer" and text.lstrip("-").isdigit():
        return int(text)
    if column.type == "boolean" and text in ("true", "false"):
        return text == "true"
    return text
