"""The framework at run time: one profile's plugins sorted into extension points, and the
rules by which each point runs them. Metrics and spans are wrappers (`instrumentation`),
reuse across attempts is the `VerdictCache`'s.

Upstream: `pkg/scheduler/framework/runtime/framework.go` and `pkg/scheduler/schedule_one.go`
(`findNodesThatFitPod`, `numFeasibleNodesToFind`).
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, cast

from drasim.common.api import core_v1
from drasim.scheduler.framework import instrumentation
from drasim.scheduler.framework.cycle_state import CycleState
from drasim.scheduler.framework.events import ClusterEventWithHint
from drasim.scheduler.framework.filter_walk import FilterFn, FilterWalk, filter_node
from drasim.scheduler.framework.instrumentation import PluginDurationObserver, TimedPlugin
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
    PreEnqueuePlugin,
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
    "Framework",
    "select_host",
]

# Filtering stops after this many feasible nodes at least (upstream's constants).
MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5


def _plugin_list_message(plugins: Iterable[str]) -> str:
    """Go's `%v` of a sorted string slice: `[A B]`."""
    return "[" + " ".join(sorted(plugins)) + "]"


def _plugin_failure(point: str, plugin: str, status: Status) -> Status:
    """What the framework answers for a plugin that failed at `point`, as upstream's
    `RunReservePluginsReserve`, `RunPreBindPlugins` and `RunBindPlugins` do: a rejection
    keeps its code and names the plugin; anything else becomes an Error naming both."""
    if is_rejected(status):
        return status.with_plugin(plugin)
    return wrap(f'running {point} plugin "{plugin}"', status)


@dataclasses.dataclass(frozen=True, slots=True)
class _ExtensionPoints:
    """A profile's plugins sorted by the extension points they implement, in list order."""

    pre_filter: list[PreFilterPlugin]
    filter: list[FilterPlugin]
    post_filter: list[PostFilterPlugin]
    pre_score: list[PreScorePlugin]
    score: list[ScorePlugin]
    reserve: list[ReservePlugin]
    pre_bind: list[PreBindPlugin]
    bind: list[BindPlugin]

    @classmethod
    def of(cls, plugins: Sequence[Plugin]) -> _ExtensionPoints:
        return cls(
            pre_filter=[p for p in plugins if isinstance(p, PreFilterPlugin)],
            filter=[p for p in plugins if isinstance(p, FilterPlugin)],
            post_filter=[p for p in plugins if isinstance(p, PostFilterPlugin)],
            pre_score=[p for p in plugins if isinstance(p, PreScorePlugin)],
            score=[p for p in plugins if isinstance(p, ScorePlugin)],
            reserve=[p for p in plugins if isinstance(p, ReservePlugin)],
            pre_bind=[p for p in plugins if isinstance(p, PreBindPlugin)],
            bind=[p for p in plugins if isinstance(p, BindPlugin)],
        )

    def timed(self, observe: PluginDurationObserver) -> _ExtensionPoints:
        """The same points, each plugin wrapped to report its durations (`TimedPlugin`)."""
        wrapped: dict[str, Any] = {}

        def each(plugins: list[Any]) -> list[Any]:
            return [wrapped.setdefault(p.name, TimedPlugin(p, observe)) for p in plugins]

        return _ExtensionPoints(
            *(each(getattr(self, field.name)) for field in dataclasses.fields(self))
        )


