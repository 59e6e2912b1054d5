"""One Protocol per extension point; the framework sorts plugins into points with
`isinstance`. Each says which codes its plugin may return and what the framework does then.

Upstream: `staging/src/k8s.io/kube-scheduler/framework/interface.go`.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, ClassVar, NamedTuple, Protocol, runtime_checkable

from drasim.common.api import core_v1
from drasim.scheduler.framework.status import FrameworkError, Status

if TYPE_CHECKING:
    from collections.abc import Hashable, Sequence

    from drasim.scheduler.framework.cycle_state import CycleState
    from drasim.scheduler.framework.events import ClusterEventWithHint
    from drasim.scheduler.framework.node_info import NodeInfo
    from drasim.scheduler.framework.types import Diagnosis

__all__ = [
    "MAX_NODE_SCORE",
    "MIN_NODE_SCORE",
    "BindPlugin",
    "CandidateNodesPlugin",
    "EnqueueExtensions",
    "FilterInputReporter",
    "FilterPlugin",
    "NodeChangeSink",
    "NodeScore",
    "Plugin",
    "PostFilterPlugin",
    "PreBindPlugin",
    "PreEnqueuePlugin",
    "PreFilterPlugin",
    "PreFilterResult",
    "PreScorePlugin",
    "ReservePlugin",
    "ScoreExtensions",
    "ScorePlugin",
    "SignPlugin",
    "invalid_score",
]

MAX_NODE_SCORE = 100
MIN_NODE_SCORE = 0


@dataclasses.dataclass(frozen=True, slots=True)
class PreFilterResult:
    """The nodes worth filtering; `None` means all of them."""

    node_names: frozenset[str] | None = None

    def all_nodes(self) -> bool:
        return self.node_names is None

    def merge(self, other: PreFilterResult | None) -> PreFilterResult | None:
        """Intersect two results; `None` (all nodes) is the identity."""
        if other is None or other.all_nodes():
            return None if self.all_nodes() else self
        if self.all_nodes():
            return other
        assert self.node_names is not None and other.node_names is not None
        return PreFilterResult(self.node_names & other.node_names)


class NodeScore(NamedTuple):
    """One plugin's score of one node (a tuple: made per node per cycle, so kept cheap)."""

    name: str
    score: int


@runtime_checkable
class Plugin(Protocol):
    name: ClassVar[str]


