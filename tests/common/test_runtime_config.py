"""`--runtime-config` read as kube-apiserver reads it, for the versions drasim serves."""

from __future__ import annotations

import pytest

from drasim.common import runtime_config
from drasim.common.runtime_config import RuntimeConfigError
from drasim.common.version import Version

GROUP = "resource.k8s.io"


def _served(flag: str, plural: str = "resourceclaims") -> list[str]:
    config = runtime_config.parse(flag)
    return [v for v in ("v1", "v1beta1", "v1beta2") if config.serves(GROUP, v, plural)]


@pytest.mark.parametrize(
    ("flag", "versions"),
    [
        ("", ["v1"]),
        ("resource.k8s.io/v1beta1=true,resource.k8s.io/v1beta2=true", ["v1", "v1beta1", "v1beta2"]),
        ("resource.k8s.io/v1beta2", ["v1", "v1beta2"]),  # no value: true
        ("api/beta=true", ["v1", "v1beta1", "v1beta2"]),
        ("api/all=true,resource.k8s.io/v1beta1=false", ["v1", "v1beta2"]),
        ("api/beta=true,api/beta=false", ["v1"]),  # the last value given counts
        ("resource.k8s.io/v1beta1=true,resource.k8s.io/v1beta1/resourceclaims=false", ["v1"]),
        ("api/ga=true,api/alpha=true,example.com/v1=true", ["v1"]),  # unknown groups: ignored
    ],
)  # fmt: skip
def test_served_versions(flag: str, versions: list[str]) -> None:
    assert _served(flag) == versions


def test_resource_level_key_turns_on_one_resource() -> None:
    flag = "resource.k8s.io/v1beta1/deviceclasses=true"
    assert _served(flag, "deviceclasses") == ["v1", "v1beta1"]
    assert _served(flag, "resourceclaims") == ["v1"]


def test_other_groups_serve_their_stored_version_only() -> None:
    config = runtime_config.parse("api/all=true")
    assert config.serves("", "v1", "pods")
    assert not config.serves("", "v1beta1", "pods")
    assert not config.serves(GROUP, "v1", "pods")


@pytest.mark.parametrize(
    ("flag", "message"),
    [
        ("api/beta=yes", "invalid value api/beta=yes"),
        ("api/beta", "invalid value api/beta="),
        ("resource.k8s.io/v1beta1=yes",
         'invalid value of resource.k8s.io/v1beta1: yes, err: strconv.ParseBool: parsing "yes": '
         "invalid syntax"),
        ("resource.k8s.io/v9=true",
         "group version resource.k8s.io/v9 that has not been registered"),
        ("resource.k8s.io", "runtime-config invalid key resource.k8s.io"),
        ("resource.k8s.io/v1beta1/ResourceClaims=true",
         "invalid key resource.k8s.io/v1beta1/ResourceClaims: group/version/resource and "
         'resource is always lowercase plural, not "ResourceClaims"'),
        ("resource.k8s.io/v1=false", "drasim cannot stop serving resource.k8s.io/v1"),
        ("api/all=false", "drasim cannot stop serving"),
    ],
)  # fmt: skip
def test_refused_with_upstreams_words(flag: str, message: str) -> None:
    with pytest.raises(RuntimeConfigError) as caught:
        runtime_config.parse(flag)
    assert str(caught.value).startswith(message)


@pytest.mark.parametrize(
    ("release", "flag", "versions"),
    [
        ("1.37", "", ["v1"]),
        ("1.37", "resource.k8s.io/v1beta2=true", ["v1", "v1beta2"]),
        ("1.36", "", []),  # v1 has it from 1.37 on; the beta is off
        ("1.36", "resource.k8s.io/v1beta2=true", ["v1beta2"]),
        ("1.35", "api/all=true", []),  # only v1alpha3 had it, which drasim does not serve
    ],
)
def test_device_taint_rules_are_served_from_the_release_that_has_them(
    release: str, flag: str, versions: list[str]
) -> None:
    """As kube-apiserver v1.37.2 with `--emulated-version` (checked on it): DeviceTaintRule
    came to v1beta2 in 1.36 and to v1 in 1.37; the DRADeviceTaintRules gate decides nothing
    about serving it."""
    config = runtime_config.parse(flag).emulating(Version.parse(release))
    assert [
        v for v in ("v1", "v1beta1", "v1beta2") if config.serves(GROUP, v, "devicetaintrules")
    ] == versions
    assert config.serves(GROUP, "v1", "resourceclaims")
