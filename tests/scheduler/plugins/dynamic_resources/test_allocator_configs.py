"""The configs an allocation result carries for the drivers (upstream `Allocate`,
"Populate configs", `TestAllocator` cases with-class-device-config and
claim-with-device-config): each class's configs once for the requests using the class,
then the claim's configs that apply to everything or to an allocated (sub)request."""

from __future__ import annotations

from typing import Any

from drasim.common import codec
from drasim.common.api import resource_v1
from drasim.scheduler.plugins.dynamic_resources.allocator import Allocator
from tests.scheduler.plugins.dynamic_resources.test_allocator import (
    BY_DRIVER,
    DRIVER,
    dev,
    exact,
    first_available,
    make_node,
    make_slice,
    sub,
)


def opaque(value: str) -> dict[str, Any]:
    return {"opaque": {"driver": DRIVER, "parameters": {"value": value}}}


def config_class(name: str, *values: str) -> resource_v1.DeviceClass:
    return codec.convert(
        {
            "metadata": {"name": name},
            "spec": {
                "selectors": [{"cel": {"expression": BY_DRIVER}}],
                "config": [opaque(v) for v in values],
            },
        },
        resource_v1.DeviceClass,
    )


CLASSES = {
    "gpu": config_class("gpu", "class-a", "class-b"),
    "plain": config_class("plain"),
    "other": config_class("other", "class-other"),
}
SLICE = make_slice("s", *(dev(f"gpu-{i}") for i in range(4)))


def allocate(requests: list[dict], configs: list[dict]) -> list[dict[str, Any]]:
    claim = codec.convert(
        {
            "metadata": {"name": "c", "namespace": "default"},
            "spec": {"devices": {"requests": requests, "config": configs}},
        },
        resource_v1.ResourceClaim,
    )
    found = Allocator([SLICE], CLASSES, set()).allocate(make_node(), [claim])
    assert found is not None
    return [
        {
            "source": c.source,
            "requests": c.requests,
            "value": c.opaque.parameters["value"] if c.opaque else None,
        }
        for c in found[0].devices.config
    ]


def test_a_class_config_once_for_every_request_using_the_class() -> None:
    got = allocate([exact("a", "gpu"), exact("b", "plain"), exact("c", "gpu")], [])
    assert got == [
        {"source": "FromClass", "requests": ["a", "c"], "value": "class-a"},
        {"source": "FromClass", "requests": ["a", "c"], "value": "class-b"},
    ]


def test_claim_configs_follow_the_class_configs() -> None:
    got = allocate(
        [exact("a", "plain"), exact("b", "other")],
        [
            {"requests": ["b"], **opaque("claim-b")},
            {**opaque("claim-all")},
            {"requests": ["missing"], **opaque("claim-none")},
        ],
    )
    assert got == [
        {"source": "FromClass", "requests": ["b"], "value": "class-other"},
        {"source": "FromClaim", "requests": ["b"], "value": "claim-b"},
        {"source": "FromClaim", "requests": [], "value": "claim-all"},
    ]


def test_a_subrequest_takes_the_class_of_the_alternative_picked() -> None:
    got = allocate(
        [first_available("r", sub("big", "gpu", 9), sub("small", "other", 1))],
        [
            {"requests": ["r/small"], **opaque("claim-small")},
            {"requests": ["r/big"], **opaque("x")},
        ],
    )
    assert got == [
        {"source": "FromClass", "requests": ["r/small"], "value": "class-other"},
        {"source": "FromClaim", "requests": ["r/small"], "value": "claim-small"},
    ]
