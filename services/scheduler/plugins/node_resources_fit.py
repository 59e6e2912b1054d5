"""NodeResourcesFit: the pod's requests must fit the node's allocatable minus what the pods
already there request; among fitting nodes, prefer the least allocated.

With the DRAExtendedResource gate on (a `resolve_device_class` given), an extended resource
that the node does not advertise (allocatable absent or 0) but a DeviceClass maps is left to
DynamicResources (spec §3.1.2, §3.2.1); one the node does advertise is a device-plugin
resource and is checked here. Scoring counts such DRA-served names by devices (§3.7.2).

Upstream: `pkg/scheduler/framework/plugins/noderesources/{fit.go,resource_allocation.go,
least_allocated.go}`. Only the LeastAllocated strategy is implemented.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import ClassVar

from drasim.common.api import core_v1, resource_v1, resources
from drasim.common.quantity import Quantity
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
are allocated), for scoring DRA-served extended resources (spec §3.7.2)."""


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


def _is_scalar_resource_name(name: str) -> bool:
    """Names kept as plain counts beside cpu, memory and ephemeral storage: extended
    resources, hugepages, attachable volumes and prefixed native names such as
    `deviceclass.resource.kubernetes.io/<class>` (upstream `IsScalarResourceName`)."""
    return (
        resources.is_extended_resource_name(name)
        or name.startswith(("hugepages-", "attachable-volumes-"))
        or ("/" in name and resources.RESOURCE_DEFAULT_NAMESPACE_PREFIX in name)
    )


def _as_resource(quantities: Mapping[str, Quantity]) -> dict[str, int]:
    """cpu in millicores, everything else rounded up to whole units; other names dropped."""
    result: dict[str, int] = {}
    for name, quantity in quantities.items():
        if name == CPU:
            result[name] = quantity.milli_value()
        elif name in (MEMORY, EPHEMERAL_STORAGE, PODS) or _is_scalar_resource_name(name):
            result[name] = quantity.int_value()
    return result


