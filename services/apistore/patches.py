"""Patch formats the apistore accepts, applied to the builtin (dict) form of an object.

- `merge`: RFC 7386 JSON merge patch.
- `json`: RFC 6902 JSON patch (add, remove, replace, move, copy, test).
- `strategic`: Kubernetes' strategic merge patch, as kubectl sends it: lists named in
  `MERGE_KEYS` merge element by element, `finalizers` merge as a set, every other list is
  replaced whole; `$patch`, `$retainKeys`, `$setElementOrder/<list>` and
  `$deleteFromPrimitiveList/<list>` directives are honoured.
- `apply`: server-side apply (`kubectl apply --server-side`). Without field ownership
  (managedFields), the applied configuration is merged like a strategic merge patch: what
  it names is set, what it leaves out is kept.
"""

from __future__ import annotations

import copy
from typing import Any

import msgspec

from drasim.common import errors

# Upstream's bounds on a JSON patch (k8s.io/apiserver endpoints/handlers/patch.go and the
# server config's JSONPatchMaxCopyBytes): without them 25 `copy` operations of a map into
# itself make a document of 2^25 times its size from a 2 KB request.
MAX_JSON_PATCH_OPERATIONS = 10000
JSON_PATCH_MAX_COPY_BYTES = 3 * 1024 * 1024

# Lists merged element by element under strategic merge patch and server-side apply, keyed
# by field name (the Go types tag these with `patchMergeKey`). Field names do not collide
# across the kinds drasim serves, so the name alone picks the key.
MERGE_KEYS: dict[str, str] = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "env": "name",
    "ports": "containerPort",
    "volumeMounts": "mountPath",
    "volumes": "name",
    "imagePullSecrets": "name",
    "conditions": "type",
    "addresses": "type",
    "podIPs": "ip",
    "hostIPs": "ip",
    "ownerReferences": "uid",
    "resourceClaims": "name",
    "resourceClaimStatuses": "name",
}
# Lists whose merge key is the kind's: a Service's (and an EndpointSlice's) `ports` merge
# by `port`, a container's by `containerPort`. Each element carries its key, so the key an
# element holds picks it; the schema names the owner (`OWNER_MERGE_KEYS`).
_PORT_KEYS = ("containerPort", "port")
OWNER_MERGE_KEYS: dict[tuple[str, str], tuple[str, ...]] = {
    ("ServiceSpec", "ports"): ("port", "protocol"),
}
# Lists of scalars that merge as sets (`patchStrategy:"merge"` on a `[]string`).
MERGE_SETS = frozenset({"finalizers"})

_PATCH = "$patch"
_RETAIN_KEYS = "$retainKeys"
_SET_ELEMENT_ORDER = "$setElementOrder/"
_DELETE_FROM_PRIMITIVE_LIST = "$deleteFromPrimitiveList/"


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch: objects merge recursively, null deletes, the rest replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def apply(patch_type: str, target: dict[str, Any], patch: Any) -> dict[str, Any]:
    """Apply a patch of the given type (merge, json, strategic, apply) to an object."""
    if patch_type == "json":
        if not isinstance(patch, list):
            raise errors.BadRequest("a JSON patch must be a JSON array of operations")
        if len(patch) > MAX_JSON_PATCH_OPERATIONS:
            raise errors.RequestEntityTooLarge(
                "Request entity too large: The allowed maximum operations in a JSON patch is "
                f"{MAX_JSON_PATCH_OPERATIONS}, got {len(patch)}"
            )
        result = json_patch(target, patch)
        if not isinstance(result, dict):
            raise errors.Invalid("the JSON patch must leave an object")
        return result
    if not isinstance(patch, dict):
        raise errors.BadRequest(f"a {patch_type} patch must be a JSON object")
    if patch_type == "merge":
        return merge_patch(target, patch)
    if patch_type in ("strategic", "apply"):
        return strategic_merge_patch(target, patch)
    raise errors.BadRequest(f"unsupported patch type {patch_type!r}")


# -- RFC 6902 ---------------------------------------------------------------------------


