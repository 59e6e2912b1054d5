"""Built-in node profiles, the default cluster file and the demo manifests (package data).

A cluster file names a built-in profile by its file name without `.yaml` (`gpu-8`);
`drasim.common.cluster_file` decodes and checks them like any other profile file.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["DEFAULT_CLUSTER", "DEMO_MANIFESTS", "builtin_profile", "builtin_profile_names"]

_HERE = Path(__file__).parent

DEFAULT_CLUSTER = _HERE / "kep-example.yaml"
"""The KEP-5004 example cluster: a DRA node with 8 GPUs and a device-plugin node with 2."""

DEMO_MANIFESTS = _HERE / "demo.yaml"
"""The KEP-5004 example DeviceClass and Deployment that `drasim up --demo` applies."""

# Files here that are not node profiles.
_NOT_PROFILES = {DEFAULT_CLUSTER.name, DEMO_MANIFESTS.name}


def builtin_profile_names() -> list[str]:
    return sorted(p.stem for p in _HERE.glob("*.yaml") if p.name not in _NOT_PROFILES)


def builtin_profile(name: str) -> Path | None:
    """The file of the built-in profile `name`, or None if there is no such profile."""
    return _HERE / f"{name}.yaml" if name in builtin_profile_names() else None
