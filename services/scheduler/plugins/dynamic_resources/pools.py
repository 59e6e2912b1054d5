"""The devices each node can reach, from the ResourceSlices: only the newest generation of
each pool counts, indexed once per set of slices and shared by every pod's allocation, with
the CEL results of selectors on devices kept while the slices stay the same.

Partitionable devices (KEP-4815): a pool's counter sets come from the `sharedCounters` of
any of its slices, those reaching no node included, and devices `consumesCounters` from
them; a pool whose counter sets repeat a name, or whose devices consume a counter set or
counter it lacks, is invalid. `Snapshot.counter_sets` and `counter_consumers` give the
allocator what it needs to know how much of each counter is left.

Upstream: `staging/src/k8s.io/dynamic-resource-allocation/structured/internal/incubating/
pools_incubating.go` (`GatherPools`, `buildPool`) and the CEL cache of the allocator.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from drasim.common.api import core_v1, resource_v1
from drasim.common.quantity import Quantity
from drasim.scheduler.plugins import node_affinity
from drasim.scheduler.plugins.dynamic_resources import cel_env

__all__ = [
    "AllocatorError",
    "Candidate",
    "DeviceID",
    "NodeView",
    "CounterSets",
    "PoolID",
    "Snapshot",
]

DeviceID = tuple[str, str, str]
"""(driver, pool, device): a device's identity, as in `DeviceRequestAllocationResult`."""

PoolID = tuple[str, str]

CounterSets = dict[str, dict[str, Quantity]]
"""Counter set name → counter name → value: a pool's shared counters."""

_POOL_BEING_UPDATED = "currently being updated"
_POOL_INVALID = "currently invalid"


class AllocatorError(Exception):
    """A hard error: the claims can be allocated on no node as they stand (CEL error, too
    many devices, ...). The scheduler turns it into status Error (upstream `Filter`)."""


@dataclass(frozen=True, slots=True, eq=False)
class Candidate:
    """A device of the newest generation of its pool, with where it can be used from.

    `node_name`, `all_nodes` and `node_selector` come from the slice, or from the device
    itself with `perDeviceNodeSelection`.
    """

    id: DeviceID
    device: resource_v1.Device
    # (pool has binding conditions, driver, pool, slice name, index): the search order; as
    # upstream's `GatherPools`, pools whose devices must wait for binding conditions last.
    order: tuple[bool, str, str, str, int]
    node_name: str | None
    all_nodes: bool
    node_selector: core_v1.NodeSelector | None
    tainted: bool  # any taint at all: only then do tolerations need a look
    # KEP-4815: (counter set, counter) → amount this device consumes while allocated.
    counters: tuple[tuple[str, str, Quantity], ...]
    multi: bool  # allowMultipleAllocations (KEP-5075): allocated as shares

    def reaches(self, node: core_v1.Node) -> bool:
        if self.node_name:
            return self.node_name == node.metadata.name
        if self.all_nodes:
            return True
        return self.node_selector is not None and node_affinity.node_selector_matches(
            self.node_selector, node
        )


@dataclass(slots=True)
class _IndexedSlice:
    name: str
    pool: PoolID
    unusable: str | None  # why the pool cannot be allocated from, if it cannot
    devices: list[Candidate]


@dataclass(slots=True)
class NodeView:
    candidates: list[Candidate]  # from usable pools, in search order
    unusable_pools: dict[PoolID, str]  # pools that reach the node but cannot be used
    pools: tuple[PoolID, ...]  # of the candidates
    tainted: bool  # some candidate has a taint
    # No candidate consumes counters or is shared: the first free devices are the answer.
    plain: bool
    # The candidates that a list of selectors (by their expressions) accepts: whether a
    # device matches never changes while the snapshot lives, only whether it is free.
    matching: dict[tuple[str, ...], list[Candidate]] = field(default_factory=dict)
    # (selectors, count) -> (the pools' versions, the first free devices or None), see
    # `Allocator._find_first_free`.
    first_free: dict[tuple[tuple[str, ...], int], tuple[Hashable, list[Candidate] | None]] = field(
        default_factory=dict
    )


