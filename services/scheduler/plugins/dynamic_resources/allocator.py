"""Structured-parameters device allocation for one node, as upstream's allocator in
`staging/src/k8s.io/dynamic-resource-allocation/structured` does it (`Allocate` in
`internal/experimental/allocator_experimental.go`).

`Snapshot` (module `pools`) indexes the ResourceSlices once; it stays valid until a slice
changes and may serve many pods. It keeps, per node, the devices that node can reach and,
per (expression, device), the CEL result, so a Filter call for one node only looks at that
node's devices and evaluates each selector once per device. `Allocator` adds the classes and
the devices already allocated (cluster state plus in-flight allocations) and answers
"can these claims be allocated together on this node, and with which devices?".

Search: claims in order, requests in order, devices in pool order (driver, pool, slice name,
position in the slice), first solution wins, with backtracking over everything, as upstream.
Unlike upstream, the devices of one request are tried as combinations, not permutations,
which finds the same first solution with less work.

Partitionable devices (KEP-4815) consume their pool's shared counters; devices with
`allowMultipleAllocations` (KEP-5075) are allocated as shares, each with a fresh `shareID`
and the capacity it consumes; a request with `adminAccess` gets devices others use and
takes nothing from anyone (module `search`).

Claim constraints (`matchAttribute`, `distinctAttribute`) are checked as devices are picked.

Not modelled: claim config (not copied into the result), the filter timeout. A device's
binding conditions are copied into its result, for PreBind to wait on.
"""

from __future__ import annotations

import uuid
from collections.abc import Container, Hashable, Iterable, Mapping, Sequence, Set
from dataclasses import dataclass

from drasim.common.api import core_v1, resource_v1
from drasim.common.quantity import Quantity
from drasim.scheduler.plugins import taint_toleration
from drasim.scheduler.plugins.dynamic_resources import capacity, cel_env, constraints, search
from drasim.scheduler.plugins.dynamic_resources.pools import (
    AllocatorError,
    Candidate,
    DeviceID,
    NodeView,
    PoolID,
    Snapshot,
)

__all__ = [
    "ALLOCATION_RESULTS_MAX_SIZE",
    "Allocation",
    "Allocator",
    "AllocatorError",
    "DeviceID",
    "PoolID",
    "Snapshot",
    "node_device_capacity",
]

ALLOCATION_RESULTS_MAX_SIZE = resource_v1.ALLOCATION_RESULTS_MAX_SIZE

_METADATA_NAME = "metadata.name"
_BLOCKING_TAINT_EFFECTS = ("NoSchedule", "NoExecute")
_ALLOCATION_MODES = ("", resource_v1.ALLOCATION_MODE_EXACT_COUNT, resource_v1.ALLOCATION_MODE_ALL)


@dataclass(slots=True, eq=False)
class _AlternativePlan:
    """A request, or one `firstAvailable` subrequest, resolved once per set of claims:
    its class found and its selectors compiled."""

    name: str  # as recorded in the result: "<request>" or "<request>/<subrequest>"
    where: str  # for error messages
    exact: bool  # ExactCount; else All
    count: int  # ExactCount's number of devices
    compiled: list[tuple[str, cel_env.Selector]]  # the class's selectors, then the request's
    key: tuple[str, ...]  # the selectors' expressions: the node view's cache key
    tolerations: list[resource_v1.DeviceToleration]
    admin_access: bool = False
    capacity: dict[str, Quantity] | None = None  # `capacity.requests`
    device_class: resource_v1.DeviceClass | None = None  # its configs go into the result


@dataclass(slots=True)
class _RequestPlan:
    claim_index: int
    alternatives: list[_AlternativePlan]


@dataclass(slots=True)
class _Plan:
    requests: list[_RequestPlan]
    claims: Sequence[resource_v1.ResourceClaim]  # kept so that their ids stay unique
    # One claim with one ExactCount request: no search needed, the first free devices win.
    simple: _AlternativePlan | None
    any_all: bool  # some alternative is All: the device limit depends on the node
    constrained: bool  # some claim has constraints


@dataclass(slots=True)
class _Alternative:
    """An alternative on one node, ready for the search."""

    plan: _AlternativePlan
    count: int  # devices needed; an "All" request that matches nothing needs 0 and fails
    candidates: list[Candidate]  # selectable, tolerated, not allocated elsewhere


