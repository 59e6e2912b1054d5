"""Patch formats the apistore accepts, applied to the builtin (dict) form of an object."""

from __future__ import annotations

import copy
from typing import Any

from drasim.common import errors


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
    """Apply a patch of the given type ("merge", ...) to an object's builtin form."""
    if patch_type == "merge":
        if not isinstance(patch, dict):
            raise errors.BadRequest("a merge patch must be a JSON object")
        return merge_patch(target, patch)
    raise errors.BadRequest(f"unsupported patch type {patch_type!r}")
