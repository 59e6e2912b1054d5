"""The scheduling framework: status codes, per-attempt state, one Protocol per extension
point, and `Framework`, which runs the plugins of each point with upstream's rules (NodeInfo
lives in `node_info`, reused Filter verdicts in `verdicts`; both are re-exported here).

Upstream: `staging/src/k8s.io/kube-scheduler/framework/{interface.go,types.go}`,
`pkg/scheduler/framework/runtime/framework.go`, `pkg/scheduler/framework/types.go`
(`Diagnosis`, `FitError`) and `pkg/scheduler/framework/events.go`. Everything here is pure and
synchronous except PostFilter, Unreserve, PreBind and Bind, the points that talk to the API
server.
"""

from __future__ import annotations

import bisect
import dataclasses
import enum
import itertools
import random
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, ClassVar, NamedTuple, Protocol, runtime_checkable

import msgspec

from drasim.common.api import core_v1, resources
from drasim.common.quantity import Quantity
from drasim.scheduler.node_info import (
    DEFAULT_MEMORY_REQUEST,
    DEFAULT_MILLI_CPU_REQUEST,
    NodeInfo,
    NodeInfoList,
    NodeListReader,
    PodResourceRequest,
    is_scalar_resource_name,
    pod_non_zero_requests,
    pod_resource_request,
    resource_vector,
)
from drasim.scheduler.verdicts import (
    FilterVerdicts,
    KeptPositions,
    NodeChangeSink,
    PodVerdicts,
    circular_slices,
    count_between,
    kept_scores,
)

__all__ = [
    "DEFAULT_MEMORY_REQUEST",
    "DEFAULT_MILLI_CPU_REQUEST",
    "MAX_NODE_SCORE",
    "MIN_NODE_SCORE",
    "ActionType",
    "BindPlugin",
    "ClusterEvent",
    "ClusterEventWithHint",
    "Code",
    "CycleState",
    "Diagnosis",
    "EnqueueExtensions",
    "EventResource",
    "ExtensionPoint",
    "FilterPlugin",
    "FitError",
    "Framework",
    "FrameworkError",
    "NodeChangeSink",
    "NodeInfo",
    "NodeInfoList",
    "NodeListReader",
    "NodePluginScores",
    "NodeScore",
    "Plugin",
    "PluginDurationObserver",
    "PluginScore",
    "PodResourceRequest",
    "PostFilterPlugin",
    "PreBindPlugin",
    "PreFilterPlugin",
    "PreFilterResult",
    "PreScorePlugin",
    "QueueingHint",
    "QueueingHintFn",
    "ReservePlugin",
    "ScoreExtensions",
    "ScorePlugin",
    "StateData",
    "Status",
    "is_rejected",
    "is_scalar_resource_name",
    "is_skip",
    "is_success",
    "node_scheduling_properties_change",
    "pod_non_zero_requests",
    "pod_resource_request",
    "pod_scheduling_properties_change",
    "resource_vector",
]

MAX_NODE_SCORE = 100
MIN_NODE_SCORE = 0
# Filtering stops after this many feasible nodes at least (upstream's constants).
MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5


# --- Status ------------------------------------------------------------------------------


class Code(enum.IntEnum):
    """A plugin's verdict. Each code decides what the framework and the queue do next."""

    SUCCESS = 0
    """The plugin ran and the pod may go on. `None` means the same."""
    ERROR = 1
    """An internal failure (bad input, API error). The attempt is aborted, no PostFilter runs,
    and the pod is requeued to backoff without recording the plugin as a rejector, so any
    cluster event or the backoff timer retries it."""
    UNSCHEDULABLE = 2
    """The pod does not fit; PostFilter (e.g. preemption) may help. The pod waits in the
    unschedulable pool until an event registered by the rejecting plugin (and its hint)
    requeues it, then goes through backoff as a penalty for the wasted cycle."""
    UNSCHEDULABLE_AND_UNRESOLVABLE = 3
    """The pod does not fit and PostFilter cannot change that on this node (preemption skips
    it). Queueing as UNSCHEDULABLE: wait for a registered event, then backoff."""
    WAIT = 4
    """A Permit plugin holds the pod before binding."""
    SKIP = 5
    """The plugin has nothing to do: from PreFilter its Filter is skipped for this pod, from
    PreScore its Score, from Bind the next binder is asked."""
    PENDING = 6
    """The cycle went well but the plugin waits for something external before binding. The
    pod is requeued straight to activeQ when its event arrives, without backoff."""

    def __str__(self) -> str:
        """Upstream's spelling, used in logs and metric labels: `UnschedulableAndUnresolvable`."""
        return "".join(part.title() for part in self.name.split("_"))