@dataclass(slots=True)
class _Request:
    claim_index: int
    alternatives: list[_Alternative]


class Allocator:
    """Allocates claims on one node at a time (upstream `Allocator.Allocate`).

    `slices` is a `Snapshot` (built once and shared) or the slices to index now.
    `allocated` holds the devices other claims own exclusively, in-flight allocations
    included; `shared` maps each device with shares to the capacity they consume. The
    gates are upstream's `Features`: DRAAdminAccess, DRAPartitionableDevices (off: devices
    consuming counters are never allocated) and DRAConsumableCapacity (off: capacity
    requests are refused and every device is exclusive).
    """

    def __init__(
        self,
        slices: Snapshot | Iterable[resource_v1.ResourceSlice],
        classes: Mapping[str, resource_v1.DeviceClass],
        allocated: Set[DeviceID],
        *,
        shared: Mapping[DeviceID, Mapping[str, Quantity]] | None = None,
        admin_access: bool = True,
        partitionable_devices: bool = True,
        consumable_capacity: bool = True,
    ) -> None:
        self._admin_access = admin_access
        self._partitionable_devices = partitionable_devices
        self._consumable_capacity = consumable_capacity
        self._snapshot = slices if isinstance(slices, Snapshot) else Snapshot(slices)
        self._classes = classes
        self._allocated = allocated
        # The containers to look devices up in directly (a view over two of them would
        # cost a Python call per device).
        parts = getattr(allocated, "parts", None)
        self._taken: tuple[Container[DeviceID], Container[DeviceID]] = (
            parts if parts is not None else (allocated, frozenset())
        )
        self._state = search.AllocatedState(self._taken, shared if shared is not None else {})
        # Counters left per pool, worked out on first use (upstream `availableCounters`).
        self._available_counters: dict[PoolID, search.Counters] = {}
        self._plans: dict[tuple[int, ...], _Plan] = {}
        # Changes whenever a device of the pool is taken or freed, if the owner of
        # `allocated` tracks that (the scheduler's DraManager does).
        self._pool_versions: Mapping[PoolID, int] | None = getattr(allocated, "pool_versions", None)

    def allocate(
        self, node: core_v1.Node, claims: Sequence[resource_v1.ResourceClaim]
    ) -> list[resource_v1.AllocationResult] | None:
        """One result per claim, or None when the claims do not fit on this node together.

        Devices are never shared between the claims, so a pod's claims (its special claim
        last) are allocated in one call (upstream `Filter`). Raises AllocatorError for
        problems no
        node can fix.
        """
        found = self.find(node, claims)
        return None if found is None else [allocation.result() for allocation in found]

    def find(
        self, node: core_v1.Node, claims: Sequence[resource_v1.ResourceClaim]
    ) -> list[Allocation] | None:
        """As `allocate`, with each result built only when asked for: Filter finds one
        per feasible node, Reserve uses one."""
        plan = self._plan(claims)
        view = self._snapshot.node_view(node)
        if plan.simple is not None and view.plain:
            return self._find_first_free(view, plan.simple, node.metadata.name, claims[0])
        requests = [
            _Request(r.claim_index, [self._alternative(view, a) for a in r.alternatives])
            for r in plan.requests
        ]
        if plan.any_all:
            _check_device_limit(claims, requests)
        # Cheap early exit for the common failure: some request has too few devices here.
        for request in requests:
            if not any(0 < a.count <= len(a.candidates) for a in request.alternatives):
                return None
        ledger = search.Ledger(
            self._state, self._snapshot, self._available_counters, self._consumable_capacity
        )
        if plan.constrained:
            ledger.constraints = [constraints.claim_constraints(c, _ref(c)) for c in claims]
        found = search.Search(requests, [[] for _ in claims], ledger)
        if not search.allocate_request(found, 0):
            return None
        return [
            Allocation(picks, node.metadata.name, claim)
            for picks, claim in zip(found.picks, claims, strict=True)
        ]

    def find_one(
        self, node: core_v1.Node, claim: resource_v1.ResourceClaim
    ) -> list[Allocation] | None:
        """`find` for one claim (a pod's special claim alone: the hot path of Filter)."""
        plan = self._plans.get((id(claim),))
        if plan is None or plan.simple is None:
            return self.find(node, [claim])
        view = self._snapshot.node_view(node)
        if not view.plain:
            return self.find(node, [claim])
        return self._find_first_free(view, plan.simple, node.metadata.name, claim)

    def _find_first_free(
        self,
        view: NodeView,
        alternative: _AlternativePlan,
        node_name: str,
        claim: resource_v1.ResourceClaim,
    ) -> list[Allocation] | None:
        """The search for one ExactCount request: its first `count` free devices.

        The answer depends only on which of the node's devices are taken, so it is kept
        per node and reused while the versions of the node's pools stay the same: one
        scheduling cycle takes devices on one node, and the next cycle finds the answers
        for every other node unchanged. (Not with taints: tolerations differ per pod.)
        """
        versions = self._pool_versions
        cacheable = versions is not None and not view.tainted
        if cacheable:
            assert versions is not None
            pools = view.pools
            if len(pools) == 1:
                stamp: Hashable = versions.get(pools[0], 0)
            else:
                stamp = tuple(versions.get(pool, 0) for pool in pools)
            key = (alternative.key, alternative.count)
            cached = view.first_free.get(key)
            if cached is not None and cached[0] == stamp:
                devices = cached[1]
                if devices is None:
                    return None
                picks = [search.Pick(alternative, c, 0) for c in devices]
                return [Allocation(picks, node_name, claim)]
        allocated, in_flight = self._taken
        tolerations = alternative.tolerations
        found: list[Candidate] | None = None
        picked: list[Candidate] = []
        for c in self._matching(view, alternative):
            if c.id in allocated or c.id in in_flight:
                continue
            if c.tainted and _taint_blocks(c.device, tolerations):
                continue
            picked.append(c)
            if len(picked) == alternative.count:
                found = picked
                break
        if cacheable:
            view.first_free[key] = (stamp, found)
        if found is None:
            return None
        return [Allocation([search.Pick(alternative, c, 0) for c in found], node_name, claim)]

    def _plan(self, claims: Sequence[resource_v1.ResourceClaim]) -> _Plan:
        """Resolve classes and compile selectors once per set of claims (Filter asks for
        the same claims on every node). Raises AllocatorError for what no node can fix."""
        key = tuple(id(claim) for claim in claims)
        plan = self._plans.get(key)
        if plan is not None:
            return plan
        requests = []
        for claim_index, claim in enumerate(claims):
            for request in claim.spec.devices.requests:
                requests.append(_RequestPlan(claim_index, self._alternatives(claim, request)))
        any_all = any(not a.exact for r in requests for a in r.alternatives)
        if not any_all:
            _check_device_limit(claims, requests)
        constrained = any(claim.spec.devices.constraints for claim in claims)
        simple = None
        if len(requests) == 1 and len(requests[0].alternatives) == 1 and not any_all:
            only = requests[0].alternatives[0]
            if not only.admin_access and only.capacity is None and not constrained:
                simple = only
        plan = _Plan(requests, list(claims), simple, any_all, constrained)
        self._plans[key] = plan
        return plan

    def _alternatives(
        self, claim: resource_v1.ResourceClaim, request: resource_v1.DeviceRequest
    ) -> list[_AlternativePlan]:
        if request.exactly is not None:
            return [self._alternative_plan(claim, request.name, request.exactly)]
        if not request.first_available:
            raise AllocatorError(
                f"claim {_ref(claim)}, request {request.name}: "
                "neither exactly nor firstAvailable is set (unsupported request type?)"
            )
        return [
            self._alternative_plan(claim, f"{request.name}/{sub.name}", sub)
            for sub in request.first_available
        ]

    def _alternative_plan(
        self,
        claim: resource_v1.ResourceClaim,
        name: str,
        spec: resource_v1.ExactDeviceRequest | resource_v1.DeviceSubRequest,
    ) -> _AlternativePlan:
        where = f"claim {_ref(claim)}, request {name}"
        admin_access = isinstance(spec, resource_v1.ExactDeviceRequest) and spec.admin_access
        if admin_access and not self._admin_access:
            raise AllocatorError(f"{where}: admin access is requested, but the feature is disabled")
        if spec.capacity is not None and not self._consumable_capacity:
            raise AllocatorError(
                f"claim {_ref(claim)}, {'sub' if '/' in name else ''}request "
                f"{name.rsplit('/', 1)[-1]}: has capacity requests, "
                "but the DRAConsumableCapacity feature is disabled"
            )
        cls = self._classes.get(spec.device_class_name)
        if cls is None:
            raise AllocatorError(
                f"{where}: could not retrieve device class {spec.device_class_name}: "
                f'deviceclass.resource.k8s.io "{spec.device_class_name}" not found'
            )
        mode = spec.allocation_mode
        if mode not in _ALLOCATION_MODES:
            raise AllocatorError(f"{where}: unsupported count mode {mode}")
        compiled = _compile(cls.spec.selectors, f"class {cls.metadata.name}")
        compiled += _compile(spec.selectors, f"claim {_ref(claim)}")
        return _AlternativePlan(
            name=name,
            where=where,
            exact=mode != resource_v1.ALLOCATION_MODE_ALL,
            count=spec.count or 1,
            compiled=compiled,
            key=tuple(selector.expression for _, selector in compiled),
            tolerations=spec.tolerations,
            admin_access=bool(admin_access),
            capacity=dict(spec.capacity.requests) if spec.capacity is not None else None,
            device_class=cls,
        )

    def _matching(self, view: NodeView, alternative: _AlternativePlan) -> list[Candidate]:
        """The node's devices the alternative's selectors accept (for ExactCount, those
        taken may be left out)."""
        found = self._snapshot.select_cached(view, alternative.key, alternative.compiled)
        if found is not None:
            return found
        if alternative.exact and not alternative.admin_access:
            # As upstream, devices in use are skipped before any selector looks at them
            # (a selector failing on a taken device is no error).
            allocated, in_flight = self._taken
            free = [c for c in view.candidates if c.id not in allocated and c.id not in in_flight]
            return self._snapshot.select(free, alternative.compiled)
        return self._snapshot.select(view.candidates, alternative.compiled)  # raises

    def _alternative(self, view: NodeView, alternative: _AlternativePlan) -> _Alternative:
        if alternative.exact:
            usable = self._usable(self._matching(view, alternative), alternative)
            return _Alternative(alternative, alternative.count, usable)
        # "All" means every matching device on the node, so a pool being updated could
        # hide some, and one matching device that is taken or tainted fails the request.
        if view.unusable_pools:
            pool, problem = next(iter(view.unusable_pools.items()))
            raise AllocatorError(
                f"{alternative.where}: asks for all devices, but resource pool "
                f"{'/'.join(pool)} is {problem}"
            )
        matching = self._matching(view, alternative)
        if self._consumable_capacity:
            # Devices whose capacity could never serve the request are not part of "all"
            # (their capacity in use is checked when picking).
            matching = [c for c in matching if _static_fit(alternative, c)]
        return _Alternative(alternative, len(matching), self._usable(matching, alternative))

    def _usable(self, matching: list[Candidate], alternative: _AlternativePlan) -> list[Candidate]:
        """Matching devices the request may take: not allocated (unless for admin
        access), no untolerated taint, no counters when partitionable devices are off."""
        allocated, in_flight = self._taken
        tolerations = alternative.tolerations
        admin = alternative.admin_access
        partitionable = self._partitionable_devices
        return [
            c
            for c in matching
            if (admin or (c.id not in allocated and c.id not in in_flight))
            and not (c.tainted and _taint_blocks(c.device, tolerations))
            and (partitionable or not c.counters)
        ]


