"""One pod's way through the scheduler, as upstream's `pkg/scheduler/schedule_one.go`.

`schedule_one` pops a pod and runs the `scheduling_cycle`: find the nodes that fit
(PreFilter, Filter; PostFilter when none does), score them, pick the best, assume the pod
there and Reserve. The `binding_cycle` (PreBind, Bind) then runs as its own task while the
next pod is scheduled: the assumption lets the next cycles count this pod already.

Every failure path unreserves and forgets the assumed pod, then hands the pod back to the
queue: rejected pods wait for an event that may help them, errors go to backoff. The pod
gets a `PodScheduled=False` condition and a FailedScheduling event saying why.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from typing import TYPE_CHECKING, Any

import msgspec
from opentelemetry.trace import INVALID_SPAN, Span

from drasim.common import codec, errors, events, tables
from drasim.common.api import core_v1
from drasim.common.client import ApiClient
from drasim.scheduler import framework, spans
from drasim.scheduler.framework import (
    ClusterEvent,
    Code,
    CycleState,
    Diagnosis,
    FitError,
    FrameworkError,
    Status,
)
from drasim.scheduler.queue import QueuedPodInfo

if TYPE_CHECKING:
    from drasim.scheduler.server import Scheduler

__all__ = [
    "DEFAULT_SCHEDULER_NAME",
    "NoNodesAvailableError",
    "ScheduleResult",
    "binding_cycle",
    "handle_scheduling_failure",
    "record_event",
    "responsible_for_pod",
    "schedule_one",
    "schedule_pod",
    "scheduling_cycle",
]

log = logging.getLogger(__name__)

DEFAULT_SCHEDULER_NAME = "default-scheduler"

# Pod condition reasons (`v1.PodReasonUnschedulable`, `v1.PodReasonSchedulerError`).
POD_REASON_UNSCHEDULABLE = "Unschedulable"
POD_REASON_SCHEDULER_ERROR = "SchedulerError"

# Plugin durations are measured in this share of attempts, as upstream.
PLUGIN_METRICS_SAMPLE_PERCENT = 10

# Events longer than this are cut (`validation.NoteLengthLimit`).
NOTE_LENGTH_LIMIT = 1024

ASSIGNED_POD_DELETE = ClusterEvent(framework.EventResource.POD, framework.ActionType.DELETE)


class NoNodesAvailableError(Exception):
    """The cluster has no nodes at all (upstream `ErrNoNodesAvailable`)."""

    def __init__(self) -> None:
        super().__init__("no nodes available to schedule pods")


@dataclasses.dataclass(frozen=True, slots=True)
class ScheduleResult:
    suggested_host: str = ""
    evaluated_nodes: int = 0
    feasible_nodes: int = 0


def responsible_for_pod(pod: core_v1.Pod) -> bool:
    """Pods naming no scheduler get the default one (API defaulting)."""
    return pod.spec.scheduler_name in ("", DEFAULT_SCHEDULER_NAME)


# --- the scheduling cycle ----------------------------------------------------------------


async def schedule_one(sched: Scheduler) -> None:
    """Schedule the next pod of the queue; its binding goes on in a task of its own."""
    pod_info = await sched.queue.pop()
    pod = pod_info.pod
    if await skip_pod_schedule(sched, pod):
        # Not requeued, but its in-flight events must be let go.
        sched.queue.done(pod.metadata.uid)
        return

    state = CycleState()
    state.record_plugin_metrics = sched.rng.randrange(100) < PLUGIN_METRICS_SAMPLE_PERCENT
    if sched.nominator:
        state.nominated_pods = sched.nominator.for_pod(pod)
    # The attempt's span continues the pod's trace and lasts until the binding ends.
    attempt = spans.start_attempt(pod_info)
    try:
        result, assumed_pod_info, status = await spans.within(
            attempt, scheduling_cycle(sched, state, pod_info)
        )
    except Exception as err:  # a plugin raised instead of returning a status
        log.exception("scheduling cycle of pod %s failed", _name(pod))
        result, assumed_pod_info, status = ScheduleResult(), pod_info, Status.error(err)
    if not framework.is_success(status):
        assert status is not None
        failure = handle_scheduling_failure(
            sched, assumed_pod_info, status, nominated_node_name=state.nominated_node_name
        )
        await spans.within(attempt, failure)
        spans.end_attempt(attempt, status)
        return

    # Bind asynchronously: we can do this because of the assumption step in the cycle.
    task = asyncio.create_task(
        _run_binding_cycle(sched, state, result, assumed_pod_info, attempt),
        name=f"binding-cycle-{pod.metadata.namespace}/{pod.metadata.name}",
    )
    sched.binding_tasks.add(task)
    task.add_done_callback(sched.binding_tasks.discard)


async def skip_pod_schedule(sched: Scheduler, pod: core_v1.Pod) -> bool:
    """A pod being deleted is not scheduled; an assumed pod (an update of it re-entered
    the queue while it binds) already is."""
    if pod.metadata.deletion_timestamp:
        await record_event(
            sched.events,
            pod,
            "Warning",
            "FailedScheduling",
            "Scheduling",
            f"skip schedule deleting pod: {pod.metadata.namespace}/{pod.metadata.name}",
        )
        return True
    return sched.cache.is_assumed_pod(pod)


async def scheduling_cycle(
    sched: Scheduler, state: CycleState, pod_info: QueuedPodInfo
) -> tuple[ScheduleResult, QueuedPodInfo, Status | None]:
    """Find a node, assume the pod on it and Reserve; on failure the returned status says
    why (Unschedulable wrapping a FitError when no node fits) and nothing stays assumed."""
    fwk = sched.framework
    pod = pod_info.pod
    try:
        result = schedule_pod(sched, state, pod)
    except NoNodesAvailableError as err:
        return ScheduleResult(), pod_info, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, err=err)
    except FrameworkError as err:
        log.error("error selecting node for pod %s: %s", _name(pod), err)
        return ScheduleResult(), pod_info, err.status
    except FitError as fit_error:
        # PostFilter may make the pod fit in a later cycle (preemption, or deleting a
        # special claim left from an earlier attempt); its verdict ends the message.
        if fwk.post_filter_plugins:
            status = await fwk.run_post_filter_plugins(state, pod, fit_error.diagnosis)
            fit_error.diagnosis.post_filter_msg = status.message() if status else ""
            if status is not None and status.code == Code.ERROR:
                # What PostFilter had to do for a later fit failed (deleting a leftover
                # special claim while the apistore is away): no event will come of a
                # write that did not happen, so the pod is retried after a backoff, as
                # for any error. Upstream waits among the unschedulable pods, up to
                # podMaxInUnschedulablePodsDuration.
                log.error("PostFilter for pod %s: %s", _name(pod), status.message())
                return ScheduleResult(), pod_info, Status.error(str(fit_error))
        return ScheduleResult(), pod_info, Status(Code.UNSCHEDULABLE, err=fit_error)

    # Tell the cache the pod runs on the host before it is bound there, so the next cycles
    # count it without waiting for the binding.
    assumed = msgspec.structs.replace(
        pod, spec=msgspec.structs.replace(pod.spec, node_name=result.suggested_host)
    )
    assumed_pod_info = dataclasses.replace(pod_info, pod=assumed)
    try:
        sched.cache.assume_pod(assumed)
    except ValueError as err:
        # A bug in requeuing; the failure handler sees the pod bound and drops it.
        return result, assumed_pod_info, Status.error(err)

    # Reserve; on failure the framework has already run every Unreserve.
    try:
        status = await fwk.run_reserve_plugins_reserve(state, assumed, result.suggested_host)
    except Exception:
        await fwk.run_reserve_plugins_unreserve(state, assumed, result.suggested_host)
        sched.cache.forget_pod(assumed)
        raise
    if not framework.is_success(status):
        assert status is not None
        sched.cache.forget_pod(assumed)
        if framework.is_rejected(status):
            diagnosis = Diagnosis(node_to_status={result.suggested_host: status})
            diagnosis.add_plugin_status(status)
            return result, assumed_pod_info, Status(status.code, err=FitError(pod, 1, diagnosis))
        return result, assumed_pod_info, status
    return result, assumed_pod_info, None


def schedule_pod(sched: Scheduler, state: CycleState, pod: core_v1.Pod) -> ScheduleResult:
    """Pick a node for the pod on a fresh snapshot (upstream `schedulePod`).

    Raises NoNodesAvailableError, FitError (no node fits) or FrameworkError (a plugin
    failed).
    """
    sched.cache.update_snapshot(sched.snapshot)
    nodes = sched.snapshot.node_info_list
    if not nodes:
        raise NoNodesAvailableError()
    feasible, diagnosis = sched.framework.find_nodes_that_fit(state, pod, nodes)
    if not feasible:
        raise FitError(pod, len(nodes), diagnosis)
    host = sched.framework.pick_host(state, pod, feasible, sched.rng)
    return ScheduleResult(host, diagnosis.evaluated_nodes, len(feasible))


# --- the binding cycle -------------------------------------------------------------------


async def _run_binding_cycle(
    sched: Scheduler,
    state: CycleState,
    result: ScheduleResult,
    assumed_pod_info: QueuedPodInfo,
    attempt: Span = INVALID_SPAN,
) -> None:
    try:
        status = await spans.within(attempt, binding_cycle(sched, state, result, assumed_pod_info))
    except Exception as err:  # a plugin bug must still unreserve and requeue the pod
        log.exception("binding cycle of pod %s failed", _name(assumed_pod_info.pod))
        status = Status.error(err)
    if not framework.is_success(status):
        assert status is not None
        await spans.within(
            attempt, handle_binding_cycle_error(sched, state, assumed_pod_info, result, status)
        )
    spans.end_attempt(attempt, status, result.suggested_host)


async def binding_cycle(
    sched: Scheduler, state: CycleState, result: ScheduleResult, assumed_pod_info: QueuedPodInfo
) -> Status | None:
    """PreBind, Bind, and the Scheduled event."""
    assumed = assumed_pod_info.pod
    host = result.suggested_host
    # Only PreBind can still reject the pod, and it does not need the events seen during
    # the attempt, so the queue may let them go now.
    sched.queue.done(assumed.metadata.uid)

    status = await sched.framework.run_pre_bind_plugins(state, assumed, host)
    if not framework.is_success(status):
        assert status is not None
        if framework.is_rejected(status):
            diagnosis = Diagnosis(node_to_status={host: status})
            diagnosis.add_plugin_status(status)
            return Status(status.code, err=FitError(assumed, 1, diagnosis))
        return status

    status = await sched.framework.run_bind_plugins(state, assumed, host)
    if not framework.is_success(status):
        return status
    sched.metrics.pod_scheduled(assumed_pod_info)

    log.debug(
        "bound pod %s to node %s (evaluated nodes %d, feasible nodes %d)",
        _name(assumed),
        host,
        result.evaluated_nodes,
        result.feasible_nodes,
    )
    await record_event(
        sched.events,
        assumed,
        "Normal",
        "Scheduled",
        "Binding",
        f"Successfully assigned {_name(assumed)} to {host}",
    )
    return None


async def handle_binding_cycle_error(
    sched: Scheduler,
    state: CycleState,
    assumed_pod_info: QueuedPodInfo,
    result: ScheduleResult,
    status: Status,
) -> None:
    """Unreserve and forget the pod, requeue it, and tell the pods waiting that what it
    held is free again."""
    assumed = assumed_pod_info.pod
    await sched.framework.run_reserve_plugins_unreserve(state, assumed, result.suggested_host)
    try:
        sched.cache.forget_pod(assumed)
        forgotten = True
    except ValueError as err:
        log.error("scheduler cache ForgetPod failed: %s", err)
        forgotten = False
    await handle_scheduling_failure(sched, assumed_pod_info, status)
    if forgotten:
        # Forgetting frees the node's resources like a pod deletion. Not for the pod
        # itself: the failure handler has just requeued it.
        uid = assumed.metadata.uid
        sched.queue.move_all_to_active_or_backoff_queue(
            ASSIGNED_POD_DELETE, assumed, None, pre_check=lambda p: p.metadata.uid != uid
        )


# --- failures ----------------------------------------------------------------------------


async def handle_scheduling_failure(
    sched: Scheduler,
    pod_info: QueuedPodInfo,
    status: Status,
    *,
    nominated_node_name: str | None = None,
) -> None:
    """Requeue the pod (rejected: with the plugins that rejected it), then record why on
    the pod: a FailedScheduling event and the PodScheduled=False condition, and the node
    preemption nominated it to (`nominated_node_name`; "" clears it, None leaves it)."""
    pod = pod_info.pod
    sched.metrics.pod_failed(rejected=framework.is_rejected(status))
    reason = (
        POD_REASON_UNSCHEDULABLE if framework.is_rejected(status) else POD_REASON_SCHEDULER_ERROR
    )
    err = status.err
    if isinstance(err, FitError):
        # Only events these plugins registered for will move the pod.
        pod_info.unschedulable_plugins = set(err.diagnosis.unschedulable_plugins)
        pod_info.pending_plugins = set(err.diagnosis.pending_plugins)
        log.info("unable to schedule pod %s; no fit; waiting: %s", _name(pod), status.message())
    elif isinstance(err, NoNodesAvailableError):
        log.info("unable to schedule pod %s; no nodes are registered; waiting", _name(pod))
    else:
        log.error("error scheduling pod %s; retrying: %s", _name(pod), status.message())

    # The queue takes the pod back only if it still exists unbound, as the informer says.
    cached = sched.pod_informer.get(pod.metadata.name, pod.metadata.namespace)
    if cached is None or cached.metadata.uid != pod.metadata.uid:
        log.info("pod %s doesn't exist in informer cache", _name(pod))
        sched.queue.done(pod.metadata.uid)
        return
    if cached.spec.node_name:
        log.info("pod %s has been assigned to node %s", _name(pod), cached.spec.node_name)
        sched.queue.done(pod.metadata.uid)
        return
    pod_info.pod = cached
    sched.queue.add_unschedulable_if_not_present(pod_info)
    if nominated_node_name is not None:
        # Counted by the next attempts at once, before the informer brings the status.
        sched.nominator.set(cached, nominated_node_name)

    message = status.message()
    await record_event(sched.events, cached, "Warning", "FailedScheduling", "Scheduling", message)
    condition = core_v1.PodCondition(
        type="PodScheduled", status="False", reason=reason, message=message
    )
    await update_pod(sched.api, cached, condition, nominated_node_name=nominated_node_name)


async def update_pod(
    api: ApiClient,
    pod: core_v1.Pod,
    condition: core_v1.PodCondition,
    *,
    nominated_node_name: str | None = None,
) -> None:
    """Set a pod condition (and a new `nominatedNodeName`) with a merge patch on
    pods/status, unless the pod already has them: a pod failing again for the same reason
    causes no write (upstream `updatePod`)."""
    status: dict[str, Any] = {}
    if nominated_node_name is not None and nominated_node_name != pod.status.nominated_node_name:
        status["nominatedNodeName"] = nominated_node_name or None
    conditions = list(pod.status.conditions)
    for i, existing in enumerate(conditions):
        if existing.type != condition.type:
            continue
        if (existing.status, existing.reason, existing.message) == (
            condition.status,
            condition.reason,
            condition.message,
        ):
            break
        transition = (
            existing.last_transition_time if existing.status == condition.status else _now()
        )
        conditions[i] = msgspec.structs.replace(condition, last_transition_time=transition)
        status["conditions"] = codec.to_builtins(conditions)
        break
    else:
        conditions.append(msgspec.structs.replace(condition, last_transition_time=_now()))
        status["conditions"] = codec.to_builtins(conditions)
    if not status:
        return
    patch = {"status": status}
    try:
        await api.patch(
            core_v1.Pod,
            pod.metadata.name,
            patch,
            namespace=pod.metadata.namespace,
            subresource="status",
        )
    except errors.ApiError as err:
        log.error("error updating pod %s: %s", _name(pod), err)


async def record_event(
    recorder: events.EventRecorder,
    pod: core_v1.Pod,
    event_type: str,
    reason: str,
    action: str,
    message: str,
) -> None:
    """Record a Kubernetes Event about the pod, as the scheduler's event recorder does: a
    repeated one counts up on the Event already written. A failure is only logged, an
    event is never worth failing a pod for."""
    involved = events.reference(pod)
    try:
        await recorder.record(involved, event_type, reason, _truncate(message), action=action)
    except errors.ApiError as err:
        log.error("error recording event %s for pod %s: %s", reason, _name(pod), err)


def _truncate(message: str) -> str:
    suffix = " ..."
    if len(message) <= NOTE_LENGTH_LIMIT:
        return message
    return message[: NOTE_LENGTH_LIMIT - len(suffix)] + suffix


def _now() -> str:
    return tables.format_time()


def _name(pod: core_v1.Pod) -> str:
    return f"{pod.metadata.namespace}/{pod.metadata.name}"
