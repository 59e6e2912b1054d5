"""Conversion of objects between a served version and the stored one, a module per version.

Each module (`resource_v1beta1`, `resource_v1beta2`) follows `Conversion`: its
`GROUP_VERSION`, the releases that deprecate and remove its kinds (`LIFECYCLE`, upstream's
prerelease-lifecycle tags: by kind, as a kind added later to a version lives longer in it),
the types describing bodies whose shape differs from the stored kind's (`TYPES`), and
`to_storage` / `from_storage` on objects as builtins. The registry names, per kind, the
modules of the versions it is also served in (`drasim.common.api.registry.ServedVersion`).
"""

from __future__ import annotations

from typing import Any, Protocol

from drasim.common.version import Version

__all__ = ["Conversion"]


class Conversion(Protocol):
    GROUP_VERSION: str
    # kind -> (the release deprecating it in this version, the release no longer serving it)
    LIFECYCLE: dict[str, tuple[Version, Version]]
    TYPES: dict[str, type]

    def to_storage(self, kind: str, obj: dict[str, Any]) -> dict[str, Any]: ...

    def from_storage(self, kind: str, obj: dict[str, Any]) -> dict[str, Any]: ...
