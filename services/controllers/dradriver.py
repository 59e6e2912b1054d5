"""The cluster-side part of the emulated DRA drivers: what a real driver's controller does
beside its kubelet plugins, for the drivers a cluster file's `drivers:` names.

- Attachment (KEP-5007): a device with binding conditions is "attached" `afterSeconds`
  after its allocation (the claim's `allocationTimestamp`), and the driver then sets its
  binding conditions True in the claim's `status.devices` (or, with `outcome: Failed`, its
  binding failure conditions), so the scheduler's PreBind lets the pod bind (or gives the
  allocation up). This is what the dra-example-driver's binding-conditions controller
  does for fabric-attached devices.
- Device status (KEP-4817): once a pod using the claim runs (its devices were prepared),
  the driver reports each of its devices: a `Ready` condition, its `data` (and the
  device's published `attributes` it names, as dra-example-driver's `gpuDeviceStatus`
  does), and with `networkData` an interface `net<i>`, an address `10.<i>.0.2/24` and a
  MAC derived from the claim and device.

Entries of other drivers are left alone; an entry is written once and kept, as upstream's
drivers do, until the allocation goes (the apistore then drops it). The controller acts as
the drivers' service account (`IDENTITY`), which `rbac()` lets read claims and write their
status, as a driver's deployment manifests would.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from drasim.common import codec, errors, nats_auth, tables
from drasim.common.api import core_v1, meta_v1, rbac_v1, resource_v1
from drasim.common.client import ApiClient
from drasim.common.cluster_file import DeviceStatusReport, DriverBehaviour
from drasim.common.informer import Informer
from drasim.controllers.queue import WorkQueue

__all__ = ["IDENTITY", "DriverController", "rbac"]

log = logging.getLogger(__name__)

IDENTITY = nats_auth.controller_identity(nats_auth.DRA_DRIVER)
_ROLE = "drasim:dra-driver"

ClaimKey = tuple[str, str]
READY = "Ready"


def rbac(drivers: Sequence[str] = ()) -> list[rbac_v1.ClusterRole | rbac_v1.ClusterRoleBinding]:
    """What the drivers' service account may do: read claims and pods, write claims'
    status (their `status.devices`) as a driver's controller writes it for devices on any
    node: `arbitrary-node:` verbs on `resourceclaims/driver` for `drivers` (all if none),
    as upstream's DRA hardening guide grants it."""
    role = rbac_v1.ClusterRole(
        metadata=meta_v1.ObjectMeta(name=_ROLE),
        rules=[
            rbac_v1.PolicyRule(
                verbs=["get", "list", "watch"],
                api_groups=["resource.k8s.io"],
                resources=["resourceclaims"],
            ),
            rbac_v1.PolicyRule(
                verbs=["update", "patch"],
                api_groups=["resource.k8s.io"],
                resources=["resourceclaims/status"],
            ),
            rbac_v1.PolicyRule(
                verbs=["arbitrary-node:update", "arbitrary-node:patch"],
                api_groups=["resource.k8s.io"],
                resources=["resourceclaims/driver"],
                resource_names=list(drivers),
            ),
            rbac_v1.PolicyRule(verbs=["get", "list", "watch"], api_groups=[""], resources=["pods"]),
        ],
    )
    binding = rbac_v1.ClusterRoleBinding(
        metadata=meta_v1.ObjectMeta(name=_ROLE),
        role_ref=rbac_v1.RoleRef(kind="ClusterRole", name=_ROLE),
        subjects=[
            rbac_v1.Subject(
                kind="ServiceAccount",
                name=nats_auth.DRA_DRIVER,
                namespace=nats_auth.CONTROLLERS_NAMESPACE,
            )
        ],
    )
    return [role, binding]


