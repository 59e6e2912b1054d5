"""Writing a status through the status subresource as one merge patch.

A merge patch leaves out what it does not name, and our structs leave zero values off the
wire, so a patch built from `codec.to_builtins` could never lower a count to 0. The patch
here names every field of the status, zeros and empty lists included.
"""

from __future__ import annotations

from typing import Any

from drasim.common import codec
from drasim.common.api.meta_v1 import KubeStruct


def merge_patch(status: KubeStruct) -> dict[str, Any]:
    """`{"status": {...}}` with every field of `status` (a `None` pointer deletes it)."""
    return {
        "status": {
            wire: codec.to_builtins(getattr(status, name))
            for name, wire in codec.field_names(type(status))
        }
    }
