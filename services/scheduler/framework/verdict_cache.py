"""Filter verdicts and scores of earlier attempts, reused for pods signed alike.

Pods of one Deployment or of many Jobs of one template come one after another asking the
same, and most nodes did not change between their attempts: `VerdictCache` keeps, per pod
signature, each node's Filter verdict (feasible, or the rejecting status) and score while
the node's state holds, so an attempt pays only for the few nodes that changed. The
framework reaches it through two hooks, as upstream's `OpportunisticBatch` (KEP-5598,
`pkg/scheduler/framework/runtime/batch.go`): `find_feasible_nodes` in Filter and
`pick_host` after PreScore. What one attempt learnt stays in its CycleState under
`STATE_KEY`, like any plugin's data.

The signature: each Filter plugin's `sign_pod` fragment, what it reads of the pod (the
requests, tolerations, node affinity...), not the whole spec: a Job's pods differ in
hostname and container names, which no plugin reads.

When: every Filter plugin is a `SignPlugin` that signs the pod after PreFilter, and no pod
is nominated to a node (kept verdicts do not know such pods). Scores are reused when every
Score plugin in use is a `SignPlugin` that does not normalize.

What a verdict depends on: the pod's signature, the NodeInfo (its generation covers the
node object and its pods) and what a plugin reports through `watch_filter_inputs(sink)`:
`node_changed(name)` (DynamicResources: a device of a pool reaching the node taken or
freed) and `all_changed()` (a class or a slice). The snapshot's NodeInfoList names the
nodes it replaced. Node changes go to a log; each signature's verdicts drop the nodes
logged since they were last used. On a NodeInfoList an attempt finds the feasible nodes
and the best of them by bisection over positions (`KeptPositions`); on any other sequence
(a PreFilter's subset) it checks each node's verdict with one comparison.

A verdict is never trusted blindly: the chosen host's, if reused, is checked again with
Filter before Reserve (plugins keep per-node results for Reserve, too). Like the
equivalence cache kube-scheduler once had.
"""

from __future__ import annotations

import bisect
import dataclasses
import itertools
import random
from collections.abc import Callable, Hashable, Sequence
from typing import TYPE_CHECKING

from drasim.common.api import core_v1
from drasim.scheduler.framework.filter_walk import FilterWalk
from drasim.scheduler.framework.interfaces import (
    MAX_NODE_SCORE,
    MIN_NODE_SCORE,
    FilterInputReporter,
    FilterPlugin,
    ScoreExtensions,
    ScorePlugin,
    SignPlugin,
    invalid_score,
)
from drasim.scheduler.framework.node_info import NodeInfo, NodeInfoList, NodeListReader
from drasim.scheduler.framework.status import FrameworkError, Status, is_success

if TYPE_CHECKING:
    from collections.abc import Mapping

    from drasim.scheduler.framework.cycle_state import CycleState
    from drasim.scheduler.framework.types import Diagnosis

__all__ = ["STATE_KEY", "AttemptVerdicts", "KeptPositions", "VerdictCache", "attempt_verdicts"]

STATE_KEY = "VerdictCache"

Verdict = tuple[int, "Status | None"]
"""(the NodeInfo's generation, None if feasible else the rejecting status)"""


# --- what is kept ------------------------------------------------------------------------


@dataclasses.dataclass(slots=True)
class PodVerdicts:
    """What earlier attempts found for pods of one signature, per node, with the NodeInfo's
    generation they saw."""

    filter: dict[str, Verdict] = dataclasses.field(default_factory=dict)
    # node -> (generation, total weighted score of `scored_by`)
    totals: dict[str, tuple[int, int]] = dataclasses.field(default_factory=dict)
    scored_by: tuple[tuple[str, int], ...] = ()
    # How far into the change log these verdicts are up to date (`VerdictCache`).
    position: int = 0
    # What attempts on the snapshot's current NodeInfoList learnt per position; None until
    # an attempt on one builds it.
    positions: KeptPositions | None = None

    def forget(self, node_name: str, position: int | None) -> None:
        self.filter.pop(node_name, None)
        self.totals.pop(node_name, None)
        if self.positions is not None and position is not None:
            self.positions.forget(position)

    def forget_all(self) -> None:
        self.filter.clear()
        self.totals.clear()
        self.positions = None


