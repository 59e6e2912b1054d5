"""`--runtime-config`: which API versions the apistore serves, in kube-apiserver's syntax.

Upstream serves a beta API only when asked (every beta API since 1.24 is off by default),
with `--runtime-config=resource.k8s.io/v1beta1=true,resource.k8s.io/v1beta2=true`. drasim
serves its stored versions always and the versions the registry lists beside them
(`ResourceInfo.versions`) as this flag says. Keys are read as upstream's
`MergeAPIResourceConfigs` (k8s.io/apiserver/pkg/server/resourceconfig/helpers.go) reads
them: `api/all`, `api/ga`, `api/beta`, `api/alpha` first (`true` or `false`), then
`<group>/<version>` and `<group>/<version>/<resource>` (`true` when no value is given); a
group nobody serves is ignored, a version the group does not have is an error with
upstream's words. drasim's services read the stored versions, so turning one of them off is
refused.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
from dataclasses import dataclass, field

from drasim.common.api import registry
from drasim.common.version import BINARY, Version

__all__ = ["RuntimeConfig", "RuntimeConfigError", "add_flag", "parse"]

_TRUE = ("1", "t", "T", "TRUE", "true", "True")  # Go's strconv.ParseBool
_FALSE = ("0", "f", "F", "FALSE", "false", "False")
_MATCHERS = {
    "api/all": lambda version: True,
    "api/ga": lambda version: re.fullmatch(r"v[0-9]+", version) is not None,
    "api/beta": lambda version: re.fullmatch(r"v[0-9]+beta[0-9]+", version) is not None,
    "api/alpha": lambda version: re.fullmatch(r"v[0-9]+alpha[0-9]+", version) is not None,
}


# Resources a version gained after the oldest release drasim emulates (upstream's
# `k8s:prerelease-lifecycle-gen:introduced`, k8s.io/api's
# `zz_generated.prerelease-lifecycle.go`): a server emulating an older release does not
# serve them there, whatever the flag and the feature gates say.
INTRODUCED: dict[tuple[str, str, str], Version] = {
    ("resource.k8s.io", "v1", "devicetaintrules"): Version(1, 37),
    ("resource.k8s.io", "v1beta2", "devicetaintrules"): Version(1, 36),
}


class RuntimeConfigError(ValueError):
    """The flag cannot be honoured; the message is upstream's where upstream refuses it."""


@dataclass(frozen=True, eq=False)
class RuntimeConfig:
    """The versions served besides the stored ones, and resources turned on or off there.
    Compared and hashed as itself: what is built from one (discovery, OpenAPI) is cached
    per configuration."""

    versions: frozenset[tuple[str, str]] = frozenset()
    resources: dict[tuple[str, str, str], bool] = field(default_factory=dict)
    flag: str = ""  # what it was parsed from, passed on to the apistore process
    emulated: Version = BINARY  # the release the server emulates (`INTRODUCED`)

    def serves(self, group: str, version: str, plural: str) -> bool:
        """Whether `/apis/<group>/<version>/<plural>` is served (the stored version always,
        unless the release emulated predates it)."""
        introduced = INTRODUCED.get((group, version, plural))
        if introduced is not None and self.emulated < introduced:
            return False
        info = registry.by_plural(plural)
        if (info.group, info.version) == (group, version):
            return True
        if info.group != group or info.served(version) is None:
            return False
        return self.resources.get((group, version, plural), (group, version) in self.versions)

    def emulating(self, release: Version) -> RuntimeConfig:
        """The same configuration on a server that emulates `release`."""
        return dataclasses.replace(self, emulated=release)

    def served_versions(self, info: registry.ResourceInfo) -> list[registry.ServedVersion]:
        """The versions besides the stored one that `info` is served in."""
        return [v for v in info.versions if self.serves(info.group, v.version, info.plural)]


DEFAULT = RuntimeConfig()


def add_flag(parser: argparse.ArgumentParser) -> None:
    """`--runtime-config`, as the apistore and `drasim up` take it (`args.runtime_config`)."""
    parser.add_argument(
        "--runtime-config",
        default="",
        metavar="KEY=VALUE,...",
        help="API versions to serve besides the stored ones, as kube-apiserver's flag, e.g. "
        "resource.k8s.io/v1beta1=true,resource.k8s.io/v1beta2=true (default: none)",
    )


def _optional_versions() -> dict[str, set[str]]:
    """Every group and the versions of its kinds that can be turned on."""
    groups: dict[str, set[str]] = {}
    for info in registry.RESOURCES:
        groups.setdefault(info.group, set()).update(v.version for v in info.versions)
    return groups


def _stored_versions() -> set[tuple[str, str]]:
    return {(info.group, info.version) for info in registry.RESOURCES}


def parse(flag: str) -> RuntimeConfig:
    """The configuration `key=value,...` sets; raises `RuntimeConfigError`."""
    overrides: dict[str, str] = {}
    for item in flag.split(","):
        item = item.strip()
        if item:
            key, _, value = item.partition("=")
            overrides[key.strip()] = value.strip()
    optional = _optional_versions()
    stored = _stored_versions()
    every = {(g, v) for g, versions in optional.items() for v in versions}
    versions: set[tuple[str, str]] = set()
    turned_off: set[tuple[str, str]] = set()
    for key, matches in _MATCHERS.items():
        if key not in overrides:
            continue
        value = overrides[key]
        if value not in ("true", "false"):
            raise RuntimeConfigError(f"invalid value {key}={value}")
        chosen = {(g, v) for g, v in every | stored if matches(v)}
        if value == "true":
            versions |= chosen
        else:
            versions -= chosen
            turned_off |= chosen & stored
    resources: dict[tuple[str, str, str], bool] = {}
    for key, value in overrides.items():
        if key in _MATCHERS:
            continue
        tokens = key.split("/")
        if len(tokens) not in (2, 3) or not tokens[1]:
            raise RuntimeConfigError(f"runtime-config invalid key {key}")
        group, version = tokens[0], tokens[1]
        group = "" if group == "api" else group  # `api/v1`: the core group
        known = optional.get(group, set()) | {v for g, v in stored if g == group}
        if group not in optional and not any(g == group for g, _ in stored):
            continue  # a group drasim does not serve: ignored, as upstream's
        if version not in known:
            raise RuntimeConfigError(
                f"group version {tokens[0]}/{version} that has not been registered"
            )
        enabled = _parse_bool(key, value)
        if len(tokens) == 3:
            resource = tokens[2]
            if resource.lower() != resource:
                raise RuntimeConfigError(
                    f"invalid key {key}: group/version/resource and resource is always "
                    f'lowercase plural, not "{resource}"'
                )
            if (group, version) in stored and not enabled:
                turned_off.add((group, version))
            resources[(group, version, resource)] = enabled
        elif enabled:
            versions.add((group, version))
            turned_off.discard((group, version))
        else:
            versions.discard((group, version))
            if (group, version) in stored:
                turned_off.add((group, version))
    if turned_off:
        names = ", ".join(f"{g}/{v}" if g else v for g, v in sorted(turned_off))
        raise RuntimeConfigError(
            f"drasim cannot stop serving {names}: its own services read and write it"
        )
    return RuntimeConfig(frozenset(versions - stored), resources, flag)


def _parse_bool(key: str, value: str) -> bool:
    if value == "" or value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise RuntimeConfigError(
        f'invalid value of {key}: {value}, err: strconv.ParseBool: parsing "{value}": '
        "invalid syntax"
    )
