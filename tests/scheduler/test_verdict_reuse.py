"""Reused Filter verdicts and scores never change a scheduling decision.

Along random histories of what a cluster produces (`verdict_history`: pods reserved, bound,
failed and deleted; devices taken and freed; nodes, DeviceClasses, ResourceSlices and
DeviceTaintRules changing), two frameworks, one reusing verdicts and scores of earlier
attempts (`framework.VerdictCache`) and one without, must decide every attempt the same; and
what they reserve must fit the devices. Each history adds #22's device features: partitions
and shares, a perDeviceNodeSelection pool, binding conditions, user claims with admin
access, beside the special claim of extended resources and device taints, always in.
The assertions are about correctness; what a history must have exercised is asserted only
as "at least once", so that another seed or a change of the scheduler's choices keeps it
meaningful without tuning.
"""

from __future__ import annotations

import copy
import random

import pytest

from drasim.common import codec
from drasim.common.api import core_v1, resource_v1
from drasim.scheduler import framework
from drasim.scheduler.cache import Cache, Snapshot
from drasim.scheduler.dra_manager import DraManager
from drasim.scheduler.framework import CycleState, verdict_cache
from drasim.scheduler.framework.verdict_cache import KeptPositions
from drasim.scheduler.server import new_default_framework
from tests.scheduler.framework_attempt import Outcome, attempt, count_calls
from tests.scheduler.history_objects import (
    CLASSES,
    DRIVER,
    Features,
    class_dict,
    node_dict,
    slice_dict,
)
from tests.scheduler.verdict_history import POD_UIDS, Cluster

SEEDS = range(6)
STEPS = 800


async def run_history(seed: int, features: Features) -> Cluster:
    cluster = Cluster(random.Random(seed), features)
    for _ in range(STEPS):
        await cluster.step()
    print(
        f"seed {seed}: {cluster.attempts} attempts ({cluster.feasible} feasible, "
        f"{cluster.scored} scored), {cluster.reserved} reserved, "
        f"{cluster.reused_feasible} feasible verdicts reused "
        f"({cluster.reused_for_claims_alone} verdicts for pods with only a claim), "
        f"{cluster.binding_failures} bindings failed; Filter runs "
        f"{cluster.reusing_calls['filter']} vs {cluster.reference_calls['filter']}, "
        f"Score runs {cluster.reusing_calls['score']} vs {cluster.reference_calls['score']}"
    )
    # A history in which nothing is reused proves nothing.
    assert cluster.reserved
    assert cluster.reusing_calls["filter"] < cluster.reference_calls["filter"]
    return cluster


@pytest.mark.parametrize("seed", SEEDS)
async def test_reused_verdicts_and_scores_never_change_a_decision(seed: int) -> None:
    await run_history(seed, Features())


@pytest.mark.parametrize("seed", SEEDS)
async def test_reuse_with_partitions_and_shares(seed: int) -> None:
    """With devices that consume counters (one partition taken can leave another
    unusable) and shared devices (taken by up to three pods)."""
    cluster = await run_history(seed, Features(partitions=True))
    consumers = {
        (s.spec.driver, s.spec.pool.name, d.name)
        for s in cluster.slices.values()
        for d in s.spec.devices
        if d.consumes_counters
    }
    assert any(r.share_id is not None for r in cluster.reserved_results)
    assert any((r.driver, r.pool, r.device) in consumers for r in cluster.reserved_results)


@pytest.mark.parametrize("seed", SEEDS)
async def test_reuse_with_devices_placed_one_by_one(seed: int) -> None:
    """With a perDeviceNodeSelection pool beside the others: a device reachable from one
    node, one reachable from a zone's nodes, one from every node."""
    cluster = await run_history(seed, Features(per_device_slice=True))
    assert any(r.pool == "nic-a-each" for r in cluster.reserved_results)


@pytest.mark.parametrize("seed", SEEDS)
async def test_reuse_with_binding_conditions(seed: int) -> None:
    """With devices that have binding conditions (some binding to the node): PreBind waits
    until the driver sets them True, or a failure condition makes the framework unreserve;
    the pod's user claim is then usable nowhere until PostFilter deallocates it."""
    cluster = await run_history(
        seed, Features(binding_conditions=True, user_claims=True, partitions=True)
    )
    assert any(r.binding_conditions for r in cluster.reserved_results)
    assert cluster.binding_failures