class Snapshot:
    """ResourceSlices indexed by the nodes they serve, plus a CEL result cache.

    Only the newest generation of each pool counts; a pool with fewer slices of that
    generation than `resourceSliceCount` is being updated, one with duplicate device names
    is invalid, and neither is allocated from.
    """

    def __init__(self, slices: Iterable[resource_v1.ResourceSlice]) -> None:
        newest: dict[PoolID, list[resource_v1.ResourceSlice]] = {}
        for s in slices:
            pool_id = (s.spec.driver, s.spec.pool.name)
            current = newest.get(pool_id)
            if current is None or s.spec.pool.generation > current[0].spec.pool.generation:
                newest[pool_id] = [s]
            elif s.spec.pool.generation == current[0].spec.pool.generation:
                current.append(s)

        self._by_node_name: dict[str, list[_IndexedSlice]] = {}
        self._all_nodes: list[_IndexedSlice] = []
        self._by_selector: list[tuple[core_v1.NodeSelector, _IndexedSlice]] = []
        self._per_device: list[_IndexedSlice] = []
        # pool -> the nodes its slices name, or None if a slice reaches nodes otherwise
        # (all nodes, a node selector, per device): who to tell when its devices change.
        self.pool_nodes: dict[PoolID, set[str] | None] = {}
        # Pools with shared counters: their counter sets, and every device of the pool
        # that consumes counters (wherever it is reachable from).
        self.counter_sets: dict[PoolID, CounterSets] = {}
        self.counter_consumers: dict[PoolID, list[Candidate]] = {}
        for pool_id, pool_slices in newest.items():
            unusable = _pool_problem(pool_slices)
            binding = any(d.binding_conditions for s in pool_slices for d in s.spec.devices)
            for s in sorted(pool_slices, key=lambda s: s.metadata.name):
                self._index(pool_id, unusable, s, binding)
            if any(s.spec.shared_counters for s in pool_slices):
                self.counter_sets[pool_id] = {
                    cs.name: {name: c.value for name, c in cs.counters.items()}
                    for s in pool_slices
                    for cs in s.spec.shared_counters
                }
        # Node labels only matter if some slice or device selects nodes by selector.
        self._label_dependent = bool(self._by_selector) or any(
            c.node_selector is not None for s in self._per_device for c in s.devices
        )
        self._views: dict[str, tuple[dict[str, str], NodeView]] = {}
        # Each selector's verdict per device, and no more: a device's CEL variables are
        # converted again for a new expression rather than kept for every device of the
        # cluster (see `cel_env.DeviceVariables`).
        self._cel_results: dict[tuple[str, DeviceID], bool] = {}

    def _index(
        self,
        pool_id: PoolID,
        unusable: str | None,
        s: resource_v1.ResourceSlice,
        binding: bool,
    ) -> None:
        spec = s.spec
        per_device = bool(spec.per_device_node_selection)
        devices = []
        for index, device in enumerate(spec.devices):
            placement = device if per_device else spec
            devices.append(
                Candidate(
                    id=(spec.driver, spec.pool.name, device.name),
                    device=device,
                    order=(binding, spec.driver, spec.pool.name, s.metadata.name, index),
                    node_name=placement.node_name,
                    all_nodes=bool(placement.all_nodes),
                    node_selector=placement.node_selector,
                    tainted=bool(device.taints),
                    counters=tuple(
                        (c.counter_set, name, counter.value)
                        for c in device.consumes_counters
                        for name, counter in c.counters.items()
                    ),
                    multi=bool(device.allow_multiple_allocations),
                )
            )
        indexed = _IndexedSlice(s.metadata.name, pool_id, unusable, devices)
        consumers = [c for c in devices if c.counters]
        if consumers:
            self.counter_consumers.setdefault(pool_id, []).extend(consumers)
        nodes = self.pool_nodes.setdefault(pool_id, set())
        if spec.node_name and not per_device:
            if nodes is not None:
                nodes.add(spec.node_name)
        else:
            self.pool_nodes[pool_id] = None
        if spec.node_name:
            self._by_node_name.setdefault(spec.node_name, []).append(indexed)
        elif spec.all_nodes:
            self._all_nodes.append(indexed)
        elif spec.node_selector is not None:
            self._by_selector.append((spec.node_selector, indexed))
        elif per_device:
            self._per_device.append(indexed)
        # A slice with none of these is from some future API; it serves no node.

    def node_view(self, node: core_v1.Node) -> NodeView:
        """The devices `node` can reach, computed once per node (and per label set, if
        labels matter)."""
        labels = node.metadata.labels if self._label_dependent else {}
        cached = self._views.get(node.metadata.name)
        if cached is not None and cached[0] == labels:
            return cached[1]
        candidates: list[Candidate] = []
        unusable: dict[PoolID, str] = {}
        for s, devices in self._reaching(node):
            if s.unusable is not None:
                unusable[s.pool] = s.unusable
            else:
                candidates += devices
        candidates.sort(key=lambda c: c.order)
        pools = tuple(dict.fromkeys((c.id[0], c.id[1]) for c in candidates))
        tainted = any(c.tainted for c in candidates)
        plain = not any(c.counters or c.multi for c in candidates)
        view = NodeView(candidates, dict(sorted(unusable.items())), pools, tainted, plain)
        self._views[node.metadata.name] = (dict(labels), view)
        return view

    def _reaching(self, node: core_v1.Node) -> Iterator[tuple[_IndexedSlice, list[Candidate]]]:
        for s in self._by_node_name.get(node.metadata.name, ()):
            yield s, s.devices
        for s in self._all_nodes:
            yield s, s.devices
        for selector, s in self._by_selector:
            if node_affinity.node_selector_matches(selector, node):
                yield s, s.devices
        for s in self._per_device:
            devices = [c for c in s.devices if c.reaches(node)]
            if devices:
                yield s, devices

    def select_cached(
        self,
        view: NodeView,
        key: tuple[str, ...],
        selectors: Sequence[tuple[str, cel_env.Selector]],
    ) -> list[Candidate] | None:
        """All of the node's candidates that every selector accepts, remembered per node
        under `key` (the selectors' expressions); None when a selector fails on some
        device: then only the free devices may be looked at (as upstream does), so the
        caller selects among those instead."""
        found = view.matching.get(key)
        if found is None:
            try:
                found = self.select(view.candidates, selectors)
            except AllocatorError:
                return None
            view.matching[key] = found
        return found

    def select(
        self,
        candidates: Iterable[Candidate],
        selectors: Sequence[tuple[str, cel_env.Selector]],
    ) -> list[Candidate]:
        """The candidates every selector accepts; `selectors` pairs each compiled selector
        with where it comes from, for error messages."""
        return [c for c in candidates if all(self._matches(w, s, c) for w, s in selectors)]

    def _matches(self, where: str, selector: cel_env.Selector, candidate: Candidate) -> bool:
        key = (selector.expression, candidate.id)
        result = self._cel_results.get(key)
        if result is None:
            try:
                variables = cel_env.DeviceVariables(candidate.id[0], candidate.device)
                result = variables.matches(selector)
            except cel_env.CELError as err:
                raise AllocatorError(
                    f"{where} on device {'/'.join(candidate.id)}: CEL runtime error: {err}"
                ) from None
            self._cel_results[key] = result
        return result


def _pool_problem(pool_slices: list[resource_v1.ResourceSlice]) -> str | None:
    if len(pool_slices) != pool_slices[0].spec.pool.resource_slice_count:
        return _POOL_BEING_UPDATED
    names = [d.name for s in pool_slices for d in s.spec.devices]
    if len(names) != len(set(names)):
        return _POOL_INVALID
    return _POOL_INVALID if _counter_problem(pool_slices) else None


def _counter_problem(pool_slices: list[resource_v1.ResourceSlice]) -> str | None:
    """Why the pool's counters are inconsistent, if they are (upstream `buildPool`)."""
    sets: dict[str, set[str]] = {}
    for s in pool_slices:
        for cs in s.spec.shared_counters:
            if cs.name in sets:
                return f"duplicate counter set name {cs.name}"
            sets[cs.name] = set(cs.counters)
    for s in pool_slices:
        for device in s.spec.devices:
            for consumption in device.consumes_counters:
                counters = sets.get(consumption.counter_set)
                if counters is None:
                    return f"counter set {consumption.counter_set} not found"
                for name in consumption.counters:
                    if name not in counters:
                        return f"counter {name} not found in counter set {consumption.counter_set}"
    return None
