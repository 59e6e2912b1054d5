"""Binding conditions (KEP-5007): a device whose allocation result carries
`bindingConditions` is usable only once its driver (or a controller beside it) has set
each of those conditions True in the claim's `status.devices`; a True
`bindingFailureCondition`, or the binding timeout counted from the allocation's
`allocationTimestamp`, gives the allocation up.

PreBind waits here, in the pod's binding task, so the scheduling loop goes on meanwhile:
where upstream polls the claim cache every five seconds, drasim wakes on every change of
the pod's claims in the DraManager. After a failure or the timeout the framework
unreserves the pod; the next attempt's Filter finds the claim unusable on every node
(`claim_unusable`) and PostFilter deallocates it, so that the retry may pick other devices.

Upstream: `isClaimReadyForBinding`, `isClaimTimeout`, `isPodReadyForBinding`,
`hasBindingConditions` and the wait in `PreBind`, in
`pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go`;
`DynamicResourcesBindingTimeoutDefault` in `pkg/scheduler/apis/config/types_pluginargs.go`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime

from drasim.common import errors, events, tables
from drasim.common.api import core_v1, meta_v1, resource_v1
from drasim.scheduler import framework
from drasim.scheduler.dra_manager import DraManager
from drasim.scheduler.plugins.dynamic_resources.state import StateData

__all__ = [
    "BINDING_TIMEOUT_DEFAULT_SECONDS",
    "EVENT_REASON_PENDING",
    "NOT_BOUND",
    "BindingFailed",
    "BindingTimeout",
    "claim_unusable",
    "has_binding_conditions",
    "is_claim_ready_for_binding",
    "is_claim_timeout",
    "pending_message",
    "pre_bind",
    "wait_for_binding_conditions",
    "wait_in_pre_bind",
]

log = logging.getLogger(__name__)

BINDING_TIMEOUT_DEFAULT_SECONDS = 600.0
"""Upstream's `DynamicResourcesArgs.bindingTimeout` default."""

EVENT_REASON_PENDING = "BindingConditionsPending"


class BindingFailed(Exception):
    """A binding failure condition of an allocated device is True (upstream
    `ErrDeviceBindingFailed`)."""

    def __init__(self, claim: resource_v1.ResourceClaim, condition: meta_v1.Condition) -> None:
        # Go's %q: a double-quoted string with escapes.
        quoted = '"' + condition.message.replace("\\", "\\\\").replace('"', '\\"') + '"'
        super().__init__(
            f"device binding failed: claim={claim.metadata.name}, "
            f"reason={condition.reason}, message={quoted}"
        )


class BindingTimeout(Exception):
    """The binding conditions did not all become True in time (upstream
    `ErrDeviceBindingTimeout`)."""

    def __init__(self, detail: str) -> None:
        super().__init__(f"device binding timeout: {detail}")


NOT_BOUND = (BindingFailed, BindingTimeout, LookupError)
"""What the wait raises when PreBind must fail."""


def pending_message(node_name: str) -> str:
    """The note of the BindingConditionsPending event PreBind records on the pod."""
    return f"waiting for binding conditions for device on node {node_name}"


def has_binding_conditions(claims: Iterable[resource_v1.ResourceClaim]) -> bool:
    """Whether any allocated device of these claims has binding conditions."""
    return any(
        result.binding_conditions
        for claim in claims
        if claim.status.allocation is not None
        for result in claim.status.allocation.devices.results
    )


def _device_status(
    claim: resource_v1.ResourceClaim, result: resource_v1.DeviceRequestAllocationResult
) -> resource_v1.AllocatedDeviceStatus | None:
    for status in claim.status.devices:
        if (status.driver, status.pool, status.device) == (
            result.driver,
            result.pool,
            result.device,
        ):
            return status
    return None


def _condition(conditions: Sequence[meta_v1.Condition], type_: str) -> meta_v1.Condition | None:
    return next((c for c in conditions if c.type == type_), None)


def is_claim_ready_for_binding(claim: resource_v1.ResourceClaim) -> bool:
    """True when every binding condition of every allocated device is True (also when
    there are none); raises BindingFailed when a binding failure condition is True."""
    allocation = claim.status.allocation
    if allocation is None:
        return False
    for result in allocation.devices.results:
        if not result.binding_conditions:
            continue
        status = _device_status(claim, result)
        if status is None:
            return False
        for type_ in result.binding_failure_conditions:
            failed = _condition(status.conditions, type_)
            if failed is not None and failed.status == "True":
                raise BindingFailed(claim, failed)
        for type_ in result.binding_conditions:
            cond = _condition(status.conditions, type_)
            if cond is None or cond.status != "True":
                return False
    return True


