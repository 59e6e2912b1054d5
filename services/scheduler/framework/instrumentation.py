"""Metrics and tracing of the framework, as wrappers, so that the runtime's code is free of
both.

- Plugin durations (`scheduler_plugin_execution_duration_seconds`): `TimedPlugin` wraps a
  plugin so that each of its extension-point calls reports its duration and status code
  to a `PluginDurationObserver`. The framework keeps its extension points twice, with the
  plugins as they are and wrapped, and runs the wrapped ones only in the attempts sampled
  for metrics (`CycleState.record_plugin_metrics`, 10 % as upstream); the others pay
  nothing. Upstream: `pkg/scheduler/framework/runtime/instrumented_plugins.go` wraps
  plugins the same way (for its call counters).
- Spans: `traced(name)` wraps one of the framework's extension-point methods: while the
  attempt's span records, the point runs in a child span `name`, an error span when it
  fails. `traced_pre_filter` and `traced_filter` add what those two show: how PreFilter
  narrowed the nodes, and for each node Filter rejected (the first `MAX_NODE_EVENTS`) an
  event naming the node, the plugin, its code and reasons. Without a recording span (no
  SDK, or not sampled) a wrapper costs one check per call and nothing per node.
"""

from __future__ import annotations

import enum
import functools
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from opentelemetry import trace
from opentelemetry.trace import Span

from drasim.common import tracing
from drasim.common.api import core_v1
from drasim.scheduler.framework.status import FrameworkError, Status, code_name, is_success

if TYPE_CHECKING:
    from drasim.scheduler.framework.cycle_state import CycleState
    from drasim.scheduler.framework.interfaces import NodeScore, Plugin, PreFilterResult
    from drasim.scheduler.framework.node_info import NodeInfo
    from drasim.scheduler.framework.types import Diagnosis

__all__ = [
    "MAX_NODE_EVENTS",
    "ExtensionPoint",
    "PluginDurationObserver",
    "TimedPlugin",
    "traced",
    "traced_call",
    "traced_filter",
    "traced_pre_filter",
]

MAX_NODE_EVENTS = 20
"""Rejected nodes shown as events on a Filter span; the rest are only counted."""

P = ParamSpec("P")
R = TypeVar("R")


class ExtensionPoint(enum.StrEnum):
    """Metric label values of `scheduler_plugin_execution_duration_seconds`."""

    PRE_FILTER = "PreFilter"
    FILTER = "Filter"
    POST_FILTER = "PostFilter"
    PRE_SCORE = "PreScore"
    SCORE = "Score"
    SCORE_EXTENSION_NORMALIZE = "ScoreExtensionNormalize"
    RESERVE = "Reserve"
    UNRESERVE = "Unreserve"
    PRE_BIND = "PreBind"
    BIND = "Bind"


PluginDurationObserver = Callable[[ExtensionPoint, str, str, float], None]
"""`(extension_point, plugin, status code as upstream spells it, seconds)`, called after
every plugin call of a sampled attempt."""


# --- plugin durations --------------------------------------------------------------------