def _static_fit(alternative: _AlternativePlan, candidate: Candidate) -> bool:
    try:
        return capacity.fits(alternative.capacity, candidate.device)
    except capacity.CapacityError as err:
        raise AllocatorError(
            f"{alternative.where}: checking capacity for device {candidate.id[2]}: {err}"
        ) from None


class Allocation:
    """The devices the search picked for one claim; the `AllocationResult` is built on
    first use, each share getting its `shareID` then."""

    __slots__ = ("_claim", "_node_name", "_picks", "_result")

    def __init__(
        self, picks: list[search.Pick], node_name: str, claim: resource_v1.ResourceClaim
    ) -> None:
        self._picks = picks
        self._node_name = node_name  # the node allocated for
        self._claim = claim
        self._result: resource_v1.AllocationResult | None = None

    def requests(self) -> set[str]:
        """The names of the (sub)requests that got devices, as the result records them."""
        return {pick.plan.name for pick in self._picks}

    def result(self) -> resource_v1.AllocationResult:
        if self._result is None:
            self._result = _allocation_result(self._picks, self._node_name, self._claim)
        return self._result


def _check_device_limit(
    claims: Sequence[resource_v1.ResourceClaim], requests: Sequence[_RequestPlan | _Request]
) -> None:
    """No claim may ask for more than ALLOCATION_RESULTS_MAX_SIZE devices (counting each
    request's smallest alternative): an error, not a node that does not fit (upstream
    `Allocate`: "exceeds the claim limit")."""
    per_claim = [0] * len(claims)
    for request in requests:
        per_claim[request.claim_index] += min(a.count for a in request.alternatives)
    for claim, min_devices in zip(claims, per_claim, strict=True):
        if min_devices > ALLOCATION_RESULTS_MAX_SIZE:
            raise AllocatorError(
                f"claim {_ref(claim)}: number of requested devices {min_devices} "
                f"exceeds the claim limit of {ALLOCATION_RESULTS_MAX_SIZE}"
            )


