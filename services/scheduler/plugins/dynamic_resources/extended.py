"""The extended-resource path of DynamicResources (KEP-5004): the extended resources of a
pod that DRA serves on a node go into one special ResourceClaim, made for that node and
written in PreBind.

What each extension point does for it:

- PreFilter (`pre_filter_extended_resources`): for a pod asking for an extended resource
  that a DeviceClass maps, find the special claim an earlier attempt left (annotated and
  controlled by the pod, `is_special_claim_for`), else make one in memory
  (`new_special_claim`): named `<extended-resources>`, no requests, a temporary UID.
- Filter (`filter_extended_resources`): a leftover claim rejects every node, for PostFilter
  to delete. Otherwise, which names the node's device plugins serve (its allocatable) and
  which DRA serves; for those, a copy of the claim with their device requests and the
  container → request mappings (`device_requests_for_pod`), which the plugin allocates
  together with the user claims.
- PostFilter: a leftover special claim is deleted (`ExtendedResourceClaimWriter.delete`)
  and the pod's status stops naming it.
- Reserve: the node's claim is registered as an in-flight allocation under the temporary
  UID, so no other pod gets its devices.
- Unreserve: the in-flight allocation goes; a claim PreBind created is deleted, and the
  pod's status stops naming it.
- PreBind: the claim is created from `generateName` (`ExtendedResourceClaimWriter.create`),
  its allocation and reservation written as for any claim, the pod's
  `status.extendedResourceClaimStatus` names it with the mappings (`set_pod_status`), and
  PreBind waits until the claim cache holds it (`wait_for`). A pod binding without a
  special claim gets a status naming none (`clear_pod_status`).
- Queueing hints: the deletion of the pod's special claim requeues it (`queueing_hints`).

That status must never name a claim that is gone when the pod binds: the kubelet would
retry "ResourceClaim not found" forever. Upstream leaves it behind when Unreserve or
PostFilter deletes the claim; only a later PreBind on a node where DRA serves the pod
overwrites it. drasim clears it there, best effort, as the KEP's Unreserve and PostFilter
describe, and PreBind makes sure of it before a pod binds without a special claim.

Upstream: `pkg/scheduler/framework/plugins/dynamicresources/extendeddynamicresources.go`.
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from collections.abc import Callable, Sequence

from drasim.common import codec, errors, metrics, resourceclaim_metrics
from drasim.common.api import core_v1, meta_v1, resource_v1, resources
from drasim.common.client import ApiClient
from drasim.scheduler import framework
from drasim.scheduler.dra_manager import DraManager
from drasim.scheduler.plugins.dynamic_resources import claims
from drasim.scheduler.plugins.dynamic_resources.state import NodeExtendedClaim, StateData

__all__ = [
    "ASSUME_EXTENDED_RESOURCE_TIMEOUT_DEFAULT_SECONDS",
    "SPECIAL_CLAIM_GENERATE_NAME_SUFFIX",
    "SPECIAL_CLAIM_IN_MEMORY_NAME",
    "ExtendedResourceClaimWriter",
    "device_requests_for_pod",
    "filter_extended_resources",
    "is_special_claim_for",
    "new_special_claim",
    "pre_filter_extended_resources",
    "requests_signature",
]

log = logging.getLogger(__name__)

# Deliberately not a valid object name: a claim with it has not been created yet (upstream
# `specialClaimInMemName`).
SPECIAL_CLAIM_IN_MEMORY_NAME = "<extended-resources>"
# The API server appends random characters to `<pod name>` + this (upstream
# `preFilterExtendedResources`; `GenerateName` in
# `staging/src/k8s.io/apiserver/pkg/storage/names/generate.go`).
SPECIAL_CLAIM_GENERATE_NAME_SUFFIX = "-extended-resources-"

# How long PreBind waits for the created special claim to reach the claim cache (upstream
# `AssumeExtendedResourceTimeoutDefaultSeconds`).
ASSUME_EXTENDED_RESOURCE_TIMEOUT_DEFAULT_SECONDS = 120.0

# Reasons, spelled as upstream's `filterExtendedResources`.
REASON_CANNOT_SCHEDULE_EXTENDED_RESOURCE_CLAIM = "cannot schedule extended resource claim"
REASON_CANNOT_FIT_RESOURCE = "cannot fit resource"

ResolveDeviceClass = Callable[[str], resource_v1.DeviceClass | None]


def is_special_claim_for(claim: resource_v1.ResourceClaim, pod: core_v1.Pod) -> bool:
    """The pod's special claim: annotated `"true"` and controlled by this very pod (name and
    UID), as upstream's `findExtendedResourceClaim` checks."""
    if (
        claim.metadata.annotations.get(resource_v1.EXTENDED_RESOURCE_CLAIM_ANNOTATION)
        != resource_v1.EXTENDED_RESOURCE_CLAIM_ANNOTATION_VALUE
    ):
        return False
    return any(
        ref.controller and ref.name == pod.metadata.name and ref.uid == pod.metadata.uid
        for ref in claim.metadata.owner_references
    )


