"""The DynamicResources plugin: allocates a pod's ResourceClaims while it is scheduled, and
its DRA-backed extended resources through one special claim (spec §3.3–§3.12).

User claims come from `pod.spec.resourceClaims`, by name or, for a template, by the name the
claim controller wrote into `pod.status.resourceClaimStatuses`. The special claim is found
among the claims the pod controls (left over from an earlier attempt) or made in memory in
PreFilter; Filter gives it the device requests of the extended resources DRA serves on that
node; PreBind creates it in the API, writes its allocation and records it in
`pod.status.extendedResourceClaimStatus`.

That status must never name a claim that is gone when the pod binds: the kubelet would
retry "ResourceClaim not found" forever. Upstream leaves it behind when Unreserve or
PostFilter deletes the claim; only a later PreBind on a node where DRA serves the pod
overwrites it. drasim clears it there, best effort, as the KEP's Unreserve and PostFilter
describe, and PreBind makes sure of it before a pod binds without a special claim.

Between Reserve and the end of PreBind, allocations live only in the DraManager as
in-flight allocations, so that no other pod gets the same devices.

Upstream: `pkg/scheduler/framework/plugins/dynamicresources/{dynamicresources.go,
extendeddynamicresources.go,claims.go}`. Not modelled: PreEnqueue, PreBindPreFlight, binding
conditions, the Filter timeout, the DRAPrioritizedList gate (always on).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import logging
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import ClassVar, TypeVar

from drasim.common import codec, errors
from drasim.common.api import core_v1, resource_v1, resources, validation
from drasim.common.client import ApiClient
from drasim.scheduler import framework
from drasim.scheduler.dra_manager import DraManager
from drasim.scheduler.plugins import names, node_affinity
from drasim.scheduler.plugins.dynamic_resources import allocator as structured
from drasim.scheduler.plugins.dynamic_resources import extended

__all__ = [
    "ASSUME_EXTENDED_RESOURCE_TIMEOUT_DEFAULT_SECONDS",
    "METRIC_RESOURCECLAIM_CREATES_TOTAL",
    "REASON_CANNOT_ALLOCATE",
    "REASON_CANNOT_FIT_RESOURCE",
    "REASON_CANNOT_SCHEDULE_EXTENDED_RESOURCE_CLAIM",
    "REASON_CLAIM_DEALLOCATED",
    "REASON_CLAIM_DELETED",
    "REASON_CLAIM_IN_USE",
    "REASON_CLAIM_NOT_AVAILABLE",
    "REASON_NO_NEW_CLAIMS",
    "REASON_STILL_NOT_SCHEDULABLE",
    "DynamicResources",
]

log = logging.getLogger(__name__)

STATE_KEY = names.DYNAMIC_RESOURCES

# Reasons, spelled as upstream (spec §8.4).
REASON_CLAIM_IN_USE = "resourceclaim in use"
REASON_CLAIM_NOT_AVAILABLE = "resourceclaim not available on the node"
REASON_CANNOT_ALLOCATE = "cannot allocate all claims"
REASON_CANNOT_SCHEDULE_EXTENDED_RESOURCE_CLAIM = "cannot schedule extended resource claim"
REASON_CANNOT_FIT_RESOURCE = "cannot fit resource"
REASON_NO_NEW_CLAIMS = "no new claims to deallocate"
REASON_CLAIM_DEALLOCATED = "deallocation of ResourceClaim completed"
REASON_CLAIM_DELETED = "deletion of ResourceClaim completed"
REASON_STILL_NOT_SCHEDULABLE = "still not schedulable"

# How long PreBind waits for the created special claim to reach the claim cache (§3.9.5).
ASSUME_EXTENDED_RESOURCE_TIMEOUT_DEFAULT_SECONDS = 120.0

# Counted once per create attempt of a special claim, by `status` (spec §8.1).
METRIC_RESOURCECLAIM_CREATES_TOTAL = "dra_resourceclaim_creates_total"

# client-go's `retry.DefaultRetry`: 5 attempts, 10 ms apart.
_CONFLICT_RETRY_STEPS = 5
_CONFLICT_RETRY_DELAY = 0.01

T = TypeVar("T")


class _NotSchedulable(Exception):
    """A pod's claim cannot be used yet (missing, being deleted, not the pod's own)."""


class _BindError(Exception):
    """PreBind cannot finish, for a reason that is not an API error."""


# --- per-attempt state -------------------------------------------------------------------


class _ClaimStore:
    """The pod's user claims in `spec.resourceClaims` order, then the special claim, if any
    (spec §3.3.4; upstream `claimStore`).

    Claims come from the cache and are read-only; PreBind replaces an entry with what the
    API answered, so Unreserve sees the written claim. The special claim's first UID is
    kept: its in-flight allocation is registered under it (the temporary UID, §3.10.1).
    """

    def __init__(
        self,
        user_claims: list[resource_v1.ResourceClaim],
        extended_resource_claim: resource_v1.ResourceClaim | None,
    ) -> None:
        self._claims = list(user_claims)
        self._num_user_owned = len(user_claims)
        if extended_resource_claim is not None:
            self._claims.append(extended_resource_claim)
        self.initial_extended_resource_claim_uid = (
            extended_resource_claim.metadata.uid if extended_resource_claim is not None else ""
        )

    def empty(self) -> bool:
        return not self._claims

    def __len__(self) -> int:
        return len(self._claims)

    def all(self) -> Iterator[tuple[int, resource_v1.ResourceClaim]]:
        return enumerate(list(self._claims))

    def all_user_claims(self) -> Iterator[tuple[int, resource_v1.ResourceClaim]]:
        return enumerate(self._claims[: self._num_user_owned])

    def to_allocate(self) -> Iterator[tuple[int, resource_v1.ResourceClaim]]:
        """Claims without an allocation, with their index among all claims."""
        return ((i, c) for i, c in enumerate(self._claims) if c.status.allocation is None)

    def extended_resource_claim(self) -> resource_v1.ResourceClaim | None:
        return self._claims[-1] if len(self._claims) > self._num_user_owned else None

    def no_user_claim(self) -> bool:
        return self._num_user_owned == 0

    def get(self, index: int) -> resource_v1.ResourceClaim:
        return self._claims[index]

    def set(self, index: int, claim: resource_v1.ResourceClaim) -> None:
        self._claims[index] = claim


@dataclasses.dataclass(slots=True)
class _InformationForClaim:
    # Where an allocated claim can be used; None when unallocated or usable anywhere.
    available_on_nodes: core_v1.NodeSelector | None = None
    # Set by Reserve, written by PreBind; None when nothing had to be allocated.
    allocation: resource_v1.AllocationResult | None = None


@dataclasses.dataclass(slots=True)
class _NodeAllocation:
    """What Filter found for one node, for Reserve and PreBind (spec §3.4.6)."""

    # Indices into the claim store of the claims allocated here, matching the results.
    claim_indices: list[int]
    allocations: list[structured.Allocation]
    # The special claim with the requests of this node; None when DRA serves nothing here.
    extended_resource_claim: resource_v1.ResourceClaim | None
    request_mappings: list[core_v1.ContainerExtendedResourceRequest]


_NodeExtendedClaim = tuple[
    resource_v1.ResourceClaim | None, list[core_v1.ContainerExtendedResourceRequest]
]


@dataclasses.dataclass(slots=True)
class _StateData:
    """Written once in PreFilter and shared by reference with the later phases."""

    claims: _ClaimStore = dataclasses.field(default_factory=lambda: _ClaimStore([], None))
    # DRA-capable names the pod requests (non-zero) → the class that serves them, if any.
    extended_resources: dict[str, resource_v1.DeviceClass | None] = dataclasses.field(
        default_factory=dict
    )
    # Built when some claim needs allocation; one per attempt, shared by all Filter calls.
    allocator: structured.Allocator | None = None
    informations_for_claim: list[_InformationForClaim] = dataclasses.field(default_factory=list)
    # Allocated claims that were unavailable on some node, for PostFilter.
    unavailable_claims: set[int] = dataclasses.field(default_factory=set)
    node_allocations: dict[str, _NodeAllocation] = dataclasses.field(default_factory=dict)
    # Nodes on which DRA serves the same names get the same special claim: built once.
    node_extended_claims: dict[frozenset[str], _NodeExtendedClaim] = dataclasses.field(
        default_factory=dict
    )
    # The pod has no user claim, only a special claim to allocate: Filter's short way.
    only_extended_resource_claim: bool = False
    # PreBind sent the pod a status naming its special claim (the answer may be lost):
    # Unreserve, which deletes that claim, clears the status again.
    extended_resource_claim_status_written: bool = False

    def clone(self) -> _StateData:
        return self


def _read_state(state: framework.CycleState) -> _StateData:
    data = state.read(STATE_KEY)
    assert isinstance(data, _StateData)
    return data


# --- the plugin --------------------------------------------------------------------------


class DynamicResources:
    """PreFilter, Filter, PostFilter, PreScore, Score, Reserve, PreBind, EnqueueExtensions.

    `extended_resources` is the DRAExtendedResource gate: off, no special claim is made
    (spec §0.4). `assume_extended_resource_timeout` bounds PreBind's wait for a created
    special claim to reach the claim cache (§3.9.5).
    """

    name: ClassVar[str] = names.DYNAMIC_RESOURCES
    # For a pod whose only claim is its in-memory special claim, Filter's verdict depends
    # on the pod's spec, the node, the classes and slices and the allocations of the
    # node's pools: all reported by `watch_filter_inputs`. PreFilter excludes every other
    # pod.
    reusable_filter_verdicts: ClassVar[bool] = True

    def __init__(
        self,
        dra_manager: DraManager,
        api: ApiClient,
        *,
        extended_resources: bool = True,
        assume_extended_resource_timeout: float = ASSUME_EXTENDED_RESOURCE_TIMEOUT_DEFAULT_SECONDS,
    ) -> None:
        self.dra_manager = dra_manager
        self.api = api
        self.extended_resources = extended_resources
        self.assume_extended_resource_timeout = assume_extended_resource_timeout
        # `dra_resourceclaim_creates_total{status}`: status "success" or "failure".
        self.resourceclaim_creates_total: collections.Counter[str] = collections.Counter()
        # UIDs of pods whose `status.extendedResourceClaimStatus` may still name a claim
        # this scheduler deleted, because clearing it failed: their copy in the informer
        # may not show the name yet, PreBind must clear it all the same.
        self._stale_extended_resource_claim_status: set[str] = set()

    def watch_filter_inputs(self, sink: framework.NodeChangeSink) -> None:
        """What Filter's verdict for a node depends on besides the pod and the NodeInfo
        (see `framework.FilterVerdicts`): the DraManager reports it."""
        self.dra_manager.watch(sink)

    # -- PreFilter --

    def pre_filter(
        self,
        state: framework.CycleState,
        pod: core_v1.Pod,
        nodes: Sequence[framework.NodeInfo],
    ) -> tuple[framework.PreFilterResult | None, framework.Status | None]:
        """Find the pod's claims and build the allocator once for all Filter calls
        (spec §3.3). Skip when the pod has no claim and no DRA-backed extended resource."""
        s = _StateData()
        state.write(STATE_KEY, s)
        try:
            user_claims = self._pod_resource_claims(pod)
        except _NotSchedulable as err:
            return None, framework.Status.unresolvable(str(err))
        extended_resource_claim = self._pre_filter_extended_resources(pod, s)
        claims = _ClaimStore(user_claims, extended_resource_claim)
        if claims.empty():
            return None, framework.Status.skip()

        num_claims_to_allocate = 0
        s.informations_for_claim = [_InformationForClaim() for _ in range(len(claims))]
        for index, claim in claims.all():
            allocation = claim.status.allocation
            if allocation is not None:
                if not _can_be_reserved(claim) and not _is_reserved_for_pod(pod, claim):
                    return None, framework.Status.unresolvable(REASON_CLAIM_IN_USE)
                s.informations_for_claim[index].available_on_nodes = allocation.node_selector
                continue
            num_claims_to_allocate += 1
            # An allocation in flight (Reserve..PreBind of another attempt): wait for it.
            if self.dra_manager.claim_is_pending_allocation(claim.metadata.uid):
                return None, framework.Status.unresolvable(
                    f"resource claim {_ref(claim)} is in the process of being allocated"
                )
            # §3.3.5: the special claim has no requests yet, nothing to validate.
            if claim is extended_resource_claim:
                continue
            status = self._validate_device_classes(claim)
            if status is not None:
                return None, status

        if num_claims_to_allocate:
            s.allocator = self.dra_manager.allocator()
        s.claims = claims
        s.only_extended_resource_claim = (
            claims.no_user_claim()
            and extended_resource_claim is not None
            and s.allocator is not None
        )
        if not (
            s.only_extended_resource_claim
            and extended_resource_claim is not None
            and extended_resource_claim.metadata.name == extended.SPECIAL_CLAIM_IN_MEMORY_NAME
        ):
            state.reuse_filter_verdicts = False  # user claims, or a leftover special claim
        return None, None

    def _pod_resource_claims(self, pod: core_v1.Pod) -> list[resource_v1.ResourceClaim]:
        """The claims of `pod.spec.resourceClaims` from the claim cache (upstream
        `foreachPodResourceClaim`); raises _NotSchedulable when one cannot be used."""
        claims = []
        for pod_claim in pod.spec.resource_claims:
            claim_name, must_check_owner = _claim_name(pod, pod_claim)
            if claim_name is None:
                continue  # the template needed no claim
            claim = self.dra_manager.get_claim(pod.metadata.namespace, claim_name)
            if claim is None:
                raise _NotSchedulable(f'resourceclaim.resource.k8s.io "{claim_name}" not found')
            if claim.metadata.deletion_timestamp is not None:
                raise _NotSchedulable(f'resourceclaim "{claim_name}" is being deleted')
            if must_check_owner and not _is_for_pod(pod, claim):
                raise _NotSchedulable(
                    f"ResourceClaim {_ref(claim)} was not created for pod "
                    f"{pod.metadata.namespace}/{pod.metadata.name} (pod is not owner)"
                )
            claims.append(claim)
        return claims

    def _pre_filter_extended_resources(
        self, pod: core_v1.Pod, s: _StateData
    ) -> resource_v1.ResourceClaim | None:
        """The special claim (spec §3.3.1–§3.3.3): None with the gate off or without a
        DRA-backed request; else the claim an earlier attempt left, or a new in-memory one.
        """
        if not self.extended_resources:
            return None
        requested = {
            name: self.dra_manager.resolve_device_class(name)
            for name, quantity in resources.pod_requests(pod).items()
            if not quantity.is_zero() and resources.is_dra_capable_name(name)
        }
        if all(cls is None for cls in requested.values()):
            return None
        s.extended_resources = requested
        # §3.3.2: never reused; Filter rejects it and PostFilter deletes it (§3.12).
        for claim in self.dra_manager.claims_controlled_by(pod.metadata.uid):
            if extended.is_special_claim_for(claim, pod):
                return claim
        return extended.new_special_claim(pod)

    def _validate_device_classes(self, claim: resource_v1.ResourceClaim) -> framework.Status | None:
        """Every request names a class that exists (upstream `validateDeviceClass`)."""
        for request in claim.spec.devices.requests:
            if request.exactly is not None:
                wanted = [(request.name, request.exactly.device_class_name)]
            elif request.first_available:
                wanted = [
                    (f"{request.name}/{sub.name}", sub.device_class_name)
                    for sub in request.first_available
                ]
            else:
                return framework.Status.unresolvable(
                    f"resource claim {_ref(claim)}, request {request.name}: unknown request type"
                )
            for request_name, class_name in wanted:
                if not class_name:
                    return framework.Status.error(
                        f"request {request_name}: unsupported request type"
                    )
                if class_name not in self.dra_manager.classes:
                    # Unschedulable until a DeviceClass event requeues the pod.
                    return framework.Status.unresolvable(
                        f"request {request_name}: device class {class_name} does not exist"
                    )
        return None

    # -- Filter --

    def filter(
        self, state: framework.CycleState, pod: core_v1.Pod, node_info: framework.NodeInfo
    ) -> framework.Status | None:
        """Can the pod's claims be used or allocated on this node (spec §3.4)?

        Allocated claims must be usable from the node; unallocated ones, the special claim
        for this node last, are allocated together in one allocator call, so the pod never
        gets one device twice. The result is kept for Reserve.
        """
        try:
            s = _read_state(state)
        except KeyError as err:
            return framework.Status.error(err)
        if s.claims.empty():
            return None
        node = node_info.node
        node_claim, mappings, status = self._filter_extended_resources(s, pod, node_info)
        if status is not None:
            return status
        if s.only_extended_resource_claim:
            # The common case of the feature, made cheap: one claim, nothing else to check.
            if node_claim is None:
                return None  # served by device plugins here: NodeResourcesFit decides
            assert s.allocator is not None
            try:
                found = s.allocator.find_one(node, node_claim)
            except structured.AllocatorError as err:
                return framework.Status.error(err)
            if found is None:
                return framework.Status.unresolvable(REASON_CANNOT_ALLOCATE)
            s.node_allocations[node.metadata.name] = _NodeAllocation(
                [len(s.claims) - 1], found, node_claim, mappings
            )
            return None
        # §3.4.3: only device-plugin resources here, no user claims: NodeResourcesFit decides.
        if node_claim is None and s.claims.no_user_claim():
            return None

        unavailable_claims = [
            index
            for index, info in enumerate(s.informations_for_claim)
            if info.available_on_nodes is not None
            and not node_affinity.node_selector_matches(info.available_on_nodes, node)
        ]

        node_allocation = None
        if s.allocator is not None:
            extended_resource_claim = s.claims.extended_resource_claim()
            claim_indices: list[int] = []
            claims_to_allocate: list[resource_v1.ResourceClaim] = []
            for index, claim in s.claims.to_allocate():
                if claim is extended_resource_claim:
                    if node_claim is None:
                        continue  # all served by device plugins here: no claim (spec §12)
                    claim = node_claim
                claim_indices.append(index)
                claims_to_allocate.append(claim)
            results: list[structured.Allocation] = []
            if claims_to_allocate:
                try:
                    allocated = s.allocator.find(node, claims_to_allocate)
                except structured.AllocatorError as err:
                    # Broken claim or class: no node can help, abort the attempt (§3.4.5).
                    return framework.Status.error(err)
                if allocated is None:
                    return framework.Status.unresolvable(REASON_CANNOT_ALLOCATE)
                results = allocated
            node_allocation = _NodeAllocation(claim_indices, results, node_claim, mappings)

        if unavailable_claims:
            s.unavailable_claims.update(unavailable_claims)
            return framework.Status.unresolvable(REASON_CLAIM_NOT_AVAILABLE)
        if node_allocation is not None:
            s.node_allocations[node.metadata.name] = node_allocation
        return None

    def _filter_extended_resources(
        self, s: _StateData, pod: core_v1.Pod, node_info: framework.NodeInfo
    ) -> tuple[
        resource_v1.ResourceClaim | None,
        list[core_v1.ContainerExtendedResourceRequest],
        framework.Status | None,
    ]:
        """The special claim for this node and its request mappings (spec §3.4.1, §3.4.2,
        §3.4.4); None when DRA serves none of the pod's extended resources here."""
        claim = s.claims.extended_resource_claim()
        if claim is None:
            return None, [], None
        if claim.metadata.name != extended.SPECIAL_CLAIM_IN_MEMORY_NAME:
            # §3.4.1: left over from an earlier attempt (it has requests, the in-memory
            # claim never has). Reject every node; PostFilter deletes it.
            return (
                None,
                [],
                framework.Status.unresolvable(REASON_CANNOT_SCHEDULE_EXTENDED_RESOURCE_CLAIM),
            )
        allocatable = node_info.allocatable
        dra_names = set()
        for name, cls in s.extended_resources.items():
            quantity = allocatable.get(name)
            if cls is not None and (quantity is None or quantity.is_zero()):
                dra_names.add(name)  # §3.1.2: no device plugin capacity, DRA serves it
            elif quantity is None:
                return None, [], framework.Status.unresolvable(REASON_CANNOT_FIT_RESOURCE)
        if not dra_names:
            return None, [], None
        key = frozenset(dra_names)
        cached = s.node_extended_claims.get(key)
        if cached is None:
            cached = _node_extended_claim(claim, pod, s.extended_resources, dra_names)
            s.node_extended_claims[key] = cached
        node_claim, mappings = cached
        return node_claim, mappings, None

    # -- PostFilter --

    async def post_filter(
        self,
        state: framework.CycleState,
        pod: core_v1.Pod,
        filtered_node_status_map: framework.Diagnosis,
    ) -> framework.Status | None:
        """No node fits: free something a later attempt may use (spec §3.6).

        One allocated user claim that was unavailable on some node and that no other pod
        uses is deallocated; else a special claim from an earlier attempt is deleted.
        """
        try:
            s = _read_state(state)
        except KeyError as err:
            return framework.Status.error(err)
        if s.claims.empty():
            return framework.Status.unschedulable(REASON_NO_NEW_CLAIMS)
        extended_resource_claim = s.claims.extended_resource_claim()

        for index in sorted(s.unavailable_claims):
            claim = s.claims.get(index)
            if claim is extended_resource_claim:
                continue  # handled below
            reserved_for = claim.status.reserved_for
            if not reserved_for or (
                len(reserved_for) == 1 and reserved_for[0].uid == pod.metadata.uid
            ):
                deallocated = codec.clone(claim)
                deallocated.status.reserved_for = []
                deallocated.status.allocation = None
                deallocated.status.devices = []
                log.debug("deallocating ResourceClaim %s for pod %s", _ref(claim), _pod_ref(pod))
                try:
                    await self.api.update_status(deallocated)
                except errors.ApiError as err:
                    return framework.Status.error(err)
                return framework.Status.unschedulable(REASON_CLAIM_DEALLOCATED)

        if (
            extended_resource_claim is not None
            and extended_resource_claim.metadata.name != extended.SPECIAL_CLAIM_IN_MEMORY_NAME
        ):
            try:
                await self._delete_claim(extended_resource_claim)
            except errors.ApiError as err:
                return framework.Status.error(err)
            if self._may_name_extended_resource_claim(pod):
                await self._forget_extended_resource_claim(pod)
            return framework.Status.unschedulable(REASON_CLAIM_DELETED)
        return framework.Status.unschedulable(REASON_STILL_NOT_SCHEDULABLE)

    # -- PreScore / Score --

    def pre_score(
        self,
        state: framework.CycleState,
        pod: core_v1.Pod,
        nodes: Sequence[framework.NodeInfo],
    ) -> framework.Status | None:
        """Skip Score unless a claim to allocate has a prioritized list: only those score
        (spec §3.7.1), so the special claim never does."""
        try:
            s = _read_state(state)
        except KeyError as err:
            return framework.Status.error(err)
        for _, claim in s.claims.to_allocate():
            if any(request.first_available for request in claim.spec.devices.requests):
                return None
        return framework.Status.skip()

    def score(
        self, state: framework.CycleState, pod: core_v1.Pod, node_info: framework.NodeInfo
    ) -> int:
        """For each allocated `firstAvailable` subrequest, the better the earlier it is in
        its list: 8 for the first, 7 for the second… (upstream `computeScore`)."""
        s = _read_state(state)
        node_allocation = s.node_allocations.get(node_info.name)
        if node_allocation is None:
            return 0
        score = 0
        for index, allocation in zip(
            node_allocation.claim_indices, node_allocation.allocations, strict=True
        ):
            allocated = allocation.requests()
            for request in s.claims.get(index).spec.devices.requests:
                for position, sub in enumerate(request.first_available):
                    if f"{request.name}/{sub.name}" in allocated:
                        score += validation.FIRST_AVAILABLE_MAX_SIZE - position
        return score

    def normalize_scores(
        self,
        state: framework.CycleState,
        pod: core_v1.Pod,
        scores: list[framework.NodeScore],
    ) -> list[framework.NodeScore]:
        """Scale so that the best node gets 100 (upstream `DefaultNormalizeScore`)."""
        highest = max((node_score.score for node_score in scores), default=0)
        if highest == 0:
            return scores
        return [
            framework.NodeScore(n.name, framework.MAX_NODE_SCORE * n.score // highest)
            for n in scores
        ]

    # -- Reserve / Unreserve --

    def reserve(
        self, state: framework.CycleState, pod: core_v1.Pod, node_name: str
    ) -> framework.Status | None:
        """Take the devices Filter found on this node, in memory only (spec §3.8).

        Each claim to allocate, the special claim as its copy for this node, is registered
        as an in-flight allocation under its UID (the temporary one for the special claim),
        so other pods' allocators treat its devices as taken until PreBind has written it.
        """
        try:
            s = _read_state(state)
        except KeyError as err:
            return framework.Status.error(err)
        if s.allocator is None:
            return None  # every claim is allocated already
        extended_resource_claim = s.claims.extended_resource_claim()
        node_allocation = s.node_allocations.get(node_name)
        # The other nodes' allocations are not needed any more; the attempt's state lives
        # on until the binding is done.
        s.node_allocations = {node_name: node_allocation} if node_allocation else {}
        if node_allocation is None or not node_allocation.allocations:
            # §3.8.1: all extended resources from device plugins, no user claim to allocate.
            if all(claim is extended_resource_claim for _, claim in s.claims.to_allocate()):
                return None
            return framework.Status.error("claim allocation not found for node")

        for index, found in zip(
            node_allocation.claim_indices, node_allocation.allocations, strict=True
        ):
            allocation = found.result()
            claim = s.claims.get(index)
            if claim is extended_resource_claim:
                assert node_allocation.extended_resource_claim is not None
                claim = node_allocation.extended_resource_claim
            s.informations_for_claim[index].allocation = allocation
            pending = codec.clone(claim)
            if extended.DELETE_PROTECTION_FINALIZER not in pending.metadata.finalizers:
                pending.metadata.finalizers.append(extended.DELETE_PROTECTION_FINALIZER)
            pending.status.allocation = allocation
            self.dra_manager.signal_claim_pending_allocation(pending.metadata.uid, pending)
        return None

    async def unreserve(
        self, state: framework.CycleState, pod: core_v1.Pod, node_name: str
    ) -> None:
        """Undo Reserve and PreBind; idempotent, errors are only logged (spec §3.10).

        In-flight allocations are dropped; user claims already reserved for the pod lose
        that reservation (their allocation stays); a special claim that PreBind created
        is deleted, and the pod's status stops naming it if PreBind wrote it there.
        """
        try:
            s = _read_state(state)
        except KeyError:
            return
        for _, claim in s.claims.all_user_claims():
            self.dra_manager.remove_claim_pending_allocation(claim.metadata.uid)
            if claim.status.allocation is not None and _is_reserved_for_pod(pod, claim):
                try:
                    await self._remove_reservation(claim, pod)
                except errors.NotFound:
                    pass  # deleted meanwhile (its pod went): nothing is reserved any more
                except errors.ApiError as err:
                    # The next attempt gets here again.
                    log.error("unreserve ResourceClaim %s: %s", _ref(claim), err)

        claim = s.claims.extended_resource_claim()
        if claim is None:
            return
        self.dra_manager.remove_claim_pending_allocation(
            s.claims.initial_extended_resource_claim_uid
        )
        if claim.metadata.name == extended.SPECIAL_CLAIM_IN_MEMORY_NAME:
            return  # never written
        try:
            await self._delete_claim(claim)
        except errors.ApiError as err:
            log.error("delete ResourceClaim %s: %s", _ref(claim), err)
        if s.extended_resource_claim_status_written:
            await self._forget_extended_resource_claim(pod)

    async def _remove_reservation(self, claim: resource_v1.ResourceClaim, pod: core_v1.Pod) -> None:
        """Drop the pod from `status.reservedFor` (upstream patches it away)."""

        async def attempt(refresh: bool) -> None:
            current = claim
            if refresh:
                current = await self.api.get(
                    resource_v1.ResourceClaim,
                    claim.metadata.name,
                    namespace=claim.metadata.namespace,
                )
                if current.metadata.uid != claim.metadata.uid:
                    return  # replaced by another claim of that name
            updated = codec.clone(current)
            updated.status.reserved_for = [
                ref for ref in updated.status.reserved_for if ref.uid != pod.metadata.uid
            ]
            await self.api.update_status(updated)

        await _retry_on_conflict(attempt)

    # -- PreBind --

    async def pre_bind(
        self, state: framework.CycleState, pod: core_v1.Pod, node_name: str
    ) -> framework.Status | None:
        """Write what Reserve took: every claim not yet reserved for the pod gets its
        allocation and the reservation; the special claim is created first and named in
        the pod's status (spec §3.9). A pod binding without a special claim gets a status
        naming none. Any failure is an Error, and the framework then unreserves (§3.9.6)."""
        try:
            s = _read_state(state)
        except KeyError as err:
            return framework.Status.error(err)
        for index, claim in s.claims.all():
            if _is_reserved_for_pod(pod, claim):
                continue
            try:
                written = await self._bind_claim(s, index, pod, node_name)
            except (errors.ApiError, _BindError) as err:
                return framework.Status.error(err)
            # Unreserve must see the written claim (and delete a created special claim).
            s.claims.set(index, written)
        if s.extended_resource_claim_status_written:
            return None
        if self._may_name_extended_resource_claim(pod):
            # A claim of an earlier attempt, deleted since: the kubelet must not look for it.
            try:
                await self._clear_extended_resource_claim_status(pod)
            except errors.ApiError as err:
                return framework.Status.error(err)
        return None

    async def _bind_claim(
        self, s: _StateData, index: int, pod: core_v1.Pod, node_name: str
    ) -> resource_v1.ResourceClaim:
        """Allocation (if Reserve made one) and reservation of one claim, in the API
        (upstream `bindClaim`)."""
        claim = s.claims.get(index)
        allocation = s.informations_for_claim[index].allocation
        is_extended_resource_claim = claim is s.claims.extended_resource_claim()
        if is_extended_resource_claim and allocation is None and not claim.spec.devices.requests:
            return claim  # §3.9.1: device plugins serve everything on this node
        in_flight_uid = claim.metadata.uid
        written: resource_v1.ResourceClaim | None = None
        outcome_unknown = False
        try:
            if (
                is_extended_resource_claim
                and claim.metadata.name == extended.SPECIAL_CLAIM_IN_MEMORY_NAME
            ):
                claim = written = await self._create_extended_resource_claim(pod, node_name, s)
                # From now on Unreserve must delete it, whatever fails next.
                s.claims.set(index, claim)
            try:
                claim = written = await self._allocate_and_reserve(claim, allocation, pod)
            except errors.Timeout:
                outcome_unknown = True  # no answer: the allocation may have been written
                raise
            if is_extended_resource_claim:
                await self._patch_pod_extended_resource_claim_status(pod, claim, node_name, s)
            return claim
        finally:
            if written is not None:
                if is_extended_resource_claim:
                    await self._wait_for_extended_resource_claim(written)
                else:
                    self.dra_manager.assume_claim_after_api_call(written)
            if allocation is not None:
                if outcome_unknown and is_extended_resource_claim:
                    # Unreserve deletes the claim; its devices stay taken until then.
                    self.dra_manager.hold_pending_allocation(
                        in_flight_uid, claim.metadata.namespace, claim.metadata.name
                    )
                self.dra_manager.remove_claim_pending_allocation(in_flight_uid)

    async def _create_extended_resource_claim(
        self, pod: core_v1.Pod, node_name: str, s: _StateData
    ) -> resource_v1.ResourceClaim:
        """Create this node's special claim; the API server names it from `generateName`
        (spec §3.9.2). The allocation is written afterwards, as for any claim."""
        node_allocation = s.node_allocations.get(node_name)
        if node_allocation is None or node_allocation.extended_resource_claim is None:
            raise _BindError(f"extended resource claim not found for node {node_name}")
        claim = codec.clone(node_allocation.extended_resource_claim)
        claim.status.allocation = None
        claim.metadata.name = ""
        claim.metadata.uid = ""
        try:
            created = await self.api.create(claim)
        except errors.ApiError as err:
            self.resourceclaim_creates_total["failure"] += 1
            where = f"{claim.metadata.namespace}/{claim.metadata.generate_name}"
            raise _wrapped(err, f"create claim for extended resources {where}") from err
        self.resourceclaim_creates_total["success"] += 1
        log.debug("created claim %s for extended resources of pod %s", _ref(created), _pod_ref(pod))
        return created

    async def _allocate_and_reserve(
        self,
        claim: resource_v1.ResourceClaim,
        allocation: resource_v1.AllocationResult | None,
        pod: core_v1.Pod,
    ) -> resource_v1.ResourceClaim:
        """Finalizer (a normal update), allocation and `reservedFor` (a status update),
        re-reading the claim after a conflict (spec §3.9.3)."""
        claim = codec.clone(claim)

        async def attempt(refresh: bool) -> resource_v1.ResourceClaim:
            nonlocal claim
            if refresh:
                try:
                    claim = await self.api.get(
                        resource_v1.ResourceClaim,
                        claim.metadata.name,
                        namespace=claim.metadata.namespace,
                    )
                except errors.ApiError as err:
                    raise _wrapped(err, f"get updated claim {_ref(claim)} after conflict") from err
            if claim.metadata.deletion_timestamp is not None:
                raise _BindError(f"claim {_ref(claim)} got deleted in the meantime")
            if allocation is not None:
                if claim.status.allocation is not None:
                    raise _BindError(f"claim {_ref(claim)} got allocated elsewhere in the meantime")
                if extended.DELETE_PROTECTION_FINALIZER not in claim.metadata.finalizers:
                    # The finalizer needs a normal update; the status update cannot set it.
                    claim.metadata.finalizers.append(extended.DELETE_PROTECTION_FINALIZER)
                    try:
                        claim = await self.api.update(claim)
                    except errors.ApiError as err:
                        raise _wrapped(err, f"add finalizer to claim {_ref(claim)}") from err
                claim.status.allocation = allocation
            claim.status.reserved_for.append(
                resource_v1.ResourceClaimConsumerReference(
                    resource="pods", name=pod.metadata.name, uid=pod.metadata.uid
                )
            )
            try:
                return await self.api.update_status(claim)
            except errors.ApiError as err:
                what = "allocation and reservation" if allocation is not None else "reservation"
                raise _wrapped(err, f"add {what} to claim {_ref(claim)}") from err

        return await _retry_on_conflict(attempt)

    async def _patch_pod_extended_resource_claim_status(
        self, pod: core_v1.Pod, claim: resource_v1.ResourceClaim, node_name: str, s: _StateData
    ) -> None:
        """`pod.status.extendedResourceClaimStatus` names the claim and maps containers to
        its requests (spec §3.9.4); only that field changes."""
        node_allocation = s.node_allocations.get(node_name)
        mappings = node_allocation.request_mappings if node_allocation is not None else []
        if not mappings:
            raise _BindError(
                f"nil or empty request mappings, no update of pod {_pod_ref(pod)} "
                "ExtendedResourceClaimStatus"
            )
        status = core_v1.PodExtendedResourceClaimStatus(
            request_mappings=mappings, resource_claim_name=claim.metadata.name
        )
        patch = {"status": {"extendedResourceClaimStatus": codec.to_builtins(status)}}
        s.extended_resource_claim_status_written = True
        try:
            await self.api.patch(
                core_v1.Pod,
                pod.metadata.name,
                patch,
                namespace=pod.metadata.namespace,
                subresource="status",
            )
        except errors.ApiError as err:
            raise _wrapped(err, f"update pod {_pod_ref(pod)} ExtendedResourceClaimStatus") from err
        # It names a claim that exists now; Unreserve clears it if the binding fails.
        self._stale_extended_resource_claim_status.discard(pod.metadata.uid)

    def _may_name_extended_resource_claim(self, pod: core_v1.Pod) -> bool:
        """The pod's status names a special claim, as far as this scheduler knows."""
        return (
            pod.status.extended_resource_claim_status is not None
            or pod.metadata.uid in self._stale_extended_resource_claim_status
        )

    async def _clear_extended_resource_claim_status(self, pod: core_v1.Pod) -> None:
        """Remove `status.extendedResourceClaimStatus` (only that field). Until that
        succeeds the pod is remembered, so that PreBind tries again before it binds. A pod
        gone meanwhile has nothing to clear."""
        uid = pod.metadata.uid
        self._stale_extended_resource_claim_status.add(uid)
        patch = {"status": {"extendedResourceClaimStatus": None}}
        try:
            await self.api.patch(
                core_v1.Pod,
                pod.metadata.name,
                patch,
                namespace=pod.metadata.namespace,
                subresource="status",
            )
        except errors.NotFound:
            pass
        except errors.ApiError as err:
            raise _wrapped(err, f"clear pod {_pod_ref(pod)} ExtendedResourceClaimStatus") from err
        self._stale_extended_resource_claim_status.discard(uid)

    async def _forget_extended_resource_claim(self, pod: core_v1.Pod) -> None:
        """After deleting the pod's special claim: the status stops naming it, best effort
        (an error is logged; PreBind clears it before the pod binds without a claim)."""
        try:
            await self._clear_extended_resource_claim_status(pod)
        except errors.ApiError as err:
            log.error("%s", err.message)

    async def _wait_for_extended_resource_claim(self, claim: resource_v1.ResourceClaim) -> None:
        """Wait until the claim cache holds what was written (spec §3.9.5). A timeout is
        only logged: the claim exists and the informer brings it eventually."""
        arrived = await self.dra_manager.wait_for_claim(
            claim.metadata.namespace,
            claim.metadata.name,
            claim.metadata.resource_version,
            self.assume_extended_resource_timeout,
        )
        if not arrived:
            log.info(
                "claim %s not in the claim cache after %.0fs",
                _ref(claim),
                self.assume_extended_resource_timeout,
            )

    async def _delete_claim(self, claim: resource_v1.ResourceClaim) -> None:
        """Remove the delete-protection finalizer (an update, re-reading the claim after a
        conflict), then delete; a claim found gone on the way is fine (spec §3.6.2): its
        pod went and the garbage collector with it, or an earlier attempt deleted it."""
        current = codec.clone(claim)

        async def attempt(refresh: bool) -> None:
            nonlocal current
            if refresh:
                current = await self.api.get(
                    resource_v1.ResourceClaim,
                    claim.metadata.name,
                    namespace=claim.metadata.namespace,
                )
            current.metadata.finalizers = [
                f for f in current.metadata.finalizers if f != extended.DELETE_PROTECTION_FINALIZER
            ]
            await self.api.update(current)

        try:
            await _retry_on_conflict(attempt)
        except errors.NotFound:
            return
        log.debug("deleting ResourceClaim %s", _ref(claim))
        with contextlib.suppress(errors.NotFound):
            await self.api.delete(
                resource_v1.ResourceClaim, claim.metadata.name, namespace=claim.metadata.namespace
            )

    # -- queueing --

    def events_to_register(self) -> list[framework.ClusterEventWithHint]:
        """Spec §3.11.1, with queueing hints (so no UpdateNodeTaint)."""
        action = framework.ActionType
        resource = framework.EventResource
        return [
            # Node labels matter for allocation; allocatable for device plugin vs DRA.
            framework.ClusterEventWithHint(
                framework.ClusterEvent(
                    resource.NODE,
                    action.ADD | action.UPDATE_NODE_LABEL | action.UPDATE_NODE_ALLOCATABLE,
                )
            ),
            framework.ClusterEventWithHint(
                framework.ClusterEvent(
                    resource.RESOURCE_CLAIM, action.ADD | action.UPDATE | action.DELETE
                ),
                self.is_schedulable_after_claim_change,
            ),
            # The claim controller wrote the name of a claim made from a template.
            framework.ClusterEventWithHint(
                framework.ClusterEvent(resource.POD, action.UPDATE_POD_GENERATED_RESOURCE_CLAIM),
                self.is_schedulable_after_pod_change,
            ),
            framework.ClusterEventWithHint(
                framework.ClusterEvent(resource.DEVICE_CLASS, action.ADD | action.UPDATE)
            ),
            framework.ClusterEventWithHint(
                framework.ClusterEvent(resource.RESOURCE_SLICE, action.ADD | action.UPDATE)
            ),
        ]

    def is_schedulable_after_claim_change(
        self,
        pod: core_v1.Pod,
        old: resource_v1.ResourceClaim | None,
        new: resource_v1.ResourceClaim | None,
    ) -> framework.QueueingHint:
        """Spec §3.11.2: freed devices (deallocation, or deletion of an allocated claim)
        may help any pod; otherwise only a change of the pod's own claims matters, or the
        deletion of its special claim, which PostFilter asked for."""
        try:
            claims = self._pod_resource_claims(pod)
        except _NotSchedulable:
            return framework.QueueingHint.QUEUE_SKIP
        if new is None:
            assert old is not None
            if old.status.allocation is not None or extended.is_special_claim_for(old, pod):
                return framework.QueueingHint.QUEUE
            return framework.QueueingHint.QUEUE_SKIP
        if old is not None and old.status.allocation is not None and new.status.allocation is None:
            return framework.QueueingHint.QUEUE
        if not any(claim.metadata.uid == new.metadata.uid for claim in claims):
            return framework.QueueingHint.QUEUE_SKIP
        if old is None or old.status != new.status:
            return framework.QueueingHint.QUEUE
        # Same status: e.g. a driver added a finalizer.
        return framework.QueueingHint.QUEUE_SKIP

    def is_schedulable_after_pod_change(
        self, pod: core_v1.Pod, old: core_v1.Pod | None, new: core_v1.Pod
    ) -> framework.QueueingHint:
        """The pod itself got the names of its generated claims, and they all exist."""
        if pod.metadata.uid != new.metadata.uid:
            return framework.QueueingHint.QUEUE_SKIP
        try:
            self._pod_resource_claims(new)
        except _NotSchedulable:
            return framework.QueueingHint.QUEUE_SKIP
        return framework.QueueingHint.QUEUE


# --- helpers -----------------------------------------------------------------------------


def _node_extended_claim(
    claim: resource_v1.ResourceClaim,
    pod: core_v1.Pod,
    classes: dict[str, resource_v1.DeviceClass | None],
    dra_names: set[str],
) -> _NodeExtendedClaim:
    """A copy of the in-memory claim with the requests for these names (spec §3.5); no
    claim when they add up to no request (non-integer quantities, §3.5.8)."""
    requests, mappings = extended.device_requests_for_pod(pod, classes.get, dra_names)
    if not requests:
        return None, []
    node_claim = codec.clone(claim)
    node_claim.spec.devices.requests = requests
    return node_claim, mappings


def _claim_name(pod: core_v1.Pod, pod_claim: core_v1.PodResourceClaim) -> tuple[str | None, bool]:
    """The claim's name and whether the pod must own it (upstream `resourceclaim.Name`);
    None when the template needed no claim. Raises _NotSchedulable."""
    if pod_claim.resource_claim_name is not None:
        return pod_claim.resource_claim_name, False
    if pod_claim.resource_claim_template_name is not None:
        for status in pod.status.resource_claim_statuses:
            if status.name == pod_claim.name:
                return status.resource_claim_name, True
        raise _NotSchedulable(f'pod "{_pod_ref(pod)}": ResourceClaim not created yet')
    raise _NotSchedulable(
        f'pod "{_pod_ref(pod)}", spec.resourceClaim "{pod_claim.name}": '
        "none of the supported fields are set"
    )


def _is_for_pod(pod: core_v1.Pod, claim: resource_v1.ResourceClaim) -> bool:
    """Made for this pod from a template: same namespace, the pod is its controller."""
    owner = claim.metadata.controller_ref()
    return (
        claim.metadata.namespace == pod.metadata.namespace
        and owner is not None
        and owner.uid == pod.metadata.uid
    )


def _can_be_reserved(claim: resource_v1.ResourceClaim) -> bool:
    return len(claim.status.reserved_for) < validation.RESERVED_FOR_MAX_SIZE


def _is_reserved_for_pod(pod: core_v1.Pod, claim: resource_v1.ResourceClaim) -> bool:
    return any(ref.uid == pod.metadata.uid for ref in claim.status.reserved_for)


async def _retry_on_conflict(attempt: Callable[[bool], Awaitable[T]]) -> T:
    """client-go's `retry.RetryOnConflict`; `attempt(refresh)` must re-read the object
    when `refresh` is true, i.e. on every try after the first."""
    for step in range(_CONFLICT_RETRY_STEPS - 1):
        try:
            return await attempt(step > 0)
        except errors.Conflict:
            await asyncio.sleep(_CONFLICT_RETRY_DELAY)
    return await attempt(True)


def _wrapped(err: errors.ApiError, context: str) -> errors.ApiError:
    """The same kind of API error with `context` in front, as Go's `fmt.Errorf("%s: %w")`,
    so that a retry still recognises a Conflict."""
    return type(err)(
        f"{context}: {err.message}",
        kind=err.kind,
        name=err.name,
        group=err.group,
        causes=err.causes,
    )


def _ref(claim: resource_v1.ResourceClaim) -> str:
    return f"{claim.metadata.namespace}/{claim.metadata.name}"


def _pod_ref(pod: core_v1.Pod) -> str:
    return f"{pod.metadata.namespace}/{pod.metadata.name}"