@dataclasses.dataclass(slots=True)
class Status:
    """A plugin's result: code, reasons, an optional error and the plugin that set it.

    `None` stands for success everywhere, as upstream's nil `*Status`; use `is_success`.
    The error field is `err` (upstream's name) because `Status.error(...)` builds one.
    """

    code: Code
    reasons: list[str] = dataclasses.field(default_factory=list)
    err: BaseException | None = None
    plugin: str = ""

    @classmethod
    def unschedulable(cls, *reasons: str) -> Status:
        return cls(Code.UNSCHEDULABLE, list(reasons))

    @classmethod
    def unresolvable(cls, *reasons: str) -> Status:
        return cls(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, list(reasons))

    @classmethod
    def error(cls, err: BaseException | str) -> Status:
        """Wrap an internal failure (upstream `AsStatus`)."""
        return cls(Code.ERROR, err=err if isinstance(err, BaseException) else Exception(err))

    @classmethod
    def skip(cls) -> Status:
        return cls(Code.SKIP)

    def all_reasons(self) -> list[str]:
        """The reasons with the error's text first (upstream `Reasons()`)."""
        return [str(self.err), *self.reasons] if self.err is not None else list(self.reasons)

    def message(self) -> str:
        return ", ".join(self.all_reasons())

    def with_plugin(self, plugin: str) -> Status:
        self.plugin = plugin
        return self


def is_success(status: Status | None) -> bool:
    return status is None or status.code == Code.SUCCESS


def is_skip(status: Status | None) -> bool:
    return status is not None and status.code == Code.SKIP


def is_rejected(status: Status | None) -> bool:
    """Unschedulable, unresolvable or pending: the plugin turned the pod away."""
    return status is not None and status.code in (
        Code.UNSCHEDULABLE,
        Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
        Code.PENDING,
    )


def _code_name(status: Status | None) -> str:
    return str(status.code if status is not None else Code.SUCCESS)


class FrameworkError(Exception):
    """A plugin returned Error: the scheduling attempt is aborted (upstream returns `err`)."""

    def __init__(self, status: Status) -> None:
        super().__init__(status.message())
        self.status = status


# --- CycleState --------------------------------------------------------------------------


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


# --- Extension points --------------------------------------------------------------------


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


class PluginScore(msgspec.Struct, frozen=True, gc=False):
    name: str
    score: int


class NodePluginScores(msgspec.Struct, gc=False):
    """One node's weighted score from each Score plugin, and their sum. (Made for every
    scored node of every attempt: a Struct the cycle collector does not track.)"""

    name: str
    scores: list[PluginScore] = msgspec.field(default_factory=list)
    total_score: int = 0


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


# --- Cluster events and queueing hints ---------------------------------------------------


class ActionType(enum.IntFlag):
    """What changed on an object; flags combine, and the specific update flags let the
    queue run a hint only for the change that matters."""

    ADD = enum.auto()
    DELETE = enum.auto()
    UPDATE_NODE_ALLOCATABLE = enum.auto()
    UPDATE_NODE_LABEL = enum.auto()
    UPDATE_NODE_TAINT = enum.auto()  # taints or spec.unschedulable
    UPDATE_NODE_CONDITION = enum.auto()
    UPDATE_NODE_ANNOTATION = enum.auto()
    UPDATE_NODE_DECLARED_FEATURE = enum.auto()
    UPDATE_POD_LABEL = enum.auto()
    UPDATE_POD_SCALE_DOWN = enum.auto()
    UPDATE_POD_TOLERATION = enum.auto()
    UPDATE_POD_SCHEDULING_GATES_ELIMINATED = enum.auto()
    # resourceClaimStatuses or extendedResourceClaimStatus changed (spec §3.11.1).
    UPDATE_POD_GENERATED_RESOURCE_CLAIM = enum.auto()
    UPDATE = (
        UPDATE_NODE_ALLOCATABLE
        | UPDATE_NODE_LABEL
        | UPDATE_NODE_TAINT
        | UPDATE_NODE_CONDITION
        | UPDATE_NODE_ANNOTATION
        | UPDATE_NODE_DECLARED_FEATURE
        | UPDATE_POD_LABEL
        | UPDATE_POD_SCALE_DOWN
        | UPDATE_POD_TOLERATION
        | UPDATE_POD_SCHEDULING_GATES_ELIMINATED
        | UPDATE_POD_GENERATED_RESOURCE_CLAIM
    )
    ALL = ADD | DELETE | UPDATE


class EventResource(enum.StrEnum):
    """The kinds whose events may requeue pods, named as upstream."""

    POD = "Pod"
    NODE = "Node"
    RESOURCE_CLAIM = "resource.k8s.io/ResourceClaim"
    RESOURCE_SLICE = "resource.k8s.io/ResourceSlice"
    DEVICE_CLASS = "resource.k8s.io/DeviceClass"
    WILDCARD = "*"


class QueueingHint(enum.IntEnum):
    QUEUE_SKIP = 0
    """The event cannot make the pod schedulable; it stays in the unschedulable pool."""
    QUEUE = 1
    """The event may make the pod schedulable; move it to backoff or activeQ."""


