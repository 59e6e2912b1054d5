"""NodeInfo: a node with the pods assigned to it, and what they request as integer vectors.

Upstream: `pkg/scheduler/framework/types.go` (`NodeInfo`, `Resource`) and
`pkg/scheduler/util` (the non-zero request defaults). Re-exported by `framework`.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterable, Mapping

import msgspec

from drasim.common.api import core_v1, resources
from drasim.common.quantity import Quantity, parse_quantity

__all__ = [
    "DEFAULT_MEMORY_REQUEST",
    "DEFAULT_MILLI_CPU_REQUEST",
    "NodeInfo",
    "NodeInfoList",
    "NodeListReader",
    "PodResourceRequest",
    "is_scalar_resource_name",
    "pod_non_zero_requests",
    "pod_resource_request",
    "resource_vector",
]

# Scoring counts a container without a cpu/memory request as asking for this much, so that
# many request-less pods do not all land on one node (`schedutil.DefaultMilliCPURequest`).
DEFAULT_MILLI_CPU_REQUEST = 100
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024

_generations = itertools.count(1)
_NON_ZERO_DEFAULTS = {
    "cpu": parse_quantity(f"{DEFAULT_MILLI_CPU_REQUEST}m"),
    "memory": parse_quantity(DEFAULT_MEMORY_REQUEST),
}
_NATIVE_RESOURCES = ("cpu", "memory", "ephemeral-storage", "pods")
_scalar_resource_names: dict[str, bool] = {}


def is_scalar_resource_name(name: str) -> bool:
    """Names kept as plain counts beside cpu, memory and ephemeral storage: extended
    resources, hugepages, attachable volumes and prefixed native names such as
    `deviceclass.resource.kubernetes.io/<class>` (upstream `IsScalarResourceName`).

    Memoized: the answer depends on the name alone, and a cluster uses few names.
    """
    scalar = _scalar_resource_names.get(name)
    if scalar is None:
        scalar = _scalar_resource_names[name] = (
            resources.is_extended_resource_name(name)
            or name.startswith(("hugepages-", "attachable-volumes-"))
            or ("/" in name and resources.RESOURCE_DEFAULT_NAMESPACE_PREFIX in name)
        )
    return scalar


def resource_vector(quantities: Mapping[str, Quantity]) -> dict[str, int]:
    """Quantities in NodeInfo's integer units (upstream `Resource.Add`): cpu in millicores
    rounded up (`MilliValue`), memory, ephemeral-storage, pods and scalar resources rounded
    up to whole units (`Value`); other names are dropped."""
    result: dict[str, int] = {}
    for name, quantity in quantities.items():
        if name == "cpu":
            result[name] = quantity.milli_value()
        elif name in _NATIVE_RESOURCES or is_scalar_resource_name(name):
            result[name] = quantity.int_value()
    return result


def pod_non_zero_requests(pod: core_v1.Pod) -> dict[str, Quantity]:
    """The pod's requests with each container's missing cpu/memory set to the scoring
    defaults (upstream `PodRequests` with `NonMissingContainerRequests`)."""

    def with_defaults(container: core_v1.Container) -> core_v1.Container:
        requests = {**_NON_ZERO_DEFAULTS, **resources.container_requests(container)}
        defaulted = msgspec.structs.replace(container.resources, requests=requests)
        return msgspec.structs.replace(container, resources=defaulted)

    spec = msgspec.structs.replace(
        pod.spec,
        containers=[with_defaults(c) for c in pod.spec.containers],
        init_containers=[with_defaults(c) for c in pod.spec.init_containers],
    )
    return resources.pod_requests(msgspec.structs.replace(pod, spec=spec))


@dataclasses.dataclass(frozen=True, slots=True)
class PodResourceRequest:
    """A pod's requests in NodeInfo's integer units (upstream `calculateResource`).

    `requested` is `resource_vector(pod_requests(pod))` and `non_zero_requested` the cpu
    and memory of `pod_non_zero_requests(pod)`; names whose value is 0 are left out. Shared
    between NodeInfos and cycles: never mutate the dicts.
    """

    requested: dict[str, int]
    non_zero_requested: dict[str, int]

    @classmethod
    def of(cls, pod: core_v1.Pod) -> PodResourceRequest:
        """Convert the pod's requests, without the cache (see `pod_resource_request`)."""
        requested = resource_vector(resources.pod_requests(pod))
        non_zero = resource_vector(pod_non_zero_requests(pod))
        return cls(
            {name: value for name, value in requested.items() if value},
            {name: non_zero[name] for name in ("cpu", "memory") if non_zero.get(name)},
        )


_POD_REQUEST_CACHE_SIZE = 4096
_pod_request_cache: dict[tuple[str, str], PodResourceRequest] = {}


def pod_resource_request(pod: core_v1.Pod) -> PodResourceRequest:
    """The pod's requests converted once per pod version: PreFilter, PreScore and the
    cache's assume of one attempt share one conversion.

    Keyed by UID and resourceVersion: a pod's resources do not change without a new
    resourceVersion, and the scheduler's assumed copy differs in `nodeName` only. A pod
    with neither (built in a test) is converted every time.
    """
    meta = pod.metadata
    if not meta.uid or not meta.resource_version:
        return PodResourceRequest.of(pod)
    key = (meta.uid, meta.resource_version)
    cached = _pod_request_cache.get(key)
    if cached is None:
        if len(_pod_request_cache) >= _POD_REQUEST_CACHE_SIZE:
            _pod_request_cache.clear()  # a pod is looked up within one attempt or so
        cached = _pod_request_cache[key] = PodResourceRequest.of(pod)
    return cached


