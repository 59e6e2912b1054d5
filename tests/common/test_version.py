"""The one Kubernetes version and the releases it may emulate (upstream's N-3..N)."""

from __future__ import annotations

import pytest

from drasim.common import version
from drasim.common.version import Version, VersionError, effective_version


def test_the_binary_is_1_37_and_emulates_itself_by_default() -> None:
    info = effective_version().info()
    assert list(info)[:7] == [
        "major",
        "minor",
        "emulationMajor",
        "emulationMinor",
        "minCompatibilityMajor",
        "minCompatibilityMinor",
        "gitVersion",
    ]
    assert (info["major"], info["minor"]) == ("1", "37")
    assert (info["emulationMajor"], info["emulationMinor"]) == ("1", "37")
    assert (info["minCompatibilityMajor"], info["minCompatibilityMinor"]) == ("1", "36")
    assert info["gitVersion"] == version.GIT_VERSION == "v1.37.0-drasim"


@pytest.mark.parametrize(
    ("asked", "emulation", "min_compatibility"),
    [
        ("1.35", "1.35", "1.34"),
        ("v1.36", "1.36", "1.35"),
        ("kube=1.36", "1.36", "1.35"),
        ("1.34", "1.34", "1.34"),
    ],
)
def test_an_emulated_release_keeps_the_binary_version(
    asked: str, emulation: str, min_compatibility: str
) -> None:
    effective = effective_version(asked)
    info = effective.info()
    assert (info["major"], info["minor"]) == ("1", "37")
    assert f"{info['emulationMajor']}.{info['emulationMinor']}" == emulation
    # One minor back, but never below the floor (1.34 emulates with 1.34 as its minimum).
    assert str(effective.min_compatibility) == min_compatibility


@pytest.mark.parametrize(
    ("asked", "message"),
    [
        (
            "1.33",
            "[emulation version 1.33 is not between [1.34, 1.37.0], minCompatibilityVersion "
            "version 1.34 is not between [1.34, 1.33]]",
        ),
        ("1.38", "emulation version 1.38 is not between [1.34, 1.37.0]"),
        ("2.0", "emulation version 2.0 is not between [1.34, 1.37.0]"),
        ("1.35.1", "patch version not allowed, got: kube=1.35.1"),
        ("latest", 'could not parse "latest" as version'),
    ],
)
def test_releases_out_of_reach_are_refused_with_upstreams_words(asked: str, message: str) -> None:
    with pytest.raises(VersionError) as refused:
        effective_version(asked)
    assert str(refused.value) == message


def test_versions_order_by_major_then_minor() -> None:
    assert Version(1, 9) < Version(1, 10) < Version(2, 0)
    assert Version.parse("1.37") == version.BINARY
    assert Version(1, 34) == version.EMULATION_FLOOR