def _insert(positions: list[int], position: int) -> None:
    i = bisect.bisect_left(positions, position)
    if i == len(positions) or positions[i] != position:
        positions.insert(i, position)


def _remove(positions: list[int], position: int) -> bool:
    i = bisect.bisect_left(positions, position)
    if i < len(positions) and positions[i] == position:
        del positions[i]
        return True
    return False


def _count_between(positions: list[int], first: int, last: int) -> int:
    """How many of the sorted `positions` lie in [first, last]."""
    return bisect.bisect_right(positions, last) - bisect.bisect_left(positions, first)


class KeptPositions:
    """One signature's nodes by position in the snapshot's NodeInfoList, in sorted lists, so
    that an attempt finds the nodes Filter passes and the best of them by bisection rather
    than by visiting every node.

    Every position is in exactly one state: `unknown` (no verdict kept: Filter must look),
    feasible (in `feasible`; also in `unscored` until its total score is kept, then in
    `by_score[score]`), or infeasible (in neither list: its rejection is in
    `PodVerdicts.filter`). A change of the node (`forget`) makes it unknown again.
    """

    __slots__ = ("by_score", "feasible", "score_at", "scored_by", "unknown", "unscored")

    def __init__(self, num_nodes: int) -> None:
        self.unknown = list(range(num_nodes))
        self.feasible: list[int] = []
        self.unscored: list[int] = []
        self.by_score: dict[int, list[int]] = {}
        self.score_at: dict[int, int] = {}
        # The Score plugins (and weights) the kept totals are the sum of.
        self.scored_by: tuple[tuple[str, int], ...] = ()

    def score_with(self, plugins: tuple[tuple[str, int], ...]) -> None:
        """Keep totals of these Score plugins and weights; totals of others are dropped
        (a signature's PreScore skips the same plugins every time, so this is a safeguard)."""
        if plugins != self.scored_by:
            self.scored_by = plugins
            self.unscored = list(self.feasible)
            self.by_score, self.score_at = {}, {}

    def forget(self, position: int) -> None:
        if _remove(self.feasible, position):
            score = self.score_at.pop(position, None)
            if score is None:
                _remove(self.unscored, position)
            else:
                bucket = self.by_score[score]
                _remove(bucket, position)
                if not bucket:
                    del self.by_score[score]
        _insert(self.unknown, position)

    def found(self, position: int, feasible: bool) -> None:
        """A verdict for an unknown position."""
        _remove(self.unknown, position)
        if feasible:
            _insert(self.feasible, position)
            _insert(self.unscored, position)

    def scored(self, position: int, score: int) -> None:
        _remove(self.unscored, position)
        self.score_at[position] = score
        bucket = self.by_score.get(score)
        if bucket is None:
            bucket = self.by_score[score] = []
        _insert(bucket, position)

    def nth_feasible(self, start: int, n: int) -> int | None:
        """The position of the n-th feasible node (n ≥ 1) going round from `start`; None
        if there are fewer."""
        feasible = self.feasible
        if n > len(feasible):
            return None
        i = bisect.bisect_left(feasible, start) + n - 1
        return feasible[i - len(feasible)] if i >= len(feasible) else feasible[i]

    def first_unknown(self, start: int, last: int | None) -> int | None:
        """The first unknown position going round from `start`, up to `last` (inclusive;
        None: the whole way round)."""
        unknown = self.unknown
        if not unknown:
            return None
        i = bisect.bisect_left(unknown, start)
        position = unknown[i] if i < len(unknown) else unknown[0]
        if last is None or _within(position, start, last):
            return position
        return None


