"""NodeResourcesFit: the pod's requests must fit the node's allocatable minus what the pods
already there request; among fitting nodes, prefer the least allocated.

With the DRAExtendedResource gate on (a `resolve_device_class` given), an extended resource
that the node does not advertise (allocatable absent or 0) but a DeviceClass maps is left to
DynamicResources (upstream `shouldDelegateResourceToDRA` and `fitsRequest` in
`pkg/scheduler/framework/plugins/noderesources/fit.go`); one the node does advertise is a
device-plugin resource and is checked here. Scoring counts such DRA-served names by devices
(upstream `calculateDRAExtendedResourceAllocatableRequest`, `resource_allocation.go`).

Filter and Score run for every node of every attempt, so they compare integers only:
NodeInfo's resource vectors (allocatable converted once per node update, requests kept up
to date as pods come and go) against the pod's requests, converted once in PreFilter and
PreScore together with what does not depend on the node (ignored names, whether a
DeviceClass maps a name).

Upstream: `pkg/scheduler/framework/plugins/noderesources/{fit.go,resource_allocation.go,
least_allocated.go}`. Only the LeastAllocated strategy is implemented.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import ClassVar

from drasim.common.api import core_v1, resource_v1, resources
from drasim.scheduler import framework
from drasim.scheduler.plugins import names

__all__ = [
    "LEAST_ALLOCATED",
    "REASON_TOO_MANY_PODS",
    "DRACapacity",
    "DeviceClassResolver",
    "InsufficientResource",
    "NodeResourcesFit",
    "NodeResourcesFitArgs",
    "ResourceSpec",
    "ScoringStrategy",
    "fits",
    "insufficient_reason",
    "least_allocated_score",
]

REASON_TOO_MANY_PODS = "Too many pods"
LEAST_ALLOCATED = "LeastAllocated"

CPU, MEMORY, EPHEMERAL_STORAGE, PODS = "cpu", "memory", "ephemeral-storage", "pods"

_PRE_FILTER_STATE_KEY = "PreFilter" + names.NODE_RESOURCES_FIT
_PRE_SCORE_STATE_KEY = "PreScore" + names.NODE_RESOURCES_FIT

DeviceClassResolver = Callable[[str], resource_v1.DeviceClass | None]
"""Extended resource name → the DeviceClass serving it (`ExtendedResourceCache`)."""

DRACapacity = Callable[[framework.NodeInfo, str], tuple[int, int]]
"""`(node_info, resource name)` → (devices of the mapped class on the node, how many of them
are allocated), for scoring DRA-served extended resources (upstream
`calculateDRAExtendedResourceAllocatableRequest`)."""


def insufficient_reason(resource_name: str) -> str:
    return f"Insufficient {resource_name}"


# --- configuration -----------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class ResourceSpec:
    """A resource the score looks at, and its weight (1–100)."""

    name: str
    weight: int = 1


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ScoringStrategy:
    type: str = LEAST_ALLOCATED
    resources: tuple[ResourceSpec, ...] = (ResourceSpec(CPU), ResourceSpec(MEMORY))

    def __post_init__(self) -> None:
        if self.type != LEAST_ALLOCATED:
            raise ValueError(f"scoring strategy {self.type} is not supported")
        if not self.resources:
            raise ValueError("scoringStrategy.resources: at least one resource is required")
        for spec in self.resources:
            if not 1 <= spec.weight <= 100:
                raise ValueError(
                    f"scoringStrategy.resources[{spec.name}].weight: {spec.weight} "
                    "must be in the range [1, 100]"
                )


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class NodeResourcesFitArgs:
    """`NodeResourcesFitArgs`: extended resources (or whole `<group>/` prefixes) the filter
    ignores, e.g. ones a scheduler extender handles, and the scoring strategy."""

    ignored_resources: frozenset[str] = frozenset()
    ignored_resource_groups: frozenset[str] = frozenset()
    scoring_strategy: ScoringStrategy = ScoringStrategy()


# --- resource arithmetic (upstream `framework.Resource`) ---------------------------------
#
# Everything per node is integer arithmetic on NodeInfo's vectors (`framework.
# resource_vector`: cpu in millicores, the rest in whole units). The pod's side is converted
# once per attempt, in PreFilter and PreScore.

_NATIVE_CHECKED = (CPU, MEMORY, EPHEMERAL_STORAGE)


def _pod_request(pod: core_v1.Pod) -> dict[str, int]:
    """What Filter checks: the pod's requests (zeros left out) without `pods`."""
    return {
        name: value
        for name, value in framework.pod_resource_request(pod).requested.items()
        if name != PODS
    }


