"""Feature gates: each release's defaults, and `--feature-gates` refused in upstream's words
(each message checked against kube-apiserver v1.37.2 given the same flags)."""

from __future__ import annotations

import pytest

from drasim.cli import launch
from drasim.common import features, service
from drasim.common.featuregate import FeatureGateError
from drasim.common.version import VersionError

DRA_GATES = (
    "DRAAdminAccess",
    "DRAConsumableCapacity",
    "DRADeviceBindingConditions",
    "DRADeviceTaintRules",
    "DRADeviceTaints",
    "DRAExtendedResource",
    "DRAPartitionableDevices",
    "DRAPrioritizedList",
    "DRAResourceClaimDeviceStatus",
    "DRAResourceClaimGranularStatusAuthorization",
)


def defaults(release: str | None) -> dict[str, bool]:
    gate = features.new_gate(emulated=release)
    return {name: gate.enabled(name) for name in DRA_GATES}


@pytest.mark.parametrize(
    ("release", "enabled"),
    [
        (None, set(DRA_GATES)),
        ("1.37", set(DRA_GATES)),
        (
            "1.36",
            set(DRA_GATES) - {"DRADeviceTaintRules"},  # beta, off: its API was off by default
        ),
        ("1.35", {"DRAAdminAccess", "DRAPrioritizedList", "DRAResourceClaimDeviceStatus"}),
        ("1.34", {"DRAAdminAccess", "DRAPrioritizedList", "DRAResourceClaimDeviceStatus"}),
    ],
    ids=["default", "1.37", "1.36", "1.35", "1.34"],
)
def test_each_release_has_its_defaults(release: str | None, enabled: set[str]) -> None:
    assert {name for name, on in defaults(release).items() if on} == enabled


def test_the_flag_sets_gates_over_the_defaults() -> None:
    gate = features.new_gate(
        "DRAExtendedResource=false, DRAConsumableCapacity=true", emulated="1.36"
    )
    assert not gate.enabled("DRAExtendedResource")
    assert gate.enabled("DRAConsumableCapacity")
    assert gate.enabled("DRAPrioritizedList")  # untouched
    # What services are handed to make the same gate again.
    assert gate.flag() == "DRAConsumableCapacity=true,DRAExtendedResource=false"
    assert features.new_gate(gate.flag(), emulated="1.36").explicit == gate.explicit
    # Setting a locked gate to its default is no change, and allowed.
    assert features.new_gate("DRAExtendedResource=true").enabled("DRAExtendedResource")


def test_all_beta_sets_the_beta_gates_the_flag_leaves_alone() -> None:
    gate = features.new_gate("AllBeta=false,DRADeviceTaints=true", emulated="1.36")
    assert not gate.enabled("DRAExtendedResource")  # beta in 1.36
    assert not gate.enabled("DRAPartitionableDevices")
    assert gate.enabled("DRADeviceTaints")  # set explicitly
    assert gate.enabled("DRAPrioritizedList")  # GA in 1.36: not beta
    assert features.new_gate("AllAlpha=true", emulated="1.35").enabled("DRAExtendedResource")


