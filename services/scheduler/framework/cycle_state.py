"""Per-attempt scratch space: plugin data under keys, and what the framework records for
the attempt (skipped plugins, whether it is timed, nominations).

Upstream: `pkg/scheduler/framework/cycle_state.go`.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from drasim.common.api import core_v1

__all__ = ["CycleState", "StateData"]


@runtime_checkable
class StateData(Protocol):
    """A plugin's private per-attempt data; immutable data may return itself from `clone`."""

    def clone(self) -> StateData: ...


class CycleState:
    """Scratch space for one scheduling attempt, keyed by plugin name.

    A plugin writes its state once in PreFilter (or PreScore) and reads it in Filter,
    Reserve and PreBind; the VerdictCache keeps what the attempt reused the same way. The
    framework records here which plugins skipped, so their Filter or Score is not called in
    this attempt.
    """

    def __init__(self) -> None:
        self._storage: dict[str, StateData] = {}
        self.skip_filter_plugins: set[str] = set()
        self.skip_score_plugins: set[str] = set()
        # Whether this attempt times its plugins (upstream samples 10 % of attempts).
        self.record_plugin_metrics = False
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
        copy.nominated_pods = self.nominated_pods  # (read only)
        return copy
