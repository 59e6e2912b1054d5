"""A pod's user claims: finding them in the claim cache, checking they can be used, and
writing their allocation and reservation (upstream `PreFilter`, `bindClaim`, `Unreserve`
in `dynamicresources.go`; `claims.go`).

User claims come from `pod.spec.resourceClaims`, by name or, for a template, by the name the
claim controller wrote into `pod.status.resourceClaimStatuses`. `ClaimStore` keeps them in
that order, with the pod's special claim (see `extended`) last.

Upstream: `pkg/scheduler/framework/plugins/dynamicresources/claims.go`, and
`foreachPodResourceClaim`, `validateDeviceClass` and `bindClaim` of `dynamicresources.go`;
`k8s.io/client-go/util/retry` for `retry_on_conflict`, and `retry.OnError` with
`schedutil.RetriableWithConflict` (`pkg/scheduler/util/utils.go`) for `retry_on_error`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Container, Iterator
from typing import TypeVar

import msgspec

from drasim.common import codec, errors, tables
from drasim.common.api import core_v1, resource_v1
from drasim.common.client import ApiClient
from drasim.scheduler import framework
from drasim.scheduler.dra_manager import DraManager

__all__ = [
    "BindError",
    "ClaimStore",
    "NotSchedulable",
    "allocate_and_reserve",
    "can_be_reserved",
    "is_reserved_for_pod",
    "pod_resource_claims",
    "remove_reservation",
    "retriable_with_conflict",
    "retry_on_conflict",
    "retry_on_error",
    "validate_device_classes",
]

# client-go's `retry.DefaultRetry`: 5 attempts, 10 ms apart.
_CONFLICT_RETRY_STEPS = 5
_CONFLICT_RETRY_DELAY = 0.01
# client-go's `retry.DefaultBackoff`: 4 attempts, the first pause 10 ms, each next 5 times
# longer (its 10 % jitter left out).
_BACKOFF_STEPS = 4
_BACKOFF_FIRST_DELAY = 0.01
_BACKOFF_FACTOR = 5.0

T = TypeVar("T")


class NotSchedulable(Exception):
    """A pod's claim cannot be used yet (missing, being deleted, not the pod's own)."""


class BindError(Exception):
    """PreBind cannot finish, for a reason that is not an API error."""


class ClaimStore:
    """The pod's user claims in `spec.resourceClaims` order, then the special claim, if any
    (upstream `newClaimStore`, `claims.go`).

    Claims come from the cache and are read-only; PreBind replaces an entry with what the
    API answered, so Unreserve sees the written claim. The special claim's first UID is
    kept: its in-flight allocation is registered under it (the temporary UID, upstream
    `getInitialExtendedResourceClaimUID`).
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


# --- finding and checking ----------------------------------------------------------------


def pod_resource_claims(
    dra_manager: DraManager, pod: core_v1.Pod
) -> list[resource_v1.ResourceClaim]:
    """The claims of `pod.spec.resourceClaims` from the claim cache (upstream
    `foreachPodResourceClaim`); raises NotSchedulable when one cannot be used."""
    claims = []
    for pod_claim in pod.spec.resource_claims:
        name, must_check_owner = _claim_name(pod, pod_claim)
        if name is None:
            continue  # the template needed no claim
        claim = dra_manager.get_claim(pod.metadata.namespace, name)
        if claim is None:
            raise NotSchedulable(f'resourceclaim.resource.k8s.io "{name}" not found')
        if claim.metadata.deletion_timestamp is not None:
            raise NotSchedulable(f'resourceclaim "{name}" is being deleted')
        if must_check_owner and not _is_for_pod(pod, claim):
            raise NotSchedulable(
                f"ResourceClaim {ref(claim)} was not created for pod "
                f"{pod.metadata.namespace}/{pod.metadata.name} (pod is not owner)"
            )
        claims.append(claim)
    return claims


