"""The one Kubernetes version drasim is, and the release it emulates.

drasim follows Kubernetes 1.37, so every component says so from here: the apistore's
`/version` and OpenAPI `info.version`, and each emulated node's
`status.nodeInfo.kubeletVersion` (upstream `component-base/version`).

Upstream splits a component's version in three (`component-base/compatibility`): the
binary version (what was built, 1.37 here), the emulation version (`--emulated-version`,
which makes the API and the feature gates' defaults behave as that earlier release did,
allowed back to three minors before the binary's, and never before 1.31) and the minimum
compatibility version (the emulation version minus one, no lower than that floor).
`drasim up --kubernetes-version` is the emulation version: `/version` keeps `major` and
`minor` of the binary and says what it emulates in `emulationMajor` and `emulationMinor`, as
kube-apiserver's does.
"""

from __future__ import annotations

import platform
import re
import sys
from dataclasses import dataclass
from typing import Any

__all__ = [
    "BINARY",
    "EMULATION_FLOOR",
    "GIT_VERSION",
    "EffectiveVersion",
    "Version",
    "VersionError",
    "effective_version",
]

_MAJOR_MINOR = re.compile(r"v?(\d+)\.(\d+)")
# Upstream's `minimumKubeEmulationVersion`: emulation began in 1.31.
_FIRST_EMULATED = (1, 31)


class VersionError(ValueError):
    """A version a flag gives is not one drasim can be; the message is upstream's."""


@dataclass(frozen=True, order=True, slots=True)
class Version:
    """A Kubernetes release, major.minor (emulation ignores patch releases)."""

    major: int
    minor: int

    @classmethod
    def parse(cls, text: str) -> Version:
        """`1.35` (or `v1.35`); a patch part is refused, as upstream's version flags do."""
        found = _MAJOR_MINOR.fullmatch(text.strip())
        if found is None:
            if re.fullmatch(r"v?\d+\.\d+\.\d+", text.strip()):
                raise VersionError(f"patch version not allowed, got: kube={text.strip()}")
            raise VersionError(f'could not parse "{text}" as version')
        return cls(int(found[1]), int(found[2]))

    def subtract_minor(self, minors: int) -> Version:
        return Version(self.major, max(self.minor - minors, 0))

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"


BINARY = Version(1, 37)
GIT_VERSION = f"v{BINARY}.0-drasim"
# Upstream's `kubeEffectiveVersionFloors`: the binary's minor minus three, not before 1.31.
EMULATION_FLOOR = max(BINARY.subtract_minor(3), Version(*_FIRST_EMULATED))

_ARCHITECTURES = {"x86_64": "amd64", "aarch64": "arm64", "arm64": "arm64"}


@dataclass(frozen=True, slots=True)
class EffectiveVersion:
    """What a component is (`binary`) and behaves as (`emulation`)."""

    binary: Version = BINARY
    emulation: Version = BINARY

    @property
    def min_compatibility(self) -> Version:
        """Upstream `SetEmulationVersion`: one minor before the emulation version."""
        return max(self.emulation.subtract_minor(1), EMULATION_FLOOR)

    def info(self) -> dict[str, Any]:
        """The `/version` document (`version.Info`), in upstream's field order."""
        machine = platform.machine().lower()
        return {
            "major": str(self.binary.major),
            "minor": str(self.binary.minor),
            "emulationMajor": str(self.emulation.major),
            "emulationMinor": str(self.emulation.minor),
            "minCompatibilityMajor": str(self.min_compatibility.major),
            "minCompatibilityMinor": str(self.min_compatibility.minor),
            "gitVersion": GIT_VERSION,
            "gitCommit": "",
            "gitTreeState": "clean",
            "buildDate": "",
            "goVersion": "",
            "compiler": "drasim",
            "platform": f"{sys.platform}/{_ARCHITECTURES.get(machine, machine)}",
        }


def effective_version(emulated: str | None = None) -> EffectiveVersion:
    """The binary version emulating `emulated` (`1.35`, or `kube=1.35` as upstream's flag
    takes it; None: itself); VersionError with upstream's message for a release outside
    [EMULATION_FLOOR, BINARY]."""
    if emulated is None:
        return EffectiveVersion()
    emulation = Version.parse(emulated.strip().removeprefix("kube="))
    effective = EffectiveVersion(emulation=emulation)
    # Upstream `effectiveVersion.Validate`, its errors aggregated.
    errors = []
    if not EMULATION_FLOOR <= emulation <= BINARY:
        errors.append(
            f"emulation version {emulation} is not between [{EMULATION_FLOOR}, {BINARY}.0]"
        )
    if effective.min_compatibility > emulation:
        errors.append(
            f"minCompatibilityVersion version {effective.min_compatibility} is not between "
            f"[{EMULATION_FLOOR}, {emulation}]"
        )
    if errors:
        raise VersionError(errors[0] if len(errors) == 1 else f"[{', '.join(errors)}]")
    return effective
