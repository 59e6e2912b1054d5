"""One attempt's Filter over the nodes, as upstream's `findNodesThatPassFilters`: from a
rotating start round the list until enough nodes passed, each node's first non-success
status ruling it out; pods nominated to a node count there.

Upstream: `pkg/scheduler/schedule_one.go` and `RunFilterPluginsWithNominatedPods` in
`pkg/scheduler/framework/runtime/framework.go`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from drasim.common.api import core_v1
from drasim.scheduler.framework.cycle_state import CycleState
from drasim.scheduler.framework.node_info import NodeInfo
from drasim.scheduler.framework.status import Code, FrameworkError, Status, is_rejected, wrap
from drasim.scheduler.framework.types import Diagnosis

__all__ = ["FilterFn", "FilterWalk", "filter_node", "with_nominated_pods"]


def with_nominated_pods(state: CycleState, node_info: NodeInfo) -> NodeInfo:
    """The node with the pods nominated to it added (a copy), or the node itself."""
    nominated = state.nominated_pods.get(node_info.name)
    if not nominated:
        return node_info
    copy = node_info.snapshot()
    for pod in nominated:
        copy.add_pod(pod)
    return copy


FilterFn = Callable[[CycleState, core_v1.Pod, NodeInfo], "Status | None"]


def filter_node(
    filters: Sequence[tuple[str, FilterFn]], state: CycleState, pod: core_v1.Pod, node: NodeInfo
) -> Status | None:
    """Run the Filters on one node: None if it passes, else the first non-success status,
    named after its plugin (an Error wrapped as upstream's). Pods nominated to the node
    count as running there (`CycleState.nominated_pods`)."""
    if state.nominated_pods:
        node = with_nominated_pods(state, node)
    for name, run_filter in filters:
        status = run_filter(state, pod, node)
        if status is not None and status.code != Code.SUCCESS:
            if not is_rejected(status):
                status = wrap(f'running "{name}" filter plugin', status)
            return status.with_plugin(name)
    return None


class FilterWalk:
    """One attempt's Filter over the nodes, upstream's way: from `start` round the list
    until `to_find` nodes passed; each node's first non-success status rules it out."""

    def __init__(
        self,
        state: CycleState,
        pod: core_v1.Pod,
        *,
        filters: list[tuple[str, FilterFn]],
        start: int,
        to_find: int,
    ) -> None:
        self.state, self.pod, self.filters = state, pod, filters
        self.start, self.to_find = start, to_find

    def filter(self, node_info: NodeInfo) -> Status | None:
        """The node's verdict: None if it passes, else the rejecting status. Raises
        FrameworkError when a plugin errs."""
        status = filter_node(self.filters, self.state, self.pod, node_info)
        if status is not None and status.code == Code.ERROR:
            raise FrameworkError(status)
        return status

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