@dataclasses.dataclass(frozen=True, slots=True)
class InsufficientResource:
    """Why the pod does not fit; `unresolvable` when even an empty node is too small, so
    preemption cannot help."""

    resource_name: str
    reason: str
    requested: int
    used: int
    capacity: int
    unresolvable: bool = False


def _should_delegate_to_dra(
    name: str, allocatable: Mapping[str, int], resolve: DeviceClassResolver | None
) -> bool:
    """Upstream `shouldDelegateResourceToDRA`: DRA serves the name on this node when the
    gate is on, the node does not
    advertise it and a DeviceClass maps it. Capacity > 0 means a device plugin serves it."""
    if resolve is None or allocatable.get(name, 0) > 0:
        return False
    return resolve(name) is not None


_Check = tuple[str, int, str, bool]
"""(resource name, pod request, its `Insufficient` reason, a DeviceClass maps the name)."""


def _checks(
    pod_request: Mapping[str, int],
    *,
    ignored_resources: frozenset[str] = frozenset(),
    ignored_resource_groups: frozenset[str] = frozenset(),
    resolve: DeviceClassResolver | None = None,
) -> tuple[_Check, ...]:
    """The comparisons Filter makes on every node, worked out once per pod: cpu, memory
    and ephemeral-storage when requested, then the scalar resources the pod asks for that
    are not ignored. Whether a class maps a name is asked here, once per attempt; a node
    then delegates the name to DRA when its allocatable for it is 0 or absent (upstream
    `shouldDelegateResourceToDRA`)."""
    checks = [
        (name, want, insufficient_reason(name), False)
        for name in _NATIVE_CHECKED
        if (want := pod_request.get(name, 0)) > 0
    ]
    # Sorted so the reasons come out in a stable order (upstream walks a Go map).
    for name in sorted(n for n in pod_request if n not in _NATIVE_CHECKED):
        want = pod_request[name]
        if want == 0:
            continue
        if resources.is_extended_resource_name(name) and (
            name in ignored_resources or name.split("/", 1)[0] in ignored_resource_groups
        ):
            continue
        mapped = resolve is not None and resolve(name) is not None
        checks.append((name, want, insufficient_reason(name), mapped))
    return tuple(checks)


def _fits_request(
    checks: Sequence[_Check], node_info: framework.NodeInfo
) -> list[InsufficientResource]:
    """Everything the node lacks for the checks. `NodeResourcesFit.filter` makes the same
    comparisons inline, without building these records."""
    insufficient: list[InsufficientResource] = []
    allowed_pods = node_info.allowed_pod_number
    if len(node_info.pods) + 1 > allowed_pods:
        insufficient.append(
            InsufficientResource(PODS, REASON_TOO_MANY_PODS, 1, len(node_info.pods), allowed_pods)
        )
    allocatable = node_info.allocatable_resource
    requested = node_info.requested
    for name, want, reason, mapped in checks:
        capacity = allocatable.get(name, 0)
        used = requested.get(name, 0)
        if want > capacity - used:
            if mapped and capacity <= 0:
                continue  # DynamicResources checks it (upstream `fitsRequest`)
            insufficient.append(
                InsufficientResource(name, reason, want, used, capacity, want > capacity)
            )
    return insufficient


def fits(
    pod: core_v1.Pod,
    node_info: framework.NodeInfo,
    resolve_device_class: DeviceClassResolver | None = None,
) -> list[InsufficientResource]:
    """Everything the pod lacks on the node; empty when it fits (upstream `Fits`)."""
    return _fits_request(_checks(_pod_request(pod), resolve=resolve_device_class), node_info)