def _within(position: int, start: int, last: int) -> bool:
    """Whether `position` lies on the way round from `start` to `last`, both included."""
    if start <= last:
        return start <= position <= last
    return position >= start or position <= last


def _circular_slices(first: int, last: int) -> list[tuple[int, int]]:
    """[first, last] going round, as one or two ascending inclusive ranges."""
    if first <= last:
        return [(first, last)]
    return [(first, 1 << 62), (0, last)]


# --- one attempt -------------------------------------------------------------------------


@dataclasses.dataclass(slots=True)
class KeptWalk:
    """A walk over kept positions: what it learnt, the node list, and the positions it went
    from and to (both included)."""

    positions: KeptPositions
    nodes: NodeInfoList
    start: int
    last: int


@dataclasses.dataclass(slots=True)
class AttemptVerdicts:
    """What one attempt used of the cache, in its CycleState under `STATE_KEY`."""

    verdicts: PodVerdicts
    # Feasible nodes whose kept verdict a walk over every node reused.
    reused: set[str] = dataclasses.field(default_factory=set)
    # The last walk over kept positions, for `VerdictCache.best_kept_node`, and the nodes
    # Filter ran for in it: every other feasible node's verdict was reused.
    kept_walk: KeptWalk | None = None
    filtered: set[str] | None = None

    def reused_verdict(self, node_name: str) -> bool:
        """Whether this feasible node's verdict was reused, not found by Filter now: if
        chosen, it is filtered again."""
        return node_name in self.reused or (
            self.filtered is not None and node_name not in self.filtered
        )

    def clone(self) -> AttemptVerdicts:
        return dataclasses.replace(self, reused=set(self.reused))


def attempt_verdicts(state: CycleState) -> AttemptVerdicts | None:
    """What this attempt used of the cache; None when it filtered every node itself."""
    try:
        data = state.read(STATE_KEY)
    except KeyError:
        return None
    assert isinstance(data, AttemptVerdicts)
    return data


# --- the cache ---------------------------------------------------------------------------