QueueingHintFn = Callable[[core_v1.Pod, Any, Any], QueueingHint]
"""`(pod, old, new)`: `old` is None for Add, `new` is None for Delete. A hint that raises
counts as QUEUE, so a buggy hint never strands a pod."""


@dataclasses.dataclass(frozen=True, slots=True)
class ClusterEvent:
    resource: EventResource
    action_type: ActionType

    def label(self) -> str:
        """For logs and metrics, e.g. `NodeAdd` (upstream `Label()`)."""
        return f"{self.resource}{_action_label(self.action_type)}"


def _action_label(action: ActionType) -> str:
    """`UpdateNodeTaint` for one flag, `All`/`Update` for those unions, else empty (as Go)."""
    if action == ActionType.ALL:
        return "All"
    if action == ActionType.UPDATE:
        return "Update"
    if action.name is None or "|" in action.name:
        return ""
    return "".join(part.title() for part in action.name.split("_"))


@dataclasses.dataclass(frozen=True, slots=True)
class ClusterEventWithHint:
    """An event that may help pods this plugin rejected; no hint means always requeue."""

    event: ClusterEvent
    queueing_hint_fn: QueueingHintFn | None = None


@runtime_checkable
class EnqueueExtensions(Protocol):
    """Plugins that reject pods (PreFilter, Filter, Reserve) say which events may help."""

    name: ClassVar[str]

    def events_to_register(self) -> list[ClusterEventWithHint]: ...


def node_scheduling_properties_change(new: core_v1.Node, old: core_v1.Node) -> list[ClusterEvent]:
    """The Node update events a change carries, one per kind of change that may matter to
    scheduling; heartbeats and status noise give none (upstream
    `NodeSchedulingPropertiesChange`). An uncordon counts as a taint change, as upstream."""
    changes = {
        ActionType.UPDATE_NODE_TAINT: new.spec.taints != old.spec.taints
        or (old.spec.unschedulable and not new.spec.unschedulable),
        ActionType.UPDATE_NODE_ALLOCATABLE: new.status.allocatable != old.status.allocatable,
        ActionType.UPDATE_NODE_LABEL: new.metadata.labels != old.metadata.labels,
        ActionType.UPDATE_NODE_CONDITION: _condition_statuses(new) != _condition_statuses(old),
        ActionType.UPDATE_NODE_ANNOTATION: new.metadata.annotations != old.metadata.annotations,
    }
    return [ClusterEvent(EventResource.NODE, action) for action, yes in changes.items() if yes]


def _condition_statuses(node: core_v1.Node) -> dict[str, str]:
    """Condition type → status; heartbeat and transition times are not a change."""
    return {c.type: c.status for c in node.status.conditions}


def pod_scheduling_properties_change(new: core_v1.Pod, old: core_v1.Pod) -> list[ClusterEvent]:
    """The Pod update events a change carries (upstream `PodSchedulingPropertiesChange`).

    Upstream falls back to an "other update" event that only plugins registering a bare
    Pod/Update see; no plugin here does, so other changes give no event.
    """
    actions = []
    if new.metadata.labels != old.metadata.labels:
        actions.append(ActionType.UPDATE_POD_LABEL)
    if _requests_decreased(new, old):
        actions.append(ActionType.UPDATE_POD_SCALE_DOWN)
    if new.spec.tolerations != old.spec.tolerations:
        actions.append(ActionType.UPDATE_POD_TOLERATION)
    if (
        new.status.resource_claim_statuses != old.status.resource_claim_statuses
        or new.status.extended_resource_claim_status != old.status.extended_resource_claim_status
    ):
        actions.append(ActionType.UPDATE_POD_GENERATED_RESOURCE_CLAIM)
    return [ClusterEvent(EventResource.POD, action) for action in actions]


def _requests_decreased(new: core_v1.Pod, old: core_v1.Pod) -> bool:
    """A bound pod resized down frees resources (upstream `extractPodScaleDown`)."""
    if not new.spec.node_name or resources.same_request_inputs(new, old):
        return False
    before, after = resources.pod_requests(old), resources.pod_requests(new)
    return any(after.get(name, Quantity()) < quantity for name, quantity in before.items())


# --- Diagnosis and the FailedScheduling message ------------------------------------------


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


# --- The framework -----------------------------------------------------------------------


class ExtensionPoint(enum.StrEnum):
    """Metric label values of `scheduler_plugin_execution_duration_seconds`."""

    PRE_FILTER = "PreFilter"
    FILTER = "Filter"
    POST_FILTER = "PostFilter"
    PRE_SCORE = "PreScore"
    SCORE = "Score"
    SCORE_EXTENSION_NORMALIZE = "ScoreExtensionNormalize"
    RESERVE = "Reserve"
    UNRESERVE = "Unreserve"
    PRE_BIND = "PreBind"
    BIND = "Bind"


PluginDurationObserver = Callable[[ExtensionPoint, str, str, float], None]
"""`(extension_point, plugin, status code as upstream spells it, seconds)`, called after
every plugin call."""