def validate_device_classes(
    claim: resource_v1.ResourceClaim, classes: Container[str], *, prioritized_list: bool = True
) -> framework.Status | None:
    """Every request names a class that exists (upstream `validateDeviceClass`); one with
    subrequests needs the DRAPrioritizedList gate (`prioritized_list`)."""
    for request in claim.spec.devices.requests:
        if request.exactly is not None:
            wanted = [(request.name, request.exactly.device_class_name)]
        elif request.first_available:
            if not prioritized_list:
                return framework.Status.unresolvable(
                    f"resource claim {ref(claim)}, request {request.name}: has subrequests, "
                    "but the DRAPrioritizedList feature is disabled"
                )
            wanted = [
                (f"{request.name}/{sub.name}", sub.device_class_name)
                for sub in request.first_available
            ]
        else:
            return framework.Status.unresolvable(
                f"resource claim {ref(claim)}, request {request.name}: unknown request type"
            )
        for request_name, class_name in wanted:
            if not class_name:
                return framework.Status.error(f"request {request_name}: unsupported request type")
            if class_name not in classes:
                # Unschedulable until a DeviceClass event requeues the pod.
                return framework.Status.unresolvable(
                    f"request {request_name}: device class {class_name} does not exist"
                )
    return None


def _claim_name(pod: core_v1.Pod, pod_claim: core_v1.PodResourceClaim) -> tuple[str | None, bool]:
    """The claim's name and whether the pod must own it (upstream `resourceclaim.Name`);
    None when the template needed no claim. Raises NotSchedulable."""
    if pod_claim.resource_claim_name is not None:
        return pod_claim.resource_claim_name, False
    if pod_claim.resource_claim_template_name is not None:
        for status in pod.status.resource_claim_statuses:
            if status.name == pod_claim.name:
                return status.resource_claim_name, True
        raise NotSchedulable(f'pod "{pod_ref(pod)}": ResourceClaim not created yet')
    raise NotSchedulable(
        f'pod "{pod_ref(pod)}", spec.resourceClaim "{pod_claim.name}": '
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


def can_be_reserved(claim: resource_v1.ResourceClaim) -> bool:
    return len(claim.status.reserved_for) < resource_v1.RESERVED_FOR_MAX_SIZE


def is_reserved_for_pod(pod: core_v1.Pod, claim: resource_v1.ResourceClaim) -> bool:
    return any(r.uid == pod.metadata.uid for r in claim.status.reserved_for)


# --- writing -----------------------------------------------------------------------------


async def allocate_and_reserve(
    api: ApiClient,
    claim: resource_v1.ResourceClaim,
    allocation: resource_v1.AllocationResult | None,
    pod: core_v1.Pod,
) -> resource_v1.ResourceClaim:
    """Finalizer (a normal update), allocation and `reservedFor` (a status update),
    re-reading the claim after a conflict (upstream `bindClaim`)."""
    claim = codec.clone(claim)

    async def attempt(refresh: bool) -> resource_v1.ResourceClaim:
        nonlocal claim
        if refresh:
            try:
                claim = await api.get(
                    resource_v1.ResourceClaim,
                    claim.metadata.name,
                    namespace=claim.metadata.namespace,
                )
            except errors.ApiError as err:
                raise wrapped(err, f"get updated claim {ref(claim)} after conflict") from err
        if claim.metadata.deletion_timestamp is not None:
            raise BindError(f"claim {ref(claim)} got deleted in the meantime")
        if allocation is not None:
            if claim.status.allocation is not None:
                raise BindError(f"claim {ref(claim)} got allocated elsewhere in the meantime")
            if resource_v1.DELETE_PROTECTION_FINALIZER not in claim.metadata.finalizers:
                # The finalizer needs a normal update; the status update cannot set it.
                claim.metadata.finalizers.append(resource_v1.DELETE_PROTECTION_FINALIZER)
                try:
                    claim = await api.update(claim)
                except errors.ApiError as err:
                    raise wrapped(err, f"add finalizer to claim {ref(claim)}") from err
            claim.status.allocation = allocation
        # As upstream's PreBind with 1.37's default gates (DRADeviceBindingConditions,
        # DRAResourceClaimDeviceStatus): the allocation carries when it was made, the clock
        # of a binding timeout; a claim reserved without one must still be allocated.
        if claim.status.allocation is None:
            raise BindError(f"claim {ref(claim)} got deallocated elsewhere in the meantime")
        if claim.status.allocation.allocation_timestamp is None:
            claim.status.allocation = msgspec.structs.replace(
                claim.status.allocation, allocation_timestamp=tables.format_time()
            )
        claim.status.reserved_for.append(
            resource_v1.ResourceClaimConsumerReference(
                resource="pods", name=pod.metadata.name, uid=pod.metadata.uid
            )
        )
        try:
            return await api.update_status(claim)
        except errors.ApiError as err:
            what = "allocation and reservation" if allocation is not None else "reservation"
            raise wrapped(err, f"add {what} to claim {ref(claim)}") from err

    return await retry_on_conflict(attempt)


async def remove_reservation(
    api: ApiClient, claim: resource_v1.ResourceClaim, pod: core_v1.Pod
) -> None:
    """Drop the pod from `status.reservedFor` (upstream patches it away)."""

    async def attempt(refresh: bool) -> None:
        current = claim
        if refresh:
            current = await api.get(
                resource_v1.ResourceClaim,
                claim.metadata.name,
                namespace=claim.metadata.namespace,
            )
            if current.metadata.uid != claim.metadata.uid:
                return  # replaced by another claim of that name
        updated = codec.clone(current)
        updated.status.reserved_for = [
            r for r in updated.status.reserved_for if r.uid != pod.metadata.uid
        ]
        await api.update_status(updated)

    await retry_on_conflict(attempt)


async def retry_on_conflict(attempt: Callable[[bool], Awaitable[T]]) -> T:
    """client-go's `retry.RetryOnConflict`; `attempt(refresh)` must re-read the object
    when `refresh` is true, i.e. on every try after the first."""
    for step in range(_CONFLICT_RETRY_STEPS - 1):
        try:
            return await attempt(step > 0)
        except errors.Conflict:
            await asyncio.sleep(_CONFLICT_RETRY_DELAY)
    return await attempt(True)


def retriable_with_conflict(err: errors.ApiError) -> bool:
    """What the scheduler writes again as it is (upstream `RetriableWithConflict`): the
    server failed or was unavailable, or the object changed meanwhile."""
    return isinstance(err, errors.InternalError | errors.ServiceUnavailable | errors.Conflict)


async def retry_on_error(
    attempt: Callable[[], Awaitable[T]], retriable: Callable[[errors.ApiError], bool]
) -> T:
    """client-go's `retry.OnError(retry.DefaultBackoff, retriable, attempt)`: the same
    request again while it fails retriably, the last error raised once the tries are spent."""
    delay = _BACKOFF_FIRST_DELAY
    for _ in range(_BACKOFF_STEPS - 1):
        try:
            return await attempt()
        except errors.ApiError as err:
            if not retriable(err):
                raise
        await asyncio.sleep(delay)
        delay *= _BACKOFF_FACTOR
    return await attempt()


def wrapped(err: errors.ApiError, context: str) -> errors.ApiError:
    """The same kind of API error with `context` in front, as Go's `fmt.Errorf("%s: %w")`,
    so that a retry still recognises a Conflict."""
    return type(err)(
        f"{context}: {err.message}",
        kind=err.kind,
        name=err.name,
        group=err.group,
        causes=err.causes,
    )


def ref(claim: resource_v1.ResourceClaim) -> str:
    return f"{claim.metadata.namespace}/{claim.metadata.name}"


def pod_ref(pod: core_v1.Pod) -> str:
    return f"{pod.metadata.namespace}/{pod.metadata.name}"