def _allocation_result(
    picks: list[search.Pick], node_name: str, claim: resource_v1.ResourceClaim
) -> resource_v1.AllocationResult:
    return resource_v1.AllocationResult(
        devices=resource_v1.DeviceAllocationResult(
            results=[_device_result(p) for p in picks], config=_configs(picks, claim)
        ),
        node_selector=_result_node_selector([pick.candidate for pick in picks], node_name),
    )


def _configs(
    picks: list[search.Pick], claim: resource_v1.ResourceClaim
) -> list[resource_v1.DeviceAllocationConfiguration]:
    """The configs the drivers get with the result (upstream `Allocate`, "Populate
    configs"): each class's configs once, for every (sub)request that used the class,
    then the claim's configs that apply to all requests or to an allocated one."""
    picked: dict[str, _AlternativePlan] = {}  # request → the alternative that got devices
    for pick in picks:
        picked.setdefault(pick.plan.name.split("/", 1)[0], pick.plan)
    found: list[resource_v1.DeviceAllocationConfiguration] = []
    by_class: dict[str, list[resource_v1.DeviceAllocationConfiguration]] = {}
    for request in claim.spec.devices.requests:
        plan = picked.get(request.name)
        device_class = plan.device_class if plan is not None else None
        if plan is None or device_class is None:
            continue
        added = by_class.get(device_class.metadata.name)
        if added is not None:
            for config in added:
                config.requests.append(plan.name)
            continue
        added = by_class[device_class.metadata.name] = [
            resource_v1.DeviceAllocationConfiguration(
                source="FromClass", requests=[plan.name], opaque=config.opaque
            )
            for config in device_class.spec.config
        ]
        found += added
    for config in claim.spec.devices.config:
        copy = resource_v1.DeviceAllocationConfiguration(
            source="FromClaim", requests=list(config.requests), opaque=config.opaque
        )
        if not config.requests:
            found.append(copy)
            continue
        for request in claim.spec.devices.requests:
            plan = picked.get(request.name)
            subrequest = plan.name if plan is not None and plan.name != request.name else ""
            if request.name in config.requests or (subrequest and subrequest in config.requests):
                found.append(copy)
    return found