@pytest.mark.parametrize("seed", SEEDS)
async def test_reuse_with_admin_access(seed: int) -> None:
    """With pods that have a claim of their own, most asking for admin access (one device
    or all of a class's), most beside extended resources of the special claim: admin access
    takes nothing from the special claims, whose verdicts are reused meanwhile."""
    cluster = await run_history(seed, Features(user_claims=True, partitions=True))
    results = cluster.reserved_results
    assert any(r.admin_access for r in results)
    assert any(not r.admin_access and r.request == "r" for r in results)  # a plain user claim


async def test_devices_freed_on_the_node_changed_last_are_seen() -> None:
    """A bound pod is deleted, a pod of the same spec is rejected on its node (the
    pod's claim still holds the devices), then the claim is deleted: a pod of that spec
    must find the node again.

    The Reserve of the first pod logged the node's change; the second attempt moved the
    spec's place in the log past it and stored a fresh rejection; the claim's deletion
    reports the same node again. `VerdictCache.node_changed` once dropped that report
    because it equals the log's last entry, and as the node's generation did not change
    (the pod had left the cache already), the stale rejection was reused: the pod,
    requeued by that very ResourceClaim deletion, stayed unschedulable until something
    else changed the node (found by the randomized test above, seeds 2 and 4).
    """
    dra = DraManager()
    reusing = new_default_framework(object(), dra)  # type: ignore[arg-type]
    reference = new_default_framework(object(), dra)  # type: ignore[arg-type]
    reference.verdict_cache.enabled = False
    cache, snapshot = Cache(), Snapshot()
    dra.on_class_add(
        codec.convert(class_dict("class-0", CLASSES["class-0"][1]), resource_v1.DeviceClass)
    )
    cache.add_node(codec.convert(node_dict("node-0", random.Random(0)), core_v1.Node))
    two = [{"name": "dev-0"}, {"name": "dev-1"}]
    dra.on_slice_add(
        codec.convert(
            slice_dict("node-0-slice", DRIVER, "node-0", two, nodeName="node-0"),
            resource_v1.ResourceSlice,
        )
    )
    spec = {
        "containers": [
            {
                "name": "c",
                "image": "pause",
                "resources": {
                    "requests": {"example.com/gpu-0": "2"},
                    "limits": {"example.com/gpu-0": "2"},
                },
            }
        ]
    }

    def new_pod() -> core_v1.Pod:
        uid = f"pod-uid-{next(POD_UIDS)}"
        meta = {"name": uid, "namespace": "default", "uid": uid, "resourceVersion": "1"}
        return codec.convert({"metadata": meta, "spec": copy.deepcopy(spec)}, core_v1.Pod)

    def both(pod: core_v1.Pod) -> tuple[Outcome, Outcome, CycleState]:
        cache.update_snapshot(snapshot)
        state = CycleState()
        got, _ = attempt(reusing, state, pod, snapshot.node_info_list)
        want, _ = attempt(reference, CycleState(), pod, snapshot.node_info_list)
        return got, want, state

    # The first pod: Reserve, PreBind (the claim written), bound.
    pod = new_pod()
    got, want, state = both(pod)
    assert got == want and got.feasible == {"node-0"}
    assumed = codec.clone(pod)
    assumed.spec.node_name = "node-0"
    cache.assume_pod(assumed)
    assert framework.is_success(await reusing.run_reserve_plugins_reserve(state, assumed, "node-0"))
    [pending] = dra.pending_allocations()
    claim = codec.clone(pending)
    claim.metadata.name, claim.metadata.uid, claim.metadata.resource_version = "c", "c", "2"
    dra.assume_claim_after_api_call(claim)
    dra.remove_claim_pending_allocation(pending.metadata.uid)
    cache.add_pod(assumed)

    # The pod is deleted; its claim still holds the devices: no room on node-0.
    cache.remove_pod(assumed)
    got, want, _ = both(new_pod())
    assert got == want and not got.feasible

    # The claim is deleted too: the devices are free.
    dra.on_claim_delete(claim)
    got, want, _ = both(new_pod())
    assert want.feasible == {"node-0"}
    assert got == want


