"""Filter verdicts and scores of earlier attempts, reused for pods whose specs are the same
(see `FilterVerdicts`). Re-exported by `framework`."""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol

from drasim.common import codec
from drasim.common.api import core_v1
from drasim.scheduler.node_info import NodeInfo, NodeInfoList

if TYPE_CHECKING:
    from drasim.scheduler.framework import CycleState, FilterPlugin, Status

__all__ = ["FilterVerdicts", "NodeChangeSink", "PodVerdicts", "kept_scores"]


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
    # Sorted positions, in the snapshot's current NodeInfoList, of the nodes not known to
    # be infeasible: an attempt visits only these. Every other position has a rejection in
    # `filter`, and a change of its node reopens it. None until an attempt on a
    # NodeInfoList builds it.
    open: list[int] | None = None

    def forget(self, node_name: str, position: int | None) -> None:
        self.filter.pop(node_name, None)
        for kept in self.scores.values():
            kept.pop(node_name, None)
        if self.open is not None and position is not None:
            i = bisect.bisect_left(self.open, position)
            if i == len(self.open) or self.open[i] != position:
                self.open.insert(i, position)

    def forget_all(self) -> None:
        self.filter.clear()
        self.scores.clear()
        self.open = None


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
    a NodeInfoList it skips the nodes known infeasible (`PodVerdicts.open`), elsewhere it
    checks each node's verdict with one comparison. Used only
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
        # The NodeInfoList that positions refer to, each node's position in it, and how
        # many of its changes are logged here.
        self._layout: NodeInfoList | None = None
        self._positions: dict[str, int] = {}
        self._layout_read = 0
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
        `open` positions when `nodes` is a snapshot's NodeInfoList."""
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
        if on_layout and verdicts.open is None:
            verdicts.open = list(range(len(nodes)))
        self._by_spec[key] = verdicts  # (re)inserted last: most recently used
        return verdicts

    def _follow(self, nodes: Sequence[NodeInfo]) -> bool:
        """Log the nodes a NodeInfoList replaced since the last attempt; a new list moves
        positions, so every spec's `open` is rebuilt (its verdicts, kept by name, stay).
        False for any other sequence (a PreFilter's subset, a test's list)."""
        if not isinstance(nodes, NodeInfoList):
            return False
        if nodes is not self._layout:
            self._layout = nodes
            self._positions = {info.name: i for i, info in enumerate(nodes)}
            for verdicts in self._by_spec.values():
                verdicts.open = None
        else:
            for node_name in nodes.changed[self._layout_read :]:
                self.node_changed(node_name)
        self._layout_read = len(nodes.changed)
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
