"""The scheduler cache: nodes and the pods counted on them, assumed pods, and snapshots
that copy only what changed."""

from __future__ import annotations

from fractions import Fraction

import pytest

from drasim.common.api import core_v1
from drasim.common.quantity import Quantity
from drasim.scheduler.cache import Cache, Snapshot
from tests.scheduler.wrappers import make_node, make_pod


def node(name: str, cpu: str = "4") -> core_v1.Node:
    return make_node(name).capacity({"cpu": cpu}).obj()


def pod(name: str, node_name: str, cpu: str = "1") -> core_v1.Pod:
    return make_pod(name).req({"cpu": cpu}).node(node_name).obj()


def snapshot_of(cache: Cache) -> Snapshot:
    snapshot = Snapshot()
    cache.update_snapshot(snapshot)
    return snapshot


def cpu_requested(snapshot: Snapshot, node_name: str) -> str:
    info = snapshot.get(node_name)
    assert info is not None
    # NodeInfo keeps cpu in millicores; written back as a quantity for readable asserts.
    return str(Quantity(Fraction(info.requested.get("cpu", 0), 1000)))


def test_bound_pods_count_on_their_nodes() -> None:
    cache = Cache()
    cache.add_node(node("a"))
    cache.add_node(node("b"))
    cache.add_pod(pod("p1", "a"))
    cache.add_pod(pod("p2", "a", cpu="500m"))
    snapshot = snapshot_of(cache)
    assert [n.name for n in snapshot.node_info_list] == ["a", "b"]
    assert cpu_requested(snapshot, "a") == "1500m"
    assert cpu_requested(snapshot, "b") == "0"

    cache.update_pod(pod("p2", "a", cpu="500m"), pod("p2", "a", cpu="2"))
    cache.remove_pod(pod("p1", "a"))
    cache.update_snapshot(snapshot)
    assert cpu_requested(snapshot, "a") == "2"


def test_assumed_pod_counts_until_forgotten() -> None:
    cache = Cache()
    cache.add_node(node("a"))
    assumed = pod("p", "a")
    cache.assume_pod(assumed)
    assert cache.is_assumed_pod(assumed)
    assert cpu_requested(snapshot_of(cache), "a") == "1"
    with pytest.raises(ValueError, match="can't be assumed"):
        cache.assume_pod(assumed)

    cache.forget_pod(assumed)
    assert not cache.is_assumed_pod(assumed)
    assert cpu_requested(snapshot_of(cache), "a") == "0"
    with pytest.raises(ValueError, match="wasn't assumed"):
        cache.forget_pod(assumed)


def test_informer_confirms_an_assumed_pod() -> None:
    cache = Cache()
    cache.add_node(node("a"))
    cache.assume_pod(pod("p", "a"))
    cache.add_pod(pod("p", "a"))  # the informer saw it bound
    assert not cache.is_assumed_pod(pod("p", "a"))
    assert cpu_requested(snapshot_of(cache), "a") == "1"  # counted once
    with pytest.raises(ValueError, match="wasn't assumed"):
        cache.forget_pod(pod("p", "a"))


def test_pods_of_an_unknown_node_wait_for_it() -> None:
    cache = Cache()
    cache.add_pod(pod("p", "later"))
    assert snapshot_of(cache).num_nodes() == 0
    cache.add_node(node("later"))
    assert cpu_requested(snapshot_of(cache), "later") == "1"


def test_removed_node_leaves_the_snapshot() -> None:
    cache = Cache()
    cache.add_node(node("a"))
    cache.add_node(node("b"))
    cache.add_pod(pod("p", "a"))
    snapshot = snapshot_of(cache)
    cache.remove_node(node("a"))
    cache.remove_node(node("b"))
    cache.update_snapshot(snapshot)
    assert snapshot.num_nodes() == 0

    # The pod still bound to the deleted node goes with its own deletion; the node comes
    # back empty.
    cache.remove_pod(pod("p", "a"))
    cache.add_node(node("a"))
    cache.update_snapshot(snapshot)
    assert [n.name for n in snapshot.node_info_list] == ["a"]
    assert cpu_requested(snapshot, "a") == "0"


def test_removed_and_added_nodes_between_two_updates() -> None:
    cache = Cache()
    for name in "abc":
        cache.add_node(node(name))
    snapshot = snapshot_of(cache)
    cache.remove_node(node("b"))
    cache.add_node(node("d"))
    cache.update_snapshot(snapshot)
    assert [n.name for n in snapshot.node_info_list] == ["a", "c", "d"]


def test_snapshot_copies_only_changed_nodes_and_is_isolated() -> None:
    cache = Cache()
    for i in range(100):
        cache.add_node(node(f"n{i}"))
    snapshot = snapshot_of(cache)
    before = {info.name: info for info in snapshot.node_info_list}

    cache.assume_pod(pod("p", "n42"))
    cache.update_snapshot(snapshot)
    changed = [info.name for info in snapshot.node_info_list if info is not before[info.name]]
    assert changed == ["n42"]
    assert snapshot.get("n42") is snapshot.node_info_list[42]
    # The copy handed to the last cycle did not change under it.
    assert before["n42"].pods == []

    current = list(snapshot.node_info_list)
    cache.update_snapshot(snapshot)  # nothing changed: nothing copied
    assert all(a is b for a, b in zip(snapshot.node_info_list, current, strict=True))


def test_node_update_reaches_the_snapshot() -> None:
    cache = Cache()
    cache.add_node(node("a", cpu="4"))
    snapshot = snapshot_of(cache)
    cache.update_node(node("a", cpu="4"), node("a", cpu="8"))
    cache.update_snapshot(snapshot)
    info = snapshot.get("a")
    assert info is not None and str(info.allocatable["cpu"]) == "8"


def test_a_newer_version_of_a_pod_keeps_the_generation_unless_it_matters() -> None:
    """Confirming an assumed pod, or a status update, changes nothing Filter reads: the
    node's generation (what reused verdicts are checked against) stays. New requests or
    labels change it."""
    cache = Cache()
    cache.add_node(node("a"))
    cache.assume_pod(pod("p", "a"))
    generation = snapshot_of(cache).get("a").generation  # type: ignore[union-attr]

    bound = pod("p", "a")
    bound.metadata.resource_version = "2"
    cache.add_pod(bound)  # the informer's confirmation
    snapshot = snapshot_of(cache)
    assert snapshot.get("a").generation == generation  # type: ignore[union-attr]
    assert cpu_requested(snapshot, "a") == "1" and not cache.is_assumed_pod(bound)

    running = pod("p", "a")
    running.metadata.resource_version = "3"
    running.status.phase = "Running"
    cache.update_pod(bound, running)
    assert snapshot_of(cache).get("a").generation == generation  # type: ignore[union-attr]

    labelled = pod("p", "a")
    labelled.metadata.resource_version = "4"
    labelled.metadata.labels = {"app": "x"}
    cache.update_pod(running, labelled)
    snapshot = snapshot_of(cache)
    assert snapshot.get("a").generation != generation  # type: ignore[union-attr]
    generation = snapshot.get("a").generation  # type: ignore[union-attr]

    bigger = pod("p", "a", cpu="2")
    bigger.metadata.resource_version = "5"
    bigger.metadata.labels = {"app": "x"}
    cache.update_pod(labelled, bigger)
    snapshot = snapshot_of(cache)
    assert snapshot.get("a").generation != generation  # type: ignore[union-attr]
    assert cpu_requested(snapshot, "a") == "2"
    cache.remove_pod(bigger)
    assert cpu_requested(snapshot_of(cache), "a") == "0"