@pytest.mark.parametrize(
    ("flag", "release", "message"),
    [
        (
            "DRAExtendedResource=false",
            None,
            "cannot set feature gate DRAExtendedResource to false, feature is locked to true",
        ),
        (
            "DRAExtendedResource=false,DRAPrioritizedList=false",
            None,
            "[cannot set feature gate DRAExtendedResource to false, feature is locked to true, "
            "cannot set feature gate DRAPrioritizedList to false, feature is locked to true]",
        ),
        (
            "DRAAdminAccess=false",
            "1.36",
            "cannot set feature gate DRAAdminAccess to false, feature is locked to true",
        ),
        ("NoSuchGate=true", None, "unrecognized feature gate: NoSuchGate"),
        ("DRAExtendedResource", None, "missing bool value for DRAExtendedResource"),
        (
            "DRAExtendedResource=maybe",
            None,
            'invalid value of DRAExtendedResource=maybe, err: strconv.ParseBool: parsing "maybe": '
            "invalid syntax",
        ),
        (
            "DRADeviceTaintRules=true",
            "1.34",
            "cannot set feature gate DRADeviceTaintRules to true, feature is PreAlpha at emulated "
            "version 1.34, min compatibility version 1.34",
        ),
        (
            "DRADeviceTaints=false,DRADeviceTaintRules=true",
            "1.35",
            "DRADeviceTaintRules is enabled, but depends on features that are disabled: "
            "[DRADeviceTaints]",
        ),
    ],
    ids=[
        "locked GA gate",
        "two locked gates",
        "locked since 1.36",
        "unknown gate",
        "no value",
        "not a boolean",
        "not yet in the release",
        "dependency off",
    ],
)
def test_gates_that_cannot_be_set_are_refused(flag: str, release: str | None, message: str) -> None:
    with pytest.raises(FeatureGateError) as refused:
        features.new_gate(flag, emulated=release)
    assert str(refused.value) == message


def test_an_unlocked_ga_gate_may_be_turned_off() -> None:
    """DRADeviceTaints is GA in 1.37 but locked only from 1.38."""
    gate = features.new_gate("DRADeviceTaintRules=false,DRADeviceTaints=false")
    assert not gate.enabled("DRADeviceTaints")


def test_drasim_keeps_dynamic_resource_allocation_on() -> None:
    """Upstream lets 1.34 turn DRA off; drasim always runs it (a deliberate difference)."""
    with pytest.raises(FeatureGateError, match="DynamicResourceAllocation cannot be false"):
        features.new_gate(
            "DynamicResourceAllocation=false,DRAAdminAccess=false,DRAPrioritizedList=false",
            emulated="1.34",
        )
    with pytest.raises(FeatureGateError, match="locked to true"):
        features.new_gate("DynamicResourceAllocation=false", emulated="1.35")


def test_a_release_out_of_reach_is_refused() -> None:
    with pytest.raises(VersionError, match=r"emulation version 1\.33 is not between"):
        features.new_gate(emulated="1.33")


def test_help_lists_what_is_neither_ga_nor_deprecated() -> None:
    assert features.new_gate(emulated="1.36").known_features() == [
        "AllAlpha=true|false (ALPHA - default=false)",
        "AllBeta=true|false (BETA - default=false)",
        "DRAConsumableCapacity=true|false (BETA - default=true)",
        "DRADeviceBindingConditions=true|false (BETA - default=true)",
        "DRADeviceTaintRules=true|false (BETA - default=false)",
        "DRADeviceTaints=true|false (BETA - default=true)",
        "DRAExtendedResource=true|false (BETA - default=true)",
        "DRAPartitionableDevices=true|false (BETA - default=true)",
        "DRAResourceClaimDeviceStatus=true|false (BETA - default=true)",
        "DRAResourceClaimGranularStatusAuthorization=true|false (BETA - default=true)",
        "ReduceDefaultCrashLoopBackOffDecay=true|false (ALPHA - default=false)",
    ]


def test_services_take_the_gates_the_launcher_hands_them(
    capsys: pytest.CaptureFixture[str],
) -> None:
    gate = features.new_gate("DRAExtendedResource=false", emulated="1.36")
    spec = launch.Launch.service(
        "drasim.scheduler", nats_url="nats://x", prefix="p", feature_gates=gate
    )
    assert spec.argv[-4:] == [
        "--emulated-version", "1.36", "--feature-gates", "DRAExtendedResource=false",
    ]  # fmt: skip
    _, args = service.parse_args("scheduler", spec.argv)
    assert args.feature_gates == gate
    assert not args.feature_gates.enabled("DRAExtendedResource")

    with pytest.raises(SystemExit) as exited:
        service.parse_args("scheduler", ["--nats-url", "nats://x", "--emulated-version", "1.2"])
    assert exited.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        "drasim-scheduler: error: --emulated-version: [emulation version 1.2 is not between "
        "[1.34, 1.37.0], minCompatibilityVersion version 1.34 is not between [1.34, 1.2]]"
    )
