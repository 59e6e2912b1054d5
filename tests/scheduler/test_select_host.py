"""Picking the host from the feasible nodes' total scores (`framework.select_host`)."""

from __future__ import annotations

import collections
import random

from drasim.scheduler.framework import NodeInfo, select_host
from tests.scheduler.wrappers import make_node


def nodes(*names: str) -> list[NodeInfo]:
    return [NodeInfo(make_node(n).obj()) for n in names]


def test_the_highest_total_wins() -> None:
    assert select_host(nodes("a", "b", "c"), [10, 30, 20], random.Random(0)) == "b"
    assert select_host(nodes("a"), [0], random.Random(0)) == "a"


def test_ties_are_shared_uniformly() -> None:
    rng = random.Random(1)
    candidates = nodes("a", "b", "c", "d")
    picked = collections.Counter(
        select_host(candidates, [50, 90, 90, 90], rng) for _ in range(3000)
    )
    assert set(picked) == {"b", "c", "d"}  # never the lower score
    assert all(900 < count < 1100 for count in picked.values()), picked
