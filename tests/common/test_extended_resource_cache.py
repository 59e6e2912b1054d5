"""ExtendedResourceCache: ids D1-D7 after upstream's `extendedresourcecache_test.go` as
kubernetes#141110 left it (every candidate kept, the winner recomputed on each event)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from drasim.common.api import meta_v1, resource_v1
from drasim.common.extended_resource_cache import ExtendedResourceCache, better_device_class

GPU = "example.com/gpu"
IMPLICIT = "deviceclass.resource.kubernetes.io/"
T0 = "2025-01-01T10:00:00Z"


def device_class(
    name: str, explicit: str | None = None, created: str = T0
) -> resource_v1.DeviceClass:
    return resource_v1.DeviceClass(
        metadata=meta_v1.ObjectMeta(name=name, creation_timestamp=created),
        spec=resource_v1.DeviceClassSpec(extended_resource_name=explicit),
    )


def with_config(cls: resource_v1.DeviceClass) -> resource_v1.DeviceClass:
    """The same class after an update that changed something other than its names."""
    return resource_v1.DeviceClass(
        metadata=cls.metadata,
        spec=resource_v1.DeviceClassSpec(
            extended_resource_name=cls.spec.extended_resource_name,
            config=[resource_v1.DeviceClassConfiguration()],
        ),
    )


GPU_CLASS = device_class("gpu-class", GPU)
GPU_CLASS_TEST = device_class("gpu-class", "test.com/gpu")
GPU_CLASS_NO_NAME = device_class("gpu-class")
FPGA_CLASS = device_class("fpga-class")
T_OLD, T_NEW = "2025-01-01T09:00:00Z", "2025-01-01T11:00:00Z"
OLDER = device_class("older-class", GPU, created=T_OLD)
NEWER = device_class("newer-class", GPU, created=T_NEW)
NEWER_RENAMED = device_class("newer-class", "new.example.com/gpu", created=T_NEW)
OLDER_RENAMED = device_class("older-class", "new.example.com/gpu", created=T_OLD)
GPU_CLASS_0 = device_class("gpu-class-0", GPU, created=T_NEW)
GPU_CLASS_0_TEST = device_class("gpu-class-0", "test.com/gpu", created=T_NEW)
GPU_CLASS_4 = device_class("gpu-class-4", GPU, created=T_NEW)

Event = tuple[str, tuple[resource_v1.DeviceClass, ...]]


def add(cls: resource_v1.DeviceClass) -> Event:
    return "add", (cls,)


def update(old: resource_v1.DeviceClass, new: resource_v1.DeviceClass) -> Event:
    return "update", (old, new)


def delete(cls: resource_v1.DeviceClass) -> Event:
    return "delete", (cls,)


@dataclass
class Case:
    id: str
    events: list[Event]
    # resource name -> expected class name (None: no mapping)
    want_classes: dict[str, str | None]
    # class name -> expected declared name (extended_resource_name_of)
    want_names: dict[str, str | None] = field(default_factory=dict)


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
        # The loser keeps its implicit name and its declared name (for quota).
        "D2-older-class-loses",
        [add(GPU_CLASS), add(OLDER)],
        {GPU: "gpu-class", IMPLICIT + "older-class": "older-class"},
        {"older-class": GPU},
    ),
    Case(
        "D2-older-class-first-loses-later",
        [add(OLDER), add(GPU_CLASS)],
        {GPU: "gpu-class", IMPLICIT + "older-class": "older-class"},
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
        [add(GPU_CLASS), add(GPU_CLASS_4), add(GPU_CLASS_0)],
        {GPU: "gpu-class-0", IMPLICIT + "gpu-class-4": "gpu-class-4"},
    ),
    Case(
        "D4-equal-time-larger-name-loses-in-any-order",
        [add(GPU_CLASS_0), add(GPU_CLASS_4)],
        {GPU: "gpu-class-0", IMPLICIT + "gpu-class-4": "gpu-class-4"},
    ),
    Case(
        # Upstream's TestExtendedResourceCache: renaming the winner promotes gpu-class-4.
        "D5-rename-winner-promotes-next-best",
        [
            add(GPU_CLASS),
            add(FPGA_CLASS),
            add(OLDER),
            add(GPU_CLASS_4),
            add(GPU_CLASS_0),
            update(GPU_CLASS_0, GPU_CLASS_0_TEST),
        ],
        {"test.com/gpu": "gpu-class-0", GPU: "gpu-class-4"},
        {"gpu-class-0": "test.com/gpu"},
    ),
    Case(
        "D5-rename-only-candidate-unmaps-old-name",
        [add(GPU_CLASS), update(GPU_CLASS, GPU_CLASS_TEST)],
        {"test.com/gpu": "gpu-class", GPU: None, IMPLICIT + "gpu-class": "gpu-class"},
        {"gpu-class": "test.com/gpu"},
    ),
    Case(
        "D5-rename-winner-tie-promotes-runner-up",
        [add(GPU_CLASS_4), add(GPU_CLASS_0), update(GPU_CLASS_0, GPU_CLASS_0_TEST)],
        {GPU: "gpu-class-4", "test.com/gpu": "gpu-class-0"},
        {"gpu-class-0": "test.com/gpu"},
    ),
    Case(
        "D5-rename-loser-keeps-winner",
        [add(NEWER), add(OLDER), update(OLDER, OLDER_RENAMED)],
        {
            GPU: "newer-class",
            "new.example.com/gpu": "older-class",
            IMPLICIT + "older-class": "older-class",
        },
        {"older-class": "new.example.com/gpu"},
    ),
    Case(
        "D5-rename-winner-to-new-name",
        [add(OLDER), add(NEWER), update(NEWER, NEWER_RENAMED)],
        {
            GPU: "older-class",
            "new.example.com/gpu": "newer-class",
            IMPLICIT + "newer-class": "newer-class",
        },
        {"newer-class": "new.example.com/gpu"},
    ),
    Case(
        "D5-explicit-name-removed",
        [add(GPU_CLASS), update(GPU_CLASS, GPU_CLASS_NO_NAME)],
        {GPU: None, IMPLICIT + "gpu-class": "gpu-class"},
        {"gpu-class": None},
    ),
    Case(
        "D5-explicit-name-removed-from-winner-promotes",
        [add(GPU_CLASS), add(OLDER), update(GPU_CLASS, GPU_CLASS_NO_NAME)],
        {GPU: "older-class", IMPLICIT + "gpu-class": "gpu-class"},
    ),
    Case(
        "D6-delete-removes-both-names",
        [add(GPU_CLASS), update(GPU_CLASS, GPU_CLASS_TEST), delete(GPU_CLASS_TEST)],
        {"test.com/gpu": None, IMPLICIT + "gpu-class": None, GPU: None},
        {"gpu-class": None},
    ),
    Case(
        "D6-delete-loser-keeps-winner",
        [add(GPU_CLASS), add(OLDER), delete(OLDER)],
        {GPU: "gpu-class", IMPLICIT + "gpu-class": "gpu-class", IMPLICIT + "older-class": None},
        {"older-class": None, "gpu-class": GPU},
    ),
    Case(
        "D6-delete-winner-promotes-runner-up-then-none",
        [add(OLDER), add(NEWER), delete(NEWER)],
        {GPU: "older-class", IMPLICIT + "newer-class": None},
        {"newer-class": None, "older-class": GPU},
    ),
    Case(
        "D6-delete-all-candidates",
        [add(OLDER), add(NEWER), delete(NEWER), delete(OLDER)],
        {GPU: None, IMPLICIT + "older-class": None},
        {"older-class": None},
    ),
    Case(
        # The informer's old object may be stale: the delete of a class whose last seen
        # object declared another name still removes what the class holds.
        "D6-delete-with-stale-object",
        [add(OLDER), add(NEWER), delete(NEWER_RENAMED)],
        {GPU: "older-class", "new.example.com/gpu": None},
        {"newer-class": None},
    ),
    Case(
        "D7-empty-cache",
        [],
        {GPU: None, IMPLICIT + "gpu-class": None},
        {"gpu-class": None},
    ),
    Case(
        "D7-class-index-follows-updates-and-delete",
        [add(GPU_CLASS), add(FPGA_CLASS), update(GPU_CLASS, GPU_CLASS_TEST), delete(FPGA_CLASS)],
        {},
        {"gpu-class": "test.com/gpu", "fpga-class": None},
    ),
]


def replay(events: list[Event]) -> ExtendedResourceCache:
    cache = ExtendedResourceCache()
    for op, args in events:
        getattr(cache, f"on_{op}")(*args)
    return cache


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_extended_resource_cache(case: Case) -> None:
    cache = replay(case.events)
    got_classes = {
        name: (cls.metadata.name if (cls := cache.class_for(name)) else None)
        for name in case.want_classes
    }
    assert got_classes == case.want_classes
    got_names = {name: cache.extended_resource_name_of(name) for name in case.want_names}
    assert got_names == case.want_names


def test_update_of_winner_refreshes_the_stored_object() -> None:
    updated = with_config(GPU_CLASS)
    cache = replay([add(GPU_CLASS), update(GPU_CLASS, updated)])
    assert cache.class_for(GPU) is updated
    assert cache.class_for(IMPLICIT + "gpu-class") is updated
    assert cache.extended_resource_name_of("gpu-class") == GPU


def test_promoted_loser_is_the_fresh_object() -> None:
    updated_loser = with_config(OLDER)
    cache = replay([add(NEWER), add(OLDER), update(OLDER, updated_loser), delete(NEWER)])
    assert cache.class_for(GPU) is updated_loser
    assert cache.class_for(IMPLICIT + "older-class") is updated_loser


def test_loser_keeps_implicit_mapping_to_itself() -> None:
    cache = replay([add(NEWER), add(OLDER)])
    assert cache.class_for(GPU) is NEWER
    assert cache.class_for(IMPLICIT + "older-class") is OLDER
    assert cache.class_for(IMPLICIT + "newer-class") is NEWER


def test_class_without_creation_timestamp_is_oldest() -> None:
    unstored = device_class("a-class", GPU, created="")
    unstored.metadata.creation_timestamp = None
    cache = replay([add(GPU_CLASS), add(unstored)])
    assert cache.class_for(GPU) is GPU_CLASS
    cache.on_delete(GPU_CLASS)
    assert cache.class_for(GPU) is unstored


def test_better_device_class() -> None:
    other = device_class("a-class", GPU, created=T_OLD)
    assert not better_device_class(OLDER, NEWER)
    assert better_device_class(NEWER, OLDER)
    assert better_device_class(other, OLDER)  # equal times: the smaller name
    assert not better_device_class(OLDER, other)
    assert not better_device_class(OLDER, OLDER)
    assert not better_device_class(None, OLDER)
    assert not better_device_class(None, None)
    assert better_device_class(OLDER, None)
