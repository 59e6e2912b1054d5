"""ExtendedResourceCache: spec §2 and the upstream quirks §2.5 a-e (cases D1-D7 of §10)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from drasim.common.api import meta_v1, resource_v1
from drasim.scheduler.plugins.dynamic_resources.class_cache import ExtendedResourceCache

GPU = "example.com/gpu"
IMPLICIT = "deviceclass.resource.kubernetes.io/"


def device_class(
    name: str, explicit: str | None = None, created: str = "2025-01-01T10:00:00Z"
) -> resource_v1.DeviceClass:
    return resource_v1.DeviceClass(
        metadata=meta_v1.ObjectMeta(name=name, creation_timestamp=created),
        spec=resource_v1.DeviceClassSpec(extended_resource_name=explicit),
    )


GPU_CLASS = device_class("gpu-class", GPU)
GPU_CLASS_TEST = device_class("gpu-class", "test.com/gpu")
GPU_CLASS_NO_NAME = device_class("gpu-class")
FPGA_CLASS = device_class("fpga-class")
OLDER = device_class("older-class", GPU, created="2025-01-01T09:00:00Z")
NEWER = device_class("newer-class", GPU, created="2025-01-01T11:00:00Z")
GPU_CLASS_0 = device_class("gpu-class-0", GPU)
GPU_CLASS_4 = device_class("gpu-class-4", GPU)


@dataclass
class Case:
    id: str
    events: list[tuple[str, tuple[resource_v1.DeviceClass, ...]]]
    # resource name -> expected class name (None: no mapping)
    want_classes: dict[str, str | None]
    # class name -> expected own explicit name (get_extended_resource)
    want_names: dict[str, str | None] = field(default_factory=dict)


def add(cls: resource_v1.DeviceClass) -> tuple[str, tuple[resource_v1.DeviceClass, ...]]:
    return "add", (cls,)


def update(
    old: resource_v1.DeviceClass, new: resource_v1.DeviceClass
) -> tuple[str, tuple[resource_v1.DeviceClass, ...]]:
    return "update", (old, new)


def delete(cls: resource_v1.DeviceClass) -> tuple[str, tuple[resource_v1.DeviceClass, ...]]:
    return "delete", (cls,)


CASES = [
    Case(
        "D1-explicit-and-implicit",
        [add(GPU_CLASS), add(FPGA_CLASS)],
        {
            GPU: "gpu-class",
            IMPLICIT + "gpu-class": "gpu-class",
            IMPLICIT + "fpga-class": "fpga-class",
            "example.com/fpga": None,
        },
        {"gpu-class": GPU, "fpga-class": None},
    ),
    Case(
        # §2.5 a): the older class loses and its event is dropped, implicit name included.
        "D2-older-class-loses",
        [add(GPU_CLASS), add(OLDER)],
        {GPU: "gpu-class", IMPLICIT + "older-class": None},
        # §2.5 e): the loser still has its own name indexed.
        {"older-class": GPU},
    ),
    Case(
        "D3-newer-class-wins",
        [add(GPU_CLASS), add(NEWER)],
        {
            GPU: "newer-class",
            IMPLICIT + "newer-class": "newer-class",
            IMPLICIT + "gpu-class": "gpu-class",
        },
    ),
    Case(
        "D4-equal-time-smaller-name-wins",
        [add(GPU_CLASS_4), add(GPU_CLASS_0)],
        {GPU: "gpu-class-0", IMPLICIT + "gpu-class-0": "gpu-class-0"},
    ),
    Case(
        "D4-equal-time-larger-name-dropped",
        [add(GPU_CLASS_0), add(GPU_CLASS_4)],
        {GPU: "gpu-class-0", IMPLICIT + "gpu-class-4": None},
    ),
    Case(
        "D5-rename-moves-mapping",
        [add(GPU_CLASS), update(GPU_CLASS, GPU_CLASS_TEST)],
        {"test.com/gpu": "gpu-class", GPU: None, IMPLICIT + "gpu-class": "gpu-class"},
        {"gpu-class": "test.com/gpu"},
    ),
    Case(
        # §2.5 c): a loser that still declares the old name is not promoted.
        "D5-rename-does-not-promote-loser",
        [add(GPU_CLASS), add(OLDER), update(GPU_CLASS, GPU_CLASS_TEST)],
        {GPU: None, "test.com/gpu": "gpu-class"},
    ),
    Case(
        "D5-explicit-name-removed",
        [add(GPU_CLASS), update(GPU_CLASS, GPU_CLASS_NO_NAME)],
        {GPU: None, IMPLICIT + "gpu-class": "gpu-class"},
        {"gpu-class": None},
    ),
    Case(
        "D6-delete-removes-both-names",
        [add(GPU_CLASS), update(GPU_CLASS, GPU_CLASS_TEST), delete(GPU_CLASS_TEST)],
        {"test.com/gpu": None, IMPLICIT + "gpu-class": None, GPU: None},
        {"gpu-class": None},
    ),
    Case(
        # §2.5 d): deleting a loser drops the explicit name although the winner holds it.
        "D6-delete-loser-removes-winners-name",
        [add(GPU_CLASS), add(OLDER), delete(OLDER)],
        {GPU: None, IMPLICIT + "gpu-class": "gpu-class"},
        {"older-class": None, "gpu-class": GPU},
    ),
    Case(
        "D7-empty-cache",
        [],
        {GPU: None, IMPLICIT + "gpu-class": None},
        {"gpu-class": None},
    ),
    Case(
        "D7-class-index-follows-updates-and-delete",
        [add(GPU_CLASS), update(GPU_CLASS, GPU_CLASS_TEST)],
        {},
        {"gpu-class": "test.com/gpu"},
    ),
]


def replay(events: list[tuple[str, tuple[resource_v1.DeviceClass, ...]]]) -> ExtendedResourceCache:
    cache = ExtendedResourceCache()
    for op, args in events:
        getattr(cache, f"on_{op}")(*args)
    return cache


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_extended_resource_cache(case: Case) -> None:
    cache = replay(case.events)
    got_classes = {
        name: (cls.metadata.name if (cls := cache.get_device_class(name)) else None)
        for name in case.want_classes
    }
    assert got_classes == case.want_classes
    got_names = {name: cache.get_extended_resource(name) for name in case.want_names}
    assert got_names == case.want_names


def test_update_of_holder_keeping_its_name_keeps_the_stored_object() -> None:
    """§2.5 a): the holder does not win over itself, so the update is dropped entirely."""
    selected = device_class("gpu-class", GPU)
    selected.spec.selectors = [
        resource_v1.DeviceSelector(cel=resource_v1.CELDeviceSelector(expression="true"))
    ]
    cache = replay([add(GPU_CLASS), update(GPU_CLASS, selected)])
    assert cache.get_device_class(GPU) is GPU_CLASS
    assert cache.get_device_class(IMPLICIT + "gpu-class") is GPU_CLASS


def test_class_without_creation_timestamp_is_oldest() -> None:
    unstored = device_class("a-class", GPU, created="")
    unstored.metadata.creation_timestamp = None
    cache = replay([add(GPU_CLASS), add(unstored)])
    assert cache.get_device_class(GPU) is GPU_CLASS