def least_allocated_score(
    requested: Sequence[int], allocatable: Sequence[int], weights: Sequence[int]
) -> int:
    """Weighted mean of `(capacity - requested) * 100 / capacity` over resources with
    capacity; an overcommitted resource scores 0 (upstream `leastResourceScorer`)."""
    node_score = weight_sum = 0
    for want, capacity, weight in zip(requested, allocatable, weights, strict=True):
        if capacity == 0:
            continue
        score = 0 if want > capacity else (capacity - want) * framework.MAX_NODE_SCORE // capacity
        node_score += score * weight
        weight_sum += weight
    return node_score // weight_sum if weight_sum else 0


# --- the plugin --------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class _PreFilterState:
    pod_request: dict[str, int]
    checks: tuple[_Check, ...]
    # One Status per distinct verdict (unresolvable, *reasons) of this attempt, handed to
    # every node that gets it: most rejected nodes lack the same thing, and a Status is
    # not changed once returned (the framework only names the plugin on it). Kept across
    # `clone`, as its contents depend on the pod alone.
    statuses: dict[tuple[object, ...], framework.Status] = dataclasses.field(default_factory=dict)
    # The only nodes that may fit, when the pod asks for a resource only device plugins
    # serve: those advertising enough of it. None: any node may.
    candidate_nodes: frozenset[str] | None = None

    def clone(self) -> _PreFilterState:
        return self


_Scored = tuple[str, int, int, bool, bool]
"""(resource name, pod request, weight, counted with the non-zero defaults (cpu, memory),
a DeviceClass maps the name and its devices may be counted)."""


@dataclasses.dataclass(frozen=True, slots=True)
class _PreScoreState:
    # The strategy's resources in order, less the scalar ones the pod does not request.
    scored: tuple[_Scored, ...]

    def clone(self) -> _PreScoreState:
        return self


class _AdvertisedResources:
    """Per extended resource, the snapshot's nodes whose allocatable has it, with how much:
    kept up to date from the NodeInfoList's changes, so that PreFilter names the candidate
    nodes of a device plugin's resource without a pass over every node."""

    def __init__(self) -> None:
        self._reader = framework.NodeListReader()
        self._by_name: dict[str, dict[str, int]] = {}  # resource -> node -> allocatable
        self._of_node: dict[str, list[str]] = {}  # node -> the resources indexed for it

    def follow(self, nodes: framework.NodeInfoList) -> dict[str, dict[str, int]]:
        changed = self._reader.changed_since_last(nodes)
        if changed is None:
            self._by_name, self._of_node = {}, {}
            changed = list(nodes.positions)
        for node_name in changed:
            for name in self._of_node.pop(node_name, ()):
                del self._by_name[name][node_name]
            position = nodes.positions.get(node_name)
            if position is None:
                continue
            indexed = self._of_node[node_name] = []
            for name, value in nodes[position].allocatable_resource.items():
                if value and name not in _NATIVE_CHECKED:
                    self._by_name.setdefault(name, {})[node_name] = value
                    indexed.append(name)
        return self._by_name