class TimedPlugin:
    """`plugin`, each extension-point call of it timed and reported to `observe`. Only the
    methods of the points the plugin implements are ever called."""

    def __init__(self, plugin: Plugin, observe: PluginDurationObserver) -> None:
        self.plugin: Any = plugin
        self.name = plugin.name
        self._observe = observe

    def _observed(self, point: ExtensionPoint, started: float, status: Status | None) -> None:
        self._observe(point, self.name, code_name(status), time.perf_counter() - started)

    def pre_filter(
        self, state: CycleState, pod: core_v1.Pod, nodes: Sequence[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None]:
        started = time.perf_counter()
        result, status = self.plugin.pre_filter(state, pod, nodes)
        self._observed(ExtensionPoint.PRE_FILTER, started, status)
        return result, status

    def filter(self, state: CycleState, pod: core_v1.Pod, node_info: NodeInfo) -> Status | None:
        started = time.perf_counter()
        status: Status | None = self.plugin.filter(state, pod, node_info)
        self._observed(ExtensionPoint.FILTER, started, status)
        return status

    async def post_filter(
        self, state: CycleState, pod: core_v1.Pod, diagnosis: Diagnosis
    ) -> Status | None:
        started = time.perf_counter()
        status: Status | None = await self.plugin.post_filter(state, pod, diagnosis)
        self._observed(ExtensionPoint.POST_FILTER, started, status)
        return status

    def pre_score(
        self, state: CycleState, pod: core_v1.Pod, nodes: Sequence[NodeInfo]
    ) -> Status | None:
        started = time.perf_counter()
        status: Status | None = self.plugin.pre_score(state, pod, nodes)
        self._observed(ExtensionPoint.PRE_SCORE, started, status)
        return status

    def score(self, state: CycleState, pod: core_v1.Pod, node_info: NodeInfo) -> int:
        started = time.perf_counter()
        score: int = self.plugin.score(state, pod, node_info)
        self._observed(ExtensionPoint.SCORE, started, None)
        return score

    def normalize_scores(
        self, state: CycleState, pod: core_v1.Pod, scores: list[NodeScore]
    ) -> list[NodeScore]:
        started = time.perf_counter()
        normalized: list[NodeScore] = self.plugin.normalize_scores(state, pod, scores)
        self._observed(ExtensionPoint.SCORE_EXTENSION_NORMALIZE, started, None)
        return normalized

    def reserve(self, state: CycleState, pod: core_v1.Pod, node_name: str) -> Status | None:
        started = time.perf_counter()
        status: Status | None = self.plugin.reserve(state, pod, node_name)
        self._observed(ExtensionPoint.RESERVE, started, status)
        return status

    async def unreserve(self, state: CycleState, pod: core_v1.Pod, node_name: str) -> None:
        started = time.perf_counter()
        await self.plugin.unreserve(state, pod, node_name)
        self._observed(ExtensionPoint.UNRESERVE, started, None)

    async def pre_bind(self, state: CycleState, pod: core_v1.Pod, node_name: str) -> Status | None:
        started = time.perf_counter()
        status: Status | None = await self.plugin.pre_bind(state, pod, node_name)
        self._observed(ExtensionPoint.PRE_BIND, started, status)
        return status

    async def bind(self, state: CycleState, pod: core_v1.Pod, node_name: str) -> Status | None:
        started = time.perf_counter()
        status: Status | None = await self.plugin.bind(state, pod, node_name)
        self._observed(ExtensionPoint.BIND, started, status)
        return status


# --- spans -------------------------------------------------------------------------------


def _recording() -> bool:
    return trace.get_current_span().is_recording()


def _annotate(s: Span, status: Status) -> None:
    s.set_attribute("drasim.code", status.code.name)
    if status.plugin:
        s.set_attribute("drasim.plugin", status.plugin)
    tracing.fail(s, status.message())


def traced(
    name: str,
) -> Callable[[Callable[P, Awaitable[R]]], Callable[P, Awaitable[R]]]:
    """An async extension point run as a child span `name` of the recording attempt; a
    failure status makes it an error span."""

    def wrap(run: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
        @functools.wraps(run)
        async def traced_run(*args: P.args, **kwargs: P.kwargs) -> R:
            if not _recording():
                return await run(*args, **kwargs)
            with tracing.span(name) as s:
                result = await run(*args, **kwargs)
                if isinstance(result, Status) and not is_success(result):
                    _annotate(s, result)
                return result

        return traced_run

    return wrap


def traced_call(name: str) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """A synchronous extension point run as a child span `name` of the recording attempt."""

    def wrap(run: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(run)
        def traced_run(*args: P.args, **kwargs: P.kwargs) -> R:
            if not _recording():
                return run(*args, **kwargs)
            with tracing.span(name):
                return run(*args, **kwargs)

        return traced_run

    return wrap


PreFilterRun = Callable[
    [Any, "CycleState", core_v1.Pod, Sequence["NodeInfo"]],
    tuple["PreFilterResult | None", "Status | None", set[str]],
]
FilterRun = Callable[..., list["NodeInfo"]]


def traced_pre_filter(run: PreFilterRun) -> PreFilterRun:
    """PreFilter as a span of its own: how many nodes its result left, and which plugins
    narrowed them."""

    @functools.wraps(run)
    def traced_run(
        self: Any, state: CycleState, pod: core_v1.Pod, nodes: Sequence[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None, set[str]]:
        if not _recording():
            return run(self, state, pod, nodes)
        with tracing.span("PreFilter") as s:
            result, status, narrowing = run(self, state, pod, nodes)
            if result is not None and result.node_names is not None:
                s.set_attribute("drasim.nodes", len(result.node_names))
                s.set_attribute("drasim.narrowed_by", sorted(narrowing))
            if not is_success(status):
                assert status is not None
                _annotate(s, status)
        return result, status, narrowing

    return traced_run


def traced_filter(run: FilterRun) -> FilterRun:
    """Filter as a span, for `run(self, state, pod, nodes, diagnosis, *,
    name_every_rejection, ...)`: the nodes, how many passed and were rejected, and an event
    `node rejected` for each rejected node (up to `MAX_NODE_EVENTS`) naming the node, the
    plugin, its code and reasons. A recording span sets `name_every_rejection`, so that
    every rejection is there to show."""

    @functools.wraps(run)
    def traced_run(
        self: Any,
        state: CycleState,
        pod: core_v1.Pod,
        nodes: Sequence[NodeInfo],
        diagnosis: Diagnosis,
        **kwargs: Any,
    ) -> list[NodeInfo]:
        if not _recording():
            return run(self, state, pod, nodes, diagnosis, **kwargs)
        kwargs["name_every_rejection"] = True
        with tracing.span("Filter") as s:
            try:
                feasible = run(self, state, pod, nodes, diagnosis, **kwargs)
            except FrameworkError as err:
                _annotate(s, err.status)
                raise
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
        return feasible

    return traced_run
