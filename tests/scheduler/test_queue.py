"""The scheduling queue on its own: ordering, backoff, requeueing by events and hints, and
events seen while a pod is in flight. A fake clock drives time."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from drasim.common.api import core_v1
from drasim.scheduler.framework import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    EventResource,
    QueueingHint,
)
from drasim.scheduler.queue import QueuedPodInfo, SchedulingQueue
from tests.scheduler.wrappers import make_node, make_pod

NODE_ADD = ClusterEvent(EventResource.NODE, ActionType.ADD)
NODE_LABEL = ClusterEvent(EventResource.NODE, ActionType.UPDATE_NODE_LABEL)
CLAIM_UPDATE = ClusterEvent(EventResource.RESOURCE_CLAIM, ActionType.UPDATE)
POD_TOLERATION = ClusterEvent(EventResource.POD, ActionType.UPDATE_POD_TOLERATION)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def step(self, seconds: float) -> None:
        self.now += seconds


def queue_hint(pod: core_v1.Pod, old: Any, new: Any) -> QueueingHint:
    return QueueingHint.QUEUE


def skip_hint(pod: core_v1.Pod, old: Any, new: Any) -> QueueingHint:
    return QueueingHint.QUEUE_SKIP


def broken_hint(pod: core_v1.Pod, old: Any, new: Any) -> QueueingHint:
    raise RuntimeError("bug in a hint")


def own_update_hint(pod: core_v1.Pod, old: Any, new: core_v1.Pod) -> QueueingHint:
    if new.metadata.uid == pod.metadata.uid and new.spec.tolerations:
        return QueueingHint.QUEUE
    return QueueingHint.QUEUE_SKIP


# Which plugin registered which event, with which hint.
EVENTS = {
    "NodeFit": [
        ClusterEventWithHint(ClusterEvent(EventResource.NODE, ActionType.ADD), queue_hint),
        ClusterEventWithHint(
            ClusterEvent(EventResource.NODE, ActionType.UPDATE_NODE_LABEL), skip_hint
        ),
    ],
    "Claims": [
        ClusterEventWithHint(
            ClusterEvent(EventResource.RESOURCE_CLAIM, ActionType.ADD | ActionType.UPDATE),
            broken_hint,
        )
    ],
    "Tolerations": [ClusterEventWithHint(POD_TOLERATION, own_update_hint)],
    "AnyNode": [ClusterEventWithHint(ClusterEvent(EventResource.NODE, ActionType.ALL))],
}


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def queue(clock: Clock) -> SchedulingQueue:
    return SchedulingQueue(EVENTS, clock=clock)


def where(queue: SchedulingQueue) -> str:
    return queue.pending_pods()[1]


async def pop_failed(
    queue: SchedulingQueue, *, rejected_by: set[str], pending: set[str] | None = None
) -> QueuedPodInfo:
    """Pop the next pod and fail it as these plugins would."""
    pinfo = await queue.pop()
    pinfo.unschedulable_plugins = set(rejected_by)
    pinfo.pending_plugins = set(pending or ())
    return pinfo


# --- activeQ -----------------------------------------------------------------------------


async def test_pop_returns_higher_priority_first_then_the_oldest(
    queue: SchedulingQueue, clock: Clock
) -> None:
    for name, priority in [("low-1", 0), ("high-1", 10), ("low-2", 0), ("high-2", 10)]:
        pod = make_pod(name).obj()
        pod.spec.priority = priority
        queue.add(pod)
        clock.step(1)
    order = [(await queue.pop()).pod.metadata.name for _ in range(4)]
    assert order == ["high-1", "high-2", "low-1", "low-2"]


async def test_pop_waits_for_a_pod(queue: SchedulingQueue) -> None:
    popping = asyncio.create_task(queue.pop())
    await asyncio.sleep(0)
    assert not popping.done()
    queue.add(make_pod("p").obj())
    pinfo = await asyncio.wait_for(popping, 1)
    assert (pinfo.pod.metadata.name, pinfo.attempts) == ("p", 1)


async def test_update_and_delete_in_active_q(queue: SchedulingQueue) -> None:
    old = make_pod("p").obj()
    queue.add(old)
    new = make_pod("p").obj()
    new.metadata.labels = {"v": "2"}
    queue.update(old, new)
    assert where(queue) == "activeQ:1; backoffQ:0; unschedulablePods:0"
    assert (await queue.pop()).pod.metadata.labels == {"v": "2"}
    queue.add(old)
    queue.delete(old)
    assert queue.pending_pods() == ([], "activeQ:0; backoffQ:0; unschedulablePods:0")


def test_update_of_an_unknown_pending_pod_adds_it(queue: SchedulingQueue) -> None:
    queue.update(make_pod("p").obj(), make_pod("p").obj())
    assert where(queue) == "activeQ:1; backoffQ:0; unschedulablePods:0"


# --- backoff -----------------------------------------------------------------------------


async def test_backoff_doubles_per_attempt_up_to_ten_seconds(
    queue: SchedulingQueue, clock: Clock
) -> None:
    queue.add(make_pod("p").obj())
    waited = []
    for _ in range(6):
        pinfo = await queue.pop()  # an error: no rejecting plugin
        queue.add_unschedulable_if_not_present(pinfo)
        assert where(queue) == "activeQ:0; backoffQ:1; unschedulablePods:0"
        seconds = 0.0
        while where(queue).startswith("activeQ:0"):
            clock.step(0.5)
            seconds += 0.5
            queue.flush_backoff_q_completed()
        waited.append(seconds)
    assert waited == [1, 2, 4, 8, 10, 10]


async def test_backoff_ends_by_itself_when_the_queue_runs() -> None:
    queue = SchedulingQueue(EVENTS, pod_initial_backoff=0.01)
    queue.add(make_pod("p").obj())
    queue.add_unschedulable_if_not_present(await queue.pop())
    runner = asyncio.create_task(queue.run())
    try:
        pinfo = await asyncio.wait_for(queue.pop(), 2)
        assert pinfo.attempts == 2
    finally:
        runner.cancel()
        with pytest.raises(asyncio.CancelledError):
            await runner


# --- unschedulable pods and events -------------------------------------------------------


async def test_rejected_pod_waits_for_an_event_its_rejector_registered(
    queue: SchedulingQueue, clock: Clock
) -> None:
    queue.add(make_pod("p").obj())
    queue.add_unschedulable_if_not_present(await pop_failed(queue, rejected_by={"NodeFit"}))
    assert where(queue) == "activeQ:0; backoffQ:0; unschedulablePods:1"

    # Registered by another plugin: not for this pod.
    queue.move_all_to_active_or_backoff_queue(CLAIM_UPDATE, None, object())
    # Registered by the rejector, but its hint says skip.
    queue.move_all_to_active_or_backoff_queue(NODE_LABEL, None, make_node().obj())
    assert where(queue) == "activeQ:0; backoffQ:0; unschedulablePods:1"

    queue.move_all_to_active_or_backoff_queue(NODE_ADD, None, make_node().obj())
    assert where(queue) == "activeQ:0; backoffQ:1; unschedulablePods:0"  # still backing off
    clock.step(1)
    queue.flush_backoff_q_completed()
    assert where(queue) == "activeQ:1; backoffQ:0; unschedulablePods:0"


async def test_event_after_the_backoff_moves_straight_to_active_q(
    queue: SchedulingQueue, clock: Clock
) -> None:
    queue.add(make_pod("p").obj())
    queue.add_unschedulable_if_not_present(await pop_failed(queue, rejected_by={"NodeFit"}))
    clock.step(5)
    queue.move_all_to_active_or_backoff_queue(NODE_ADD, None, make_node().obj())
    assert where(queue) == "activeQ:1; backoffQ:0; unschedulablePods:0"


async def test_event_without_hint_and_failing_hint_both_queue(queue: SchedulingQueue) -> None:
    queue.add(make_pod("a").obj())
    queue.add(make_pod("b").obj())
    queue.add_unschedulable_if_not_present(await pop_failed(queue, rejected_by={"AnyNode"}))
    queue.add_unschedulable_if_not_present(await pop_failed(queue, rejected_by={"Claims"}))
    queue.move_all_to_active_or_backoff_queue(NODE_LABEL, None, make_node().obj())
    queue.move_all_to_active_or_backoff_queue(CLAIM_UPDATE, None, object())
    assert where(queue) == "activeQ:0; backoffQ:2; unschedulablePods:0"


async def test_pre_check_keeps_pods_out_of_a_move(queue: SchedulingQueue) -> None:
    queue.add(make_pod("a").obj())
    queue.add(make_pod("b").obj())
    for _ in range(2):
        queue.add_unschedulable_if_not_present(await pop_failed(queue, rejected_by={"NodeFit"}))
    queue.move_all_to_active_or_backoff_queue(
        NODE_ADD, None, make_node().obj(), pre_check=lambda pod: pod.metadata.name == "a"
    )
    assert where(queue) == "activeQ:0; backoffQ:1; unschedulablePods:1"


async def test_pending_plugin_queues_immediately(queue: SchedulingQueue) -> None:
    queue.add(make_pod("p").obj())
    pinfo = await pop_failed(queue, rejected_by={"Claims"}, pending={"NodeFit"})
    queue.add_unschedulable_if_not_present(pinfo)
    queue.move_all_to_active_or_backoff_queue(NODE_ADD, None, make_node().obj())
    assert where(queue) == "activeQ:1; backoffQ:0; unschedulablePods:0"


async def test_own_update_moves_an_unschedulable_pod(queue: SchedulingQueue) -> None:
    old = make_pod("p").obj()
    queue.add(old)
    queue.add_unschedulable_if_not_present(await pop_failed(queue, rejected_by={"Tolerations"}))
    relabeled = make_pod("p").obj()
    relabeled.metadata.labels = {"a": "b"}
    queue.update(old, relabeled)
    assert where(queue) == "activeQ:0; backoffQ:0; unschedulablePods:1"
    tolerating = make_pod("p").toleration("gpu", "Exists").obj()
    queue.update(relabeled, tolerating)
    assert where(queue) == "activeQ:0; backoffQ:1; unschedulablePods:0"
    assert queue.pending_pods()[0] == [tolerating]


async def test_leftover_unschedulable_pods_are_flushed_after_five_minutes(
    queue: SchedulingQueue, clock: Clock
) -> None:
    queue.add(make_pod("p").obj())
    queue.add_unschedulable_if_not_present(await pop_failed(queue, rejected_by={"NodeFit"}))
    clock.step(299)
    queue.flush_unschedulable_pods_leftover()
    assert where(queue) == "activeQ:0; backoffQ:0; unschedulablePods:1"
    clock.step(2)
    queue.flush_unschedulable_pods_leftover()
    assert where(queue) == "activeQ:1; backoffQ:0; unschedulablePods:0"


async def test_deleted_pod_leaves_unschedulable_pods(queue: SchedulingQueue) -> None:
    pod = make_pod("p").obj()
    queue.add(pod)
    queue.add_unschedulable_if_not_present(await pop_failed(queue, rejected_by={"NodeFit"}))
    queue.delete(pod)
    assert where(queue) == "activeQ:0; backoffQ:0; unschedulablePods:0"


# --- in-flight events --------------------------------------------------------------------


async def test_event_during_the_attempt_sends_the_pod_to_backoff(queue: SchedulingQueue) -> None:
    queue.add(make_pod("p").obj())
    pinfo = await pop_failed(queue, rejected_by={"NodeFit"})
    # The node arrives while the pod is being scheduled on a snapshot without it.
    queue.move_all_to_active_or_backoff_queue(NODE_ADD, None, make_node().obj())
    queue.add_unschedulable_if_not_present(pinfo)
    assert where(queue) == "activeQ:0; backoffQ:1; unschedulablePods:0"


async def test_irrelevant_event_during_the_attempt_is_not_enough(queue: SchedulingQueue) -> None:
    queue.add(make_pod("p").obj())
    pinfo = await pop_failed(queue, rejected_by={"NodeFit"})
    queue.move_all_to_active_or_backoff_queue(NODE_LABEL, None, make_node().obj())
    queue.add_unschedulable_if_not_present(pinfo)
    assert where(queue) == "activeQ:0; backoffQ:0; unschedulablePods:1"


async def test_events_before_the_pop_and_after_done_do_not_count(
    queue: SchedulingQueue,
) -> None:
    queue.add(make_pod("first").obj())
    queue.add(make_pod("second").obj())
    first = await pop_failed(queue, rejected_by={"NodeFit"})
    queue.move_all_to_active_or_backoff_queue(NODE_ADD, None, make_node().obj())
    queue.done(first.uid)  # e.g. bound: the event is no longer needed by anyone
    second = await pop_failed(queue, rejected_by={"NodeFit"})
    queue.add_unschedulable_if_not_present(second)
    assert where(queue) == "activeQ:0; backoffQ:0; unschedulablePods:1"


async def test_own_update_during_the_attempt_is_an_in_flight_event(
    queue: SchedulingQueue,
) -> None:
    old = make_pod("p").obj()
    queue.add(old)
    pinfo = await pop_failed(queue, rejected_by={"Tolerations"})
    tolerating = make_pod("p").toleration("gpu", "Exists").obj()
    queue.update(old, tolerating)
    assert where(queue) == "activeQ:0; backoffQ:0; unschedulablePods:0"  # still in flight
    pinfo.pod = tolerating
    queue.add_unschedulable_if_not_present(pinfo)
    assert where(queue) == "activeQ:0; backoffQ:1; unschedulablePods:0"


async def test_failure_after_done_goes_to_backoff(queue: SchedulingQueue) -> None:
    """The binding cycle lets the in-flight events go before PreBind; a rejection there
    cannot be judged by events, so the pod is retried."""
    queue.add(make_pod("p").obj())
    pinfo = await pop_failed(queue, rejected_by={"NodeFit"})
    queue.done(pinfo.uid)
    queue.add_unschedulable_if_not_present(pinfo)
    assert where(queue) == "activeQ:0; backoffQ:1; unschedulablePods:0"


async def test_a_queued_pod_is_not_queued_twice(queue: SchedulingQueue) -> None:
    pod = make_pod("p").obj()
    queue.add(pod)
    pinfo = await queue.pop()
    queue.add(pod)  # re-added by an update while it was in flight
    queue.add_unschedulable_if_not_present(pinfo)
    assert where(queue) == "activeQ:1; backoffQ:0; unschedulablePods:0"


async def test_many_updates_keep_the_heap_small(queue: SchedulingQueue) -> None:
    pod = make_pod("p").obj()
    queue.add(pod)
    for _ in range(1000):
        queue.update(pod, pod)
    for i in range(3):
        queue.add(make_pod(f"p{i}").obj())
    names: list[str] = [(await queue.pop()).pod.metadata.name for _ in range(4)]
    assert names == ["p", "p0", "p1", "p2"]
    assert len(queue._active_q._heap) < 100  # stale entries are compacted away
