"""The span of a scheduling attempt: one trace per pod.

Each attempt of a pod is a `schedule pod` span continuing the pod's trace (the event that
queued it, see `QueuedPodInfo.traceparent`); it lasts until the binding cycle ends, so a
failed PreBind and the later attempt that binds are siblings in the same trace. Its
children are the extension points the attempt ran, which the framework spans itself
(`framework.instrumentation`): PreFilter, Filter, PostFilter, Score, Reserve, PreBind
(whose API writes are its children, through the `ApiClient`), Bind, Unreserve. An attempt
that fails is an error span.

All of it costs nothing per node while the attempt's span does not record (no SDK, or
not sampled). The writes of an attempt still carry the pod's trace, so
`drasim events --trace-id` shows them.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TypeVar

from opentelemetry import trace
from opentelemetry.trace import INVALID_SPAN, Span

from drasim.common import tracing
from drasim.scheduler import framework
from drasim.scheduler.framework import Status
from drasim.scheduler.queue import QueuedPodInfo

__all__ = ["end_attempt", "start_attempt", "within"]

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