def is_claim_timeout(claim: resource_v1.ResourceClaim, timeout: float, now: datetime) -> bool:
    """Whether a device of the claim with binding conditions was allocated longer than
    `timeout` seconds before `now`."""
    allocation = claim.status.allocation
    if allocation is None or allocation.allocation_timestamp is None:
        return False
    if not any(result.binding_conditions for result in allocation.devices.results):
        return False
    allocated = tables.parse_time(allocation.allocation_timestamp)
    return allocated is not None and (now - allocated).total_seconds() > timeout


def claim_unusable(claim: resource_v1.ResourceClaim, timeout: float, now: datetime) -> bool:
    """Filter's check of an allocated claim: its binding failed or timed out, so no node
    can use it and PostFilter should deallocate it."""
    if claim.status.allocation is None:
        return False
    try:
        ready = is_claim_ready_for_binding(claim)
    except BindingFailed:
        return True
    return not ready and is_claim_timeout(claim, timeout, now)


def _check(
    dra_manager: DraManager, claims: Sequence[resource_v1.ResourceClaim], timeout: float
) -> tuple[bool, list[resource_v1.ResourceClaim]]:
    """Upstream `isPodReadyForBinding` over the claim cache: (ready, the claims as cached)."""
    current = []
    ready = True
    now = datetime.now(UTC)
    for claim in claims:
        if claim.status.allocation is None:
            # Nothing to wait for (the special claim when device plugins serve the pod).
            current.append(claim)
            continue
        cached = dra_manager.get_claim(claim.metadata.namespace, claim.metadata.name)
        if cached is None:
            raise LookupError(f'resourceclaim.resource.k8s.io "{claim.metadata.name}" not found')
        current.append(cached)
        if ready and not is_claim_ready_for_binding(cached):
            if is_claim_timeout(cached, timeout, now):
                raise BindingTimeout(f"claim={cached.metadata.name}")
            ready = False
    return ready, current


async def wait_for_binding_conditions(
    dra_manager: DraManager, claims: Sequence[resource_v1.ResourceClaim], timeout: float
) -> list[resource_v1.ResourceClaim]:
    """Wait until the claims are ready for binding, woken by every change the claim cache
    sees; the claims as last seen. Raises BindingFailed, BindingTimeout, or LookupError
    when a claim is gone."""
    deadline = time.monotonic() + timeout
    while True:
        ready, current = _check(dra_manager, claims, timeout)
        if ready:
            return current
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise BindingTimeout("context deadline exceeded")
        await dra_manager.wait_for_claim_change(
            [(c.metadata.namespace, c.metadata.name) for c in current], remaining
        )


async def wait_in_pre_bind(
    dra_manager: DraManager,
    recorder: events.EventRecorder | None,
    pod: core_v1.Pod,
    node_name: str,
    claims: Sequence[resource_v1.ResourceClaim],
    timeout: float,
) -> list[resource_v1.ResourceClaim]:
    """PreBind's wait, once the claims are allocated and reserved: nothing when no device
    has binding conditions; else a BindingConditionsPending event on the pod and
    `wait_for_binding_conditions`."""
    if not has_binding_conditions(claims):
        return list(claims)
    if recorder is not None:
        try:
            await recorder.record(
                events.reference(pod),
                "Normal",
                EVENT_REASON_PENDING,
                pending_message(node_name),
                action="Scheduling",
            )
        except errors.ApiError as err:
            log.error("event %s for pod %s: %s", EVENT_REASON_PENDING, pod.metadata.name, err)
    return await wait_for_binding_conditions(dra_manager, claims, timeout)


async def pre_bind(
    dra_manager: DraManager,
    recorder: events.EventRecorder | None,
    pod: core_v1.Pod,
    node_name: str,
    s: StateData,
    timeout: float,
) -> framework.Status | None:
    """The end of PreBind (upstream `PreBind`), once every claim is written: an Error when
    binding failed or timed out; the claims as last seen go into the state, for
    Unreserve."""
    indexed = list(s.claims.all())
    try:
        current = await wait_in_pre_bind(
            dra_manager, recorder, pod, node_name, [claim for _, claim in indexed], timeout
        )
    except NOT_BOUND as err:
        return framework.Status.error(err)
    for (index, _), claim in zip(indexed, current, strict=True):
        s.claims.set(index, claim)
    return None