def _pod_key(pod: core_v1.Pod) -> str:
    return pod.metadata.uid or f"{pod.metadata.namespace}/{pod.metadata.name}"


def _add(total: dict[str, int], more: Mapping[str, int], sign: int = 1) -> None:
    """Add (or subtract) a pod's vector; a name whose sum becomes 0 is dropped, so the
    total equals the sum over the pods whatever their order."""
    for name, value in more.items():
        value = total.get(name, 0) + sign * value
        if value:
            total[name] = value
        else:
            total.pop(name, None)


class NodeInfo:
    """A node with the pods assigned (or assumed) to it and what they request.

    Resources are integer vectors, name → int with cpu in millicores (upstream
    `framework.Resource`, see `resource_vector`), so Filter and Score compare ints:
    `allocatable_resource` is the node's allocatable, converted when the node is set;
    `requested` sums the pods' `PodResourceRequest.requested` and `non_zero_requested`
    their cpu and memory with the scoring defaults, both kept up to date as pods are added
    and removed (names at 0 are left out). `allocatable` is the Node's own quantities and
    `name` its name. `generation` changes on every change, so a snapshot can tell whether
    it is stale.
    """

    def __init__(self, node: core_v1.Node, pods: Iterable[core_v1.Pod] = ()) -> None:
        self.set_node(node)
        self.pods: list[core_v1.Pod] = []
        # What each pod of `pods` added (same index), subtracted again on removal.
        self.pod_requests: list[PodResourceRequest] = []
        self.requested: dict[str, int] = {}
        self.non_zero_requested: dict[str, int] = {}
        for pod in pods:
            self.add_pod(pod)

    @property
    def allocatable(self) -> dict[str, Quantity]:
        return self.node.status.allocatable

    def set_node(self, node: core_v1.Node) -> None:
        self.node = node
        self.name: str = node.metadata.name  # read for every node of every attempt
        # Replaced, never changed in place: snapshots share it.
        self.allocatable_resource = resource_vector(node.status.allocatable)
        self.allowed_pod_number = self.allocatable_resource.get("pods", 0)
        self.generation = next(_generations)

    def add_pod(self, pod: core_v1.Pod) -> None:
        request = pod_resource_request(pod)
        self.pods.append(pod)
        self.pod_requests.append(request)
        _add(self.requested, request.requested)
        _add(self.non_zero_requested, request.non_zero_requested)
        self.generation = next(_generations)

    def remove_pod(self, pod: core_v1.Pod) -> None:
        """Raises KeyError when the pod is not on this node (matched by UID, else name)."""
        key = _pod_key(pod)
        for i, existing in enumerate(self.pods):
            if _pod_key(existing) == key:
                del self.pods[i]
                # Subtract what the stored copy added: the caller's copy may differ.
                request = self.pod_requests.pop(i)
                _add(self.requested, request.requested, sign=-1)
                _add(self.non_zero_requested, request.non_zero_requested, sign=-1)
                self.generation = next(_generations)
                return
        raise KeyError(f"pod {key} not found on node {self.name}")

    def replace_pod(self, old: core_v1.Pod, new: core_v1.Pod) -> bool:
        """Swap in a newer version of a pod on this node if nothing Filter or Score reads
        changed (its requests and labels): then the generation stays, so verdicts kept for
        this node stay valid (`framework.VerdictCache`) — an assumed pod's confirmation
        and its status updates would otherwise invalidate them again and again. Returns
        False (and changes nothing) when the caller must remove and add instead."""
        if new.metadata.labels != old.metadata.labels:
            return False
        key = _pod_key(old)
        for i, existing in enumerate(self.pods):
            if _pod_key(existing) == key:
                same = resources.same_request_inputs(existing, new)
                if not same and self.pod_requests[i] != pod_resource_request(new):
                    return False
                self.pods[i] = new
                return True
        return False

    def snapshot(self) -> NodeInfo:
        """A copy that later changes to this one do not affect (same generation): shallow
        copies of the lists and the small request vectors."""
        copy = NodeInfo.__new__(NodeInfo)
        copy.node = self.node
        copy.name = self.name
        copy.allocatable_resource = self.allocatable_resource
        copy.allowed_pod_number = self.allowed_pod_number
        copy.pods = list(self.pods)
        copy.pod_requests = list(self.pod_requests)
        copy.requested = dict(self.requested)
        copy.non_zero_requested = dict(self.non_zero_requested)
        copy.generation = self.generation
        return copy


class NodeInfoList(list[NodeInfo]):
    """A snapshot's nodes in order, each node's position (`positions`), and the names of
    the nodes replaced in place since the list was made (`changed`). A node keeps its
    position for the list's life: another set of nodes makes a new list. So what an
    attempt learnt per node (`framework.VerdictCache`, NodeResourcesFit's index) holds in
    later attempts but for the nodes named since (`NodeListReader`)."""

    __slots__ = ("changed", "positions")

    def __init__(self, nodes: Iterable[NodeInfo] = ()) -> None:
        super().__init__(nodes)
        self.positions = {info.name: i for i, info in enumerate(self)}
        self.changed: list[str] = []


class NodeListReader:
    """Follows the snapshot's NodeInfoList from one attempt to the next."""

    __slots__ = ("_nodes", "_read")

    def __init__(self) -> None:
        self._nodes: NodeInfoList | None = None
        self._read = 0

    def changed_since_last(self, nodes: NodeInfoList) -> list[str] | None:
        """The names of the nodes replaced since the last call; None when `nodes` is
        another list than last time (positions moved: start over)."""
        if nodes is not self._nodes:
            self._nodes, self._read = nodes, len(nodes.changed)
            return None
        changed = nodes.changed[self._read :]
        self._read = len(nodes.changed)
        return changed
