"""Filter verdicts and scores of earlier attempts, reused for pods whose specs are the same
(see `FilterVerdicts`). Re-exported by `framework`."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import TYPE_CHECKING

from drasim.common import codec
from drasim.common.api import core_v1
from drasim.scheduler.node_info import NodeInfo

if TYPE_CHECKING:
    from drasim.scheduler.framework import CycleState, FilterPlugin, Status

__all__ = ["FilterVerdicts", "PodVerdicts", "kept_scores"]


@dataclasses.dataclass(slots=True)
class PodVerdicts:
    """What earlier attempts found for one pod spec, per node, with the node's stamp."""

    # node -> (stamp, None if feasible else the rejecting status)
    filter: dict[str, tuple[Hashable, Status | None]] = dataclasses.field(default_factory=dict)
    # Score plugin -> node -> (stamp, the plugin's score before normalizing); only for
    # plugins declaring `reusable_scores = True` (their score, like their Filter, reads
    # the pod's spec and what the stamp covers).
    scores: dict[str, dict[str, tuple[Hashable, int]]] = dataclasses.field(default_factory=dict)


class FilterVerdicts:
    """Filter verdicts of earlier attempts, reused for pods whose specs are the same.

    A verdict (feasible, or the rejecting status) depends on the pod's spec and on the
    node's state; it is kept per pod spec and node with a stamp of that state: the
    NodeInfo's generation (its node object and pods) and what plugins add through
    `filter_stamp(node_info)` (DynamicResources: its classes, slices and the allocations
    of the node's pools). An attempt checks nodes whose stamp is unchanged without calling
    the plugins, so a cycle pays for the few nodes that changed. Used only when every
    Filter plugin declares `reusable_filter_verdicts = True`, and not for a pod that a
    PreFilter excluded (`CycleState.reuse_filter_verdicts`). Like the equivalence cache
    kube-scheduler once had; the chosen node is always filtered again before Reserve.
    """

    MAX_SPECS = 64  # distinct pod specs kept, the least recently used dropped first

    def __init__(self, filter_plugins: Sequence[FilterPlugin]) -> None:
        self.enabled = bool(filter_plugins) and all(
            getattr(p, "reusable_filter_verdicts", False) for p in filter_plugins
        )
        self._stamps = [p.filter_stamp for p in filter_plugins if hasattr(p, "filter_stamp")]
        self._by_spec: dict[bytes, PodVerdicts] = {}

    def stamp(self, node_info: NodeInfo) -> Hashable:
        return (node_info.generation, *(stamp(node_info) for stamp in self._stamps))

    def stamp_function(self) -> Callable[[NodeInfo], Hashable]:
        """`stamp`, or the same without a call more per node in the usual case of one
        plugin adding to it."""
        if len(self._stamps) != 1:
            return self.stamp
        [plugin_stamp] = self._stamps
        return lambda node_info: (node_info.generation, plugin_stamp(node_info))

    def for_pod(self, pod: core_v1.Pod) -> PodVerdicts:
        key = codec.encode(pod.spec)
        verdicts = self._by_spec.pop(key, None)
        if verdicts is None:
            verdicts = PodVerdicts()
            if len(self._by_spec) >= self.MAX_SPECS:
                del self._by_spec[next(iter(self._by_spec))]
        self._by_spec[key] = verdicts  # (re)inserted last: most recently used
        return verdicts

    def clear(self) -> None:
        self._by_spec.clear()


def kept_scores(
    kept: dict[str, tuple[Hashable, int]],
    stamps: Mapping[str, Hashable],
    state: CycleState,
    pod: core_v1.Pod,
    nodes: Sequence[NodeInfo],
    score: Callable[[CycleState, core_v1.Pod, NodeInfo], int],
) -> list[int]:
    """Each node's score from an earlier attempt while its stamp holds, else scored now."""
    values = []
    for node_info in nodes:
        name = node_info.name
        stamp = stamps[name]
        known = kept.get(name)
        if known is not None and known[0] == stamp:
            values.append(known[1])
        else:
            value = score(state, pod, node_info)
            kept[name] = (stamp, value)
            values.append(value)
    return values