def new_special_claim(pod: core_v1.Pod) -> resource_v1.ResourceClaim:
    """The in-memory special claim of upstream's `preFilterExtendedResources`: no requests
    yet (Filter adds them per node),
    and a random UID that keys its in-flight allocation until PreBind creates it."""
    return resource_v1.ResourceClaim(
        metadata=meta_v1.ObjectMeta(
            name=SPECIAL_CLAIM_IN_MEMORY_NAME,
            generate_name=pod.metadata.name + SPECIAL_CLAIM_GENERATE_NAME_SUFFIX,
            namespace=pod.metadata.namespace,
            uid=str(uuid.uuid4()),
            annotations={
                resource_v1.EXTENDED_RESOURCE_CLAIM_ANNOTATION: (
                    resource_v1.EXTENDED_RESOURCE_CLAIM_ANNOTATION_VALUE
                )
            },
            owner_references=[resource_v1.pod_controller_ref(pod)],
        )
    )


def pre_filter_extended_resources(
    dra_manager: DraManager, pod: core_v1.Pod, s: StateData
) -> resource_v1.ResourceClaim | None:
    """The special claim (upstream `preFilterExtendedResources`): None without a DRA-backed
    request; else the
    claim an earlier attempt left, or a new in-memory one. Keeps the pod's DRA-capable
    names and their classes in `s.extended_resources` for Filter."""
    requested = {
        name: dra_manager.resolve_device_class(name)
        for name, quantity in resources.pod_requests(pod).items()
        if not quantity.is_zero() and resources.is_dra_capable_name(name)
    }
    if all(cls is None for cls in requested.values()):
        return None
    s.extended_resources = requested
    # Upstream `findExtendedResourceClaim`: never reused; Filter rejects it and PostFilter
    # deletes it.
    for claim in dra_manager.claims_controlled_by(pod.metadata.uid):
        if is_special_claim_for(claim, pod):
            return claim
    return new_special_claim(pod)


def filter_extended_resources(
    s: StateData, pod: core_v1.Pod, node_info: framework.NodeInfo
) -> tuple[
    resource_v1.ResourceClaim | None,
    list[core_v1.ContainerExtendedResourceRequest],
    framework.Status | None,
]:
    """The special claim for this node and its request mappings (upstream
    `filterExtendedResources`); None when DRA serves none of the pod's extended resources
    here."""
    claim = s.claims.extended_resource_claim()
    if claim is None:
        return None, [], None
    if claim.metadata.name != SPECIAL_CLAIM_IN_MEMORY_NAME:
        # Left over from an earlier attempt (it has requests, the in-memory
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
            dra_names.add(name)  # no device plugin capacity, DRA serves it
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


def _node_extended_claim(
    claim: resource_v1.ResourceClaim,
    pod: core_v1.Pod,
    classes: dict[str, resource_v1.DeviceClass | None],
    dra_names: set[str],
) -> NodeExtendedClaim:
    """A copy of the in-memory claim with the requests for these names; no claim when they
    add up to no request (non-integer quantities, see `_request_and_mappings`)."""
    requests, mappings = device_requests_for_pod(pod, classes.get, dra_names)
    if not requests:
        return None, []
    node_claim = codec.clone(claim)
    node_claim.spec.devices.requests = requests
    return node_claim, mappings


