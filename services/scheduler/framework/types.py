"""What one attempt produces: each node's scores per plugin, and the `Diagnosis` of why
nodes were rejected, which makes the FailedScheduling message.

Upstream: `pkg/scheduler/framework/types.go` (`Diagnosis`, `FitError`, `NodePluginScores`).
"""

from __future__ import annotations

import dataclasses

import msgspec

from drasim.common.api import core_v1
from drasim.scheduler.framework.status import Code, Status, is_rejected

__all__ = ["Diagnosis", "FitError", "NodePluginScores", "PluginScore"]


class PluginScore(msgspec.Struct, frozen=True, gc=False):
    name: str
    score: int


class NodePluginScores(msgspec.Struct, gc=False):
    """One node's weighted score from each Score plugin, and their sum. (Made for every
    scored node of every attempt: a Struct the cycle collector does not track.)"""

    name: str
    scores: list[PluginScore] = msgspec.field(default_factory=list)
    total_score: int = 0


@dataclasses.dataclass(slots=True)
class Diagnosis:
    """Why each node was rejected in one attempt (upstream `Diagnosis` + `NodeToStatus`).

    Nodes absent from `node_to_status` share `absent_nodes_status`: the PreFilter rejection
    for all nodes, or the status of nodes a PreFilterResult left out.
    """

    node_to_status: dict[str, Status] = dataclasses.field(default_factory=dict)
    absent_nodes_status: Status = dataclasses.field(
        default_factory=lambda: Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE)
    )
    unschedulable_plugins: set[str] = dataclasses.field(default_factory=set)
    pending_plugins: set[str] = dataclasses.field(default_factory=set)
    pre_filter_msg: str = ""
    post_filter_msg: str = ""
    # Nodes Filter passed over: feasible or rejected (upstream counts both).
    evaluated_nodes: int = 0

    def get(self, node_name: str) -> Status:
        return self.node_to_status.get(node_name, self.absent_nodes_status)

    def add_plugin_status(self, status: Status) -> None:
        """Remember rejecting plugins: only their events requeue the pod."""
        if not status.plugin:
            return
        if is_rejected(status):
            self.unschedulable_plugins.add(status.plugin)
        if status.code == Code.PENDING:
            self.pending_plugins.add(status.plugin)

    def message(self, num_all_nodes: int) -> str:
        """The FailedScheduling text (upstream `FitError.Error()`).

        `0/N nodes are available: <PreFilter msg>. <histogram>. <PostFilter msg>` where the
        histogram is "<count> <reason>" per distinct reason, sorted as strings (so by count
        text first: "10 x" sorts before "2 y"), and left out when PreFilter rejected, since
        then every node carries that same status. The PostFilter text is appended as is.
        """
        text = f"0/{num_all_nodes} nodes are available:"
        if self.pre_filter_msg:
            text += f" {self.pre_filter_msg}."
        else:
            counts: dict[str, int] = {}
            for status in self.node_to_status.values():
                for reason in status.all_reasons():
                    counts[reason] = counts.get(reason, 0) + 1
            absent = num_all_nodes - len(self.node_to_status)
            if absent > 0:
                for reason in self.absent_nodes_status.all_reasons():
                    counts[reason] = counts.get(reason, 0) + absent
            histogram = sorted(f"{count} {reason}" for reason, count in counts.items())
            if histogram:
                text += f" {', '.join(histogram)}."
        if self.post_filter_msg:
            text += f" {self.post_filter_msg}"
        return text


class FitError(Exception):
    """No node fits the pod; `str()` is the FailedScheduling message."""

    def __init__(self, pod: core_v1.Pod, num_all_nodes: int, diagnosis: Diagnosis) -> None:
        super().__init__()
        self.pod = pod
        self.num_all_nodes = num_all_nodes
        self.diagnosis = diagnosis

    def __str__(self) -> str:
        return self.diagnosis.message(self.num_all_nodes)
