"""`fieldValidation`: fields a body names that the kind's type does not have.

The API types drop unknown fields when they decode (as Kubernetes prunes them), so the
check walks the body's builtins against the type's shape before the core sees it: Strict
refuses the request naming every such field, Warn lets it through with a `Warning` header
per field, Ignore does neither.
"""

from __future__ import annotations

import functools
from typing import Any

import msgspec.inspect as mi

from drasim.apistore.http import options
from drasim.common import errors
from drasim.common.api import customresources


def check(target: options.Target, body: Any, mode: str, *, patch: bool = False) -> list[str]:
    """The warnings to send (Warn); raises BadRequest naming the fields (Strict). Fields
    are those of the version the request's path names."""
    if mode == "Ignore":
        return []
    info = target.info
    custom = customresources.by_plural(info.plural)
    if custom is not None and custom.info is info and isinstance(body, dict):
        found = customresources.unknown_fields(custom, body)
    else:
        found = unknown_fields(target.served.type if target.served else info.type, body)
    if not found:
        return []
    warnings = [f'unknown field "{path}"' for path in found]
    if mode == "Strict":
        detail = f"strict decoding error: {', '.join(warnings)}"
        if not patch:
            detail = (
                f'{info.kind} in version "{target.version}" cannot be handled as a {info.kind}: '
                + detail
            )
        raise errors.BadRequest(detail)
    return warnings


def unknown_fields(type_: type, body: Any) -> list[str]:
    """Paths (`spec.template.spec.foo`, `spec.containers[0].bar`) the type has no field for.

    Keys starting with `$` are patch directives, not fields, and are skipped.
    """
    found: list[str] = []
    _walk(_type_info(type_), body, "", found)
    return found


@functools.cache
def _type_info(type_: type) -> mi.Type:
    return mi.type_info(type_)


def _walk(shape: mi.Type, value: Any, path: str, found: list[str]) -> None:
    if isinstance(shape, mi.UnionType):
        for member in shape.types:
            if _fits(member, value):
                _walk(member, value, path, found)
                return
    elif isinstance(shape, mi.StructType) and isinstance(value, dict):
        fields = {f.encode_name: f for f in shape.fields}
        for key, item in value.items():
            if key.startswith("$"):
                continue
            where = f"{path}.{key}" if path else key
            field = fields.get(key)
            if field is None:
                found.append(where)
            elif item is not None:
                _walk(field.type, item, where, found)
    elif isinstance(shape, mi.ListType) and isinstance(value, list):
        for index, item in enumerate(value):
            _walk(shape.item_type, item, f"{path}[{index}]", found)
    elif isinstance(shape, mi.DictType) and isinstance(value, dict):
        for key, item in value.items():
            _walk(shape.value_type, item, f"{path}.{key}", found)


def _fits(shape: mi.Type, value: Any) -> bool:
    if isinstance(value, dict):
        return isinstance(shape, mi.StructType | mi.DictType)
    if isinstance(value, list):
        return isinstance(shape, mi.ListType)
    return False