def _device_result(pick: search.Pick) -> resource_v1.DeviceRequestAllocationResult:
    driver, pool, device = pick.candidate.id
    shared = pick.consumed is not None
    return resource_v1.DeviceRequestAllocationResult(
        request=pick.plan.name,
        driver=driver,
        pool=pool,
        device=device,
        admin_access=True if pick.plan.admin_access else None,
        tolerations=list(pick.plan.tolerations),
        # Upstream `GenerateShareID`: a time-based UUID, as `uuid.NewUUID`.
        share_id=str(uuid.uuid1()) if shared else None,
        consumed_capacity=dict(pick.consumed) if pick.consumed else {},
        # KEP-5007: the device is usable once its driver reports these True.
        binding_conditions=list(pick.candidate.device.binding_conditions),
        binding_failure_conditions=list(pick.candidate.device.binding_failure_conditions),
    )


def _result_node_selector(devices: list[Candidate], node_name: str) -> core_v1.NodeSelector | None:
    """Where the claim can be used (upstream `createNodeSelector`): the node allocated for
    if any device is node-local or binds to the node it is attached to (`bindsToNode`),
    else the union of the network-attached devices' selector requirements, else anywhere
    (None)."""
    merged = core_v1.NodeSelectorTerm()
    for device in devices:
        if device.node_name or device.device.binds_to_node:
            return core_v1.NodeSelector(
                node_selector_terms=[
                    core_v1.NodeSelectorTerm(
                        match_fields=[
                            core_v1.NodeSelectorRequirement(
                                key=_METADATA_NAME, operator="In", values=[node_name]
                            )
                        ]
                    )
                ]
            )
        if device.node_selector is None or not device.node_selector.node_selector_terms:
            continue
        terms = device.node_selector.node_selector_terms
        if len(terms) > 1:
            # API validation allows only one term for slices and devices.
            raise AllocatorError(f"unsupported ResourceSlice.NodeSelector with {len(terms)} terms")
        _add_requirements(merged.match_fields, terms[0].match_fields)
        _add_requirements(merged.match_expressions, terms[0].match_expressions)
    if merged.match_fields or merged.match_expressions:
        return core_v1.NodeSelector(node_selector_terms=[merged])
    return None


