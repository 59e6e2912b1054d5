"""The framework at run time: one profile's plugins sorted into extension points, and the
rules by which each point runs them.

Upstream: `pkg/scheduler/framework/runtime/framework.go` and `pkg/scheduler/schedule_one.go`
(`findNodesThatFitPod`, `numFeasibleNodesToFind`).
"""

from __future__ import annotations

import bisect
import enum
import itertools
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
from drasim.scheduler.verdicts import (
    FilterVerdicts,
    PodVerdicts,
    circular_slices,
    count_between,
    kept_scores,
)

__all__ = [
    "MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND",
    "MIN_FEASIBLE_NODES_TO_FIND",
    "ExtensionPoint",
    "Framework",
    "PluginDurationObserver",
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


def _invalid_score(plugin: str, score: int) -> FrameworkError:
    """Upstream's error for a (normalized) score outside 0–100."""
    return FrameworkError(
        Status.error(
            f"plugin {plugin!r} returns an invalid score {score}, it should in the range of "
            f"[{MIN_NODE_SCORE}, {MAX_NODE_SCORE}] after normalizing"
        )
    )


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


class _FilterWalk:
    """One attempt's Filter over the nodes, upstream's way: from `start` round the list
    until `to_find` nodes passed; each node's first non-success status rules it out.
    Both walks answer (feasible nodes, nodes passed over)."""

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
        verdicts: dict[str, tuple[int, Status | None]] | None,
        diagnosis: Diagnosis,
    ) -> tuple[list[NodeInfo], int]:
        """Visit each node in turn, answering from `verdicts` where the node's generation
        is the one they saw; every rejection goes into the diagnosis."""
        num_all = len(nodes)
        feasible: list[NodeInfo] = []
        processed = 0
        for i in range(self.start, self.start + num_all):
            node_info = nodes[i % num_all]
            processed += 1
            known = verdicts.get(node_info.name) if verdicts is not None else None
            if known is not None and known[0] == node_info.generation:
                status = known[1]
                if status is None:
                    self.state.reused_feasible.add(node_info.name)
            else:
                status = self.filter(node_info)
                if verdicts is not None:
                    verdicts[node_info.name] = (node_info.generation, status)
            if status is None:
                feasible.append(node_info)
                if len(feasible) >= self.to_find:
                    break
            else:
                diagnosis.node_to_status[node_info.name] = status
                diagnosis.add_plugin_status(status)
        return feasible, processed

    def kept_nodes(
        self, nodes: NodeInfoList, pod_verdicts: PodVerdicts, diagnosis: Diagnosis
    ) -> tuple[list[NodeInfo], int]:
        """`every_node` by bisection over what this spec's attempts learnt per position
        (`KeptPositions`): Filter runs only for the unknown positions on the way, in walk
        order, until `to_find` known feasible nodes lie between `start` and the next
        unknown one. The same nodes pass, in the same order, and as many are passed over.
        The rejections of the nodes passed over go into the diagnosis only when no node
        passed or the attempt records them (`CycleState.record_rejections`), as a full
        cluster otherwise costs a visit to every node per attempt. Leaves the range in
        `CycleState.kept_walk` for `Framework.best_kept_node`."""
        kept = pod_verdicts.positions
        assert kept is not None
        verdicts = pod_verdicts.filter
        state, start, to_find = self.state, self.start, self.to_find
        state.filtered_now = filtered = set()
        while True:
            last = kept.nth_feasible(start, to_find)
            position = kept.first_unknown(start, last)
            if position is None:
                break
            node_info = nodes[position]
            known = verdicts.get(node_info.name)
            if known is not None and known[0] == node_info.generation:
                status = known[1]
            else:
                status = self.filter(node_info)
                verdicts[node_info.name] = (node_info.generation, status)
                filtered.add(node_info.name)
            kept.found(position, status is None)
        num_all = len(nodes)
        if last is None:  # fewer than to_find pass: the whole way round
            processed, last = num_all, (start - 1) % num_all
        else:
            processed = (last - start) % num_all + 1
        passed = kept.feasible
        i = bisect.bisect_left(passed, start)
        feasible = [
            nodes[p] for p in itertools.islice(itertools.chain(passed[i:], passed[:i]), to_find)
        ]
        if not feasible or state.record_rejections:
            for i in range(start, start + processed):
                name = nodes[i % num_all].name
                status = verdicts[name][1]
                if status is not None:
                    diagnosis.node_to_status[name] = status
                    diagnosis.add_plugin_status(status)
        state.kept_walk = (kept, nodes, start, last)
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
        self.score_weights = {p.name: (score_weights or {}).get(p.name, 1) for p in plugins}
        self._observe = observe_plugin_duration
        # 0 picks upstream's adaptive percentage (see `num_feasible_nodes_to_find`).
        self.percentage_of_nodes_to_score = percentage_of_nodes_to_score
        self._next_start_node_index = 0
        self.filter_verdicts = FilterVerdicts(self.filter_plugins)

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
        self, state: CycleState, pod: core_v1.Pod, node_infos: Sequence[NodeInfo]
    ) -> tuple[list[NodeInfo], Diagnosis]:
        """PreFilter, then Filter (upstream `findNodesThatFitPod`).

        As upstream, Filter stops once `num_feasible_nodes_to_find` nodes passed, and the
        next attempt starts where this one stopped, so every node gets its turn. Nodes not
        checked have no status in the diagnosis. Raises FrameworkError when a plugin
        returns Error.
        """
        diagnosis = Diagnosis()
        # Verdicts kept per node do not know the pods nominated to it.
        state.reuse_filter_verdicts = self.filter_verdicts.enabled and not state.nominated_pods
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
        if state.candidate_nodes is not None:
            # Only these can pass; if none does, every node is filtered after all, so
            # that the diagnosis says what each node lacks, as upstream's does.
            if isinstance(nodes, NodeInfoList):  # (in walk order, without a pass over all)
                positions = nodes.positions
                candidates = [
                    nodes[p]
                    for p in sorted(positions[n] for n in state.candidate_nodes if n in positions)
                ]
            else:
                candidates = [n for n in nodes if n.name in state.candidate_nodes]
            probe = Diagnosis()
            feasible = self._find_nodes_that_pass_filters(state, pod, candidates, probe)
            if feasible:
                diagnosis.evaluated_nodes = probe.evaluated_nodes
                return feasible, diagnosis
        return self._find_nodes_that_pass_filters(state, pod, nodes, diagnosis), diagnosis

    def _find_nodes_that_pass_filters(
        self, state: CycleState, pod: core_v1.Pod, nodes: Sequence[NodeInfo], diagnosis: Diagnosis
    ) -> list[NodeInfo]:
        num_all = len(nodes)
        if num_all == 0:
            return []
        walk = _FilterWalk(
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
        if not state.reuse_filter_verdicts:
            feasible, processed = walk.every_node(nodes, None, diagnosis)
        else:
            state.pod_verdicts = self.filter_verdicts.for_pod(pod, nodes)
            if isinstance(nodes, NodeInfoList):
                feasible, processed = walk.kept_nodes(nodes, state.pod_verdicts, diagnosis)
            else:
                feasible, processed = walk.every_node(nodes, state.pod_verdicts.filter, diagnosis)
        self._next_start_node_index = (walk.start + processed) % num_all
        diagnosis.evaluated_nodes = processed
        return feasible

    def confirm_reused_verdict(
        self, state: CycleState, pod: core_v1.Pod, node_info: NodeInfo
    ) -> None:
        """Run Filter for real on the chosen node if its verdict was reused: plugins keep
        per-node results for Reserve, and a verdict must never be trusted blindly. Raises
        FrameworkError (the pod retries after backoff) if it no longer passes; that
        would mean a change went unreported, so every kept verdict is dropped."""
        name = node_info.name
        reused = name in state.reused_feasible or (
            state.filtered_now is not None and name not in state.filtered_now
        )
        if not reused:
            return
        status = self.run_filter_plugins(state, pod, node_info)
        if not is_success(status):
            self.filter_verdicts.all_changed()
            raise FrameworkError(
                Status.error(f"reused Filter verdict for node {node_info.name} was stale")
            )

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

    def best_kept_node(self, state: CycleState, pod: core_v1.Pod, rng: random.Random) -> str | None:
        """After PreScore: the host among the feasible nodes of a `kept_nodes` walk, from
        the spec's kept total scores, scoring only the nodes not scored yet: the highest
        total, ties broken uniformly at random, as `schedule_one.select_host` does over
        every node. None (score every node as usual) without such a walk, when a Score
        plugin in use cannot keep its scores (not `reusable_scores`, or normalizing), or
        when the attempt times its plugins."""
        walk = state.kept_walk
        if walk is None or (self._observe is not None and state.record_plugin_metrics):
            return None
        plugins = [p for p in self.score_plugins if p.name not in state.skip_score_plugins]
        if not all(
            getattr(p, "reusable_scores", False) and not isinstance(p, ScoreExtensions)
            for p in plugins
        ):
            return None
        weighted = [(p, self.score_weights[p.name]) for p in plugins]
        kept, nodes, start, last = walk
        kept.score_with(tuple((p.name, weight) for p, weight in weighted))
        ranges = circular_slices(start, last)
        for first, end in ranges:
            lo = bisect.bisect_left(kept.unscored, first)
            for position in kept.unscored[lo : bisect.bisect_right(kept.unscored, end)]:
                node_info = nodes[position]
                total = 0
                for pl, weight in weighted:
                    value = pl.score(state, pod, node_info)
                    if not MIN_NODE_SCORE <= value <= MAX_NODE_SCORE:
                        raise _invalid_score(pl.name, value)
                    total += weight * value
                kept.scored(position, total)
        for score in sorted(kept.by_score, reverse=True):
            bucket = kept.by_score[score]
            counts = [count_between(bucket, first, end) for first, end in ranges]
            if not any(counts):
                continue
            pick = rng.randrange(sum(counts))
            for (first, _), count in zip(ranges, counts, strict=True):
                if pick < count:
                    return nodes[bucket[bisect.bisect_left(bucket, first) + pick]].name
                pick -= count
        return None

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
            if state.pod_verdicts is not None and getattr(pl, "reusable_scores", False):
                kept = state.pod_verdicts.scores.setdefault(pl.name, {})
                values = kept_scores(kept, state, pod, nodes, score)
            else:
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
                raise _invalid_score(pl.name, bad)
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