def _invalid_score(plugin: str, score: int) -> FrameworkError:
    """Upstream's error for a (normalized) score outside 0–100."""
    return FrameworkError(
        Status.error(
            f"plugin {plugin!r} returns an invalid score {score}, it should in the range of "
            f"[{MIN_NODE_SCORE}, {MAX_NODE_SCORE}] after normalizing"
        )
    )


def _plugin_list_message(plugins: Iterable[str]) -> str:
    """Go's `%v` of a sorted string slice: `[A B]`."""
    return "[" + " ".join(sorted(plugins)) + "]"


def with_nominated_pods(state: CycleState, node_info: NodeInfo) -> NodeInfo:
    """The node with the pods nominated to it added (a copy), or the node itself."""
    nominated = state.nominated_pods.get(node_info.name)
    if not nominated:
        return node_info
    copy = node_info.snapshot()
    for pod in nominated:
        copy.add_pod(pod)
    return copy


class _FilterWalk:
    """One attempt's Filter over the nodes, upstream's way: from `start` round the list
    until `to_find` nodes passed; each node's first non-success status rules it out.
    Both walks answer (feasible nodes, nodes passed over)."""

    def __init__(
        self,
        state: CycleState,
        pod: core_v1.Pod,
        *,
        filters: list[tuple[str, Callable[[CycleState, core_v1.Pod, NodeInfo], Status | None]]],
        observe: Callable[[CycleState, ExtensionPoint, str, float, Status | None], None] | None,
        start: int,
        to_find: int,
    ) -> None:
        self.state, self.pod, self.filters, self.observe = state, pod, filters, observe
        self.start, self.to_find = start, to_find

    def filter(self, node_info: NodeInfo) -> Status | None:
        """Run the Filters on one node: None if it passes, else the rejecting status.
        Raises FrameworkError when a plugin errs."""
        state, pod, observe = self.state, self.pod, self.observe
        if state.nominated_pods:
            node_info = with_nominated_pods(state, node_info)
        for name, run_filter in self.filters:
            if observe is not None:
                started = time.perf_counter()
                status = run_filter(state, pod, node_info)
                observe(state, ExtensionPoint.FILTER, name, started, status)
            else:
                status = run_filter(state, pod, node_info)
            if status is not None and status.code != Code.SUCCESS:
                if not is_rejected(status):
                    raise FrameworkError(_wrap(f"running {name!r} filter plugin", status))
                return status.with_plugin(name)
        return None

    def every_node(
        self,
        nodes: Sequence[NodeInfo],
        verdicts: dict[str, tuple[int, Status | None]] | None,
        diagnosis: Diagnosis,
    ) -> tuple[list[NodeInfo], int]:
        """Visit each node in turn, answering from `verdicts` where the node's generation
        is the one they saw; every rejection goes into the diagnosis."""
        num_all = len(nodes)
        feasible: list[NodeInfo] = []
        processed = 0
        for i in range(self.start, self.start + num_all):
            node_info = nodes[i % num_all]
            processed += 1
            known = verdicts.get(node_info.name) if verdicts is not None else None
            if known is not None and known[0] == node_info.generation:
                status = known[1]
                if status is None:
                    self.state.reused_feasible.add(node_info.name)
            else:
                status = self.filter(node_info)
                if verdicts is not None:
                    verdicts[node_info.name] = (node_info.generation, status)
            if status is None:
                feasible.append(node_info)
                if len(feasible) >= self.to_find:
                    break
            else:
                diagnosis.node_to_status[node_info.name] = status
                diagnosis.add_plugin_status(status)
        return feasible, processed

    def kept_nodes(
        self, nodes: NodeInfoList, pod_verdicts: PodVerdicts, diagnosis: Diagnosis
    ) -> tuple[list[NodeInfo], int]:
        """`every_node` by bisection over what this spec's attempts learnt per position
        (`KeptPositions`): Filter runs only for the unknown positions on the way, in walk
        order, until `to_find` known feasible nodes lie between `start` and the next
        unknown one. The same nodes pass, in the same order, and as many are passed over.
        The rejections of the nodes passed over go into the diagnosis only when no node
        passed or the attempt records them (`CycleState.record_rejections`), as a full
        cluster otherwise costs a visit to every node per attempt. Leaves the range in
        `CycleState.kept_walk` for `Framework.best_kept_node`."""
        kept = pod_verdicts.positions
        assert kept is not None
        verdicts = pod_verdicts.filter
        state, start, to_find = self.state, self.start, self.to_find
        state.filtered_now = filtered = set()
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
                status = self.filter(node_info)
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
        if not feasible or state.record_rejections:
            for i in range(start, start + processed):
                name = nodes[i % num_all].name
                status = verdicts[name][1]
                if status is not None:
                    diagnosis.node_to_status[name] = status
                    diagnosis.add_plugin_status(status)
        state.kept_walk = (kept, nodes, start, last)
        return feasible, processed