class VerdictCache:
    """Filter verdicts and scores kept per pod signature across attempts (see the module).

    Built by the framework from its Filter and Score plugins; `run_filter_plugins` checks a
    reused verdict again. A `NodeChangeSink` for the plugins' reports.
    """

    MAX_SIGNATURES = 64  # distinct pod signatures kept, the least recently used dropped first
    MAX_LOG = 10_000  # node changes kept; verdicts older than the log are all dropped

    def __init__(
        self,
        filter_plugins: Sequence[FilterPlugin],
        score_plugins: Sequence[ScorePlugin],
        score_weights: Mapping[str, int],
        run_filter_plugins: Callable[[CycleState, core_v1.Pod, NodeInfo], Status | None],
    ) -> None:
        self.enabled = bool(filter_plugins) and all(
            isinstance(p, SignPlugin) for p in filter_plugins
        )
        self._score_plugins = list(score_plugins)
        self._score_weights = score_weights
        # Score plugins whose scores may be kept: they sign pods and do not normalize.
        keeping = [
            p
            for p in score_plugins
            if isinstance(p, SignPlugin) and not isinstance(p, ScoreExtensions)
        ]
        self._keeping_scores = {p.name for p in keeping}
        # What a kept verdict or score depends on of the pod: every Filter plugin's
        # fragment, and that of each Score plugin whose scores are kept.
        self._signers = [p for p in filter_plugins if isinstance(p, SignPlugin)]
        self._signers += [p for p in keeping if p not in self._signers]
        self._run_filter_plugins = run_filter_plugins
        self._by_signature: dict[tuple[Hashable, ...], PodVerdicts] = {}
        self._log: list[str] = []
        self._log_start = 0  # position of `_log[0]` among all changes ever logged
        self._read_to = 0  # the log's end when a signature's verdicts last caught up with it
        # The NodeInfoList that positions refer to.
        self._layout = NodeListReader()
        self._positions: dict[str, int] = {}
        for plugin in filter_plugins:
            if isinstance(plugin, FilterInputReporter):
                plugin.watch_filter_inputs(self)

    # -- the framework's hooks --

    def find_feasible_nodes(
        self,
        state: CycleState,
        pod: core_v1.Pod,
        nodes: Sequence[NodeInfo],
        walk: FilterWalk,
        diagnosis: Diagnosis,
        *,
        name_every_rejection: bool,
    ) -> tuple[list[NodeInfo], int] | None:
        """Filter's hook: the feasible nodes and how many nodes were passed over, as
        `walk.every_node` finds them, from kept verdicts where they hold; None when this
        attempt may not use them, and the framework filters every node itself. On a
        NodeInfoList the rejections of the nodes passed over go into the diagnosis only when
        no node passed or `name_every_rejection`, as naming them costs a visit to every
        node per attempt."""
        if not self.enabled or state.nominated_pods:
            return None  # (kept verdicts do not know the pods nominated to a node)
        signature = self._sign(state, pod)
        if signature is None:
            return None
        verdicts = self._for_signature(signature, nodes)
        attempt = attempt_verdicts(state)
        if attempt is None:
            attempt = AttemptVerdicts(verdicts)
            state.write(STATE_KEY, attempt)
        if isinstance(nodes, NodeInfoList):
            return self._walk_kept_positions(attempt, nodes, walk, diagnosis, name_every_rejection)
        return walk.every_node(nodes, diagnosis, self._kept_verdict(attempt, walk))

    def pick_host(
        self,
        state: CycleState,
        pod: core_v1.Pod,
        feasible: Sequence[NodeInfo],
        rng: random.Random,
        select: Callable[[list[int] | None], str],
        scorers: Sequence[ScorePlugin] | None = None,
    ) -> str:
        """Score's hook, after PreScore: the host among the feasible nodes. From kept total
        scores when the Filter hook answered and every Score plugin in use keeps them,
        scoring only the nodes not scored yet; else `select(None)` scores as usual
        (`select(totals)` picks the highest total). `scorers` are the Score plugins as this
        attempt runs them (timed, when sampled). A host whose verdict was reused is filtered
        again first (`confirm`)."""
        attempt = attempt_verdicts(state)
        if attempt is None:
            return select(None)
        host: str | None = None
        weighted = self._kept_score_plugins(state, scorers)
        if len(feasible) > 1 and weighted is not None:
            host = self.best_kept_node(state, pod, rng, scorers)
            if host is None and attempt.kept_walk is None:
                host = select(self._kept_totals(attempt, state, pod, feasible, weighted))
        if host is None:
            host = select(None)
        if attempt.reused_verdict(host):
            self.confirm(state, pod, next(n for n in feasible if n.name == host))
        return host

    def confirm(self, state: CycleState, pod: core_v1.Pod, node_info: NodeInfo) -> None:
        """Run Filter for real on the chosen node if its verdict was reused: plugins keep
        per-node results for Reserve, and a verdict must never be trusted blindly. Raises
        FrameworkError (the pod retries after backoff) if it no longer passes; that
        would mean a change went unreported, so every kept verdict is dropped."""
        attempt = attempt_verdicts(state)
        if attempt is None or not attempt.reused_verdict(node_info.name):
            return
        status = self._run_filter_plugins(state, pod, node_info)
        if not is_success(status):
            self.all_changed()
            raise FrameworkError(
                Status.error(f"reused Filter verdict for node {node_info.name} was stale")
            )

    # -- NodeChangeSink --

    def node_changed(self, node_name: str) -> None:
        end = self._log_start + len(self._log)
        logged_last = self._log and self._log[-1] == node_name and self._read_to < end
        if not self._by_signature or logged_last:
            return  # (logged last, and no signature has read past it since: it would drop it again)
        if len(self._log) >= self.MAX_LOG:
            self._log_start += len(self._log)
            self._log = []
        self._log.append(node_name)

    def all_changed(self) -> None:
        self._by_signature.clear()

    # -- Filter --

    def _sign(self, state: CycleState, pod: core_v1.Pod) -> tuple[Hashable, ...] | None:
        """The pod's signature: every signer's fragment (None if one cannot sign)."""
        fragments = []
        for plugin in self._signers:
            fragment = plugin.sign_pod(state, pod)
            if fragment is None:
                return None
            fragments.append(fragment)
        return tuple(fragments)

    def _for_signature(self, key: tuple[Hashable, ...], nodes: Sequence[NodeInfo]) -> PodVerdicts:
        """The verdicts of pods signed `key`, without those of nodes changed since their
        last use; with `positions` when `nodes` is a snapshot's NodeInfoList."""
        on_layout = self._follow(nodes)
        position = self._log_start + len(self._log)
        verdicts = self._by_signature.pop(key, None)
        if verdicts is None:
            verdicts = PodVerdicts(position=position)
            if len(self._by_signature) >= self.MAX_SIGNATURES:
                del self._by_signature[next(iter(self._by_signature))]
        elif verdicts.position < self._log_start:
            verdicts.forget_all()
        else:
            positions = self._positions
            for node_name in self._log[verdicts.position - self._log_start :]:
                verdicts.forget(node_name, positions.get(node_name))
        verdicts.position = self._read_to = position
        if on_layout and verdicts.positions is None:
            verdicts.positions = KeptPositions(len(nodes))
        self._by_signature[key] = verdicts  # (re)inserted last: most recently used
        return verdicts

    def _follow(self, nodes: Sequence[NodeInfo]) -> bool:
        """Log the nodes a NodeInfoList replaced since the last attempt; a new list moves
        positions, so every signature's `positions` is rebuilt (its verdicts, kept by name,
        stay). False for any other sequence (a PreFilter's subset, a test's list)."""
        if not isinstance(nodes, NodeInfoList):
            return False
        changed = self._layout.changed_since_last(nodes)
        if changed is None:
            self._positions = nodes.positions
            for verdicts in self._by_signature.values():
                verdicts.positions = None
        else:
            for node_name in changed:
                self.node_changed(node_name)
        return True

    @staticmethod
    def _kept_verdict(
        attempt: AttemptVerdicts, walk: FilterWalk
    ) -> Callable[[NodeInfo], Status | None]:
        """A node's kept verdict while its NodeInfo's generation is the one it saw, else
        Filter's, kept."""
        kept, reused, run_filters = attempt.verdicts.filter, attempt.reused, walk.filter

        def verdict(node_info: NodeInfo) -> Status | None:
            known = kept.get(node_info.name)
            if known is not None and known[0] == node_info.generation:
                if known[1] is None:
                    reused.add(node_info.name)
                return known[1]
            status = run_filters(node_info)
            kept[node_info.name] = (node_info.generation, status)
            return status

        return verdict

    @staticmethod
    def _walk_kept_positions(
        attempt: AttemptVerdicts,
        nodes: NodeInfoList,
        walk: FilterWalk,
        diagnosis: Diagnosis,
        name_every_rejection: bool,
    ) -> tuple[list[NodeInfo], int]:
        """`walk.every_node` by bisection over what this signature's attempts learnt per
        position (`KeptPositions`): Filter runs only for the unknown positions on the way,
        in walk order, until `to_find` known feasible nodes lie between `start` and the
        next unknown one. The same nodes pass, in the same order, and as many are passed
        over. Leaves the range in `attempt.kept_walk` for `best_kept_node`."""
        kept = attempt.verdicts.positions
        assert kept is not None
        verdicts = attempt.verdicts.filter
        start, to_find = walk.start, walk.to_find
        filtered: set[str] = set()
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
                status = walk.filter(node_info)
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
        if not feasible or name_every_rejection:
            for i in range(start, start + processed):
                name = nodes[i % num_all].name
                status = verdicts[name][1]
                if status is not None:
                    diagnosis.node_to_status[name] = status
                    diagnosis.add_plugin_status(status)
        attempt.kept_walk, attempt.filtered = KeptWalk(kept, nodes, start, last), filtered
        return feasible, processed

    # -- Score --

    def _kept_score_plugins(
        self, state: CycleState, scorers: Sequence[ScorePlugin] | None
    ) -> list[tuple[ScorePlugin, int]] | None:
        """The Score plugins in use with their weights, if each keeps its scores (a
        `SignPlugin` that does not normalize); else None."""
        skipped = state.skip_score_plugins
        plugins = [p for p in scorers or self._score_plugins if p.name not in skipped]
        if not plugins or not all(p.name in self._keeping_scores for p in plugins):
            return None
        return [(p, self._score_weights[p.name]) for p in plugins]

    def best_kept_node(
        self,
        state: CycleState,
        pod: core_v1.Pod,
        rng: random.Random,
        scorers: Sequence[ScorePlugin] | None = None,
    ) -> str | None:
        """After PreScore: the host among the feasible nodes of a walk over kept positions,
        from the signature's kept total scores, scoring only the nodes not scored yet: the
        highest total, ties broken uniformly at random, as `runtime.select_host` does over
        every node. None without such a walk, or when a Score plugin in use does not keep
        its scores."""
        attempt = attempt_verdicts(state)
        weighted = self._kept_score_plugins(state, scorers)
        if attempt is None or attempt.kept_walk is None or weighted is None:
            return None
        walk = attempt.kept_walk
        kept, nodes = walk.positions, walk.nodes
        kept.score_with(tuple((p.name, weight) for p, weight in weighted))
        ranges = _circular_slices(walk.start, walk.last)
        for first, end in ranges:
            lo = bisect.bisect_left(kept.unscored, first)
            for position in kept.unscored[lo : bisect.bisect_right(kept.unscored, end)]:
                kept.scored(position, _total(weighted, state, pod, nodes[position]))
        for score in sorted(kept.by_score, reverse=True):
            bucket = kept.by_score[score]
            counts = [_count_between(bucket, first, end) for first, end in ranges]
            if not any(counts):
                continue
            pick = rng.randrange(sum(counts))
            for (first, _), count in zip(ranges, counts, strict=True):
                if pick < count:
                    return nodes[bucket[bisect.bisect_left(bucket, first) + pick]].name
                pick -= count
        return None

    def _kept_totals(
        self,
        attempt: AttemptVerdicts,
        state: CycleState,
        pod: core_v1.Pod,
        nodes: Sequence[NodeInfo],
        weighted: list[tuple[ScorePlugin, int]],
    ) -> list[int]:
        """Each node's total score from an earlier attempt while its NodeInfo and what
        plugins report hold, else scored now."""
        verdicts = attempt.verdicts
        scored_by = tuple((p.name, weight) for p, weight in weighted)
        if verdicts.scored_by != scored_by:
            verdicts.scored_by = scored_by
            verdicts.totals.clear()
        kept = verdicts.totals
        totals = []
        for node_info in nodes:
            known = kept.get(node_info.name)
            if known is not None and known[0] == node_info.generation:
                totals.append(known[1])
            else:
                total = _total(weighted, state, pod, node_info)
                kept[node_info.name] = (node_info.generation, total)
                totals.append(total)
        return totals


def _total(
    weighted: list[tuple[ScorePlugin, int]], state: CycleState, pod: core_v1.Pod, node: NodeInfo
) -> int:
    """A node's weighted total over the plugins; raises FrameworkError for a score out of
    range."""
    total = 0
    for pl, weight in weighted:
        value = pl.score(state, pod, node)
        if not MIN_NODE_SCORE <= value <= MAX_NODE_SCORE:
            raise invalid_score(pl.name, value)
        total += weight * value
    return total
