"""Per-attempt scratch space: plugin data under keys, and what the framework records for
the attempt (skipped plugins, whether it is timed, nominations).

Upstream: `pkg/scheduler/framework/cycle_state.go`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

from drasim.common.api import core_v1

if TYPE_CHECKING:
    from drasim.scheduler.framework.node_info import NodeInfoList
    from drasim.scheduler.verdicts import KeptPositions, PodVerdicts

__all__ = ["CycleState", "StateData"]


@runtime_checkable
class StateData(Protocol):
    """A plugin's private per-attempt data; immutable data may return itself from `clone`."""

    def clone(self) -> StateData: ...


class CycleState:
    """Scratch space for one scheduling attempt, keyed by plugin name.

    A plugin writes its state once in PreFilter (or PreScore) and reads it in Filter,
    Reserve and PreBind. The framework records here which plugins skipped, so their Filter
    or Score is not called in this attempt.
    """

    def __init__(self) -> None:
        self._storage: dict[str, StateData] = {}
        self.skip_filter_plugins: set[str] = set()
        self.skip_score_plugins: set[str] = set()
        # Whether this attempt times its plugins (upstream samples 10 % of attempts).
        self.record_plugin_metrics = False
        # Whether Filter may answer from earlier attempts' verdicts (see `FilterVerdicts`);
        # a PreFilter turns it off for a pod whose verdicts depend on more than its spec.
        self.reuse_filter_verdicts = False
        # Feasible nodes whose verdict was reused: the chosen one is checked again.
        self.reused_feasible: set[str] = set()
        # Set by a PreFilter that knows no other node can pass its Filter (NodeResourcesFit:
        # the nodes whose allocatable has a device plugin's resource the pod asks for).
        # Unlike a PreFilterResult it does not change the diagnosis: a shortcut only.
        self.candidate_nodes: frozenset[str] | None = None
        # With reuse on: this pod spec's kept verdicts.
        self.pod_verdicts: PodVerdicts | None = None
        # Whether the diagnosis must name every rejected node even when some node fits (a
        # traced attempt shows them); without, a walk that skips nodes known infeasible
        # names them only when none fits.
        self.record_rejections = False
        # Left by a walk over kept positions (`_FilterWalk.kept_nodes`): what it learnt,
        # the node list, and the positions it went from and to (both included); and the
        # nodes Filter ran for in it (every other feasible node's verdict was reused).
        self.kept_walk: tuple[KeptPositions, NodeInfoList, int, int] | None = None
        self.filtered_now: set[str] | None = None
        # Set by a PostFilter that made room for the pod on a node (DefaultPreemption):
        # the failure handler records it as the pod's `status.nominatedNodeName`.
        self.nominated_node_name: str | None = None
        # Pods nominated to a node (by node) whose priority is at least this pod's: Filter
        # counts them there as if they ran (upstream `RunFilterPluginsWithNominatedPods`).
        self.nominated_pods: dict[str, list[core_v1.Pod]] = {}

    def read(self, key: str) -> StateData:
        """Raises KeyError when nothing was written, e.g. because PreFilter did not run."""
        try:
            return self._storage[key]
        except KeyError:
            raise KeyError(f"{key!r} not found in cycle state") from None

    def write(self, key: str, value: StateData) -> None:
        self._storage[key] = value

    def delete(self, key: str) -> None:
        self._storage.pop(key, None)

    def clone(self) -> CycleState:
        """A copy whose data is cloned, for what-if runs that must not touch this attempt."""
        copy = CycleState()
        copy._storage = {key: value.clone() for key, value in self._storage.items()}
        copy.skip_filter_plugins = set(self.skip_filter_plugins)
        copy.skip_score_plugins = set(self.skip_score_plugins)
        copy.record_plugin_metrics = self.record_plugin_metrics
        copy.reuse_filter_verdicts = self.reuse_filter_verdicts
        copy.reused_feasible = set(self.reused_feasible)
        copy.pod_verdicts = self.pod_verdicts
        copy.candidate_nodes = self.candidate_nodes
        copy.nominated_pods = self.nominated_pods  # (read only)
        return copy
