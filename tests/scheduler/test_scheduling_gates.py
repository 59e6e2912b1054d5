"""SchedulingGates and the queue's gated pods: a pod with scheduling gates is held in
unschedulablePods without an attempt, counted as `gated`, until the update that removes
its last gate (upstream `schedulinggates` and the queue's PreEnqueue handling)."""

from __future__ import annotations

import asyncio

import msgspec

from drasim.common.api import core_v1
from drasim.scheduler import framework
from drasim.scheduler.framework import ActionType, ClusterEvent, EventResource
from drasim.scheduler.plugins.scheduling_gates import SchedulingGates
from drasim.scheduler.queue import SchedulingQueue
from tests.scheduler.wrappers import make_pod


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def gated_queue(clock: Clock | None = None) -> SchedulingQueue:
    fwk = framework.Framework([SchedulingGates()])
    return SchedulingQueue(
        fwk.events_to_register(),
        clock=clock or Clock(),
        pre_enqueue=fwk.run_pre_enqueue_plugins,
    )


def ungated(pod: core_v1.Pod, *keep: str) -> core_v1.Pod:
    gates = [g for g in pod.spec.scheduling_gates if g.name in keep]
    spec = msgspec.structs.replace(pod.spec, scheduling_gates=gates)
    return msgspec.structs.replace(pod, spec=spec)


def test_pre_enqueue_names_the_gates_as_upstream() -> None:
    status = SchedulingGates().pre_enqueue(make_pod("p").scheduling_gates("a.io/x", "b").obj())
    assert status is not None
    assert status.code == framework.Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert status.message() == "waiting for scheduling gates: [a.io/x b]"
    assert SchedulingGates().pre_enqueue(make_pod("p").obj()) is None


def test_run_pre_enqueue_plugins_names_the_gating_plugin() -> None:
    fwk = framework.Framework([SchedulingGates()])
    status = fwk.run_pre_enqueue_plugins(make_pod("p").scheduling_gates("g").obj())
    assert status is not None and status.plugin == "SchedulingGates"
    assert fwk.run_pre_enqueue_plugins(make_pod("p").obj()) is None


async def test_gated_pod_waits_without_an_attempt_until_its_last_gate_goes() -> None:
    clock = Clock()
    queue = gated_queue(clock)
    pod = make_pod("p").scheduling_gates("a", "b").obj()
    queue.add(pod)
    assert queue.pending_pods_by_queue() == {
        "active": 0,
        "backoff": 0,
        "unschedulable": 0,
        "gated": 1,
    }

    # One gate of two removed: still gated.
    one_left = ungated(pod, "b")
    queue.update(pod, one_left)
    assert queue.pending_pods_by_queue()["gated"] == 1

    clock.now += 30  # time gated does not count towards the scheduling latency
    queue.update(one_left, ungated(pod))
    assert queue.pending_pods_by_queue() == {
        "active": 1,
        "backoff": 0,
        "unschedulable": 0,
        "gated": 0,
    }
    pinfo = await asyncio.wait_for(queue.pop(), 1)
    assert pinfo.pod.spec.scheduling_gates == []
    assert pinfo.attempts == 1
    assert pinfo.initial_attempt_timestamp == clock.now


def test_other_changes_and_cluster_events_leave_a_gated_pod_gated() -> None:
    queue = gated_queue()
    pod = make_pod("p").scheduling_gates("a").obj()
    queue.add(pod)
    relabelled = make_pod("p").scheduling_gates("a").obj()
    relabelled.metadata.labels = {"v": "2"}
    queue.update(pod, relabelled)
    other = make_pod("other").scheduling_gates("a").obj()
    queue.move_all_to_active_or_backoff_queue(
        ClusterEvent(EventResource.POD, ActionType.UPDATE_POD_SCHEDULING_GATES_ELIMINATED),
        other,
        ungated(other),
    )
    queue.move_all_to_active_or_backoff_queue(
        ClusterEvent(EventResource.NODE, ActionType.ADD), None, None
    )
    assert queue.pending_pods_by_queue()["gated"] == 1
    [pending], _ = queue.pending_pods()
    assert pending.metadata.labels == {"v": "2"}


def test_flush_of_a_gated_pod_gates_it_again() -> None:
    clock = Clock()
    queue = gated_queue(clock)
    queue.add(make_pod("p").scheduling_gates("a").obj())
    clock.now += 301
    queue.flush_unschedulable_pods_leftover()
    assert queue.pending_pods_by_queue()["gated"] == 1
    assert queue.pending_pods()[1] == "activeQ:0; backoffQ:0; unschedulablePods:1"


def test_pod_without_gates_goes_straight_to_active_q() -> None:
    queue = gated_queue()
    queue.add(make_pod("p").obj())
    assert queue.pending_pods_by_queue()["active"] == 1


def test_deleting_a_gated_pod_forgets_it() -> None:
    queue = gated_queue()
    pod = make_pod("p").scheduling_gates("a").obj()
    queue.add(pod)
    queue.delete(pod)
    assert queue.pending_pods_by_queue()["gated"] == 0
