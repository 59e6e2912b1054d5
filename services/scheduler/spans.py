"""The spans of a scheduling attempt: one trace per pod, one span per extension point.

Each attempt of a pod is a `schedule pod` span continuing the pod's trace (the event that
queued it, see `QueuedPodInfo.traceparent`); it lasts until the binding cycle ends, so a
failed PreBind and the later attempt that binds are siblings in the same trace. Its
children are the extension points the attempt ran: PreFilter, Filter (the rejecting
plugin's verdict for each node it rejected as span events, the first `MAX_NODE_EVENTS`),
PostFilter, Score, Reserve, PreBind (whose API writes are its children, through the
`ApiClient`), Bind, Unreserve. A point that fails, and an attempt that fails, is an error
span.

All of it costs nothing per node while the attempt's span does not record (no SDK, or
not sampled): the helpers check `is_recording()` once and then call the framework as is.
The writes of an attempt still carry the pod's trace, so `drasim events --trace-id` shows
them.

Framework hook wanted: PreFilter and Filter run inside one framework call
(`find_nodes_that_fit`), so `TracedFramework` times PreFilter by overriding
`run_pre_filter_plugins`; a hook in the framework would make that override unnecessary.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from opentelemetry import trace
from opentelemetry.trace import INVALID_SPAN, Span

from drasim.common import tracing
from drasim.common.api import core_v1
from drasim.scheduler import framework
from drasim.scheduler.framework import CycleState, Diagnosis, NodeInfo, PreFilterResult, Status
from drasim.scheduler.queue import QueuedPodInfo

__all__ = [
    "MAX_NODE_EVENTS",
    "TracedFramework",
    "call",
    "end_attempt",
    "find_nodes_that_fit",
    "point",
    "start_attempt",
    "within",
]

MAX_NODE_EVENTS = 20
"""Rejected nodes shown as events on a Filter span; the rest are only counted."""

ATTEMPT = "schedule pod"

R = TypeVar("R")


# --- the attempt -------------------------------------------------------------------------


def start_attempt(pod_info: QueuedPodInfo) -> Span:
    """The span of this attempt, continuing the pod's trace (not made current: the cycle
    runs `within` it, and the binding task ends it)."""
    if not pod_info.traceparent and not tracing.enabled():
        return INVALID_SPAN
    s = tracing.start_span(ATTEMPT, traceparent=pod_info.traceparent)
    if s.is_recording():
        pod = pod_info.pod
        s.set_attribute("k8s.namespace.name", pod.metadata.namespace)
        s.set_attribute("k8s.pod.name", pod.metadata.name)
        s.set_attribute("k8s.pod.uid", pod.metadata.uid)
        s.set_attribute("drasim.attempt", pod_info.attempts)
    return s


async def within(s: Span, work: Awaitable[R]) -> R:
    """Await `work` with `s` current: its spans and API writes join the attempt."""
    if s is INVALID_SPAN:
        return await work
    with trace.use_span(s, end_on_exit=False):
        return await work


def end_attempt(s: Span, status: Status | None, node: str = "") -> None:
    """End the attempt: scheduled on `node`, or failed (rejected or an error) with the
    status' message."""
    if s.is_recording():
        if framework.is_success(status):
            s.set_attribute("drasim.result", "scheduled")
            s.set_attribute("k8s.node.name", node)
        else:
            assert status is not None
            rejected = framework.is_rejected(status)
            s.set_attribute("drasim.result", "unschedulable" if rejected else "error")
            s.set_attribute("drasim.code", status.code.name)
            tracing.fail(s, status.message())
    s.end()


# --- extension points --------------------------------------------------------------------


async def point(name: str, work: Awaitable[R]) -> R:
    """Await an extension point's framework call as a child span `name` of the current
    attempt; a failure status makes it an error span."""
    parent = trace.get_current_span()
    if not parent.is_recording():
        return await work
    with tracing.span(name) as s:
        result = await work
        if isinstance(result, Status) and not framework.is_success(result):
            _annotate(s, result)
        return result


def call(name: str, work: Callable[..., R], *args: Any) -> R:
    """`work(*args)`, synchronous, as a child span `name` when the attempt records."""
    if not trace.get_current_span().is_recording():
        return work(*args)
    with tracing.span(name):
        return work(*args)


def _annotate(s: Span, status: Status) -> None:
    s.set_attribute("drasim.code", status.code.name)
    if status.plugin:
        s.set_attribute("drasim.plugin", status.plugin)
    tracing.fail(s, status.message())


class TracedFramework(framework.Framework):
    """The framework, with PreFilter as a span of its own while the attempt records (it
    runs inside `find_nodes_that_fit`, which `find_nodes_that_fit` below spans as Filter)."""

    pre_filter_ended_ns = 0

    def run_pre_filter_plugins(
        self, state: CycleState, pod: core_v1.Pod, nodes: Sequence[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None, set[str]]:
        if not trace.get_current_span().is_recording():
            return super().run_pre_filter_plugins(state, pod, nodes)
        with tracing.span("PreFilter") as s:
            result, status, narrowing = super().run_pre_filter_plugins(state, pod, nodes)
            if result is not None and result.node_names is not None:
                s.set_attribute("drasim.nodes", len(result.node_names))
                s.set_attribute("drasim.narrowed_by", sorted(narrowing))
            if not framework.is_success(status):
                assert status is not None
                _annotate(s, status)
        self.pre_filter_ended_ns = time.time_ns()
        return result, status, narrowing


def find_nodes_that_fit(
    fwk: framework.Framework, state: CycleState, pod: core_v1.Pod, nodes: Sequence[NodeInfo]
) -> tuple[list[NodeInfo], Diagnosis]:
    """`fwk.find_nodes_that_fit`, with a Filter span when the attempt records: the number
    of nodes checked and passed, and for each rejected node (up to `MAX_NODE_EVENTS`) an
    event `node rejected` naming the node, the plugin, its code and reasons."""
    if not trace.get_current_span().is_recording():
        return fwk.find_nodes_that_fit(state, pod, nodes)
    started = time.time_ns()
    try:
        feasible, diagnosis = fwk.find_nodes_that_fit(state, pod, nodes, name_every_rejection=True)
    except framework.FrameworkError as err:
        s = tracing.start_span("Filter", kind=tracing.SpanKind.INTERNAL)
        _annotate(s, err.status)
        s.end()
        raise
    if diagnosis.pre_filter_msg:
        return feasible, diagnosis  # PreFilter rejected every node: Filter did not run
    pre_filter_ended = getattr(fwk, "pre_filter_ended_ns", 0)
    s = tracing.tracer().start_span("Filter", start_time=max(started, pre_filter_ended))
    rejected = diagnosis.node_to_status
    s.set_attribute("drasim.nodes", len(nodes))
    s.set_attribute("drasim.feasible_nodes", len(feasible))
    s.set_attribute("drasim.rejected_nodes", len(rejected))
    for shown, (node, status) in enumerate(rejected.items()):
        if shown == MAX_NODE_EVENTS:
            s.set_attribute("drasim.rejected_nodes_not_shown", len(rejected) - shown)
            break
        s.add_event(
            "node rejected",
            {
                "k8s.node.name": node,
                "drasim.plugin": status.plugin,
                "drasim.code": status.code.name,
                "drasim.reasons": status.all_reasons(),
            },
        )
    if not feasible:
        tracing.fail(s, f"0/{len(nodes)} nodes are available")
    s.end()
    return feasible, diagnosis
