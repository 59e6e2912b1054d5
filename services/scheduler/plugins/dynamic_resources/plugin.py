"""The DynamicResources plugin: allocates a pod's ResourceClaims while it is scheduled, and
its DRA-backed extended resources through one special claim (upstream
`pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go`).

The extension points are here; each concern is a module of its own, as upstream's
`dynamicresources/` splits them:

- `claims`: the pod's user claims, found in the claim cache, checked and written;
- `extended`: the extended-resource path, the special claim, with a map of what each
  extension point does for it;
- `state`: what one attempt keeps in the CycleState;
- `allocator` and `cel_env`: structured-parameters allocation on one node, and the CEL of
  device selectors;
- `queueing_hints`: the events that may requeue a rejected pod, and their hints.

Between Reserve and the end of PreBind, allocations live only in the DraManager as
in-flight allocations, so that no other pod gets the same devices.

PreBind waits for the binding conditions of devices that have them (module
`binding_conditions`).

Upstream: `pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go`. Not
modelled: PreEnqueue, PreBindPreFlight, the Filter timeout, the binding-conditions metrics.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
from collections.abc import Hashable, Sequence
from datetime import UTC, datetime
from typing import ClassVar

from drasim.common import codec, errors, events, metrics
from drasim.common.api import core_v1, resource_v1
from drasim.common.client import ApiClient
from drasim.scheduler import framework
from drasim.scheduler.dra_manager import DraManager
from drasim.scheduler.plugins import names, node_affinity
from drasim.scheduler.plugins.dynamic_resources import allocator as structured
from drasim.scheduler.plugins.dynamic_resources import (
    binding_conditions,
    claims,
    extended,
    queueing_hints,
)
from drasim.scheduler.plugins.dynamic_resources.extended import (
    ASSUME_EXTENDED_RESOURCE_TIMEOUT_DEFAULT_SECONDS,
)
from drasim.scheduler.plugins.dynamic_resources.state import (
    STATE_KEY,
    InformationForClaim,
    NodeAllocation,
    StateData,
    read_state,
)
from drasim.scheduler.plugins.feature import DEFAULT_FEATURES, Features

__all__ = [
    "DynamicResourcesArgs",
    "REASON_CANNOT_ALLOCATE",
    "REASON_CLAIM_DEALLOCATED",
    "REASON_CLAIM_DELETED",
    "REASON_CLAIM_IN_USE",
    "REASON_CLAIM_NOT_AVAILABLE",
    "DynamicResources",
]

log = logging.getLogger(__name__)

# Reasons, spelled as upstream's `statusUnschedulable` calls; the extended-resource path's
# are in `extended`.
REASON_CLAIM_IN_USE = "resourceclaim in use"
REASON_CLAIM_NOT_AVAILABLE = "resourceclaim not available on the node"
REASON_CANNOT_ALLOCATE = "cannot allocate all claims"
REASON_CLAIM_DEALLOCATED = "deallocation of ResourceClaim completed"
REASON_CLAIM_DELETED = "deletion of ResourceClaim completed"


@dataclasses.dataclass(frozen=True, slots=True)
class DynamicResourcesArgs:
    """Upstream `DynamicResourcesArgs`: how long PreBind waits for binding conditions,
    in seconds."""

    binding_timeout: float = binding_conditions.BINDING_TIMEOUT_DEFAULT_SECONDS


class DynamicResources:
    """PreEnqueue, PreFilter, Filter, PostFilter, PreScore, Score, Reserve, PreBind,
    EnqueueExtensions.

    `features` are the gates it honours: DRAExtendedResource off, no special claim is made
    (upstream `preFilterExtendedResources` returns at once without
    `EnableDRAExtendedResource`); DRAPrioritizedList off, a claim with subrequests is
    unschedulable; DRAAdminAccess off, a request for admin access is an error.
    `assume_extended_resource_timeout` bounds PreBind's wait for a created special claim to
    reach the claim cache (upstream `waitForExtendedClaimInAssumeCache`).
    `resourceclaim_creates` counts the special claims' creates (the scheduler's registry
    serves it; default: a counter of the plugin's own). `args` bound the wait for binding
    conditions; `recorder` writes its BindingConditionsPending event (None: none).
    """

    name: ClassVar[str] = names.DYNAMIC_RESOURCES

    def __init__(
        self,
        dra_manager: DraManager,
        api: ApiClient,
        *,
        features: Features = DEFAULT_FEATURES,
        assume_extended_resource_timeout: float = ASSUME_EXTENDED_RESOURCE_TIMEOUT_DEFAULT_SECONDS,
        resourceclaim_creates: metrics.CounterVec | None = None,
        args: DynamicResourcesArgs | None = None,
        recorder: events.EventRecorder | None = None,
    ) -> None:
        self.dra_manager = dra_manager
        self.api = api
        self.features = features
        self.binding_timeout = (args or DynamicResourcesArgs()).binding_timeout
        self._recorder = recorder
        self._writer = extended.ExtendedResourceClaimWriter(
            api,
            dra_manager,
            assume_timeout=assume_extended_resource_timeout,
            resourceclaim_creates=resourceclaim_creates,
        )

    @property
    def resourceclaim_creates_total(self) -> dict[str, float]:
        """The special claims' create attempts so far, by status ("success", "failure")."""
        totals: collections.Counter[str] = collections.Counter()
        for (status, *_), value in self._writer.resourceclaim_creates.items():
            totals[status] += value
        return dict(totals)

    def watch_filter_inputs(self, sink: framework.NodeChangeSink) -> None:
        """What Filter's verdict for a node depends on besides the pod and the NodeInfo
        (see `framework.VerdictCache`): the DraManager reports it."""
        self.dra_manager.watch(sink)

    def sign_pod(self, state: framework.CycleState, pod: core_v1.Pod) -> Hashable | None:
        """After PreFilter: for a pod without claims, or whose only claim is its in-memory
        special claim, Filter's verdict depends on the containers' requests (the special
        claim's requests are made from them, per container, in their order), the node, the
        classes and slices and the allocations of the node's pools, all reported by
        `watch_filter_inputs`. For a pod whose claims (no special claim) are all still
        unallocated and unused, as a Job's claims from one template are, it depends on the
        claims' specs in their order and the same node state: nothing of a claim's
        identity reaches the allocator. None otherwise (an allocated or reserved claim,
        a leftover special claim, user claims beside a special claim)."""
        try:
            s = read_state(state)
        except KeyError:
            return None
        if s.claims.empty():
            return ()
        claim = s.claims.extended_resource_claim()
        if (
            s.only_extended_resource_claim
            and claim is not None
            and claim.metadata.name == extended.SPECIAL_CLAIM_IN_MEMORY_NAME
        ):
            return extended.requests_signature(pod)
        if claim is None:
            return _unused_claims_signature(s.claims)
        return None

    # -- PreEnqueue --

    def pre_enqueue(self, pod: core_v1.Pod) -> framework.Status | None:
        """Keep the pod out of activeQ until every claim it names exists, is not being
        deleted and, if made from a template, is the pod's (upstream `PreEnqueue`): a
        template's claim the controller has not made yet costs no attempt, and its
        creation lets the pod in at once (the claim's or the pod's queueing hint), not
        after a failed attempt's backoff."""
        try:
            claims.pod_resource_claims(self.dra_manager, pod)
        except claims.NotSchedulable as err:
            return framework.Status.unresolvable(str(err))
        return None

    # -- PreFilter --

    def pre_filter(
        self,
        state: framework.CycleState,
        pod: core_v1.Pod,
        nodes: Sequence[framework.NodeInfo],
    ) -> tuple[framework.PreFilterResult | None, framework.Status | None]:
        """Find the pod's claims and build the allocator once for all Filter calls
        (upstream `PreFilter`). Skip when the pod has no claim and no DRA-backed extended
        resource."""
        s = StateData()
        state.write(STATE_KEY, s)
        try:
            user_claims = claims.pod_resource_claims(self.dra_manager, pod)
        except claims.NotSchedulable as err:
            return None, framework.Status.unresolvable(str(err))
        extended_resource_claim = None
        if self.features.enable_dra_extended_resource:
            extended_resource_claim = extended.pre_filter_extended_resources(
                self.dra_manager, pod, s
            )
        store = claims.ClaimStore(user_claims, extended_resource_claim)
        if store.empty():
            return None, framework.Status.skip()

        num_claims_to_allocate = 0
        s.informations_for_claim = [InformationForClaim() for _ in range(len(store))]
        for index, claim in store.all():
            allocation = claim.status.allocation
            if allocation is not None:
                if not claims.can_be_reserved(claim) and not claims.is_reserved_for_pod(pod, claim):
                    return None, framework.Status.unresolvable(REASON_CLAIM_IN_USE)
                s.informations_for_claim[index].available_on_nodes = allocation.node_selector
                continue
            num_claims_to_allocate += 1
            # An allocation in flight (Reserve..PreBind of another attempt): wait for it.
            if self.dra_manager.claim_is_pending_allocation(claim.metadata.uid):
                return None, framework.Status.unresolvable(
                    f"resource claim {claims.ref(claim)} is in the process of being allocated"
                )
            # Upstream `PreFilter`: the special claim has no requests yet, nothing to
            # validate (its class is not checked).
            if claim is extended_resource_claim:
                continue
            status = claims.validate_device_classes(
                claim,
                self.dra_manager.classes,
                prioritized_list=self.features.enable_dra_prioritized_list,
            )
            if status is not None:
                return None, status

        if num_claims_to_allocate:
            s.allocator = self.dra_manager.allocator(
                admin_access=self.features.enable_dra_admin_access,
                partitionable_devices=self.features.enable_dra_partitionable_devices,
                consumable_capacity=self.features.enable_dra_consumable_capacity,
            )
        s.claims = store
        s.only_extended_resource_claim = (
            store.no_user_claim()
            and extended_resource_claim is not None
            and s.allocator is not None
        )
        return None, None

    # -- Filter --

    def filter(
        self, state: framework.CycleState, pod: core_v1.Pod, node_info: framework.NodeInfo
    ) -> framework.Status | None:
        """Can the pod's claims be used or allocated on this node (upstream `Filter`)?

        Allocated claims must be usable from the node; unallocated ones, the special claim
        for this node last, are allocated together in one allocator call, so the pod never
        gets one device twice. The result is kept for Reserve.
        """
        try:
            s = read_state(state)
        except KeyError as err:
            return framework.Status.error(err)
        if s.claims.empty():
            return None
        node = node_info.node
        node_claim, mappings, status = extended.filter_extended_resources(s, pod, node_info)
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
            s.node_allocations[node.metadata.name] = NodeAllocation(
                [len(s.claims) - 1], found, node_claim, mappings
            )
            return None
        # Upstream `filterExtendedResources`: only device-plugin resources here, no user
        # claims: NodeResourcesFit decides.
        if node_claim is None and s.claims.no_user_claim():
            return None

        unavailable_claims = [
            index
            for index, info in enumerate(s.informations_for_claim)
            if (
                info.available_on_nodes is not None
                and not node_affinity.node_selector_matches(info.available_on_nodes, node)
            )
            or self._binding_given_up(s.claims.get(index))
        ]

        node_allocation = None
        if s.allocator is not None:
            extended_resource_claim = s.claims.extended_resource_claim()
            claim_indices: list[int] = []
            claims_to_allocate: list[resource_v1.ResourceClaim] = []
            for index, claim in s.claims.to_allocate():
                if claim is extended_resource_claim:
                    if node_claim is None:
                        # All served by device plugins here: no claim. A drasim decision:
                        # upstream would carry a special claim without requests.
                        continue
                    claim = node_claim
                claim_indices.append(index)
                claims_to_allocate.append(claim)
            results: list[structured.Allocation] = []
            if claims_to_allocate:
                try:
                    allocated = s.allocator.find(node, claims_to_allocate)
                except structured.AllocatorError as err:
                    # Broken claim or class: no node can help, abort the attempt (upstream
                    # `Filter` returns `statusError`).
                    return framework.Status.error(err)
                if allocated is None:
                    return framework.Status.unresolvable(REASON_CANNOT_ALLOCATE)
                results = allocated
            node_allocation = NodeAllocation(claim_indices, results, node_claim, mappings)

        if unavailable_claims:
            s.unavailable_claims.update(unavailable_claims)
            return framework.Status.unresolvable(REASON_CLAIM_NOT_AVAILABLE)
        if node_allocation is not None:
            s.node_allocations[node.metadata.name] = node_allocation
        return None

    # -- PostFilter --

    async def post_filter(
        self,
        state: framework.CycleState,
        pod: core_v1.Pod,
        filtered_node_status_map: framework.Diagnosis,
    ) -> framework.Status | None:
        """No node fits: free something a later attempt may use (upstream `PostFilter`).

        One allocated user claim that was unavailable on some node and that no other pod
        uses is deallocated; else a special claim from an earlier attempt is deleted.
        """
        try:
            s = read_state(state)
        except KeyError as err:
            return framework.Status.error(err)
        # Where there is nothing to deallocate, upstream's PostFilter says so in its log
        # only: its status has no reason, so FailedScheduling ends with preemption's.
        if s.claims.empty():
            log.debug("no new claims to deallocate for pod %s", claims.pod_ref(pod))
            return framework.Status.unschedulable()
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
                log.debug(
                    "deallocating ResourceClaim %s for pod %s",
                    claims.ref(claim),
                    claims.pod_ref(pod),
                )
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
                await self._writer.delete(extended_resource_claim)
            except errors.ApiError as err:
                return framework.Status.error(err)
            if self._writer.may_be_named(pod):
                await self._writer.forget(pod)
            return framework.Status.unschedulable(REASON_CLAIM_DELETED)
        return framework.Status.unschedulable()

    # -- PreScore / Score --

    def pre_score(
        self,
        state: framework.CycleState,
        pod: core_v1.Pod,
        nodes: Sequence[framework.NodeInfo],
    ) -> framework.Status | None:
        """Skip Score unless a claim to allocate has a prioritized list: only those score
        (upstream `computeScore`), so the special claim never does."""
        try:
            s = read_state(state)
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
        s = read_state(state)
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
                        score += resource_v1.FIRST_AVAILABLE_MAX_SIZE - position
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
        """Take the devices Filter found on this node, in memory only (upstream `Reserve`).

        Each claim to allocate, the special claim as its copy for this node, is registered
        as an in-flight allocation under its UID (the temporary one for the special claim),
        so other pods' allocators treat its devices as taken until PreBind has written it.
        """
        try:
            s = read_state(state)
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
            # Upstream `Reserve`: all extended resources from device plugins, no user claim
            # to allocate.
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
            if resource_v1.DELETE_PROTECTION_FINALIZER not in pending.metadata.finalizers:
                pending.metadata.finalizers.append(resource_v1.DELETE_PROTECTION_FINALIZER)
            pending.status.allocation = allocation
            self.dra_manager.signal_claim_pending_allocation(pending.metadata.uid, pending)
        return None

    async def unreserve(
        self, state: framework.CycleState, pod: core_v1.Pod, node_name: str
    ) -> None:
        """Undo Reserve and PreBind; idempotent, errors are only logged (upstream
        `Unreserve`, `unreserveExtendedResourceClaim`).

        In-flight allocations are dropped; user claims already reserved for the pod lose
        that reservation (their allocation stays); a special claim that PreBind created
        is deleted, and the pod's status stops naming it if PreBind wrote it there.
        """
        try:
            s = read_state(state)
        except KeyError:
            return
        for _, claim in s.claims.all_user_claims():
            self.dra_manager.remove_claim_pending_allocation(claim.metadata.uid)
            if claim.status.allocation is not None and claims.is_reserved_for_pod(pod, claim):
                try:
                    await claims.remove_reservation(self.api, claim, pod)
                except errors.NotFound:
                    pass  # deleted meanwhile (its pod went): nothing is reserved any more
                except errors.ApiError as err:
                    # The next attempt gets here again.
                    log.error("unreserve ResourceClaim %s: %s", claims.ref(claim), err)

        claim = s.claims.extended_resource_claim()
        if claim is None:
            return
        self.dra_manager.remove_claim_pending_allocation(
            s.claims.initial_extended_resource_claim_uid
        )
        if claim.metadata.name == extended.SPECIAL_CLAIM_IN_MEMORY_NAME:
            return  # never written
        try:
            await self._writer.delete(claim)
        except errors.ApiError as err:
            log.error("delete ResourceClaim %s: %s", claims.ref(claim), err)
        if s.extended_resource_claim_status_written:
            await self._writer.forget(pod)

    # -- PreBind --

    async def pre_bind(
        self, state: framework.CycleState, pod: core_v1.Pod, node_name: str
    ) -> framework.Status | None:
        """Write what Reserve took: every claim not yet reserved for the pod gets its
        allocation and the reservation; the special claim is created first and named in
        the pod's status (upstream `PreBind`, `bindClaim`). A pod binding without a special
        claim gets a status naming none. Any failure is an Error, and the framework then
        unreserves (upstream `handleBindingCycleError`, `pkg/scheduler/schedule_one.go`)."""
        try:
            s = read_state(state)
        except KeyError as err:
            return framework.Status.error(err)
        for index, claim in s.claims.all():
            if claims.is_reserved_for_pod(pod, claim):
                continue
            try:
                written = await self._bind_claim(s, index, pod, node_name)
            except (errors.ApiError, claims.BindError) as err:
                return framework.Status.error(err)
            # Unreserve must see the written claim (and delete a created special claim).
            s.claims.set(index, written)
        if not s.extended_resource_claim_status_written and self._writer.may_be_named(pod):
            # A claim of an earlier attempt, deleted since: the kubelet must not look for it.
            try:
                await self._writer.clear_pod_status(pod)
            except errors.ApiError as err:
                return framework.Status.error(err)
        if not self.features.device_binding_and_status:
            return None
        return await binding_conditions.pre_bind(
            self.dra_manager, self._recorder, pod, node_name, s, self.binding_timeout
        )

    def _binding_given_up(self, claim: resource_v1.ResourceClaim) -> bool:
        """Binding failed or timed out: PostFilter may deallocate it (upstream `Filter`)."""
        return self.features.device_binding_and_status and binding_conditions.claim_unusable(
            claim, self.binding_timeout, datetime.now(UTC)
        )

    async def _bind_claim(
        self, s: StateData, index: int, pod: core_v1.Pod, node_name: str
    ) -> resource_v1.ResourceClaim:
        """Allocation (if Reserve made one) and reservation of one claim, in the API
        (upstream `bindClaim`)."""
        claim = s.claims.get(index)
        allocation = s.informations_for_claim[index].allocation
        is_extended_resource_claim = claim is s.claims.extended_resource_claim()
        if is_extended_resource_claim and allocation is None and not claim.spec.devices.requests:
            return claim  # device plugins serve everything on this node (upstream `bindClaim`)
        in_flight_uid = claim.metadata.uid
        written: resource_v1.ResourceClaim | None = None
        outcome_unknown = False
        try:
            if (
                is_extended_resource_claim
                and claim.metadata.name == extended.SPECIAL_CLAIM_IN_MEMORY_NAME
            ):
                claim = written = await self._writer.create(pod, node_name, s)
                # From now on Unreserve must delete it, whatever fails next.
                s.claims.set(index, claim)
            try:
                claim = written = await claims.allocate_and_reserve(
                    self.api, claim, allocation, pod
                )
            except errors.Timeout:
                outcome_unknown = True  # no answer: the allocation may have been written
                raise
            if is_extended_resource_claim:
                await self._writer.set_pod_status(pod, claim, node_name, s)
            return claim
        finally:
            if written is not None:
                if is_extended_resource_claim:
                    await self._writer.wait_for(written)
                else:
                    self.dra_manager.assume_claim_after_api_call(written)
            if allocation is not None:
                if outcome_unknown and is_extended_resource_claim:
                    # Unreserve deletes the claim; its devices stay taken until then.
                    self.dra_manager.hold_pending_allocation(
                        in_flight_uid, claim.metadata.namespace, claim.metadata.name
                    )
                self.dra_manager.remove_claim_pending_allocation(in_flight_uid)

    # -- queueing --

    def events_to_register(self) -> list[framework.ClusterEventWithHint]:
        return queueing_hints.events_to_register(
            self.is_schedulable_after_claim_change, self.is_schedulable_after_pod_change
        )

    def is_schedulable_after_claim_change(
        self,
        pod: core_v1.Pod,
        old: resource_v1.ResourceClaim | None,
        new: resource_v1.ResourceClaim | None,
    ) -> framework.QueueingHint:
        return queueing_hints.is_schedulable_after_claim_change(self.dra_manager, pod, old, new)

    def is_schedulable_after_pod_change(
        self, pod: core_v1.Pod, old: core_v1.Pod | None, new: core_v1.Pod
    ) -> framework.QueueingHint:
        return queueing_hints.is_schedulable_after_pod_change(self.dra_manager, pod, old, new)


def _unused_claims_signature(store: claims.ClaimStore) -> Hashable | None:
    """The specs of the pod's claims in order, if none is allocated, reserved or has device
    status; None otherwise (then Filter reads more of each claim than its spec)."""
    specs: list[bytes] = []
    for _, claim in store.all():
        status = claim.status
        if status.allocation is not None or status.reserved_for or status.devices:
            return None
        specs.append(codec.encode(claim.spec))
    return ("claims", *specs)