@runtime_checkable
class PreFilterPlugin(Protocol):
    """Runs once per attempt before Filter.

    May return Success (optionally a PreFilterResult narrowing the nodes), Skip (its Filter
    is then not run for this pod), Unschedulable (the other PreFilters still run, then
    PostFilter), UnschedulableAndUnresolvable (stops at once) or Error (aborts the attempt).
    """

    name: ClassVar[str]

    def pre_filter(
        self, state: CycleState, pod: core_v1.Pod, nodes: Sequence[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None]: ...


@runtime_checkable
class FilterPlugin(Protocol):
    """Decides whether the pod fits one node; pure and synchronous.

    Returns Success, Unschedulable or UnschedulableAndUnresolvable (the node is out, the
    first rejecting plugin names the reason) or Error (the attempt is aborted).
    """

    name: ClassVar[str]

    def filter(self, state: CycleState, pod: core_v1.Pod, node_info: NodeInfo) -> Status | None: ...


@runtime_checkable
class PostFilterPlugin(Protocol):
    """Runs when no node fits, to make the pod schedulable in a later attempt.

    Returns Success (stop; the pod may fit next time), Unschedulable (ask the next plugin),
    UnschedulableAndUnresolvable (stop) or Error. Its reasons end the FailedScheduling text.
    """

    name: ClassVar[str]

    async def post_filter(
        self, state: CycleState, pod: core_v1.Pod, filtered_node_status_map: Diagnosis
    ) -> Status | None: ...


@runtime_checkable
class PreScorePlugin(Protocol):
    """Runs once with the feasible nodes before Score; Skip skips its Score, other
    non-success codes abort the attempt."""

    name: ClassVar[str]

    def pre_score(
        self, state: CycleState, pod: core_v1.Pod, nodes: Sequence[NodeInfo]
    ) -> Status | None: ...


@runtime_checkable
class ScorePlugin(Protocol):
    """Ranks one feasible node, 0–100 after normalization; pure and synchronous."""

    name: ClassVar[str]

    def score(self, state: CycleState, pod: core_v1.Pod, node_info: NodeInfo) -> int: ...


@runtime_checkable
class ScoreExtensions(Protocol):
    """Optional on a ScorePlugin: rescales all its node scores into 0–100."""

    def normalize_scores(
        self, state: CycleState, pod: core_v1.Pod, scores: list[NodeScore]
    ) -> list[NodeScore]: ...


@runtime_checkable
class ReservePlugin(Protocol):
    """Claims the chosen node's resources in memory before binding.

    Any non-success from `reserve` rejects the pod, and then `unreserve` of every reserve
    plugin runs in reverse order; `unreserve` must therefore be idempotent and cope with
    a `reserve` that never ran. It also runs when a later phase (PreBind, Bind) fails, and
    is async because undoing PreBind's work means API calls (deleting a created claim).
    """

    name: ClassVar[str]

    def reserve(self, state: CycleState, pod: core_v1.Pod, node_name: str) -> Status | None: ...

    async def unreserve(self, state: CycleState, pod: core_v1.Pod, node_name: str) -> None: ...


@runtime_checkable
class PreBindPlugin(Protocol):
    """Does the API work binding depends on (e.g. creating a ResourceClaim).

    Any non-success rejects the pod; the binding cycle then unreserves it.
    """

    name: ClassVar[str]

    async def pre_bind(
        self, state: CycleState, pod: core_v1.Pod, node_name: str
    ) -> Status | None: ...


@runtime_checkable
class BindPlugin(Protocol):
    """Binds the pod. Skip passes the pod to the next bind plugin; the first other result
    is final, and a failure unreserves the pod."""

    name: ClassVar[str]

    async def bind(self, state: CycleState, pod: core_v1.Pod, node_name: str) -> Status | None: ...


@runtime_checkable
class PreEnqueuePlugin(Protocol):
    """Decides whether a pod may enter activeQ at all, before any attempt; pure.

    Returns Success (None), or UnschedulableAndUnresolvable: the queue keeps the pod gated
    in unschedulablePods until an event this plugin registered lets it in (upstream
    SchedulingGates). The pod is never tried meanwhile, so no condition or event is written.
    """

    name: ClassVar[str]

    def pre_enqueue(self, pod: core_v1.Pod) -> Status | None: ...


@runtime_checkable
class EnqueueExtensions(Protocol):
    """Plugins that reject pods (PreFilter, Filter, Reserve) say which events may help."""

    name: ClassVar[str]

    def events_to_register(self) -> list[ClusterEventWithHint]: ...


class NodeChangeSink(Protocol):
    """Where a plugin reports changes its Filter reads beyond the pod's spec and the
    NodeInfo (DynamicResources: classes, slices, devices taken or freed)."""

    def node_changed(self, node_name: str) -> None: ...

    def all_changed(self) -> None: ...


@runtime_checkable
class SignPlugin(Protocol):
    """A Filter plugin whose verdict on a node, and its score if it scores, follow from
    what it reads of the pod, the NodeInfo and what it reports to a `NodeChangeSink`: the
    framework may then keep them for later pods it signs alike (`VerdictCache`; upstream
    `SignPlugin`, KEP-5598). The cache is used only when every Filter plugin is one.

    `sign_pod` runs after PreFilter and returns the plugin's fragment of the pod's
    signature: a hashable value holding all the plugin's Filter and Score read of the pod
    (NodeResourcesFit: the requests; TaintToleration: the tolerations), so that pods that
    differ elsewhere, as a Job's pods do in hostname and container names, share verdicts.
    None keeps this pod's verdicts from being kept or reused (DynamicResources: the pod
    has claims of its own, whose state it reads).
    """

    name: ClassVar[str]

    def sign_pod(self, state: CycleState, pod: core_v1.Pod) -> Hashable | None: ...


@runtime_checkable
class FilterInputReporter(Protocol):
    """A plugin whose Filter reads more than the pod's spec and the NodeInfo (DynamicResources:
    classes, slices, allocated devices): it reports every change of that to `sink`."""

    def watch_filter_inputs(self, sink: NodeChangeSink) -> None: ...


@runtime_checkable
class CandidateNodesPlugin(Protocol):
    """A PreFilter plugin that may know, for this pod, the only nodes its Filter can pass
    (NodeResourcesFit: the nodes advertising enough of a device plugin's resource). Filter
    tries those first; if none passes, every node is filtered after all, so that the
    diagnosis names each node's own reason. Unlike a PreFilterResult it changes no verdict:
    a shortcut only. None: every node may pass."""

    name: ClassVar[str]

    def candidate_nodes(self, state: CycleState) -> frozenset[str] | None: ...


def invalid_score(plugin: str, score: int) -> FrameworkError:
    """Upstream's error for a (normalized) score outside 0–100."""
    return FrameworkError(
        Status.error(
            f'plugin "{plugin}" returns an invalid score {score}, it should in the range of '
            f"[{MIN_NODE_SCORE}, {MAX_NODE_SCORE}] after normalizing"
        )
    )
