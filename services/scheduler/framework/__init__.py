"""The scheduling framework, split by concept as upstream's `pkg/scheduler/framework/`:

- `status`: `Code` and `Status`, a plugin's verdict (`None` is success);
- `cycle_state`: `CycleState`, one attempt's scratch space, plugin data under keys;
- `interfaces`: one Protocol per extension point, and what each code makes the framework do;
- `events`: cluster events and queueing hints, which requeue rejected pods;
- `node_info`: `NodeInfo`, a node with its pods, and their requests as integer vectors;
- `types`: scores per node and plugin, `Diagnosis` and `FitError`;
- `runtime`: `Framework`, which sorts a profile's plugins into extension points and runs them;
- `filter_walk`: one attempt's Filter over the nodes;
- `instrumentation`: plugin durations and spans, as wrappers around plugins and points;
- `verdict_cache`: Filter verdicts and scores kept across attempts of pods of one spec.

Callers import the package (`from drasim.scheduler import framework`, `framework.Status`);
everything public is re-exported here. Everything is pure and synchronous except
PostFilter, Unreserve, PreBind and Bind, the points that talk to the API server.
"""

from drasim.scheduler.framework.cycle_state import CycleState, StateData
from drasim.scheduler.framework.events import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    EventResource,
    QueueingHint,
    QueueingHintFn,
    node_scheduling_properties_change,
    pod_scheduling_properties_change,
)
from drasim.scheduler.framework.instrumentation import ExtensionPoint, PluginDurationObserver
from drasim.scheduler.framework.interfaces import (
    MAX_NODE_SCORE,
    MIN_NODE_SCORE,
    BindPlugin,
    CandidateNodesPlugin,
    EnqueueExtensions,
    FilterInputReporter,
    FilterPlugin,
    NodeChangeSink,
    NodeScore,
    Plugin,
    PostFilterPlugin,
    PreBindPlugin,
    PreEnqueuePlugin,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    ReservePlugin,
    ScoreExtensions,
    ScorePlugin,
    SignPlugin,
)
from drasim.scheduler.framework.node_info import (
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
from drasim.scheduler.framework.runtime import MIN_FEASIBLE_NODES_TO_FIND, Framework, select_host
from drasim.scheduler.framework.status import (
    Code,
    FrameworkError,
    Status,
    is_rejected,
    is_skip,
    is_success,
)
from drasim.scheduler.framework.types import Diagnosis, FitError, NodePluginScores, PluginScore
from drasim.scheduler.framework.verdict_cache import VerdictCache

__all__ = [
    "DEFAULT_MEMORY_REQUEST",
    "DEFAULT_MILLI_CPU_REQUEST",
    "MAX_NODE_SCORE",
    "MIN_FEASIBLE_NODES_TO_FIND",
    "MIN_NODE_SCORE",
    "ActionType",
    "BindPlugin",
    "CandidateNodesPlugin",
    "ClusterEvent",
    "ClusterEventWithHint",
    "Code",
    "CycleState",
    "Diagnosis",
    "EnqueueExtensions",
    "EventResource",
    "ExtensionPoint",
    "FilterInputReporter",
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
    "PreEnqueuePlugin",
    "PreFilterPlugin",
    "PreFilterResult",
    "PreScorePlugin",
    "QueueingHint",
    "QueueingHintFn",
    "ReservePlugin",
    "ScoreExtensions",
    "ScorePlugin",
    "SignPlugin",
    "StateData",
    "Status",
    "VerdictCache",
    "is_rejected",
    "is_scalar_resource_name",
    "is_skip",
    "is_success",
    "node_scheduling_properties_change",
    "pod_non_zero_requests",
    "pod_resource_request",
    "pod_scheduling_properties_change",
    "resource_vector",
    "select_host",
]