@pytest.mark.parametrize("seed", range(3))
def test_kept_positions_pass_the_same_nodes_and_pick_a_best_one(seed: int) -> None:
    """With more nodes than `MIN_FEASIBLE_NODES_TO_FIND`, Filter stops early and the next
    attempt starts where it stopped. A walk over a spec's kept positions (the VerdictCache's)
    must find the same nodes in the same order, pass over as many and leave the same next
    start as one that visits every node, and the host picked from kept scores must have the
    best total score, along a history of pods placed and removed, nodes changed, added and
    removed."""
    rng = random.Random(seed)
    dra = DraManager()
    reusing = new_default_framework(object(), dra)  # type: ignore[arg-type]
    reference = new_default_framework(object(), dra)  # type: ignore[arg-type]
    reference.verdict_cache.enabled = False
    reusing_calls, reference_calls = count_calls(reusing), count_calls(reference)
    cache, snapshot = Cache(), Snapshot()
    node_names = [f"node-{i:03}" for i in range(300)]
    for name in node_names:
        cache.add_node(codec.convert(node_dict(name, rng), core_v1.Node))
    cpus = ["500m", "1", "1500m", "3"]
    placed: list[core_v1.Pod] = []
    picks = 0
    for step in range(1500):
        roll = rng.random()
        if roll < 0.15 and placed:
            cache.remove_pod(placed.pop(rng.randrange(len(placed))))
        elif roll < 0.18:
            name = rng.choice(node_names)
            node = codec.convert(node_dict(name, rng), core_v1.Node)
            node.status.allocatable["cpu"] = node.status.capacity["cpu"] = codec.convert(
                rng.choice(["2", "4", "8"]), type(node.status.allocatable["cpu"])
            )
            cache.update_node(node, node)
        elif roll < 0.19:
            name = f"extra-{step}"
            node_names.append(name)
            cache.add_node(codec.convert(node_dict(name, rng), core_v1.Node))
        elif roll < 0.20:
            name = node_names.pop(rng.randrange(len(node_names)))
            cache.remove_node(codec.convert(node_dict(name, rng), core_v1.Node))
        else:
            uid = f"pod-uid-{next(POD_UIDS)}"
            pod = codec.convert(
                {
                    "metadata": {"name": uid, "namespace": "d", "uid": uid, "resourceVersion": "1"},
                    "spec": {
                        "containers": [
                            {
                                "name": "c",
                                "image": "pause",
                                "resources": {"requests": {"cpu": rng.choice(cpus)}},
                            }
                        ]
                    },
                },
                core_v1.Pod,
            )
            cache.update_snapshot(snapshot)
            nodes = snapshot.node_info_list
            state, reference_state = CycleState(), CycleState()
            got, got_diagnosis = reusing.find_nodes_that_fit(state, pod, nodes)
            want, want_diagnosis = reference.find_nodes_that_fit(reference_state, pod, nodes)
            assert [n.name for n in got] == [n.name for n in want], f"step {step}"
            assert got_diagnosis.evaluated_nodes == want_diagnosis.evaluated_nodes
            assert reusing._next_start_node_index == reference._next_start_node_index
            if not want:
                assert got_diagnosis.node_to_status == want_diagnosis.node_to_status
                continue
            host = reusing.pick_host(state, pod, got, rng)
            status = reference.run_pre_score_plugins(reference_state, pod, want)
            assert framework.is_success(status)
            totals = dict(
                zip(
                    [n.name for n in want],
                    reference.total_scores(reference_state, pod, want),
                    strict=True,
                )
            )
            assert totals[host] == max(totals.values()), f"step {step}"
            kept = verdict_cache.attempt_verdicts(state)
            picks += kept is not None and kept.kept_walk is not None
            assumed = codec.clone(pod)
            assumed.spec.node_name = host
            cache.assume_pod(assumed)
            placed.append(assumed)
    # A history where nothing was kept would prove nothing.
    assert picks > 1000
    assert reusing_calls["filter"] < reference_calls["filter"] / 10, (
        reusing_calls,
        reference_calls,
    )
    assert reusing_calls["score"] < reference_calls["score"] / 5


def test_kept_totals_belong_to_the_score_plugins_that_made_them() -> None:
    """Totals kept for one set of Score plugins and weights are not read for another."""
    kept = KeptPositions(4)
    kept.score_with((("NodeResourcesFit", 1),))
    for position in (0, 2, 3):
        kept.found(position, feasible=True)
    kept.found(1, feasible=False)
    kept.scored(0, 50)
    kept.scored(2, 70)
    assert kept.unscored == [3] and kept.by_score == {50: [0], 70: [2]}
    kept.score_with((("NodeResourcesFit", 1),))  # the same: kept
    assert kept.by_score == {50: [0], 70: [2]}
    kept.score_with((("NodeResourcesFit", 2),))
    assert kept.unscored == [0, 2, 3] and kept.by_score == {} and kept.score_at == {}
    kept.forget(2)
    assert kept.unscored == [0, 3] and kept.unknown == [2] and kept.feasible == [0, 3]
