"""Filter verdicts and scores of earlier attempts, reused for pods whose specs are the same
(see `FilterVerdicts`). Re-exported by `framework`."""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol

from drasim.common import codec
from drasim.common.api import core_v1
from drasim.scheduler.framework.node_info import NodeInfo, NodeInfoList, NodeListReader

if TYPE_CHECKING:
    from drasim.scheduler.framework.cycle_state import CycleState
    from drasim.scheduler.framework.interfaces import FilterPlugin
    from drasim.scheduler.framework.status import Status

__all__ = [
    "FilterVerdicts",
    "KeptPositions",
    "NodeChangeSink",
    "PodVerdicts",
    "circular_slices",
    "count_between",
    "kept_scores",
]


class NodeChangeSink(Protocol):
    """Where a plugin reports changes its Filter reads beyond the pod's spec and the
    NodeInfo (DynamicResources: classes, slices, devices taken or freed)."""

    def node_changed(self, node_name: str) -> None: ...

    def all_changed(self) -> None: ...


@dataclasses.dataclass(slots=True)
class PodVerdicts:
    """What earlier attempts found for one pod spec, per node, with the NodeInfo's
    generation they saw."""

    # node -> (generation, None if feasible else the rejecting status)
    filter: dict[str, tuple[int, Status | None]] = dataclasses.field(default_factory=dict)
    # Score plugin -> node -> (generation, the plugin's score before normalizing); only
    # for plugins declaring `reusable_scores = True` (their score, like their Filter,
    # reads the pod's spec, the NodeInfo and what plugins report as changes).
    scores: dict[str, dict[str, tuple[int, int]]] = dataclasses.field(default_factory=dict)
    # How far into the change log these verdicts are up to date (`FilterVerdicts`).
    position: int = 0
    # What attempts on the snapshot's current NodeInfoList learnt per position; None until
    # an attempt on one builds it.
    positions: KeptPositions | None = None

    def forget(self, node_name: str, position: int | None) -> None:
        self.filter.pop(node_name, None)
        for kept in self.scores.values():
            kept.pop(node_name, None)
        if self.positions is not None and position is not None:
            self.positions.forget(position)

    def forget_all(self) -> None:
        self.filter.clear()
        self.scores.clear()
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


def count_between(positions: list[int], first: int, last: int) -> int:
    """How many of the sorted `positions` lie in [first, last]."""
    return bisect.bisect_right(positions, last) - bisect.bisect_left(positions, first)


class KeptPositions:
    """One pod spec's nodes by position in the snapshot's NodeInfoList, in sorted lists, so
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
        (a spec's PreScore skips the same plugins every time, so this is a safeguard)."""
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


def circular_slices(first: int, last: int) -> list[tuple[int, int]]:
    """[first, last] going round, as one or two ascending inclusive ranges."""
    if first <= last:
        return [(first, last)]
    return [(first, 1 << 62), (0, last)]