def device_requests_for_pod(
    pod: core_v1.Pod,
    resolve: ResolveDeviceClass,
    dra_names: set[str] | None = None,
) -> tuple[list[resource_v1.DeviceRequest], list[core_v1.ContainerExtendedResourceRequest]]:
    """The special claim's device requests and the request mappings (upstream
    `createRequestsAndMappings`).

    `resolve` maps a resource name to its DeviceClass (`ExtendedResourceCache`). `dra_names`
    are the names that DRA serves on the node at hand (upstream `filterExtendedResources`);
    by default every DRA-capable name the pod
    requests that resolves to a class.

    Long-lived containers (regular ones and sidecars) each get a request for their full
    quantity. A short-lived init container first reuses the requests of long-lived
    containers that start after it (it runs before them, so their devices are free), and asks
    only for what is still missing; of those extra requests only the largest per resource is
    kept, since init containers run one at a time.
    """
    if dra_names is None:
        dra_names = {
            name
            for name, quantity in resources.pod_requests(pod).items()
            if not quantity.is_zero()
            and resources.is_dra_capable_name(name)
            and resolve(name) is not None
        }
    containers = pod.spec.all_containers()
    init_count = len(pod.spec.init_containers)
    short_lived = [
        i for i in range(init_count) if not resources.is_restartable_init_container(containers[i])
    ]
    long_lived = [i for i in range(len(containers)) if i not in short_lived]

    requests: list[resource_v1.DeviceRequest] = []
    mappings: list[core_v1.ContainerExtendedResourceRequest] = []
    for resource_name in sorted(dra_names):
        cls = resolve(resource_name)
        if cls is None:
            continue
        # Indexed by container position; short-lived containers reuse entries after theirs.
        long_lived_requests: list[resource_v1.DeviceRequest | None] = [None] * len(containers)
        long_lived_mappings: list[core_v1.ContainerExtendedResourceRequest] = []
        for i in long_lived:
            request, container_mappings = _request_and_mappings(
                i, containers[i], resource_name, cls.metadata.name, ()
            )
            long_lived_requests[i] = request
            long_lived_mappings += container_mappings

        largest: resource_v1.DeviceRequest | None = None
        short_lived_names: set[str] = set()
        short_lived_mappings: list[core_v1.ContainerExtendedResourceRequest] = []
        for i in short_lived:
            request, container_mappings = _request_and_mappings(
                i, containers[i], resource_name, cls.metadata.name, long_lived_requests[i:]
            )
            if request is not None:
                short_lived_names.add(request.name)
                if largest is None or _count(largest) < _count(request):
                    largest = request
            short_lived_mappings += container_mappings

        if largest is not None:
            requests.append(largest)
            if len(short_lived_names) > 1:
                # Upstream `createRequestsAndMappings`: every init container is served by the
                # one kept short-lived request.
                for mapping in short_lived_mappings:
                    if mapping.request_name in short_lived_names:
                        mapping.request_name = largest.name
        requests += [r for r in long_lived_requests if r is not None]
        mappings += long_lived_mappings + short_lived_mappings

    requests.sort(key=lambda r: r.name)
    return requests, mappings


def requests_signature(pod: core_v1.Pod) -> tuple[tuple[bool, bool, bytes], ...]:
    """What `requests_and_mappings` reads of the pod but the containers' names: per
    container in order, whether it is an init container, whether it restarts (a sidecar),
    and its resources. Pods alike in this get the same special claim requests."""
    init_count = len(pod.spec.init_containers)
    return tuple(
        (i < init_count, resources.is_restartable_init_container(c), codec.encode(c.resources))
        for i, c in enumerate(pod.spec.all_containers())
    )