class DriverController:
    """Attaches devices and reports device status for the drivers in `behaviours`."""

    def __init__(
        self,
        api: ApiClient,
        behaviours: list[DriverBehaviour],
        *,
        claims: Informer[resource_v1.ResourceClaim],
        pods: Informer[core_v1.Pod],
        slices: Informer[resource_v1.ResourceSlice] | None = None,
    ) -> None:
        self.api = api
        self.behaviours = {b.name: b for b in behaviours}
        self.claims = claims
        self.pods = pods
        self.slices = slices  # the published devices, for attribute data
        self.queue: WorkQueue[ClaimKey] = WorkQueue("dra-driver", self.sync)
        self._attachments: dict[ClaimKey, asyncio.TimerHandle] = {}
        claims.add_handlers(
            on_add=self._enqueue,
            on_update=lambda _old, new: self._enqueue(new),
        )
        # A pod that starts running makes its claims' device status due.
        pods.add_handlers(on_update=self._on_pod_update)

    def _enqueue(self, claim: resource_v1.ResourceClaim) -> None:
        allocation = claim.status.allocation
        if allocation is not None and any(
            r.driver in self.behaviours for r in allocation.devices.results
        ):
            self.queue.add((claim.metadata.namespace, claim.metadata.name))

    def _on_pod_update(self, old: core_v1.Pod, pod: core_v1.Pod) -> None:
        if pod.status.phase != "Running" or old.status.phase == "Running":
            return
        names = [s.resource_claim_name for s in pod.status.resource_claim_statuses]
        names += [c.resource_claim_name for c in pod.spec.resource_claims]
        if pod.status.extended_resource_claim_status is not None:
            names.append(pod.status.extended_resource_claim_status.resource_claim_name)
        for name in names:
            if name:
                self.queue.add((pod.metadata.namespace, name))

    async def sync(self, key: ClaimKey) -> None:
        cached = self.claims.get(key[1], key[0])
        if cached is None or cached.status.allocation is None:
            return
        claim = codec.clone(cached)
        assert claim.status.allocation is not None
        now = datetime.now(UTC)
        entries = {_device_key(d): d for d in claim.status.devices}
        changed = False
        for index, result in enumerate(claim.status.allocation.devices.results):
            behaviour = self.behaviours.get(result.driver)
            if behaviour is None:
                continue
            device_key = (result.driver, result.pool, result.device, result.share_id or "")
            entry = entries.get(device_key) or resource_v1.AllocatedDeviceStatus(
                driver=result.driver,
                pool=result.pool,
                device=result.device,
                share_id=result.share_id,
            )
            reported = {c.type for c in entry.conditions}
            binding = {*result.binding_conditions, *result.binding_failure_conditions}
            if behaviour.attachment is not None and binding and not reported & binding:
                wait = _allocated_at(claim) + behaviour.attachment.after_seconds - now.timestamp()
                if wait > 0:
                    self._attach_later(key, wait)
                    continue
                entry.conditions += _attachment_conditions(result, behaviour, now)
                changed = True
            report = behaviour.device_status
            if (
                report is not None
                and not _reported(entry, report)
                and self._used_by_running_pod(claim)
            ):
                _report(entry, behaviour, claim, index, now)
                if report.attributes:
                    entry.data = {**(entry.data or {}), **self._attribute_data(result, report)}
                changed = True
            entries[device_key] = entry
        if not changed:
            return
        claim.status.devices = list(entries.values())
        try:
            await self.api.update_status(claim)
        except errors.NotFound:
            return

    def _attach_later(self, key: ClaimKey, delay: float) -> None:
        """Sync `key` again once its device is attached. Not `queue.add_after`: the queue
        drops a key's pending wake-up when its sync succeeds."""
        pending = self._attachments.pop(key, None)
        if pending is not None:
            pending.cancel()
        loop = asyncio.get_running_loop()
        self._attachments[key] = loop.call_later(delay, self._attached, key)

    def _attached(self, key: ClaimKey) -> None:
        self._attachments.pop(key, None)
        self.queue.add(key)

    def _attribute_data(
        self,
        result: resource_v1.DeviceRequestAllocationResult,
        report: DeviceStatusReport,
    ) -> dict[str, Any]:
        """The device's published attributes `report` names, as the attributes' JSON."""
        for resource_slice in self.slices.list() if self.slices is not None else []:
            spec = resource_slice.spec
            if (spec.driver, spec.pool.name) != (result.driver, result.pool):
                continue
            for device in spec.devices:
                if device.name == result.device:
                    return {
                        name: codec.to_builtins(device.attributes[name])
                        for name in report.attributes
                        if name in device.attributes
                    }
        return {}

    def _used_by_running_pod(self, claim: resource_v1.ResourceClaim) -> bool:
        for ref in claim.status.reserved_for:
            pod = self.pods.get(ref.name, claim.metadata.namespace)
            if pod is not None and pod.metadata.uid == ref.uid and pod.status.phase == "Running":
                return True
        return False


def _reported(entry: resource_v1.AllocatedDeviceStatus, report: DeviceStatusReport) -> bool:
    if report.ready_condition:
        return any(c.type == READY for c in entry.conditions)
    return entry.data is not None


def _device_key(status: resource_v1.AllocatedDeviceStatus) -> tuple[str, str, str, str]:
    return (status.driver, status.pool, status.device, status.share_id or "")


def _allocated_at(claim: resource_v1.ResourceClaim) -> float:
    assert claim.status.allocation is not None
    when = tables.parse_time(claim.status.allocation.allocation_timestamp)
    return when.timestamp() if when is not None else 0.0


def _attachment_conditions(
    result: resource_v1.DeviceRequestAllocationResult, behaviour: DriverBehaviour, now: datetime
) -> list[meta_v1.Condition]:
    attachment = behaviour.attachment
    assert attachment is not None
    if attachment.outcome == "Failed":
        types, reason, message = result.binding_failure_conditions, "AttachFailed", "attach failed"
    else:
        types, reason, message = result.binding_conditions, "Attached", "device attached"
    return [
        meta_v1.Condition(
            type=type_,
            status="True",
            reason=attachment.reason or reason,
            message=attachment.message or f"{message} by {behaviour.name}",
            last_transition_time=tables.format_time(now),
        )
        for type_ in types
    ]


def _report(
    entry: resource_v1.AllocatedDeviceStatus,
    behaviour: DriverBehaviour,
    claim: resource_v1.ResourceClaim,
    index: int,
    now: datetime,
) -> None:
    """The device's Ready condition, data and network data."""
    report = behaviour.device_status
    assert report is not None
    if report.ready_condition:
        entry.conditions.append(
            meta_v1.Condition(
                type=READY,
                status="True",
                reason="Prepared",
                message=f"prepared by {behaviour.name}",
                last_transition_time=tables.format_time(now),
            )
        )
    if report.data is not None:
        entry.data = report.data
    if report.network_data:
        digest = hashlib.sha256(f"{claim.metadata.uid}/{entry.device}".encode()).digest()
        mac = ":".join(f"{b:02x}" for b in (0x02, *digest[:5]))  # locally administered
        entry.network_data = resource_v1.NetworkDeviceData(
            interface_name=f"net{index + 1}",
            ips=[f"10.{index + 1}.0.2/24"],
            hardware_address=mac,
        )