class FilterVerdicts:
    """Filter verdicts of earlier attempts, reused for pods whose specs are the same.

    A verdict (feasible, or the rejecting status) depends on the pod's spec and on the
    node's state; it is kept per pod spec and node while that state holds. The NodeInfo's
    generation covers the node object and its pods; what else a plugin's Filter reads, the
    plugin reports through `watch_filter_inputs(sink)` as calls of `node_changed(name)`
    (DynamicResources: a device of a pool reaching the node taken or freed) and
    `all_changed()` (a class or a slice); the snapshot's NodeInfoList names the nodes it
    replaced. Node changes go to a log; each pod spec's verdicts drop the nodes logged
    since they were last used, so an attempt pays only for the few nodes that changed: on
    a NodeInfoList it finds the feasible nodes and the best of them by bisection
    (`KeptPositions`), elsewhere it checks each node's verdict with one comparison. Used only
    when every Filter plugin declares `reusable_filter_verdicts = True`, and not for a pod
    that a PreFilter excluded (`CycleState.reuse_filter_verdicts`). Like the equivalence
    cache kube-scheduler once had; the chosen node is always filtered again before Reserve.
    """

    MAX_SPECS = 64  # distinct pod specs kept, the least recently used dropped first
    MAX_LOG = 10_000  # node changes kept; verdicts older than the log are all dropped

    def __init__(self, filter_plugins: Sequence[FilterPlugin]) -> None:
        self.enabled = bool(filter_plugins) and all(
            getattr(p, "reusable_filter_verdicts", False) for p in filter_plugins
        )
        self._by_spec: dict[bytes, PodVerdicts] = {}
        self._log: list[str] = []
        self._log_start = 0  # position of `_log[0]` among all changes ever logged
        self._read_to = 0  # the log's end when a spec's verdicts last caught up with it
        # The NodeInfoList that positions refer to.
        self._layout = NodeListReader()
        self._positions: dict[str, int] = {}
        for plugin in filter_plugins:
            watch = getattr(plugin, "watch_filter_inputs", None)
            if watch is not None:
                watch(self)

    def node_changed(self, node_name: str) -> None:
        end = self._log_start + len(self._log)
        if not self._by_spec or (self._log and self._log[-1] == node_name and self._read_to < end):
            return  # (logged last, and no spec has read past it since: it would drop it again)
        if len(self._log) >= self.MAX_LOG:
            self._log_start += len(self._log)
            self._log = []
        self._log.append(node_name)

    def all_changed(self) -> None:
        self._by_spec.clear()

    def for_pod(self, pod: core_v1.Pod, nodes: Sequence[NodeInfo]) -> PodVerdicts:
        """This spec's verdicts, without those of nodes changed since their last use; with
        `positions` when `nodes` is a snapshot's NodeInfoList."""
        on_layout = self._follow(nodes)
        key = codec.encode(pod.spec)
        position = self._log_start + len(self._log)
        verdicts = self._by_spec.pop(key, None)
        if verdicts is None:
            verdicts = PodVerdicts(position=position)
            if len(self._by_spec) >= self.MAX_SPECS:
                del self._by_spec[next(iter(self._by_spec))]
        elif verdicts.position < self._log_start:
            verdicts.forget_all()
        else:
            positions = self._positions
            for node_name in self._log[verdicts.position - self._log_start :]:
                verdicts.forget(node_name, positions.get(node_name))
        verdicts.position = self._read_to = position
        if on_layout and verdicts.positions is None:
            verdicts.positions = KeptPositions(len(nodes))
        self._by_spec[key] = verdicts  # (re)inserted last: most recently used
        return verdicts

    def _follow(self, nodes: Sequence[NodeInfo]) -> bool:
        """Log the nodes a NodeInfoList replaced since the last attempt; a new list moves
        positions, so every spec's `positions` is rebuilt (its verdicts, kept by name,
        stay). False for any other sequence (a PreFilter's subset, a test's list)."""
        if not isinstance(nodes, NodeInfoList):
            return False
        changed = self._layout.changed_since_last(nodes)
        if changed is None:
            self._positions = nodes.positions
            for verdicts in self._by_spec.values():
                verdicts.positions = None
        else:
            for node_name in changed:
                self.node_changed(node_name)
        return True


def kept_scores(
    kept: dict[str, tuple[int, int]],
    state: CycleState,
    pod: core_v1.Pod,
    nodes: Sequence[NodeInfo],
    score: Callable[[CycleState, core_v1.Pod, NodeInfo], int],
) -> list[int]:
    """Each node's score from an earlier attempt while its NodeInfo and what plugins
    report hold, else scored now."""
    values = []
    for node_info in nodes:
        known = kept.get(node_info.name)
        if known is not None and known[0] == node_info.generation:
            values.append(known[1])
        else:
            value = score(state, pod, node_info)
            kept[node_info.name] = (node_info.generation, value)
            values.append(value)
    return values
