"""A CustomResourceDefinition's OpenAPI v3 schema applied to its objects, as upstream's
apiextensions-apiserver does (`pkg/apiserver/schema/pruning/algorithm.go`,
`schema/defaulting/algorithm.go`, and the validation of `kube-openapi`'s validate package
for the basic constraints): unknown fields pruned, defaults filled in, then the object
checked against types, required fields, enums, bounds, lengths and patterns.

Objects are JSON builtins here; schemas the CRD's `openAPIV3Schema` as written.
`metadata`, `apiVersion` and `kind` at the root are the API server's, never pruned.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from drasim.common.errors import (
    FieldError,
    field_invalid,
    field_not_supported,
    field_required,
    field_too_long,
    field_too_many,
)

__all__ = ["apply_defaults", "prune", "validate"]

_ROOT_FIELDS = ("apiVersion", "kind", "metadata")
_PRESERVE = "x-kubernetes-preserve-unknown-fields"
_INT_OR_STRING = "x-kubernetes-int-or-string"


def prune(
    obj: Any,
    schema: dict[str, Any],
    *,
    root: bool = True,
    path: str = "",
    removed: list[str] | None = None,
) -> Any:
    """`obj` with the fields its schema does not name dropped (in place and returned),
    unless the schema preserves unknown fields there; their paths go to `removed`."""
    if isinstance(obj, dict):
        properties = schema.get("properties")
        additional = schema.get("additionalProperties")
        for key in list(obj):
            at = f"{path}.{key}" if path else key
            if root and key in _ROOT_FIELDS:
                continue
            if properties is not None and key in properties:
                prune(obj[key], properties[key], root=False, path=at, removed=removed)
            elif isinstance(additional, dict):
                prune(obj[key], additional, root=False, path=at, removed=removed)
            elif not schema.get(_PRESERVE) and additional is not True:
                del obj[key]
                if removed is not None:
                    removed.append(at)
    elif isinstance(obj, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(obj):
            prune(item, schema["items"], root=False, path=f"{path}[{i}]", removed=removed)
    return obj


def apply_defaults(obj: Any, schema: dict[str, Any]) -> Any:
    """Fill in the `default` of every absent property whose parent object is present (in
    place and returned), depth first as upstream's `Default`."""
    if isinstance(obj, dict):
        for key, prop in (schema.get("properties") or {}).items():
            if key not in obj and "default" in prop:
                obj[key] = copy.deepcopy(prop["default"])
            if key in obj:
                apply_defaults(obj[key], prop)
        additional = schema.get("additionalProperties")
        if isinstance(additional, dict):
            for key, value in obj.items():
                if key not in (schema.get("properties") or {}):
                    apply_defaults(value, additional)
    elif isinstance(obj, list) and isinstance(schema.get("items"), dict):
        for item in obj:
            apply_defaults(item, schema["items"])
    return obj


def _type_of(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "integer" if value.is_integer() else "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _fits(value: Any, wanted: str, schema: dict[str, Any]) -> bool:
    actual = _type_of(value)
    if schema.get(_INT_OR_STRING):
        return actual in ("integer", "string")
    if actual == "null":
        return bool(schema.get("nullable"))
    return actual == wanted or (wanted == "number" and actual == "integer")


def validate(obj: Any, schema: dict[str, Any], path: str = "") -> list[FieldError]:
    """Errors of `obj` against `schema`, with upstream's field paths and messages."""
    errs: list[FieldError] = []
    wanted = schema.get("type")
    at = path or "<root>"
    if wanted and not _fits(obj, wanted, schema):
        actual = _type_of(obj)
        return [field_invalid(at, actual, f'{at} in body must be of type {wanted}: "{actual}"')]
    if "enum" in schema and obj not in schema["enum"]:
        errs.append(field_not_supported(at, obj, [_enum_text(v) for v in schema["enum"]]))
    if isinstance(obj, int | float) and not isinstance(obj, bool):
        errs += _bounds(obj, schema, at)
    if isinstance(obj, str):
        errs += _string(obj, schema, at)
    if isinstance(obj, list):
        if "maxItems" in schema and len(obj) > schema["maxItems"]:
            errs.append(field_too_many(at, len(obj), schema["maxItems"]))
        if "minItems" in schema and len(obj) < schema["minItems"]:
            errs.append(
                field_invalid(
                    at, len(obj), f"{at} in body should have at least {schema['minItems']} items"
                )  # fmt: skip
            )
        items = schema.get("items")
        if isinstance(items, dict):
            for i, item in enumerate(obj):
                errs += validate(item, items, f"{path}[{i}]")
    if isinstance(obj, dict):
        errs += _object(obj, schema, path)
    return errs


def _enum_text(value: Any) -> str:
    return value if isinstance(value, str) else str(value)


def _bounds(value: float, schema: dict[str, Any], at: str) -> list[FieldError]:
    errs = []
    if "minimum" in schema:
        low = schema["minimum"]
        if value < low or (schema.get("exclusiveMinimum") and value == low):
            op = "greater than" if schema.get("exclusiveMinimum") else "greater than or equal to"
            errs.append(field_invalid(at, value, f"{at} in body should be {op} {low}"))
    if "maximum" in schema:
        high = schema["maximum"]
        if value > high or (schema.get("exclusiveMaximum") and value == high):
            op = "less than" if schema.get("exclusiveMaximum") else "less than or equal to"
            errs.append(field_invalid(at, value, f"{at} in body should be {op} {high}"))
    return errs


def _string(value: str, schema: dict[str, Any], at: str) -> list[FieldError]:
    errs = []
    if "maxLength" in schema and len(value) > schema["maxLength"]:
        errs.append(field_too_long(at, schema["maxLength"]))
    if "minLength" in schema and len(value) < schema["minLength"]:
        detail = f"{at} in body should be at least {schema['minLength']} chars long"
        errs.append(field_invalid(at, value, detail))
    pattern = schema.get("pattern")
    if pattern and not re.search(pattern, value):
        errs.append(field_invalid(at, value, f"{at} in body should match '{pattern}'"))
    return errs


def _object(obj: dict[str, Any], schema: dict[str, Any], path: str) -> list[FieldError]:
    errs = []
    prefix = f"{path}." if path else ""
    for name in schema.get("required") or ():
        if name not in obj:
            errs.append(field_required(f"{prefix}{name}"))
    properties = schema.get("properties") or {}
    additional = schema.get("additionalProperties")
    for key, value in obj.items():
        if not path and key in _ROOT_FIELDS:
            continue
        if key in properties:
            errs += validate(value, properties[key], f"{prefix}{key}")
        elif isinstance(additional, dict):
            errs += validate(value, additional, f"{prefix}{key}")
    if "maxProperties" in schema and len(obj) > schema["maxProperties"]:
        errs.append(field_too_many(path or "<root>", len(obj), schema["maxProperties"]))
    return errs
