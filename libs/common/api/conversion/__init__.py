"""Conversion of objects between a served version and the stored one, a module per version.

Each module (`resource_v1beta1`, `resource_v1beta2`) follows `Conversion`: its
`GROUP_VERSION`, the releases that deprecate and remove it, the types describing bodies
whose shape differs from the stored kind's (`TYPES`), and `to_storage` / `from_storage`
on objects as builtins. The registry names, per kind, the modules of the versions it is
also served in (`drasim.common.api.registry.ServedVersion`).
"""

from __future__ import annotations

from typing import Any, Protocol

__all__ = ["Conversion"]


class Conversion(Protocol):
    GROUP_VERSION: str
    DEPRECATED: tuple[int, int]
    REMOVED: tuple[int, int]
    TYPES: dict[str, type]

    def to_storage(self, kind: str, obj: dict[str, Any]) -> dict[str, Any]: ...

    def from_storage(self, kind: str, obj: dict[str, Any]) -> dict[str, Any]: ...