def json_patch(target: Any, operations: list[Any]) -> Any:
    """RFC 6902: the operations in order, all or nothing; a failed `test` is 422.

    `copy` operations may add at most JSON_PATCH_MAX_COPY_BYTES of JSON between them, as
    evanphx/json-patch counts them (the copied value's encoded size); past that the patch
    is refused with upstream's 422.
    """
    doc = _deep_copy(target)
    copied = 0
    for index, op in enumerate(operations):
        if not isinstance(op, dict) or not isinstance(op.get("path"), str):
            raise errors.BadRequest(f"JSON patch operation {index} has no path")
        name = op.get("op")
        path = _pointer(op["path"])
        if name == "add":
            doc = _add(doc, path, _deep_copy(_value(op, index)))
        elif name == "remove":
            doc = _remove(doc, path)
        elif name == "replace":
            _get(doc, path)  # the target must exist
            value = _deep_copy(_value(op, index))
            doc = _add(_remove(doc, path), path, value) if path else value
        elif name == "move":
            source = _pointer(_from(op, index))
            value = _get(doc, source)
            doc = _add(_remove(doc, source), path, value)
        elif name == "copy":
            encoded = msgspec.json.encode(_get(doc, _pointer(_from(op, index))))
            copied += len(encoded)
            if copied > JSON_PATCH_MAX_COPY_BYTES:
                raise _copy_too_large(copied)
            doc = _add(doc, path, msgspec.json.decode(encoded))
        elif name == "test":
            if _get(doc, path) != _value(op, index):
                raise errors.Invalid(f"testing value {op['path']} failed: the value differs")
        else:
            raise errors.BadRequest(f"unexpected JSON patch operation {name!r}")
    return doc


def _deep_copy(doc: Any) -> Any:
    """A copy of JSON builtins, through msgspec: many times faster than copy.deepcopy."""
    return msgspec.json.decode(msgspec.json.encode(doc))


def _copy_too_large(copied: int) -> errors.Invalid:
    # Upstream answers any failed JSON patch with this generic 422 (NewGenericServerResponse);
    # evanphx/json-patch's own error goes into the one cause.
    detail = (
        "Unable to complete the copy, the accumulated size increase of copy is "
        f"{copied}, exceeding the limit {JSON_PATCH_MAX_COPY_BYTES}"
    )
    return errors.Invalid(
        "the server rejected our request due to an error in our request",
        causes=[errors.StatusCause(message=detail)],
    )


def _value(op: dict[str, Any], index: int) -> Any:
    if "value" not in op:
        raise errors.BadRequest(f"JSON patch operation {index} ({op['op']}) has no value")
    return op["value"]


def _from(op: dict[str, Any], index: int) -> str:
    source = op.get("from")
    if not isinstance(source, str):
        raise errors.BadRequest(f"JSON patch operation {index} ({op['op']}) has no from")
    return source


def _pointer(text: str) -> list[str]:
    """RFC 6901: `/a/b~1c/~0d` → ["a", "b/c", "~d"]."""
    if text == "":
        return []
    if not text.startswith("/"):
        raise errors.BadRequest(f"JSON pointer {text!r} does not start with '/'")
    return [part.replace("~1", "/").replace("~0", "~") for part in text[1:].split("/")]


def _index(container: list[Any], token: str, *, allow_end: bool) -> int:
    if allow_end and token == "-":
        return len(container)
    if not token.isdigit() or (len(token) > 1 and token.startswith("0")):
        raise errors.Invalid(f"invalid array index {token!r}")
    index = int(token)
    if index > len(container) or (index == len(container) and not allow_end):
        raise errors.Invalid(f"array index {index} is out of range")
    return index


def _get(doc: Any, path: list[str]) -> Any:
    for token in path:
        if isinstance(doc, dict):
            if token not in doc:
                raise errors.Invalid(f"path /{'/'.join(path)} does not exist")
            doc = doc[token]
        elif isinstance(doc, list):
            doc = doc[_index(doc, token, allow_end=False)]
        else:
            raise errors.Invalid(f"path /{'/'.join(path)} does not exist")
    return doc


def _add(doc: Any, path: list[str], value: Any) -> Any:
    if not path:
        return value
    parent = _get(doc, path[:-1])
    token = path[-1]
    if isinstance(parent, dict):
        parent[token] = value
    elif isinstance(parent, list):
        parent.insert(_index(parent, token, allow_end=True), value)
    else:
        raise errors.Invalid(f"cannot add at /{'/'.join(path)}: the parent is not a container")
    return doc


def _remove(doc: Any, path: list[str]) -> Any:
    if not path:
        raise errors.Invalid("cannot remove the whole document")
    parent = _get(doc, path[:-1])
    token = path[-1]
    if isinstance(parent, dict):
        if token not in parent:
            raise errors.Invalid(f"path /{'/'.join(path)} does not exist")
        del parent[token]
    elif isinstance(parent, list):
        del parent[_index(parent, token, allow_end=False)]
    else:
        raise errors.Invalid(f"path /{'/'.join(path)} does not exist")
    return doc


# -- strategic merge patch --------------------------------------------------------------


