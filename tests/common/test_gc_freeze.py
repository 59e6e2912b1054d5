"""`service.freeze_survivors`: what a collection of the middle or oldest generation leaves
alive is frozen, so no later collection walks it, while reference counting still frees
frozen objects and cycles made later are still collected."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from drasim.common import service


class _Cached:
    """Stands for an informer's cached object."""


@pytest.fixture
def freezing() -> Iterator[None]:
    service.freeze_survivors()
    service.freeze_survivors()  # a second call adds nothing
    try:
        yield
    finally:
        gc.callbacks.remove(service._freeze_after_older_collection)
        gc.unfreeze()


def _tracked_ids() -> set[int]:
    return {id(o) for o in gc.get_objects()}


@pytest.mark.usefixtures("freezing")
@pytest.mark.parametrize("generation", [1, 2])
def test_survivors_of_an_older_collection_leave_the_collectors_sight(generation: int) -> None:
    assert gc.callbacks.count(service._freeze_after_older_collection) == 1
    cache = [_Cached() for _ in range(1000)]
    ids = {id(o) for o in cache}

    gc.collect(0)
    assert ids <= _tracked_ids(), "a young collection froze its survivors"

    gc.collect(generation)
    assert not ids & _tracked_ids()
    assert gc.get_freeze_count() >= len(cache)


@pytest.mark.usefixtures("freezing")
def test_frozen_objects_are_still_freed_and_new_cycles_still_collected() -> None:
    cached = _Cached()
    gone = weakref.ref(cached)
    gc.collect(2)
    assert id(cached) not in _tracked_ids()
    del cached
    assert gone() is None  # reference counting frees a frozen object

    cycle = _Cached()
    cycle.me = cycle  # type: ignore[attr-defined]
    collected = weakref.ref(cycle)
    del cycle
    gc.collect(2)
    assert collected() is None