def _add_requirements(
    into: list[core_v1.NodeSelectorRequirement], more: list[core_v1.NodeSelectorRequirement]
) -> None:
    for r in more:
        if not any(
            e.key == r.key and e.operator == r.operator and set(e.values) == set(r.values)
            for e in into
        ):
            into.append(
                core_v1.NodeSelectorRequirement(key=r.key, operator=r.operator, values=[*r.values])
            )


def node_device_capacity(
    node: core_v1.Node,
    slices: Snapshot | Iterable[resource_v1.ResourceSlice],
    cls: resource_v1.DeviceClass,
    allocated: Set[DeviceID],
) -> tuple[int, int]:
    """(devices of `cls` that `node` can reach, how many of them are allocated), the
    capacity and usage NodeResourcesFit scores a DRA-backed extended resource with
    (upstream `calculateDRAResourceTotals`; the caller adds the pod's request to the usage).
    Shared allocations count as
    allocated: `allocated` should hold them. Pools being updated or invalid are left out.
    """
    snapshot = slices if isinstance(slices, Snapshot) else Snapshot(slices)
    matching = snapshot.select(
        snapshot.node_view(node).candidates,
        _compile(cls.spec.selectors, f"class {cls.metadata.name}"),
    )
    return len(matching), sum(1 for c in matching if c.id in allocated)


def _compile(
    selectors: list[resource_v1.DeviceSelector], owner: str
) -> list[tuple[str, cel_env.Selector]]:
    compiled = []
    for i, selector in enumerate(selectors):
        where = f"{owner}: selector #{i}"
        if selector.cel is None:
            raise AllocatorError(f"{where}: CEL expression empty (unsupported selector type?)")
        try:
            compiled.append((where, cel_env.compile_selector(selector.cel.expression)))
        except cel_env.CELError as err:
            raise AllocatorError(f"{where}: CEL compile error: {err}") from None
    return compiled


def _taint_blocks(
    device: resource_v1.Device, tolerations: list[resource_v1.DeviceToleration]
) -> bool:
    """A NoSchedule or NoExecute taint that no toleration tolerates (other effects do not
    prevent allocation)."""
    return any(
        taint.effect in _BLOCKING_TAINT_EFFECTS
        and not any(taint_toleration.toleration_tolerates_taint(t, taint) for t in tolerations)
        for taint in device.taints
    )


def _ref(claim: resource_v1.ResourceClaim) -> str:
    """`klog.KObj` form: namespace/name."""
    meta = claim.metadata
    return f"{meta.namespace}/{meta.name}" if meta.namespace else meta.name