def _request_and_mappings(
    index: int,
    container: core_v1.Container,
    resource_name: str,
    class_name: str,
    reusable: Sequence[resource_v1.DeviceRequest | None],
) -> tuple[resource_v1.DeviceRequest | None, list[core_v1.ContainerExtendedResourceRequest]]:
    """One container's request for one resource (upstream `createResourceRequestAndMappings`).

    Requests in `reusable` are mapped first until they cover the container's need; a new
    request is made only for the rest. No request and no mapping for a zero or non-integer
    quantity (upstream `createResourceRequestAndMappings`).
    """
    container_reqs = resources.container_requests(container)
    quantity = container_reqs.get(resource_name)
    # Upstream converts with AsInt64, which refuses a whole number past int64, and so makes
    # no request: the pod would run with none of its devices. Here such a number saturates,
    # as upstream's Value() does, and asks for more devices than a claim may hold, which
    # the allocator refuses with an error.
    need = None
    if quantity is not None and quantity.value.denominator == 1:
        need = quantity.saturated_int64()
    if not need:
        return None, []
    mappings: list[core_v1.ContainerExtendedResourceRequest] = []
    covered = 0
    for request in reusable:
        if request is None:
            continue
        covered += _count(request)
        mappings.append(_mapping(container, resource_name, request.name))
        if covered >= need:
            return None, mappings
    # Upstream `createResourceRequestAndMappings`: j is the position among all of the
    # container's request keys, cpu included.
    name = f"container-{index}-request-{sorted(container_reqs).index(resource_name)}"
    request = resource_v1.DeviceRequest(
        name=name,
        exactly=resource_v1.ExactDeviceRequest(
            device_class_name=class_name,
            allocation_mode=resource_v1.ALLOCATION_MODE_EXACT_COUNT,
            count=need - covered,
        ),
    )
    mappings.append(_mapping(container, resource_name, name))
    return request, mappings


def _mapping(
    container: core_v1.Container, resource_name: str, request_name: str
) -> core_v1.ContainerExtendedResourceRequest:
    return core_v1.ContainerExtendedResourceRequest(
        container_name=container.name, resource_name=resource_name, request_name=request_name
    )


def _count(request: resource_v1.DeviceRequest) -> int:
    # Every request made here is an ExactCount one.
    return request.exactly.count if request.exactly is not None else 0


# --- writing -----------------------------------------------------------------------------


