"""Feature gates as upstream's `component-base/featuregate`: versioned specs, the
`--feature-gates` flag's syntax, its checks and its error messages.

A gate's spec changes with the releases (alpha off, beta on, GA locked on); the spec that
counts is the newest one not after the emulated release (`drasim.common.version`), so
`--kubernetes-version 1.35` gives every gate the default it had in 1.35. The flag
(`DRAExtendedResource=false,DRAPrioritizedList=true`) then sets gates explicitly, and is
refused, with upstream's words, for a gate nobody registered, a value that is no boolean,
a gate locked to its default, a gate that did not exist yet in the emulated release, and
gates enabled while a gate they depend on is not. `AllAlpha` and `AllBeta` set every
alpha (beta) gate the flag leaves unset, as upstream's.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from drasim.common.version import EffectiveVersion, Version

__all__ = ["FeatureGate", "FeatureGateError", "FeatureSpec", "PreRelease"]

ALL_ALPHA = "AllAlpha"
ALL_BETA = "AllBeta"
_TRUE = ("1", "t", "T", "TRUE", "true", "True")  # Go's strconv.ParseBool
_FALSE = ("0", "f", "F", "FALSE", "false", "False")


class FeatureGateError(ValueError):
    """The flag cannot be honoured; the message is upstream's."""


class PreRelease(enum.StrEnum):
    PRE_ALPHA = "PRE-ALPHA"
    ALPHA = "ALPHA"
    BETA = "BETA"
    GA = ""
    DEPRECATED = "DEPRECATED"


@dataclass(frozen=True, slots=True)
class FeatureSpec:
    """A gate as of release `version` (upstream `FeatureSpec`)."""

    version: Version
    default: bool
    pre_release: PreRelease
    lock_to_default: bool = False


_PRE_ALPHA = FeatureSpec(Version(0, 0), False, PreRelease.PRE_ALPHA)
_SPECIAL = {
    ALL_ALPHA: (FeatureSpec(Version(0, 0), False, PreRelease.ALPHA),),
    ALL_BETA: (FeatureSpec(Version(0, 0), False, PreRelease.BETA),),
}


def _parse_bool(text: str) -> bool | None:
    return True if text in _TRUE else False if text in _FALSE else None


def _aggregate(errors: Sequence[str]) -> str:
    """Upstream's `utilerrors.NewAggregate(...).Error()`: one message, or all in brackets."""
    unique = list(dict.fromkeys(errors))
    return unique[0] if len(unique) == 1 else f"[{', '.join(unique)}]"


@dataclass(frozen=True)
class FeatureGate:
    """The gates a component knows (`known`, each spec list oldest first), what they depend
    on, the release it emulates, and the values the flag set (`explicit`)."""

    known: Mapping[str, tuple[FeatureSpec, ...]]
    dependencies: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    version: EffectiveVersion = field(default_factory=EffectiveVersion)
    explicit: Mapping[str, bool] = field(default_factory=dict)

    def spec(self, name: str) -> FeatureSpec:
        """The gate's spec at the emulated release (upstream
        `featureSpecAtEmulationAndMinCompatVersion`); pre-alpha before its first."""
        specs = self.known.get(name) or _SPECIAL.get(name)
        if specs is None:
            raise KeyError(f'feature "{name}" is not registered in FeatureGate')
        for spec in reversed(specs):
            if spec.version <= self.version.emulation:
                return spec
        return _PRE_ALPHA

    def enabled(self, name: str) -> bool:
        """The flag's value, else `AllAlpha`'s (`AllBeta`'s) for an alpha (beta) gate,
        else the default at the emulated release."""
        explicit = self.explicit.get(name)
        if explicit is not None:
            return explicit
        spec = self.spec(name)
        every = {PreRelease.ALPHA: ALL_ALPHA, PreRelease.BETA: ALL_BETA}.get(spec.pre_release)
        if every is not None and every in self.explicit and name not in _SPECIAL:
            return self.explicit[every]
        return spec.default

    def set(self, flag: str) -> FeatureGate:
        """This gate with `flag` (`key=value,...`) applied over what it set before."""
        values: dict[str, bool] = {}
        for item in flag.split(","):
            if not item:
                continue
            key, sep, raw = item.partition("=")
            key, raw = key.strip(), raw.strip()
            if not sep:
                raise FeatureGateError(f"missing bool value for {key}")
            value = _parse_bool(raw)
            if value is None:
                raise FeatureGateError(
                    f'invalid value of {key}={raw}, err: strconv.ParseBool: parsing "{raw}": '
                    "invalid syntax"
                )
            values[key] = value
        return self.set_from_map(values)

    def set_from_map(self, values: Mapping[str, bool]) -> FeatureGate:
        """Upstream `SetFromMap`: every value checked against its gate's spec at the
        emulated release, then the dependencies of what ends up enabled."""
        errors: list[str] = []
        for key, value in values.items():
            if key not in self.known and key not in _SPECIAL:
                # Upstream stops at an unknown gate.
                raise FeatureGateError(f"unrecognized feature gate: {key}")
            spec = self.spec(key)
            if spec.lock_to_default and spec.default != value:
                errors.append(
                    f"cannot set feature gate {key} to {_go_bool(value)}, feature is locked "
                    f"to {_go_bool(spec.default)}"
                )
            elif spec.pre_release is PreRelease.PRE_ALPHA:
                errors.append(
                    f"cannot set feature gate {key} to {_go_bool(value)}, feature is PreAlpha at "
                    f"emulated version {self.version.emulation}, min compatibility version "
                    f"{self.version.min_compatibility}"
                )
        if errors:
            raise FeatureGateError(_aggregate(errors))
        gate = FeatureGate(self.known, self.dependencies, self.version, {**self.explicit, **values})
        gate.check_dependencies()
        return gate

    def check_dependencies(self) -> None:
        """Upstream's dependency check after a set: an enabled gate needs its dependencies
        enabled."""
        errors = []
        for name in sorted(self.dependencies):
            if not self.enabled(name):
                continue
            disabled = [d for d in self.dependencies[name] if not self.enabled(d)]
            if disabled:
                errors.append(
                    f"{name} is enabled, but depends on features that are disabled: "
                    f"[{' '.join(disabled)}]"
                )
        if errors:
            raise FeatureGateError(_aggregate(errors))

    def flag(self) -> str:
        """What `--feature-gates` takes to make this gate again (the explicit values)."""
        return ",".join(f"{k}={_go_bool(v)}" for k, v in sorted(self.explicit.items()))

    def known_features(self) -> list[str]:
        """Upstream `KnownFeatures`: one help line per gate that is neither GA nor
        deprecated at the emulated release."""
        lines = []
        for name in sorted({*self.known, *_SPECIAL}):
            spec = self.spec(name)
            if spec.pre_release in (PreRelease.GA, PreRelease.DEPRECATED, PreRelease.PRE_ALPHA):
                continue
            lines.append(
                f"{name}=true|false ({spec.pre_release} - default={_go_bool(spec.default)})"
            )
        return lines

    def at(self, version: EffectiveVersion) -> FeatureGate:
        """The same gates emulating another release, nothing set."""
        return FeatureGate(self.known, self.dependencies, version)


def _go_bool(value: bool) -> str:
    return "true" if value else "false"