class NodeResourcesFit:
    """PreFilter, Filter, PreScore, Score and EnqueueExtensions.

    `resolve_device_class` is None when the DRAExtendedResource gate is off: then nothing
    is delegated to DRA and no DeviceClass event is registered (upstream
    `EnableDRAExtendedResource` in `shouldDelegateResourceToDRA` and `EventsToRegister`).
    `dra_capacity`
    lets the score count DRA devices; without it DRA-served names are not scored.
    """

    name: ClassVar[str] = names.NODE_RESOURCES_FIT

    def __init__(
        self,
        args: NodeResourcesFitArgs | None = None,
        *,
        resolve_device_class: DeviceClassResolver | None = None,
        dra_capacity: DRACapacity | None = None,
    ) -> None:
        self.args = args or NodeResourcesFitArgs()
        self.resolve_device_class = resolve_device_class
        self.dra_capacity = dra_capacity
        self._advertised = _AdvertisedResources()

    # -- filtering --

    def pre_filter(
        self,
        state: framework.CycleState,
        pod: core_v1.Pod,
        nodes: Sequence[framework.NodeInfo],
    ) -> tuple[framework.PreFilterResult | None, framework.Status | None]:
        pod_request = _pod_request(pod)
        checks = _checks(
            pod_request,
            ignored_resources=self.args.ignored_resources,
            ignored_resource_groups=self.args.ignored_resource_groups,
            resolve=self.resolve_device_class,
        )
        candidates: frozenset[str] | None = None
        # A resource only device plugins serve (no class maps it) fits only on nodes whose
        # allocatable has enough of it: with thousands of nodes and few such nodes, Filter
        # need not look at the others (`candidate_nodes`).
        scarce = [(name, want) for name, want, _, mapped in checks if not mapped]
        scarce = [(name, want) for name, want in scarce if name not in _NATIVE_CHECKED]
        if scarce:
            if isinstance(nodes, framework.NodeInfoList):
                advertised = self._advertised.follow(nodes)
            else:  # (a one-off index: a pass over every node)
                advertised = _AdvertisedResources().follow(framework.NodeInfoList(nodes))
            name, want = scarce[0]
            found = {n for n, value in advertised.get(name, {}).items() if value >= want}
            for name, want in scarce[1:]:
                more = advertised.get(name, {})
                found = {n for n in found if more.get(n, 0) >= want}
            if len(found) < len(nodes):
                candidates = frozenset(found)
        state.write(_PRE_FILTER_STATE_KEY, _PreFilterState(pod_request, checks, {}, candidates))
        return None, None

    def candidate_nodes(self, state: framework.CycleState) -> frozenset[str] | None:
        """The nodes advertising enough of each device plugin's resource the pod asks for,
        when that is fewer than all (see `framework.CandidateNodesPlugin`)."""
        try:
            pre_filter_state = state.read(_PRE_FILTER_STATE_KEY)
        except KeyError:
            return None
        assert isinstance(pre_filter_state, _PreFilterState)
        return pre_filter_state.candidate_nodes

    def sign_pod(self, state: framework.CycleState, pod: core_v1.Pod) -> Hashable:
        """Filter and Score read only the pod's requests (Score counting request-less
        containers with the defaults), the NodeInfo and which extended resources DRA
        serves; Score also the device counts of the node's pools for those, whose changes
        DynamicResources reports (`watch_filter_inputs`). Upstream turns signing off for
        NodeResourcesFit with DRAExtendedResource; those reports make it safe here."""
        request = framework.pod_resource_request(pod)
        return (
            tuple(sorted(request.requested.items())),
            tuple(sorted(request.non_zero_requested.items())),
        )

    def filter(
        self, state: framework.CycleState, pod: core_v1.Pod, node_info: framework.NodeInfo
    ) -> framework.Status | None:
        # Runs for every node of every attempt: int comparisons only (see `_fits_request`).
        try:
            pre_filter_state = state.read(_PRE_FILTER_STATE_KEY)
        except KeyError as err:
            return framework.Status.error(err)
        assert isinstance(pre_filter_state, _PreFilterState)
        reasons = (
            [REASON_TOO_MANY_PODS] if len(node_info.pods) >= node_info.allowed_pod_number else None
        )
        unresolvable = False
        allocatable = node_info.allocatable_resource
        requested = node_info.requested
        for name, want, reason, mapped in pre_filter_state.checks:
            capacity = allocatable.get(name, 0)
            if want > capacity - requested.get(name, 0):
                if mapped and capacity <= 0:
                    continue  # DynamicResources checks it (upstream `fitsRequest`)
                if reasons is None:
                    reasons = [reason]
                else:
                    reasons.append(reason)
                # Preemption frees only what other pods use; it cannot grow the node
                # (upstream `fitsRequest`: Unresolvable when the request exceeds allocatable).
                unresolvable = unresolvable or want > capacity
        if reasons is None:
            return None
        key = (unresolvable, *reasons)
        status = pre_filter_state.statuses.get(key)
        if status is None:
            code = (
                framework.Code.UNSCHEDULABLE_AND_UNRESOLVABLE
                if unresolvable
                else framework.Code.UNSCHEDULABLE
            )
            status = pre_filter_state.statuses[key] = framework.Status(code, reasons)
        return status

    # -- scoring --

    def _pre_score_state(self, pod: core_v1.Pod) -> _PreScoreState:
        request = framework.pod_resource_request(pod)
        scored: list[_Scored] = []
        for spec in self.args.scoring_strategy.resources:
            name = spec.name
            if name in (CPU, MEMORY):
                # Request-less containers count with the defaults, so they still spread out.
                scored.append(
                    (name, request.non_zero_requested.get(name, 0), spec.weight, True, False)
                )
                continue
            want = request.requested.get(name, 0)
            if want == 0 and framework.is_scalar_resource_name(name):
                continue  # the pod does not ask for it
            mapped = (
                name != EPHEMERAL_STORAGE
                and self.dra_capacity is not None
                and self.resolve_device_class is not None
                and self.resolve_device_class(name) is not None
            )
            scored.append((name, want, spec.weight, False, mapped))
        return _PreScoreState(tuple(scored))

    def pre_score(
        self,
        state: framework.CycleState,
        pod: core_v1.Pod,
        nodes: Sequence[framework.NodeInfo],
    ) -> framework.Status | None:
        state.write(_PRE_SCORE_STATE_KEY, self._pre_score_state(pod))
        return None

    def score(
        self, state: framework.CycleState, pod: core_v1.Pod, node_info: framework.NodeInfo
    ) -> int:
        """LeastAllocated over the strategy's resources, as `least_allocated_score` of
        `allocatable_and_requested`, inlined: it runs for every scored node."""
        try:
            pre_score_state = state.read(_PRE_SCORE_STATE_KEY)
            assert isinstance(pre_score_state, _PreScoreState)
        except KeyError:
            pre_score_state = self._pre_score_state(pod)
        allocatable = node_info.allocatable_resource
        node_score = weight_sum = 0
        for name, want, weight, non_zero, mapped in pre_score_state.scored:
            capacity = allocatable.get(name, 0)
            if non_zero:
                used = node_info.non_zero_requested.get(name, 0) + want
            elif capacity == 0:
                if not mapped:
                    continue  # not on this node: not scored
                # Upstream `calculateDRAExtendedResourceAllocatableRequest`: devices of the
                # mapped class on this node; none → not scored.
                assert self.dra_capacity is not None
                capacity, allocated = self.dra_capacity(node_info, name)
                used = allocated + want
            else:
                used = node_info.requested.get(name, 0) + want
            if capacity == 0:
                continue
            score = (
                0 if used > capacity else (capacity - used) * framework.MAX_NODE_SCORE // capacity
            )
            node_score += score * weight
            weight_sum += weight
        return node_score // weight_sum if weight_sum else 0

    def allocatable_and_requested(
        self, node_info: framework.NodeInfo, resource_name: str, pod_request: int
    ) -> tuple[int, int]:
        """The node's capacity for one scored resource and what would be in use with the
        pod; (0, 0) leaves the resource out (upstream `calculateResourceAllocatableRequest`).
        """
        if pod_request == 0 and framework.is_scalar_resource_name(resource_name):
            return 0, 0  # the pod does not ask for it
        allocatable = node_info.allocatable_resource
        if resource_name in (CPU, MEMORY):
            # Request-less containers count with the defaults, so they still spread out.
            non_zero = node_info.non_zero_requested
            return allocatable.get(resource_name, 0), non_zero.get(resource_name, 0) + pod_request
        requested = node_info.requested
        if resource_name == EPHEMERAL_STORAGE:
            return allocatable.get(resource_name, 0), requested.get(resource_name, 0) + pod_request
        capacity = allocatable.get(resource_name, 0)
        if (
            capacity == 0
            and self.dra_capacity is not None
            and _should_delegate_to_dra(resource_name, allocatable, self.resolve_device_class)
        ):
            # Upstream `calculateDRAExtendedResourceAllocatableRequest`: devices of the mapped
            # class on this node; none → not scored.
            devices, allocated = self.dra_capacity(node_info, resource_name)
            if devices > 0:
                return devices, allocated + pod_request
        if resource_name in allocatable:
            return capacity, requested.get(resource_name, 0) + pod_request
        return 0, 0

    # -- queueing --

    def events_to_register(self) -> list[framework.ClusterEventWithHint]:
        action = framework.ActionType
        events = [
            framework.ClusterEventWithHint(
                framework.ClusterEvent(framework.EventResource.POD, action.DELETE),
                self.is_schedulable_after_pod_event,
            ),
            framework.ClusterEventWithHint(
                framework.ClusterEvent(
                    framework.EventResource.NODE, action.ADD | action.UPDATE_NODE_ALLOCATABLE
                ),
                self.is_schedulable_after_node_change,
            ),
        ]
        if self.resolve_device_class is not None:
            # A pod may wait for a class that maps its extended resource (upstream
            # `EventsToRegister`).
            events.append(
                framework.ClusterEventWithHint(
                    framework.ClusterEvent(
                        framework.EventResource.DEVICE_CLASS, action.ADD | action.UPDATE
                    ),
                    self.is_schedulable_after_device_class_event,
                )
            )
        return events

    def is_schedulable_after_pod_event(
        self, pod: core_v1.Pod, old: core_v1.Pod, new: core_v1.Pod | None
    ) -> framework.QueueingHint:
        """A deleted pod frees resources only if it was bound or nominated somewhere."""
        if new is not None:
            # Only Delete is registered: without in-place scaling an update frees nothing.
            return framework.QueueingHint.QUEUE_SKIP
        if not old.spec.node_name and not old.status.nominated_node_name:
            return framework.QueueingHint.QUEUE_SKIP
        return framework.QueueingHint.QUEUE

    def is_schedulable_after_node_change(
        self, pod: core_v1.Pod, old: core_v1.Node | None, new: core_v1.Node
    ) -> framework.QueueingHint:
        """The node, empty, would fit the pod, and it is new or grew in something the pod
        asks for."""
        insufficient = fits(pod, framework.NodeInfo(new), self.resolve_device_class)
        if insufficient:
            return framework.QueueingHint.QUEUE_SKIP
        if old is None or self._have_requested_resources_increased(pod, old, new):
            return framework.QueueingHint.QUEUE
        return framework.QueueingHint.QUEUE_SKIP

    def _have_requested_resources_increased(
        self, pod: core_v1.Pod, old: core_v1.Node, new: core_v1.Node
    ) -> bool:
        before = framework.resource_vector(old.status.allocatable)
        after = framework.resource_vector(new.status.allocatable)
        if after.get(PODS, 0) > before.get(PODS, 0):
            return True
        for name, want in _pod_request(pod).items():
            if want == 0:
                continue
            if after.get(name, 0) > before.get(name, 0):
                return True
            if framework.is_scalar_resource_name(name) and _should_delegate_to_dra(
                name, after, self.resolve_device_class
            ):
                return True
        return False

    def is_schedulable_after_device_class_event(
        self,
        pod: core_v1.Pod,
        old: resource_v1.DeviceClass | None,
        new: resource_v1.DeviceClass,
    ) -> framework.QueueingHint:
        """Upstream `isSchedulableAfterDeviceClassEvent`: a new class may serve the pod
        under its implicit or explicit name; an
        updated one only if its `extendedResourceName` changed to a name the pod asks for."""
        requested = resources.pod_requests(pod)
        if old is not None:
            if (old.spec.extended_resource_name or "") == (new.spec.extended_resource_name or ""):
                return framework.QueueingHint.QUEUE_SKIP
        elif resources.IMPLICIT_EXTENDED_RESOURCE_PREFIX + new.metadata.name in requested:
            return framework.QueueingHint.QUEUE
        explicit = new.spec.extended_resource_name
        if explicit is not None and explicit in requested:
            return framework.QueueingHint.QUEUE
        return framework.QueueingHint.QUEUE_SKIP