class ExtendedResourceClaimWriter:
    """The API writes of the special claim: creating it, deleting it, and the pod's
    `status.extendedResourceClaimStatus` naming it (upstream `deleteClaim`,
    `createExtendedResourceClaimInAPI`, `patchPodExtendedResourceClaimStatus`).

    `resourceclaim_creates` counts create attempts as upstream's
    `dynamic_resource_allocation_resourceclaim_creates_total` (`ResourceClaimCreate`; the
    scheduler serves it, `drasim.common.resourceclaim_metrics`). `assume_timeout` bounds the
    wait for a created claim to reach the claim cache (upstream
    `waitForExtendedClaimInAssumeCache`).
    """

    def __init__(
        self,
        api: ApiClient,
        dra_manager: DraManager,
        *,
        assume_timeout: float,
        resourceclaim_creates: metrics.CounterVec | None = None,
    ) -> None:
        self.api = api
        self.dra_manager = dra_manager
        self.assume_timeout = assume_timeout
        self.resourceclaim_creates = (
            resourceclaim_creates or resourceclaim_metrics.new_creates_counter()
        )
        # UIDs of pods whose `status.extendedResourceClaimStatus` may still name a claim
        # this scheduler deleted, because clearing it failed: their copy in the informer
        # may not show the name yet, PreBind must clear it all the same.
        self._stale_pod_status: set[str] = set()

    async def create(
        self, pod: core_v1.Pod, node_name: str, s: StateData
    ) -> resource_v1.ResourceClaim:
        """Create this node's special claim; the API server names it from `generateName`
        (upstream `createExtendedResourceClaimInAPI`). The allocation is written afterwards,
        as for any claim."""
        node_allocation = s.node_allocations.get(node_name)
        if node_allocation is None or node_allocation.extended_resource_claim is None:
            raise claims.BindError(f"extended resource claim not found for node {node_name}")
        claim = codec.clone(node_allocation.extended_resource_claim)
        claim.status.allocation = None
        claim.metadata.name = ""
        claim.metadata.uid = ""
        try:
            created = await resourceclaim_metrics.create_counted(
                self.api, claim, self.resourceclaim_creates
            )
        except errors.ApiError as err:
            where = f"{claim.metadata.namespace}/{claim.metadata.generate_name}"
            raise claims.wrapped(err, f"create claim for extended resources {where}") from err
        log.debug(
            "created claim %s for extended resources of pod %s",
            claims.ref(created),
            claims.pod_ref(pod),
        )
        return created

    async def set_pod_status(
        self, pod: core_v1.Pod, claim: resource_v1.ResourceClaim, node_name: str, s: StateData
    ) -> None:
        """`pod.status.extendedResourceClaimStatus` names the claim and maps containers to
        its requests (upstream `patchPodExtendedResourceClaimStatus`); only that field
        changes."""
        node_allocation = s.node_allocations.get(node_name)
        mappings = node_allocation.request_mappings if node_allocation is not None else []
        if not mappings:
            raise claims.BindError(
                f"nil or empty request mappings, no update of pod {claims.pod_ref(pod)} "
                "ExtendedResourceClaimStatus"
            )
        status = core_v1.PodExtendedResourceClaimStatus(
            request_mappings=mappings, resource_claim_name=claim.metadata.name
        )
        s.extended_resource_claim_status_written = True
        await self._patch_pod_status(pod, codec.to_builtins(status), "update")
        # It names a claim that exists now; Unreserve clears it if the binding fails.
        self._stale_pod_status.discard(pod.metadata.uid)

    def may_be_named(self, pod: core_v1.Pod) -> bool:
        """The pod's status names a special claim, as far as this scheduler knows."""
        return (
            pod.status.extended_resource_claim_status is not None
            or pod.metadata.uid in self._stale_pod_status
        )

    async def clear_pod_status(self, pod: core_v1.Pod) -> None:
        """Remove `status.extendedResourceClaimStatus` (only that field). Until that
        succeeds the pod is remembered, so that PreBind tries again before it binds. A pod
        gone meanwhile has nothing to clear."""
        uid = pod.metadata.uid
        self._stale_pod_status.add(uid)
        with contextlib.suppress(errors.NotFound):
            await self._patch_pod_status(pod, None, "clear")
        self._stale_pod_status.discard(uid)

    async def _patch_pod_status(self, pod: core_v1.Pod, value: object, what: str) -> None:
        """A merge patch of `status.extendedResourceClaimStatus` alone (None removes it),
        sent again after a conflict or a server error, as upstream's `PatchPodStatus`.

        It carries no `resourceVersion`: upstream added one (kubernetes#139602) and took it
        out again before 1.37 (kubernetes#140177). The patch touches one field only the
        scheduler writes, so another writer's change in between is no reason to fail.
        """
        patch = {"status": {"extendedResourceClaimStatus": value}}

        async def attempt() -> None:
            await self.api.patch(
                core_v1.Pod,
                pod.metadata.name,
                patch,
                namespace=pod.metadata.namespace,
                subresource="status",
            )

        try:
            await claims.retry_on_error(attempt, claims.retriable_with_conflict)
        except errors.ApiError as err:
            raise claims.wrapped(
                err, f"{what} pod {claims.pod_ref(pod)} ExtendedResourceClaimStatus"
            ) from err

    async def forget(self, pod: core_v1.Pod) -> None:
        """After deleting the pod's special claim: the status stops naming it, best effort
        (an error is logged; PreBind clears it before the pod binds without a claim)."""
        try:
            await self.clear_pod_status(pod)
        except errors.ApiError as err:
            log.error("%s", err.message)

    async def wait_for(self, claim: resource_v1.ResourceClaim) -> None:
        """Wait until the claim cache holds what was written (upstream
        `waitForExtendedClaimInAssumeCache`). A timeout is
        only logged: the claim exists and the informer brings it eventually."""
        arrived = await self.dra_manager.wait_for_claim(
            claim.metadata.namespace,
            claim.metadata.name,
            claim.metadata.resource_version,
            self.assume_timeout,
        )
        if not arrived:
            log.info(
                "claim %s not in the claim cache after %.0fs",
                claims.ref(claim),
                self.assume_timeout,
            )

    async def delete(self, claim: resource_v1.ResourceClaim) -> None:
        """Remove the delete-protection finalizer (an update, re-reading the claim after a
        conflict), then delete; a claim found gone on the way is fine (upstream
        `deleteClaim`): its
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
                f
                for f in current.metadata.finalizers
                if f != resource_v1.DELETE_PROTECTION_FINALIZER
            ]
            await self.api.update(current)

        try:
            await claims.retry_on_conflict(attempt)
        except errors.NotFound:
            return
        log.debug("deleting ResourceClaim %s", claims.ref(claim))
        with contextlib.suppress(errors.NotFound):
            await self.api.delete(
                resource_v1.ResourceClaim, claim.metadata.name, namespace=claim.metadata.namespace
            )