class _Delete:
    """A map patched with `$patch: delete`: its field goes away."""


_DELETED = _Delete()


def strategic_merge_patch(target: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """Kubernetes' strategic merge patch of one object (see the module docstring)."""
    result = _merge_map(target, patch)
    if isinstance(result, _Delete):
        raise errors.BadRequest("a patch may not delete the whole object")
    return result


def _merge_map(target: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any] | _Delete:
    directive = patch.get(_PATCH)
    if directive == "delete":
        return _DELETED
    if directive == "replace":
        return _strip(patch)
    if directive not in (None, "merge"):
        raise errors.BadRequest(f"unknown patch directive {directive!r}")
    result = dict(target)
    retain = patch.get(_RETAIN_KEYS)
    if retain is not None:
        if not isinstance(retain, list):
            raise errors.BadRequest("$retainKeys must be a list of field names")
        result = {k: v for k, v in result.items() if k in retain}
    for key, value in patch.items():
        if key.startswith(_DELETE_FROM_PRIMITIVE_LIST):
            field = key[len(_DELETE_FROM_PRIMITIVE_LIST) :]
            result[field] = [v for v in result.get(field) or [] if v not in (value or [])]
    for key, value in patch.items():
        if key in (_PATCH, _RETAIN_KEYS) or key.startswith(_DELETE_FROM_PRIMITIVE_LIST):
            continue
        if key.startswith(_SET_ELEMENT_ORDER):
            field = key[len(_SET_ELEMENT_ORDER) :]
            if field not in patch and isinstance(result.get(field), list):
                result[field] = _ordered(field, result[field], value)
            continue
        if value is None:
            result.pop(key, None)
            continue
        current = result.get(key)
        if isinstance(value, dict):
            merged = _merge_map(current if isinstance(current, dict) else {}, value)
            if isinstance(merged, _Delete):
                result.pop(key, None)
            else:
                result[key] = merged
        elif isinstance(value, list):
            order = patch.get(_SET_ELEMENT_ORDER + key)
            merged_list = _merge_list(key, current if isinstance(current, list) else [], value)
            result[key] = merged_list if order is None else _ordered(key, merged_list, order)
        else:
            result[key] = value
    return result


def merge_key(field: str, items: list[Any]) -> str | None:
    """The key elements of the list `field` merge by (None: replaced whole)."""
    if field == "ports":
        for item in items:
            if isinstance(item, dict):
                return next((k for k in _PORT_KEYS if k in item), MERGE_KEYS[field])
    return MERGE_KEYS.get(field)


def _merge_list(field: str, target: list[Any], patch: list[Any]) -> list[Any]:
    key = merge_key(field, [*patch, *target])
    if field in MERGE_SETS:
        return [*target, *(v for v in patch if v not in target)]
    replace = [i for i in patch if isinstance(i, dict) and i.get(_PATCH) == "replace"]
    if key is None or replace:
        # Atomic lists are replaced; so is a merged list whose patch says `$patch: replace`.
        return [_strip(i) if isinstance(i, dict) else i for i in patch if i not in replace]
    result = list(target)
    for item in patch:
        if not isinstance(item, dict) or key not in item:
            raise errors.BadRequest(
                f"map: {item} does not contain declared merge key: {key} (field {field})"
            )
        found = next((n for n, cur in enumerate(result) if cur.get(key) == item[key]), None)
        merged = _merge_map(result[found] if found is not None else {}, item)
        if found is None:
            if not isinstance(merged, _Delete):
                result.append(merged)
        elif isinstance(merged, _Delete):
            del result[found]
        else:
            result[found] = merged
    return result


def _ordered(field: str, items: list[Any], order: list[Any]) -> list[Any]:
    """`$setElementOrder`: the named elements in the given order, then the rest as they were."""
    key = merge_key(field, [*order, *items])

    def key_of(item: Any) -> Any:
        return item.get(key) if key and isinstance(item, dict) else item

    rank = {key_of(o): n for n, o in enumerate(order)}
    named = sorted((i for i in items if key_of(i) in rank), key=lambda i: rank[key_of(i)])
    return named + [i for i in items if key_of(i) not in rank]


def _strip(patch: dict[str, Any]) -> dict[str, Any]:
    """A patch fragment taken whole: its directives dropped, nested ones too."""
    out: dict[str, Any] = {}
    for key, value in patch.items():
        if key.startswith("$"):
            continue
        if isinstance(value, dict):
            out[key] = _strip(value)
        elif isinstance(value, list):
            out[key] = [_strip(v) if isinstance(v, dict) else v for v in value]
        else:
            out[key] = value
    return out