class Framework:
    """One scheduling profile: its plugins sorted into extension points, run in list order.

    A plugin joins every point whose Protocol it implements (checked with `isinstance`).
    """

    def __init__(
        self,
        plugins: Sequence[Plugin],
        *,
        score_weights: Mapping[str, int] | None = None,
        observe_plugin_duration: PluginDurationObserver | None = None,
        percentage_of_nodes_to_score: int = 0,
    ) -> None:
        names = [plugin.name for plugin in plugins]
        if len(set(names)) != len(names):
            raise ValueError(f"plugin names must be unique, got {names}")
        self.plugins = list(plugins)
        self.pre_filter_plugins = [p for p in plugins if isinstance(p, PreFilterPlugin)]
        self.filter_plugins = [p for p in plugins if isinstance(p, FilterPlugin)]
        self.post_filter_plugins = [p for p in plugins if isinstance(p, PostFilterPlugin)]
        self.pre_score_plugins = [p for p in plugins if isinstance(p, PreScorePlugin)]
        self.score_plugins = [p for p in plugins if isinstance(p, ScorePlugin)]
        self.reserve_plugins = [p for p in plugins if isinstance(p, ReservePlugin)]
        self.pre_bind_plugins = [p for p in plugins if isinstance(p, PreBindPlugin)]
        self.bind_plugins = [p for p in plugins if isinstance(p, BindPlugin)]
        self.enqueue_extensions = [p for p in plugins if isinstance(p, EnqueueExtensions)]
        self.score_weights = {p.name: (score_weights or {}).get(p.name, 1) for p in plugins}
        self._observe = observe_plugin_duration
        # 0 picks upstream's adaptive percentage (see `num_feasible_nodes_to_find`).
        self.percentage_of_nodes_to_score = percentage_of_nodes_to_score
        self._next_start_node_index = 0
        self.filter_verdicts = FilterVerdicts(self.filter_plugins)

    def _observed(
        self,
        state: CycleState,
        point: ExtensionPoint,
        plugin: str,
        started: float,
        status: Status | None,
    ) -> None:
        if self._observe is not None and state.record_plugin_metrics:
            self._observe(point, plugin, _code_name(status), time.perf_counter() - started)

    # -- scheduling cycle --

    def run_pre_filter_plugins(
        self, state: CycleState, pod: core_v1.Pod, nodes: Sequence[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None, set[str]]:
        """Run every PreFilter; returns the merged result, the status and the plugins that
        narrowed the nodes. Skips are recorded in `state.skip_filter_plugins`."""
        result: PreFilterResult | None = None
        plugins_with_nodes: set[str] = set()
        unschedulable: Status | None = None
        for pl in self.pre_filter_plugins:
            started = time.perf_counter()
            narrowed, status = pl.pre_filter(state, pod, nodes)
            self._observed(state, ExtensionPoint.PRE_FILTER, pl.name, started, status)
            if is_skip(status):
                state.skip_filter_plugins.add(pl.name)
                continue
            if status is not None and not is_success(status):
                status.plugin = pl.name
                if status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                    # Preemption cannot help, so the remaining PreFilters need not run.
                    return None, status, set()
                if status.code == Code.UNSCHEDULABLE:
                    # Preemption runs later and needs every PreFilter's state (#119770).
                    unschedulable = status
                    continue
                return None, _wrap(f"running PreFilter plugin {pl.name!r}", status), set()
            if narrowed is not None and not narrowed.all_nodes():
                plugins_with_nodes.add(pl.name)
            result = narrowed.merge(result) if narrowed is not None else result
            if result is not None and not result.node_names:
                if len(plugins_with_nodes) == 1:
                    msg = f"node(s) didn't satisfy plugin {next(iter(plugins_with_nodes))}"
                else:
                    msg = (
                        f"node(s) didn't satisfy plugin(s) "
                        f"{_plugin_list_message(plugins_with_nodes)} simultaneously"
                    )
                return result, Status.unresolvable(msg), plugins_with_nodes
        return result, unschedulable, plugins_with_nodes

    def run_filter_plugins(
        self, state: CycleState, pod: core_v1.Pod, node_info: NodeInfo
    ) -> Status | None:
        """The first non-success Filter status rules the node out; the rest do not run.
        Pods nominated to the node count as running there (`CycleState.nominated_pods`)."""
        if state.nominated_pods:
            node_info = with_nominated_pods(state, node_info)
        for pl in self.filter_plugins:
            if pl.name in state.skip_filter_plugins:
                continue
            started = time.perf_counter()
            status = pl.filter(state, pod, node_info)
            self._observed(state, ExtensionPoint.FILTER, pl.name, started, status)
            if not is_success(status):
                assert status is not None
                if not is_rejected(status):
                    status = _wrap(f"running {pl.name!r} filter plugin", status)
                return status.with_plugin(pl.name)
        return None

    def num_feasible_nodes_to_find(self, num_all_nodes: int) -> int:
        """How many feasible nodes are enough to stop filtering (upstream
        `numFeasibleNodesToFind`): all of a small cluster, else `percentageOfNodesToScore`
        of it, by default 50 % minus 1 % per 125 nodes (at least 5 %), never below 100."""
        if num_all_nodes < MIN_FEASIBLE_NODES_TO_FIND:
            return num_all_nodes
        percentage = self.percentage_of_nodes_to_score
        if percentage <= 0:
            percentage = max(50 - num_all_nodes // 125, MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND)
        return max(num_all_nodes * percentage // 100, MIN_FEASIBLE_NODES_TO_FIND)

    def find_nodes_that_fit(
        self, state: CycleState, pod: core_v1.Pod, node_infos: Sequence[NodeInfo]
    ) -> tuple[list[NodeInfo], Diagnosis]:
        """PreFilter, then Filter (upstream `findNodesThatFitPod`).

        As upstream, Filter stops once `num_feasible_nodes_to_find` nodes passed, and the
        next attempt starts where this one stopped, so every node gets its turn. Nodes not
        checked have no status in the diagnosis. Raises FrameworkError when a plugin
        returns Error.
        """
        diagnosis = Diagnosis()
        # Verdicts kept per node do not know the pods nominated to it.
        state.reuse_filter_verdicts = self.filter_verdicts.enabled and not state.nominated_pods
        result, status, plugins_with_nodes = self.run_pre_filter_plugins(state, pod, node_infos)
        diagnosis.unschedulable_plugins = set(plugins_with_nodes)
        if not is_success(status):
            assert status is not None
            if not is_rejected(status):
                raise FrameworkError(status)
            # Every node gets the same status so that PostFilter sees them all.
            diagnosis.absent_nodes_status = status
            diagnosis.pre_filter_msg = status.message()
            diagnosis.add_plugin_status(status)
            return [], diagnosis

        nodes = node_infos
        if result is not None and result.node_names is not None:
            nodes = [n for n in node_infos if n.name in result.node_names]
            diagnosis.absent_nodes_status = Status.unresolvable(
                f"node(s) didn't satisfy plugin(s) {_plugin_list_message(plugins_with_nodes)}"
            )
        if state.candidate_nodes is not None:
            # Only these can pass; if none does, every node is filtered after all, so
            # that the diagnosis says what each node lacks, as upstream's does.
            if isinstance(nodes, NodeInfoList):  # (in walk order, without a pass over all)
                positions = nodes.positions
                candidates = [
                    nodes[p]
                    for p in sorted(positions[n] for n in state.candidate_nodes if n in positions)
                ]
            else:
                candidates = [n for n in nodes if n.name in state.candidate_nodes]
            probe = Diagnosis()
            feasible = self._find_nodes_that_pass_filters(state, pod, candidates, probe)
            if feasible:
                diagnosis.evaluated_nodes = probe.evaluated_nodes
                return feasible, diagnosis
        return self._find_nodes_that_pass_filters(state, pod, nodes, diagnosis), diagnosis

    def _find_nodes_that_pass_filters(
        self, state: CycleState, pod: core_v1.Pod, nodes: Sequence[NodeInfo], diagnosis: Diagnosis
    ) -> list[NodeInfo]:
        num_all = len(nodes)
        if num_all == 0:
            return []
        walk = _FilterWalk(
            state,
            pod,
            filters=[
                (pl.name, pl.filter)
                for pl in self.filter_plugins
                if pl.name not in state.skip_filter_plugins
            ],
            observe=self._observed if self._observe and state.record_plugin_metrics else None,
            start=self._next_start_node_index % num_all,
            to_find=self.num_feasible_nodes_to_find(num_all),
        )
        if not state.reuse_filter_verdicts:
            feasible, processed = walk.every_node(nodes, None, diagnosis)
        else:
            state.pod_verdicts = self.filter_verdicts.for_pod(pod, nodes)
            if isinstance(nodes, NodeInfoList):
                feasible, processed = walk.kept_nodes(nodes, state.pod_verdicts, diagnosis)
            else:
                feasible, processed = walk.every_node(nodes, state.pod_verdicts.filter, diagnosis)
        self._next_start_node_index = (walk.start + processed) % num_all
        diagnosis.evaluated_nodes = processed
        return feasible

    def confirm_reused_verdict(
        self, state: CycleState, pod: core_v1.Pod, node_info: NodeInfo
    ) -> None:
        """Run Filter for real on the chosen node if its verdict was reused: plugins keep
        per-node results for Reserve, and a verdict must never be trusted blindly. Raises
        FrameworkError (the pod retries after backoff) if it no longer passes; that
        would mean a change went unreported, so every kept verdict is dropped."""
        name = node_info.name
        reused = name in state.reused_feasible or (
            state.filtered_now is not None and name not in state.filtered_now
        )
        if not reused:
            return
        status = self.run_filter_plugins(state, pod, node_info)
        if not is_success(status):
            self.filter_verdicts.all_changed()
            raise FrameworkError(
                Status.error(f"reused Filter verdict for node {node_info.name} was stale")
            )

    async def run_post_filter_plugins(
        self, state: CycleState, pod: core_v1.Pod, diagnosis: Diagnosis
    ) -> Status | None:
        """Run PostFilters until one succeeds, errs or is unresolvable; otherwise merge all
        their Unschedulable reasons into one status, named after the first plugin."""
        reasons: list[str] = []
        rejector = ""
        for pl in self.post_filter_plugins:
            started = time.perf_counter()
            status = await pl.post_filter(state, pod, diagnosis)
            self._observed(state, ExtensionPoint.POST_FILTER, pl.name, started, status)
            if is_success(status):
                return None
            assert status is not None
            if status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                return status.with_plugin(pl.name)
            if not is_rejected(status):
                return Status(Code.ERROR, err=_as_error(status)).with_plugin(pl.name)
            reasons.extend(status.all_reasons())
            rejector = rejector or pl.name
        return Status(Code.UNSCHEDULABLE, reasons).with_plugin(rejector)

    def best_kept_node(self, state: CycleState, pod: core_v1.Pod, rng: random.Random) -> str | None:
        """After PreScore: the host among the feasible nodes of a `kept_nodes` walk, from
        the spec's kept total scores, scoring only the nodes not scored yet: the highest
        total, ties broken uniformly at random, as `schedule_one.select_host` does over
        every node. None (score every node as usual) without such a walk, when a Score
        plugin in use cannot keep its scores (not `reusable_scores`, or normalizing), or
        when the attempt times its plugins."""
        walk = state.kept_walk
        if walk is None or (self._observe is not None and state.record_plugin_metrics):
            return None
        plugins = [p for p in self.score_plugins if p.name not in state.skip_score_plugins]
        if not all(
            getattr(p, "reusable_scores", False) and not isinstance(p, ScoreExtensions)
            for p in plugins
        ):
            return None
        weighted = [(p, self.score_weights[p.name]) for p in plugins]
        kept, nodes, start, last = walk
        kept.score_with(tuple((p.name, weight) for p, weight in weighted))
        ranges = circular_slices(start, last)
        for first, end in ranges:
            lo = bisect.bisect_left(kept.unscored, first)
            for position in kept.unscored[lo : bisect.bisect_right(kept.unscored, end)]:
                node_info = nodes[position]
                total = 0
                for pl, weight in weighted:
                    value = pl.score(state, pod, node_info)
                    if not MIN_NODE_SCORE <= value <= MAX_NODE_SCORE:
                        raise _invalid_score(pl.name, value)
                    total += weight * value
                kept.scored(position, total)
        for score in sorted(kept.by_score, reverse=True):
            bucket = kept.by_score[score]
            counts = [count_between(bucket, first, end) for first, end in ranges]
            if not any(counts):
                continue
            pick = rng.randrange(sum(counts))
            for (first, _), count in zip(ranges, counts, strict=True):
                if pick < count:
                    return nodes[bucket[bisect.bisect_left(bucket, first) + pick]].name
                pick -= count
        return None

    def run_pre_score_plugins(
        self, state: CycleState, pod: core_v1.Pod, nodes: Sequence[NodeInfo]
    ) -> Status | None:
        """Skips are recorded in `state.skip_score_plugins`; other failures abort."""
        for pl in self.pre_score_plugins:
            started = time.perf_counter()
            status = pl.pre_score(state, pod, nodes)
            self._observed(state, ExtensionPoint.PRE_SCORE, pl.name, started, status)
            if is_skip(status):
                state.skip_score_plugins.add(pl.name)
                continue
            if not is_success(status):
                assert status is not None
                return _wrap(f"running PreScore plugin {pl.name!r}", status)
        return None

    def run_score_plugins(
        self, state: CycleState, pod: core_v1.Pod, nodes: Sequence[NodeInfo]
    ) -> list[NodePluginScores]:
        """Each node's weighted score per Score plugin and their sum (upstream
        `RunScorePlugins`). Raises FrameworkError when a normalized score is out of range."""
        weighted = self._weighted_scores(state, pod, nodes)
        result = []
        for i, node_info in enumerate(nodes):
            per_plugin = [PluginScore(plugin, values[i]) for plugin, values in weighted]
            total = sum(p.score for p in per_plugin)
            result.append(NodePluginScores(node_info.name, per_plugin, total))
        return result

    def total_scores(
        self, state: CycleState, pod: core_v1.Pod, nodes: Sequence[NodeInfo]
    ) -> list[int]:
        """Each node's sum of `run_score_plugins`, all that picking a host needs, without
        its objects per node and plugin (a cycle scores ~230 nodes)."""
        weighted = self._weighted_scores(state, pod, nodes)
        if len(weighted) == 1:
            return weighted[0][1]
        if not weighted:
            return [0] * len(nodes)
        return [sum(column) for column in zip(*(values for _, values in weighted), strict=True)]

    def _weighted_scores(
        self, state: CycleState, pod: core_v1.Pod, nodes: Sequence[NodeInfo]
    ) -> list[tuple[str, list[int]]]:
        """Score, normalize, check the 0–100 range and apply the weight, plugin by plugin:
        (plugin, the nodes' scores in `nodes` order)."""
        plugins = [p for p in self.score_plugins if p.name not in state.skip_score_plugins]
        timed = self._observe is not None and state.record_plugin_metrics
        weighted: list[tuple[str, list[int]]] = []
        for pl in plugins:
            score = pl.score
            started = time.perf_counter()
            if state.pod_verdicts is not None and getattr(pl, "reusable_scores", False):
                kept = state.pod_verdicts.scores.setdefault(pl.name, {})
                values = kept_scores(kept, state, pod, nodes, score)
            else:
                values = [score(state, pod, n) for n in nodes]
            if timed:  # (upstream times each node; one figure per cycle is enough here)
                self._observed(state, ExtensionPoint.SCORE, pl.name, started, None)
            if isinstance(pl, ScoreExtensions):
                started = time.perf_counter()
                scores = [NodeScore(n.name, v) for n, v in zip(nodes, values, strict=True)]
                values = [v for _, v in pl.normalize_scores(state, pod, scores)]
                self._observed(
                    state, ExtensionPoint.SCORE_EXTENSION_NORMALIZE, pl.name, started, None
                )
            if values and not MIN_NODE_SCORE <= min(values) <= max(values) <= MAX_NODE_SCORE:
                bad = next(v for v in values if not MIN_NODE_SCORE <= v <= MAX_NODE_SCORE)
                raise _invalid_score(pl.name, bad)
            weight = self.score_weights[pl.name]
            if weight != 1:
                values = [v * weight for v in values]
            weighted.append((pl.name, values))
        return weighted

    async def run_reserve_plugins_reserve(
        self, state: CycleState, pod: core_v1.Pod, node_name: str
    ) -> Status | None:
        """Reserve in order; on the first failure unreserve everything and return it.

        Upstream leaves the Unreserve call to its caller, which always makes it; doing it
        here keeps that rule in one place.
        """
        for pl in self.reserve_plugins:
            started = time.perf_counter()
            status = pl.reserve(state, pod, node_name)
            self._observed(state, ExtensionPoint.RESERVE, pl.name, started, status)
            if not is_success(status):
                assert status is not None
                if is_rejected(status):
                    status.plugin = pl.name
                else:
                    status = _wrap(f"running Reserve plugin {pl.name!r}", status)
                await self.run_reserve_plugins_unreserve(state, pod, node_name)
                return status
        return None

    async def run_reserve_plugins_unreserve(
        self, state: CycleState, pod: core_v1.Pod, node_name: str
    ) -> None:
        """Every reserve plugin's Unreserve, in reverse order of Reserve."""
        for pl in reversed(self.reserve_plugins):
            started = time.perf_counter()
            await pl.unreserve(state, pod, node_name)
            self._observed(state, ExtensionPoint.UNRESERVE, pl.name, started, None)

    # -- binding cycle --

    async def run_pre_bind_plugins(
        self, state: CycleState, pod: core_v1.Pod, node_name: str
    ) -> Status | None:
        for pl in self.pre_bind_plugins:
            started = time.perf_counter()
            status = await pl.pre_bind(state, pod, node_name)
            self._observed(state, ExtensionPoint.PRE_BIND, pl.name, started, status)
            if not is_success(status):
                assert status is not None
                if is_rejected(status):
                    return status.with_plugin(pl.name)
                return _wrap(f"running PreBind plugin {pl.name!r}", status)
        return None

    async def run_bind_plugins(
        self, state: CycleState, pod: core_v1.Pod, node_name: str
    ) -> Status | None:
        """Ask binders in order until one does not Skip; Skip from all (or none
        configured) is returned as Skip."""
        status: Status | None = Status.skip()
        for pl in self.bind_plugins:
            started = time.perf_counter()
            status = await pl.bind(state, pod, node_name)
            self._observed(state, ExtensionPoint.BIND, pl.name, started, status)
            if is_skip(status):
                continue
            if not is_success(status):
                assert status is not None
                if is_rejected(status):
                    return status.with_plugin(pl.name)
                return _wrap(f"running Bind plugin {pl.name!r}", status)
            return status
        return status

    # -- queueing --

    def events_to_register(self) -> dict[str, list[ClusterEventWithHint]]:
        """Plugin name → the events that may requeue pods it rejected."""
        return {pl.name: pl.events_to_register() for pl in self.enqueue_extensions}


def _as_error(status: Status) -> BaseException:
    return status.err if status.err is not None else Exception(status.message())


def _wrap(context: str, status: Status) -> Status:
    """An Error status naming the plugin, as upstream's `fmt.Errorf("running …: %w")`."""
    cause = _as_error(status)
    err = Exception(f"{context}: {cause}")
    err.__cause__ = cause
    return Status(Code.ERROR, err=err, plugin=status.plugin)
