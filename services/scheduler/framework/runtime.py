"""The framework at run time: one profile's plugins sorted into extension points, and the
rules by which each point runs them.

Upstream: `pkg/scheduler/framework/runtime/framework.go` and `pkg/scheduler/schedule_one.go`
(`findNodesThatFitPod`, `numFeasibleNodesToFind`).
"""

from __future__ import annotations

import enum
import random
import time
from collections.abc import Callable, Iterable, Mapping, Sequence

from drasim.common.api import core_v1
from drasim.scheduler.framework.cycle_state import CycleState
from drasim.scheduler.framework.events import ClusterEventWithHint
from drasim.scheduler.framework.interfaces import (
    MAX_NODE_SCORE,
    MIN_NODE_SCORE,
    BindPlugin,
    CandidateNodesPlugin,
    EnqueueExtensions,
    FilterPlugin,
    NodeScore,
    Plugin,
    PostFilterPlugin,
    PreBindPlugin,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    ReservePlugin,
    ScoreExtensions,
    ScorePlugin,
    invalid_score,
)
from drasim.scheduler.framework.node_info import NodeInfo, NodeInfoList
from drasim.scheduler.framework.status import (
    Code,
    FrameworkError,
    Status,
    as_error,
    code_name,
    is_rejected,
    is_skip,
    is_success,
    wrap,
)
from drasim.scheduler.framework.types import Diagnosis, NodePluginScores, PluginScore
from drasim.scheduler.framework.verdict_cache import VerdictCache

__all__ = [
    "MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND",
    "MIN_FEASIBLE_NODES_TO_FIND",
    "ExtensionPoint",
    "FilterWalk",
    "Framework",
    "PluginDurationObserver",
    "select_host",
    "with_nominated_pods",
]

# Filtering stops after this many feasible nodes at least (upstream's constants).
MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5


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
every plugin call."""


def _plugin_list_message(plugins: Iterable[str]) -> str:
    """Go's `%v` of a sorted string slice: `[A B]`."""
    return "[" + " ".join(sorted(plugins)) + "]"


def with_nominated_pods(state: CycleState, node_info: NodeInfo) -> NodeInfo:
    """The node with the pods nominated to it added (a copy), or the node itself."""
    nominated = state.nominated_pods.get(node_info.name)
    if not nominated:
        return node_info
    copy = node_info.snapshot()
    for pod in nominated:
        copy.add_pod(pod)
    return copy


class FilterWalk:
    """One attempt's Filter over the nodes, upstream's way: from `start` round the list
    until `to_find` nodes passed; each node's first non-success status rules it out."""

    def __init__(
        self,
        state: CycleState,
        pod: core_v1.Pod,
        *,
        filters: list[tuple[str, Callable[[CycleState, core_v1.Pod, NodeInfo], Status | None]]],
        observe: Callable[[CycleState, ExtensionPoint, str, float, Status | None], None] | None,
        start: int,
        to_find: int,
    ) -> None:
        self.state, self.pod, self.filters, self.observe = state, pod, filters, observe
        self.start, self.to_find = start, to_find

    def filter(self, node_info: NodeInfo) -> Status | None:
        """Run the Filters on one node: None if it passes, else the rejecting status.
        Raises FrameworkError when a plugin errs."""
        state, pod, observe = self.state, self.pod, self.observe
        if state.nominated_pods:
            node_info = with_nominated_pods(state, node_info)
        for name, run_filter in self.filters:
            if observe is not None:
                started = time.perf_counter()
                status = run_filter(state, pod, node_info)
                observe(state, ExtensionPoint.FILTER, name, started, status)
            else:
                status = run_filter(state, pod, node_info)
            if status is not None and status.code != Code.SUCCESS:
                if not is_rejected(status):
                    raise FrameworkError(wrap(f"running {name!r} filter plugin", status))
                return status.with_plugin(name)
        return None

    def every_node(
        self,
        nodes: Sequence[NodeInfo],
        diagnosis: Diagnosis,
        verdict: Callable[[NodeInfo], Status | None] | None = None,
    ) -> tuple[list[NodeInfo], int]:
        """Visit each node in turn: (feasible nodes, nodes passed over). `verdict` answers
        for a node in place of `filter` (the VerdictCache's kept verdicts); every rejection
        goes into the diagnosis."""
        verdict = verdict or self.filter
        num_all = len(nodes)
        feasible: list[NodeInfo] = []
        processed = 0
        for i in range(self.start, self.start + num_all):
            node_info = nodes[i % num_all]
            processed += 1
            status = verdict(node_info)
            if status is None:
                feasible.append(node_info)
                if len(feasible) >= self.to_find:
                    break
            else:
                diagnosis.node_to_status[node_info.name] = status
                diagnosis.add_plugin_status(status)
        return feasible, processed


