"""Filter verdicts and scores of earlier attempts, reused for pods whose specs are the same
(see `FilterVerdicts`). Re-exported by `framework`."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol

from drasim.common import codec
from drasim.common.api import core_v1
from drasim.scheduler.node_info import NodeInfo

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

    def forget(self, node_name: str) -> None:
        self.filter.pop(node_name, None)
        for kept in self.scores.values():
            kept.pop(node_name, None)

    def forget_all(self) -> None:
        self.filter.clear()
        self.scores.clear()


class FilterVerdicts:
    """Filter verdicts of earlier attempts, reused for pods whose specs are the same.

    A verdict (feasible, or the rejecting status) depends on the pod's spec and on the
    node's state; it is kept per pod spec and node while that state holds. The NodeInfo's
    generation covers the node object and its pods; what else a plugin's Filter reads, the
    plugin reports through `watch_filter_inputs(sink)` as calls of `node_changed(name)`
    (DynamicResources: a device of a pool reaching the node taken or freed) and
    `all_changed()` (a class or a slice). Node changes go to a log; each pod spec's
    verdicts drop the nodes logged since they were last used, so an attempt checks the
    unchanged nodes with one comparison each and pays for the few that changed. Used only
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

    def for_pod(self, pod: core_v1.Pod) -> PodVerdicts:
        """This spec's verdicts, without those of nodes changed since their last use."""
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
            for node_name in self._log[verdicts.position - self._log_start :]:
                verdicts.forget(node_name)
        verdicts.position = self._read_to = position
        self._by_spec[key] = verdicts  # (re)inserted last: most recently used
        return verdicts


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