class Framework:
    """One scheduling profile: its plugins sorted into extension points, run in list order.

    A plugin joins every point whose Protocol it implements (checked with `isinstance`).
    `factories` build more plugins with this framework as their handle, as upstream's
    `NewFramework` does: a plugin may keep `run_filter_plugins` and call it later.
    With `observe_plugin_duration`, attempts sampled for metrics run timed plugins.
    """

    def __init__(
        self,
        plugins: Sequence[Plugin] = (),
        *,
        factories: Sequence[Callable[[Framework], Plugin]] = (),
        score_weights: Mapping[str, int] | None = None,
        observe_plugin_duration: PluginDurationObserver | None = None,
        percentage_of_nodes_to_score: int = 0,
    ) -> None:
        plugins = [*plugins, *(make(self) for make in factories)]
        names = [plugin.name for plugin in plugins]
        if len(set(names)) != len(names):
            raise ValueError(f"plugin names must be unique, got {names}")
        self.plugins = plugins
        self._points = _ExtensionPoints.of(plugins)
        self._timed = (
            self._points.timed(observe_plugin_duration) if observe_plugin_duration else None
        )
        self.pre_filter_plugins = self._points.pre_filter
        self.filter_plugins = self._points.filter
        self.post_filter_plugins = self._points.post_filter
        self.pre_score_plugins = self._points.pre_score
        self.score_plugins = self._points.score
        self.reserve_plugins = self._points.reserve
        self.pre_bind_plugins = self._points.pre_bind
        self.bind_plugins = self._points.bind
        self.pre_enqueue_plugins = [p for p in plugins if isinstance(p, PreEnqueuePlugin)]
        self.enqueue_extensions = [p for p in plugins if isinstance(p, EnqueueExtensions)]
        self.candidate_plugins = [p for p in plugins if isinstance(p, CandidateNodesPlugin)]
        self.score_weights = {p.name: (score_weights or {}).get(p.name, 1) for p in plugins}
        self._normalizing = {p.name for p in self.score_plugins if isinstance(p, ScoreExtensions)}
        # 0 picks upstream's adaptive percentage (see `num_feasible_nodes_to_find`).
        self.percentage_of_nodes_to_score = percentage_of_nodes_to_score
        self._next_start_node_index = 0
        self.verdict_cache = VerdictCache(
            self.filter_plugins, self.score_plugins, self.score_weights, self.run_filter_plugins
        )

    def _run(self, state: CycleState) -> _ExtensionPoints:
        """The plugins this attempt runs: timed if it is sampled for metrics."""
        if self._timed is not None and state.record_plugin_metrics:
            return self._timed
        return self._points

    # -- scheduling cycle --

    @instrumentation.traced_pre_filter
    def run_pre_filter_plugins(
        self, state: CycleState, pod: core_v1.Pod, nodes: Sequence[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None, set[str]]:
        """Run every PreFilter; returns the merged result, the status and the plugins that
        narrowed the nodes. Skips are recorded in `state.skip_filter_plugins`."""
        result: PreFilterResult | None = None
        plugins_with_nodes: set[str] = set()
        unschedulable: Status | None = None
        for pl in self._run(state).pre_filter:
            narrowed, status = pl.pre_filter(state, pod, nodes)
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
                return None, wrap(f'running PreFilter plugin "{pl.name}"', status), set()
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
        return filter_node(self._filters(state), state, pod, node_info)

    def _filters(self, state: CycleState) -> list[tuple[str, FilterFn]]:
        skipped = state.skip_filter_plugins
        return [(pl.name, pl.filter) for pl in self._run(state).filter if pl.name not in skipped]

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

        feasible = self._filter(
            state,
            pod,
            node_infos,
            diagnosis,
            narrowed=result,
            narrowed_by=plugins_with_nodes,
            name_every_rejection=name_every_rejection,
        )
        return feasible, diagnosis

    @instrumentation.traced_filter
    def _filter(
        self,
        state: CycleState,
        pod: core_v1.Pod,
        node_infos: Sequence[NodeInfo],
        diagnosis: Diagnosis,
        *,
        narrowed: PreFilterResult | None,
        narrowed_by: set[str],
        name_every_rejection: bool,
    ) -> list[NodeInfo]:
        """Filter over the nodes PreFilter left, the candidates first if a plugin named
        them (`CandidateNodesPlugin`)."""
        nodes = node_infos
        if narrowed is not None and narrowed.node_names is not None:
            nodes = [n for n in node_infos if n.name in narrowed.node_names]
            diagnosis.absent_nodes_status = Status.unresolvable(
                f"node(s) didn't satisfy plugin(s) {_plugin_list_message(narrowed_by)}"
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
                return feasible
        return self._find_nodes_that_pass_filters(
            state, pod, nodes, diagnosis, name_every_rejection
        )

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
            filters=self._filters(state),
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

    @instrumentation.traced("PostFilter")
    async def run_post_filter_plugins(
        self, state: CycleState, pod: core_v1.Pod, diagnosis: Diagnosis
    ) -> Status | None:
        """Run PostFilters until one succeeds, errs or is unresolvable; otherwise merge all
        their Unschedulable reasons into one status, named after the first plugin."""
        reasons: list[str] = []
        rejector = ""
        for pl in self._run(state).post_filter:
            status = await pl.post_filter(state, pod, diagnosis)
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
        if len(feasible) == 1:
            only = feasible[0].name
            return self.verdict_cache.pick_host(state, pod, feasible, rng, lambda _: only)
        return self._score(state, pod, feasible, rng)

    @instrumentation.traced_call("Score")
    def _score(
        self, state: CycleState, pod: core_v1.Pod, feasible: Sequence[NodeInfo], rng: random.Random
    ) -> str:
        scored = bool(self.score_plugins)
        if scored:
            status = self.run_pre_score_plugins(state, pod, feasible)
            if not is_success(status):
                assert status is not None
                raise FrameworkError(status)

        def select(totals: list[int] | None) -> str:
            if totals is None:
                totals = self.total_scores(state, pod, feasible) if scored else [1] * len(feasible)
            return select_host(feasible, totals, rng)

        scorers = self._run(state).score
        return self.verdict_cache.pick_host(state, pod, feasible, rng, select, scorers)

    def run_pre_score_plugins(
        self, state: CycleState, pod: core_v1.Pod, nodes: Sequence[NodeInfo]
    ) -> Status | None:
        """Skips are recorded in `state.skip_score_plugins`; other failures abort."""
        for pl in self._run(state).pre_score:
            status = pl.pre_score(state, pod, nodes)
            if is_skip(status):
                state.skip_score_plugins.add(pl.name)
                continue
            if not is_success(status):
                assert status is not None
                return wrap(f'running PreScore plugin "{pl.name}"', status)
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
        its objects per node and plugin (a cycle may score hundreds of nodes)."""
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
        skipped = state.skip_score_plugins
        weighted: list[tuple[str, list[int]]] = []
        for pl in self._run(state).score:
            if pl.name in skipped:
                continue
            score = pl.score
            values = [score(state, pod, n) for n in nodes]
            if pl.name in self._normalizing:
                scores = [NodeScore(n.name, v) for n, v in zip(nodes, values, strict=True)]
                values = [
                    v for _, v in cast(ScoreExtensions, pl).normalize_scores(state, pod, scores)
                ]
            if values and not MIN_NODE_SCORE <= min(values) <= max(values) <= MAX_NODE_SCORE:
                bad = next(v for v in values if not MIN_NODE_SCORE <= v <= MAX_NODE_SCORE)
                raise invalid_score(pl.name, bad)
            weight = self.score_weights[pl.name]
            if weight != 1:
                values = [v * weight for v in values]
            weighted.append((pl.name, values))
        return weighted

    @instrumentation.traced("Reserve")
    async def run_reserve_plugins_reserve(
        self, state: CycleState, pod: core_v1.Pod, node_name: str
    ) -> Status | None:
        """Reserve in order; on the first failure unreserve everything and return it.

        Upstream leaves the Unreserve call to its caller, which always makes it; doing it
        here keeps that rule in one place.
        """
        for pl in self._run(state).reserve:
            status = pl.reserve(state, pod, node_name)
            if not is_success(status):
                assert status is not None
                await self._unreserve(state, pod, node_name)
                return _plugin_failure("Reserve", pl.name, status)
        return None

    async def _unreserve(self, state: CycleState, pod: core_v1.Pod, node_name: str) -> None:
        """Every reserve plugin's Unreserve, in reverse order of Reserve."""
        for pl in reversed(self._run(state).reserve):
            await pl.unreserve(state, pod, node_name)

    run_reserve_plugins_unreserve = instrumentation.traced("Unreserve")(_unreserve)

    # -- binding cycle --

    @instrumentation.traced("PreBind")
    async def run_pre_bind_plugins(
        self, state: CycleState, pod: core_v1.Pod, node_name: str
    ) -> Status | None:
        for pl in self._run(state).pre_bind:
            status = await pl.pre_bind(state, pod, node_name)
            if not is_success(status):
                assert status is not None
                return _plugin_failure("PreBind", pl.name, status)
        return None

    @instrumentation.traced("Bind")
    async def run_bind_plugins(
        self, state: CycleState, pod: core_v1.Pod, node_name: str
    ) -> Status | None:
        """Ask binders in order until one does not Skip; Skip from all (or none
        configured) is returned as Skip."""
        status: Status | None = Status.skip()
        for pl in self._run(state).bind:
            status = await pl.bind(state, pod, node_name)
            if is_skip(status):
                continue
            if not is_success(status):
                assert status is not None
                return _plugin_failure("Bind", pl.name, status)
            return status
        return status

    # -- queueing --

    def run_pre_enqueue_plugins(self, pod: core_v1.Pod) -> Status | None:
        """The first PreEnqueue plugin that holds the pod back, as its status naming it;
        None when every one lets the pod into activeQ."""
        for pl in self.pre_enqueue_plugins:
            status = pl.pre_enqueue(pod)
            if not is_success(status):
                assert status is not None
                return status.with_plugin(pl.name)
        return None

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
