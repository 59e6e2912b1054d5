"""Device taints: which tolerations accept a taint (upstream `ToleratesTaint`'s table), which
devices a DeviceTaintRule selects, and the slices as the allocator sees them with the
rules' taints added."""

from __future__ import annotations

import itertools

import pytest

from drasim.common import codec, device_taints
from drasim.common.api import core_v1, resource_v1
from drasim.scheduler.plugins.dynamic_resources import allocator

Taint = resource_v1.DeviceTaint
Toleration = resource_v1.DeviceToleration


EQ, EX = "Equal", "Exists"
NS, NE = "NoSchedule", "NoExecute"


@pytest.mark.parametrize(
    ("toleration", "taint", "tolerated"),
    [
        # toleration (key, operator, value, effect) | taint (key, value, effect)
        (("k", EQ, "v", ""), ("k", "v", NS), True),
        (("k", "", "v", ""), ("k", "v", NE), True),  # no operator: Equal
        (("k", EQ, "v", ""), ("k", "w", NS), False),
        (("k", EX, "", ""), ("k", "w", NE), True),
        (("", EX, "", ""), ("any", "", NS), True),
        (("other", EX, "", ""), ("k", "", NS), False),
        (("k", EX, "", NS), ("k", "", NE), False),
        (("k", EX, "", NE), ("k", "", NE), True),
        (("", EX, "", "None"), ("k", "", "None"), True),
        (("k", "Unknown", "", ""), ("k", "", NS), False),
        # An empty key with Equal matches a taint of any key with the toleration's value.
        (("", EQ, "v", ""), ("k", "v", NS), True),
        (("", EQ, "", ""), ("k", "v", NS), False),
    ],
    ids=itertools.count(),
)
def test_tolerates(
    toleration: tuple[str, str, str, str], taint: tuple[str, str, str], tolerated: bool
) -> None:
    key, operator, value, effect = toleration
    t = Toleration(key=key, operator=operator, value=value, effect=effect)
    taint_key, taint_value, taint_effect = taint
    assert (
        device_taints.tolerates(t, Taint(key=taint_key, value=taint_value, effect=taint_effect))
        is tolerated
    )


def rule(**selector: str) -> resource_v1.DeviceTaintRule:
    return codec.convert(
        {
            "metadata": {"name": "r"},
            "spec": {
                "deviceSelector": selector,
                "taint": {"key": "example.com/broken", "effect": "NoExecute"},
            },
        },
        resource_v1.DeviceTaintRule,
    )


@pytest.mark.parametrize(
    ("selector", "matches"),
    [
        ({}, {"d1/p1/a", "d1/p1/b", "d1/p2/a", "d2/p1/a"}),  # empty: every device
        ({"driver": "d1"}, {"d1/p1/a", "d1/p1/b", "d1/p2/a"}),
        ({"pool": "p1"}, {"d1/p1/a", "d1/p1/b", "d2/p1/a"}),  # pools of any driver
        ({"device": "a"}, {"d1/p1/a", "d1/p2/a", "d2/p1/a"}),
        ({"driver": "d1", "pool": "p1", "device": "b"}, {"d1/p1/b"}),
        ({"driver": "d3"}, set()),
    ],
    ids=lambda v: str(v),
)
def test_a_rule_selects_devices_by_driver_pool_and_device(
    selector: dict[str, str], matches: set[str]
) -> None:
    devices = ["d1/p1/a", "d1/p1/b", "d1/p2/a", "d2/p1/a"]
    r = rule(**selector)
    assert {d for d in devices if device_taints.rule_matches_device(r, *d.split("/"))} == matches


def test_a_rule_without_a_selector_selects_nothing() -> None:
    r = rule()
    r.spec.device_selector = None
    assert not device_taints.rule_matches_device(r, "d1", "p1", "a")


def slice_(*devices: str) -> resource_v1.ResourceSlice:
    return codec.convert(
        {
            "metadata": {"name": "s"},
            "spec": {
                "driver": "gpu.example.com",
                "nodeName": "n",
                "pool": {"name": "n", "resourceSliceCount": 1},
                "devices": [
                    {"name": d, "taints": [{"key": "own", "effect": "None"}]} for d in devices
                ],
            },
        },
        resource_v1.ResourceSlice,
    )


def test_the_rules_taints_are_added_to_the_devices_they_select_in_a_copy() -> None:
    stored = slice_("gpu-0", "gpu-1")
    (seen,) = device_taints.with_rule_taints([stored], [rule(device="gpu-1")])
    assert [[t.key for t in d.taints] for d in seen.spec.devices] == [
        ["own"],
        ["own", "example.com/broken"],
    ]
    assert [len(d.taints) for d in stored.spec.devices] == [1, 1]  # the stored one unchanged
    # No rule selects anything: the very same slices.
    (same,) = device_taints.with_rule_taints([stored], [rule(driver="other")])
    assert same is stored


def claim(*tolerations: dict[str, str]) -> resource_v1.ResourceClaim:
    request = {"deviceClassName": "gpu", "tolerations": list(tolerations)}
    return codec.convert(
        {
            "metadata": {"name": "c", "namespace": "default"},
            "spec": {"devices": {"requests": [{"name": "req", "exactly": request}]}},
        },
        resource_v1.ResourceClaim,
    )


@pytest.mark.parametrize(
    ("effect", "tolerations", "device"),
    [
        ("NoSchedule", [], "gpu-1"),
        ("NoExecute", [], "gpu-1"),
        ("None", [], "gpu-0"),
        ("NoExecute", [{"key": "example.com/broken", "operator": "Exists"}], "gpu-0"),
        ("NoSchedule", [{"operator": "Exists", "effect": "NoExecute"}], "gpu-1"),
    ],
    ids=itertools.count(),
)
def test_the_allocator_skips_a_device_a_rule_taints_unless_tolerated(
    effect: str, tolerations: list[dict[str, str]], device: str
) -> None:
    tainting = rule(device="gpu-0")
    tainting.spec.taint.effect = effect
    slices = device_taints.with_rule_taints([slice_("gpu-0", "gpu-1")], [tainting])
    classes = {"gpu": codec.convert({"metadata": {"name": "gpu"}}, resource_v1.DeviceClass)}
    node = codec.convert({"metadata": {"name": "n"}}, core_v1.Node)
    (result,) = allocator.Allocator(slices, classes, set()).allocate(node, [claim(*tolerations)])
    assert [r.device for r in result.devices.results] == [device]