class Framework:
    """One scheduling profile: its plugins sorted into extension points, run in list order.

    A plugin joins every point whose Protocol it implements (checked with `isinstance`).
    """

    def __init__(
        self,
        plugins: Sequence[Plugin],
        *,
        score_weights: Mapping[str, int] | None = None,
        observe_plugin_duration: PluginDurationObserver | None = None,
        percentage_of_nodes_to_score: int = 0,
    ) -> None:
        names = [plugin.name for plugin in plugins]
        if len(set(names)) != len(names):
            raise ValueError(f"plugin names must be unique, got {names}")
        self.plugins = list(plugins)
        self.pre_filter_plugins = [p for p in plugins if isinstance(p, PreFilterPlugin)]
        self.filter_plugins = [p for p in plugins if isinstance(p, FilterPlugin)]
        self.post_filter_plugins = [p for p in plugins if isinstance(p, PostFilterPlugin)]
        self.pre_score_plugins = [p for p in plugins if isinstance(p, PreScorePlugin)]
        self.score_plugins = [p for p in plugins if isinstance(p, ScorePlugin)]
        self.reserve_plugins = [p for p in plugins if isinstance(p, ReservePlugin)]
        self.pre_bind_plugins = [p for p in plugins if isinstance(p, PreBindPlugin)]
        self.bind_plugins = [p for p in plugins if isinstance(p, BindPlugin)]
        self.enqueue_extensions = [p for p in plugins if isinstance(p, EnqueueExtensions)]
        self.candidate_plugins = [p for p in plugins if isinstance(p, CandidateNodesPlugin)]
        self.score_weights = {p.name: (score_weights or {}).get(p.name, 1) for p in plugins}
        self._observe = observe_plugin_duration
        # 0 picks upstream's adaptive percentage (see `num_feasible_nodes_to_find`).
        self.percentage_of_nodes_to_score = percentage_of_nodes_to_score
        self._next_start_node_index = 0
        self.verdict_cache = VerdictCache(
            self.filter_plugins, self.score_plugins, self.score_weights, self.run_filter_plugins
        )

    def _observed(
        self,
        state: CycleState,
        point: ExtensionPoint,
        plugin: str,
        started: float,
        status: Status | None,
    ) -> None:
        if self._observe is not None and state.record_plugin_metrics:
            self._observe(point, plugin, code_name(status), time.perf_counter() - started)

    # -- scheduling cycle --

    def run_pre_filter_plugins(
        self, state: CycleState, pod: core_v1.Pod, nodes: Sequence[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None, set[str]]:
        """Run every PreFilter; returns the merged result, the status and the plugins that
        narrowed the nodes. Skips are recorded in `state.skip_filter_plugins`."""
        result: PreFilterResult | None = None
        plugins_with_nodes: set[str] = set()
        unschedulable: Status | None = None
        for pl in self.pre_filter_plugins:
            started = time.perf_counter()
            narrowed, status = pl.pre_filter(state, pod, nodes)
            self._observed(state, ExtensionPoint.PRE_FILTER, pl.name, started, status)
            if is_skip(status):
                state.skip_filter_plugins.add(pl.name)
                continue
            if status is not None and not is_success(status):
                status.plugin = pl.name
                if status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                    # Preemption cannot help, so the remaining PreFilters need not run.
                    return None, status, set()
                if status.code == Code.UNSCHEDULABLE:
                    # Preemption runs later and needs every PreFilter's state (#119770).
                    unschedulable = status
                    continue
                return None, wrap(f"running PreFilter plugin {pl.name!r}", status), set()
            if narrowed is not None and not narrowed.all_nodes():
                plugins_with_nodes.add(pl.name)
            result = narrowed.merge(result) if narrowed is not None else result
            if result is not None and not result.node_names:
                if len(plugins_with_nodes) == 1:
                    msg = f"node(s) didn't satisfy plugin {next(iter(plugins_with_nodes))}"
                else:
                    msg = (
                        f"node(s) didn't satisfy plugin(s) "
                        f"{_plugin_list_message(plugins_with_nodes)} simultaneously"
                    )
                return result, Status.unresolvable(msg), plugins_with_nodes
        return result, unschedulable, plugins_with_nodes

    def run_filter_plugins(
        self, state: CycleState, pod: core_v1.Pod, node_info: NodeInfo
    ) -> Status | None:
        """The first non-success Filter status rules the node out; the rest do not run.
        Pods nominated to the node count as running there (`CycleState.nominated_pods`)."""
        if state.nominated_pods:
            node_info = with_nominated_pods(state, node_info)
        for pl in self.filter_plugins:
            if pl.name in state.skip_filter_plugins:
                continue
            started = time.perf_counter()
            status = pl.filter(state, pod, node_info)
            self._observed(state, ExtensionPoint.FILTER, pl.name, started, status)
            if not is_success(status):
                assert status is not None
                if not is_rejected(status):
                    status = wrap(f"running {pl.name!r} filter plugin", status)
                return status.with_plugin(pl.name)
        return None

    def num_feasible_nodes_to_find(self, num_all_nodes: int) -> int:
        """How many feasible nodes are enough to stop filtering (upstream
        `numFeasibleNodesToFind`): all of a small cluster, else `percentageOfNodesToScore`
        of it, by default 50 % minus 1 % per 125 nodes (at least 5 %), never below 100."""
        if num_all_nodes < MIN_FEASIBLE_NODES_TO_FIND:
            return num_all_nodes
        percentage = self.percentage_of_nodes_to_score
        if percentage <= 0:
            percentage = max(50 - num_all_nodes // 125, MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND)
        return max(num_all_nodes * percentage // 100, MIN_FEASIBLE_NODES_TO_FIND)

    def find_nodes_that_fit(
        self,
        state: CycleState,
        pod: core_v1.Pod,
        node_infos: Sequence[NodeInfo],
        *,
        name_every_rejection: bool = False,
    ) -> tuple[list[NodeInfo], Diagnosis]:
        """PreFilter, then Filter (upstream `findNodesThatFitPod`).

        As upstream, Filter stops once `num_feasible_nodes_to_find` nodes passed, and the
        next attempt starts where this one stopped, so every node gets its turn. Nodes not
        checked have no status in the diagnosis; with kept verdicts, nodes passed over are
        named only when none fits, unless `name_every_rejection` (a traced attempt). Raises
        FrameworkError when a plugin returns Error.
        """
        diagnosis = Diagnosis()
        result, status, plugins_with_nodes = self.run_pre_filter_plugins(state, pod, node_infos)
        diagnosis.unschedulable_plugins = set(plugins_with_nodes)
        if not is_success(status):
            assert status is not None
            if not is_rejected(status):
                raise FrameworkError(status)
            # Every node gets the same status so that PostFilter sees them all.
            diagnosis.absent_nodes_status = status
            diagnosis.pre_filter_msg = status.message()
            diagnosis.add_plugin_status(status)
            return [], diagnosis

        nodes = node_infos
        if result is not None and result.node_names is not None:
            nodes = [n for n in node_infos if n.name in result.node_names]
            diagnosis.absent_nodes_status = Status.unresolvable(
                f"node(s) didn't satisfy plugin(s) {_plugin_list_message(plugins_with_nodes)}"
            )
        only = self._candidate_nodes(state)
        if only is not None:
            # Only these can pass; if none does, every node is filtered after all, so
            # that the diagnosis says what each node lacks, as upstream's does.
            if isinstance(nodes, NodeInfoList):  # (in walk order, without a pass over all)
                positions = nodes.positions
                candidates = [
                    nodes[p] for p in sorted(positions[n] for n in only if n in positions)
                ]
            else:
                candidates = [n for n in nodes if n.name in only]
            probe = Diagnosis()
            feasible = self._find_nodes_that_pass_filters(
                state, pod, candidates, probe, name_every_rejection
            )
            if feasible:
                diagnosis.evaluated_nodes = probe.evaluated_nodes
                return feasible, diagnosis
        feasible = self._find_nodes_that_pass_filters(
            state, pod, nodes, diagnosis, name_every_rejection
        )
        return feasible, diagnosis

    def _candidate_nodes(self, state: CycleState) -> frozenset[str] | None:
        """The only nodes that may pass, as the PreFilters that ran know them."""
        only: frozenset[str] | None = None
        for pl in self.candidate_plugins:
            if pl.name not in state.skip_filter_plugins:
                names = pl.candidate_nodes(state)
                if names is not None:
                    only = names if only is None else only & names
        return only

    def _find_nodes_that_pass_filters(
        self,
        state: CycleState,
        pod: core_v1.Pod,
        nodes: Sequence[NodeInfo],
        diagnosis: Diagnosis,
        name_every_rejection: bool,
    ) -> list[NodeInfo]:
        num_all = len(nodes)
        if num_all == 0:
            return []
        walk = FilterWalk(
            state,
            pod,
            filters=[
                (pl.name, pl.filter)
                for pl in self.filter_plugins
                if pl.name not in state.skip_filter_plugins
            ],
            observe=self._observed if self._observe and state.record_plugin_metrics else None,
            start=self._next_start_node_index % num_all,
            to_find=self.num_feasible_nodes_to_find(num_all),
        )
        found = self.verdict_cache.find_feasible_nodes(
            state, pod, nodes, walk, diagnosis, name_every_rejection=name_every_rejection
        )
        feasible, processed = found if found is not None else walk.every_node(nodes, diagnosis)
        self._next_start_node_index = (walk.start + processed) % num_all
        diagnosis.evaluated_nodes = processed
        return feasible

    async def run_post_filter_plugins(
        self, state: CycleState, pod: core_v1.Pod, diagnosis: Diagnosis
    ) -> Status | None:
        """Run PostFilters until one succeeds, errs or is unresolvable; otherwise merge all
        their Unschedulable reasons into one status, named after the first plugin."""
        reasons: list[str] = []
        rejector = ""
        for pl in self.post_filter_plugins:
            started = time.perf_counter()
            status = await pl.post_filter(state, pod, diagnosis)
            self._observed(state, ExtensionPoint.POST_FILTER, pl.name, started, status)
            if is_success(status):
                return None
            assert status is not None
            if status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                return status.with_plugin(pl.name)
            if not is_rejected(status):
                return Status(Code.ERROR, err=as_error(status)).with_plugin(pl.name)
            reasons.extend(status.all_reasons())
            rejector = rejector or pl.name
        return Status(Code.UNSCHEDULABLE, reasons).with_plugin(rejector)

    def pick_host(
        self, state: CycleState, pod: core_v1.Pod, feasible: Sequence[NodeInfo], rng: random.Random
    ) -> str:
        """PreScore, Score and the highest total (upstream `prioritizeNodes`, `selectHost`);
        without Score plugins every node scores 1, as upstream. Kept scores answer where they
        can, and a host whose Filter verdict was reused is filtered again
        (`VerdictCache.pick_host`). Raises FrameworkError when a plugin fails."""
        scored = len(feasible) > 1 and bool(self.score_plugins)
        if scored:
            status = self.run_pre_score_plugins(state, pod, feasible)
            if not is_success(status):
                assert status is not None
                raise FrameworkError(status)

        def select(totals: list[int] | None) -> str:
            if len(feasible) == 1:
                return feasible[0].name
            if totals is None:
                totals = self.total_scores(state, pod, feasible) if scored else [1] * len(feasible)
            return select_host(feasible, totals, rng)

        return self.verdict_cache.pick_host(state, pod, feasible, rng, select)

    def run_pre_score_plugins(
        self, state: CycleState, pod: core_v1.Pod, nodes: Sequence[NodeInfo]
    ) -> Status | None:
        """Skips are recorded in `state.skip_score_plugins`; other failures abort."""
        for pl in self.pre_score_plugins:
            started = time.perf_counter()
            status = pl.pre_score(state, pod, nodes)
            self._observed(state, ExtensionPoint.PRE_SCORE, pl.name, started, status)
            if is_skip(status):
                state.skip_score_plugins.add(pl.name)
                continue
            if not is_success(status):
                assert status is not None
                return wrap(f"running PreScore plugin {pl.name!r}", status)
        return None

    def run_score_plugins(
        self, state: CycleState, pod: core_v1.Pod, nodes: Sequence[NodeInfo]
    ) -> list[NodePluginScores]:
        """Each node's weighted score per Score plugin and their sum (upstream
        `RunScorePlugins`). Raises FrameworkError when a normalized score is out of range."""
        weighted = self._weighted_scores(state, pod, nodes)
        result = []
        for i, node_info in enumerate(nodes):
            per_plugin = [PluginScore(plugin, values[i]) for plugin, values in weighted]
            total = sum(p.score for p in per_plugin)
            result.append(NodePluginScores(node_info.name, per_plugin, total))
        return result

    def total_scores(
        self, state: CycleState, pod: core_v1.Pod, nodes: Sequence[NodeInfo]
    ) -> list[int]:
        """Each node's sum of `run_score_plugins`, all that picking a host needs, without
        its objects per node and plugin (a cycle scores ~230 nodes)."""
        weighted = self._weighted_scores(state, pod, nodes)
        if len(weighted) == 1:
            return weighted[0][1]
        if not weighted:
            return [0] * len(nodes)
        return [sum(column) for column in zip(*(values for _, values in weighted), strict=True)]

    def _weighted_scores(
        self, state: CycleState, pod: core_v1.Pod, nodes: Sequence[NodeInfo]
    ) -> list[tuple[str, list[int]]]:
        """Score, normalize, check the 0–100 range and apply the weight, plugin by plugin:
        (plugin, the nodes' scores in `nodes` order)."""
        plugins = [p for p in self.score_plugins if p.name not in state.skip_score_plugins]
        timed = self._observe is not None and state.record_plugin_metrics
        weighted: list[tuple[str, list[int]]] = []
        for pl in plugins:
            score = pl.score
            started = time.perf_counter()
            values = [score(state, pod, n) for n in nodes]
            if timed:  # (upstream times each node; one figure per cycle is enough here)
                self._observed(state, ExtensionPoint.SCORE, pl.name, started, None)
            if isinstance(pl, ScoreExtensions):
                started = time.perf_counter()
                scores = [NodeScore(n.name, v) for n, v in zip(nodes, values, strict=True)]
                values = [v for _, v in pl.normalize_scores(state, pod, scores)]
                self._observed(
                    state, ExtensionPoint.SCORE_EXTENSION_NORMALIZE, pl.name, started, None
                )
            if values and not MIN_NODE_SCORE <= min(values) <= max(values) <= MAX_NODE_SCORE:
                bad = next(v for v in values if not MIN_NODE_SCORE <= v <= MAX_NODE_SCORE)
                raise invalid_score(pl.name, bad)
            weight = self.score_weights[pl.name]
            if weight != 1:
                values = [v * weight for v in values]
            weighted.append((pl.name, values))
        return weighted

    async def run_reserve_plugins_reserve(
        self, state: CycleState, pod: core_v1.Pod, node_name: str
    ) -> Status | None:
        """Reserve in order; on the first failure unreserve everything and return it.

        Upstream leaves the Unreserve call to its caller, which always makes it; doing it
        here keeps that rule in one place.
        """
        for pl in self.reserve_plugins:
            started = time.perf_counter()
            status = pl.reserve(state, pod, node_name)
            self._observed(state, ExtensionPoint.RESERVE, pl.name, started, status)
            if not is_success(status):
                assert status is not None
                if is_rejected(status):
                    status.plugin = pl.name
                else:
                    status = wrap(f"running Reserve plugin {pl.name!r}", status)
                await self.run_reserve_plugins_unreserve(state, pod, node_name)
                return status
        return None

    async def run_reserve_plugins_unreserve(
        self, state: CycleState, pod: core_v1.Pod, node_name: str
    ) -> None:
        """Every reserve plugin's Unreserve, in reverse order of Reserve."""
        for pl in reversed(self.reserve_plugins):
            started = time.perf_counter()
            await pl.unreserve(state, pod, node_name)
            self._observed(state, ExtensionPoint.UNRESERVE, pl.name, started, None)

    # -- binding cycle --

    async def run_pre_bind_plugins(
        self, state: CycleState, pod: core_v1.Pod, node_name: str
    ) -> Status | None:
        for pl in self.pre_bind_plugins:
            started = time.perf_counter()
            status = await pl.pre_bind(state, pod, node_name)
            self._observed(state, ExtensionPoint.PRE_BIND, pl.name, started, status)
            if not is_success(status):
                assert status is not None
                if is_rejected(status):
                    return status.with_plugin(pl.name)
                return wrap(f"running PreBind plugin {pl.name!r}", status)
        return None

    async def run_bind_plugins(
        self, state: CycleState, pod: core_v1.Pod, node_name: str
    ) -> Status | None:
        """Ask binders in order until one does not Skip; Skip from all (or none
        configured) is returned as Skip."""
        status: Status | None = Status.skip()
        for pl in self.bind_plugins:
            started = time.perf_counter()
            status = await pl.bind(state, pod, node_name)
            self._observed(state, ExtensionPoint.BIND, pl.name, started, status)
            if is_skip(status):
                continue
            if not is_success(status):
                assert status is not None
                if is_rejected(status):
                    return status.with_plugin(pl.name)
                return wrap(f"running Bind plugin {pl.name!r}", status)
            return status
        return status

    # -- queueing --

    def events_to_register(self) -> dict[str, list[ClusterEventWithHint]]:
        """Plugin name → the events that may requeue pods it rejected."""
        return {pl.name: pl.events_to_register() for pl in self.enqueue_extensions}


def select_host(nodes: Sequence[NodeInfo], scores: Sequence[int], rng: random.Random) -> str:
    """The node with the highest total score; ties are broken uniformly at random by
    reservoir sampling, so equal nodes share the load (upstream `selectHost`)."""
    best = 0
    best_score = scores[0]
    ties = 1
    random = rng.random  # (randrange costs a Python call per tie; often hundreds tie)
    for i, score in enumerate(scores):
        if score > best_score:
            best, best_score, ties = i, score, 1
        elif score == best_score and i != best:
            ties += 1
            if random() * ties < 1:
                best = i
    return nodes[best].name