def _pod_request(pod: core_v1.Pod) -> dict[str, int]:
    return {
        name: value
        for name, value in _as_resource(resources.pod_requests(pod)).items()
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
    """Spec §3.1.2: DRA serves the name on this node when the gate is on, the node does not
    advertise it and a DeviceClass maps it. Capacity > 0 means a device plugin serves it."""
    if resolve is None or allocatable.get(name, 0) > 0:
        return False
    return resolve(name) is not None


def _fits_request(
    pod_request: Mapping[str, int],
    node_info: framework.NodeInfo,
    *,
    ignored_resources: frozenset[str] = frozenset(),
    ignored_resource_groups: frozenset[str] = frozenset(),
    resolve: DeviceClassResolver | None = None,
) -> list[InsufficientResource]:
    insufficient: list[InsufficientResource] = []
    allowed_pods = node_info.allowed_pod_number
    if len(node_info.pods) + 1 > allowed_pods:
        insufficient.append(
            InsufficientResource(PODS, REASON_TOO_MANY_PODS, 1, len(node_info.pods), allowed_pods)
        )
    if not pod_request:
        return insufficient

    allocatable = _as_resource(node_info.allocatable)
    requested = _as_resource(node_info.requested)
    for name in (CPU, MEMORY, EPHEMERAL_STORAGE):
        want = pod_request.get(name, 0)
        free = allocatable.get(name, 0) - requested.get(name, 0)
        if want > 0 and want > free:
            insufficient.append(_insufficient(name, want, requested, allocatable))

    # Sorted so the reasons come out in a stable order (upstream walks a Go map).
    scalars = sorted(n for n in pod_request if n not in (CPU, MEMORY, EPHEMERAL_STORAGE))
    for name in scalars:
        want = pod_request[name]
        if want == 0:
            continue
        if resources.is_extended_resource_name(name) and (
            name in ignored_resources or name.split("/", 1)[0] in ignored_resource_groups
        ):
            continue
        if _should_delegate_to_dra(name, allocatable, resolve):
            continue  # DynamicResources checks it (spec §3.2.1)
        if want > allocatable.get(name, 0) - requested.get(name, 0):
            insufficient.append(_insufficient(name, want, requested, allocatable))
    return insufficient


def _insufficient(
    name: str, want: int, requested: Mapping[str, int], allocatable: Mapping[str, int]
) -> InsufficientResource:
    capacity = allocatable.get(name, 0)
    return InsufficientResource(
        name,
        insufficient_reason(name),
        want,
        requested.get(name, 0),
        capacity,
        unresolvable=want > capacity,
    )


def fits(
    pod: core_v1.Pod,
    node_info: framework.NodeInfo,
    resolve_device_class: DeviceClassResolver | None = None,
) -> list[InsufficientResource]:
    """Everything the pod lacks on the node; empty when it fits (upstream `Fits`)."""
    return _fits_request(_pod_request(pod), node_info, resolve=resolve_device_class)


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

    def clone(self) -> _PreFilterState:
        return self


@dataclasses.dataclass(frozen=True, slots=True)
class _PreScoreState:
    # Same order as the strategy's resources; cpu/memory with the non-zero defaults.
    pod_requests: list[int]

    def clone(self) -> _PreScoreState:
        return self


class NodeResourcesFit:
    """PreFilter, Filter, PreScore, Score and EnqueueExtensions.

    `resolve_device_class` is None when the DRAExtendedResource gate is off: then nothing
    is delegated to DRA and no DeviceClass event is registered (spec §0.4). `dra_capacity`
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

    # -- filtering --

    def pre_filter(
        self,
        state: framework.CycleState,
        pod: core_v1.Pod,
        nodes: Sequence[framework.NodeInfo],
    ) -> tuple[framework.PreFilterResult | None, framework.Status | None]:
        state.write(_PRE_FILTER_STATE_KEY, _PreFilterState(_pod_request(pod)))
        return None, None

    def filter(
        self, state: framework.CycleState, pod: core_v1.Pod, node_info: framework.NodeInfo
    ) -> framework.Status | None:
        try:
            pre_filter_state = state.read(_PRE_FILTER_STATE_KEY)
        except KeyError as err:
            return framework.Status.error(err)
        assert isinstance(pre_filter_state, _PreFilterState)
        insufficient = _fits_request(
            pre_filter_state.pod_request,
            node_info,
            ignored_resources=self.args.ignored_resources,
            ignored_resource_groups=self.args.ignored_resource_groups,
            resolve=self.resolve_device_class,
        )
        if not insufficient:
            return None
        reasons = [r.reason for r in insufficient]
        # Preemption frees only what other pods use; it cannot grow the node (spec §3.2.1).
        if any(r.unresolvable for r in insufficient):
            return framework.Status.unresolvable(*reasons)
        return framework.Status.unschedulable(*reasons)

    # -- scoring --

    def _pod_scoring_requests(self, pod: core_v1.Pod) -> list[int]:
        requests = _as_resource(framework.pod_non_zero_requests(pod))
        return [requests.get(spec.name, 0) for spec in self.args.scoring_strategy.resources]

    def pre_score(
        self,
        state: framework.CycleState,
        pod: core_v1.Pod,
        nodes: Sequence[framework.NodeInfo],
    ) -> framework.Status | None:
        state.write(_PRE_SCORE_STATE_KEY, _PreScoreState(self._pod_scoring_requests(pod)))
        return None

    def score(
        self, state: framework.CycleState, pod: core_v1.Pod, node_info: framework.NodeInfo
    ) -> int:
        try:
            pre_score_state = state.read(_PRE_SCORE_STATE_KEY)
            assert isinstance(pre_score_state, _PreScoreState)
            pod_requests = pre_score_state.pod_requests
        except KeyError:
            pod_requests = self._pod_scoring_requests(pod)
        specs = self.args.scoring_strategy.resources
        pairs = [
            self.allocatable_and_requested(node_info, spec.name, pod_request)
            for spec, pod_request in zip(specs, pod_requests, strict=True)
        ]
        return least_allocated_score(
            [requested for _, requested in pairs],
            [allocatable for allocatable, _ in pairs],
            [spec.weight for spec in specs],
        )

    def allocatable_and_requested(
        self, node_info: framework.NodeInfo, resource_name: str, pod_request: int
    ) -> tuple[int, int]:
        """The node's capacity for one scored resource and what would be in use with the
        pod; (0, 0) leaves the resource out (upstream `calculateResourceAllocatableRequest`).
        """
        if pod_request == 0 and _is_scalar_resource_name(resource_name):
            return 0, 0  # the pod does not ask for it
        allocatable = _as_resource(node_info.allocatable)
        if resource_name in (CPU, MEMORY):
            # Request-less containers count with the defaults, so they still spread out.
            non_zero = _as_resource(node_info.non_zero_requested)
            return allocatable.get(resource_name, 0), non_zero.get(resource_name, 0) + pod_request
        requested = _as_resource(node_info.requested)
        if resource_name == EPHEMERAL_STORAGE:
            return allocatable.get(resource_name, 0), requested.get(resource_name, 0) + pod_request
        capacity = allocatable.get(resource_name, 0)
        if (
            capacity == 0
            and self.dra_capacity is not None
            and _should_delegate_to_dra(resource_name, allocatable, self.resolve_device_class)
        ):
            # Spec §3.7.2: devices of the mapped class on this node; none → not scored.
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
            # A pod may wait for a class that maps its extended resource (spec §3.2.4).
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
        before = _as_resource(old.status.allocatable)
        after = _as_resource(new.status.allocatable)
        if after.get(PODS, 0) > before.get(PODS, 0):
            return True
        for name, want in _pod_request(pod).items():
            if want == 0:
                continue
            if after.get(name, 0) > before.get(name, 0):
                return True
            if _is_scalar_resource_name(name) and _should_delegate_to_dra(
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
        """Spec §2.6: a new class may serve the pod under its implicit or explicit name; an
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
