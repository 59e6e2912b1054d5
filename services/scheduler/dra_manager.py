"""The scheduler's view of DRA objects (upstream `dra_manager.go`).

Informer handlers feed it DeviceClasses, ResourceSlices, DeviceTaintRules and
ResourceClaims; it keeps the extended-resource class cache, the set of allocated devices
(maintained incrementally, not recomputed per pod), an allocator `Snapshot` rebuilt only
when slices or rules change (with the rules' taints added to the devices they select, as
upstream's slice tracker does), and the in-flight allocations: claims reserved by a
scheduling cycle but not yet written, whose devices other pods must not get (upstream
`SignalClaimPendingAllocation`, `pkg/scheduler/framework/plugins/dynamicresources/
dra_manager.go`).

Like upstream's assume cache, a claim the scheduler itself wrote is stored at once
(`assume_claim_after_api_call`), and informer events older than what is stored are ignored,
so the devices stay taken between the write and the informer catching up.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Container, Iterator, Mapping, Sequence, Set
from dataclasses import dataclass, field

from drasim.common import device_taints
from drasim.common.api import resource_v1
from drasim.common.extended_resource_cache import ExtendedResourceCache
from drasim.common.quantity import Quantity
from drasim.scheduler import framework
from drasim.scheduler.plugins.dynamic_resources import allocator

ClaimKey = tuple[str, str]  # (namespace, name)
_STORED = "stored"  # the holder of shares of stored claims (in-flight ones: the claim uid)

log = logging.getLogger(__name__)


def claim_devices(claim: resource_v1.ResourceClaim) -> set[allocator.DeviceID]:
    """The devices the claim holds exclusively: not its shares of shared devices, not what
    it has for admin access, which takes nothing from anyone (upstream
    `foreachAllocatedDevice`)."""
    allocation = claim.status.allocation
    if allocation is None:
        return set()
    return {
        (r.driver, r.pool, r.device)
        for r in allocation.devices.results
        if not r.admin_access and r.share_id is None
    }


ShareKey = tuple[allocator.DeviceID, str]  # (device, shareID)


def claim_shares(claim: resource_v1.ResourceClaim) -> dict[ShareKey, dict[str, Quantity]]:
    """The claim's shares of devices with `allowMultipleAllocations`, with the capacity each
    consumes (KEP-5075)."""
    allocation = claim.status.allocation
    if allocation is None:
        return {}
    return {
        ((r.driver, r.pool, r.device), r.share_id): r.consumed_capacity
        for r in allocation.devices.results
        if not r.admin_access and r.share_id is not None
    }


class _SharedView(Mapping[allocator.DeviceID, Mapping[str, Quantity]]):
    """Devices with shares (stored or in flight) → the capacity their shares consume
    together (upstream `AggregatedCapacity`)."""

    def __init__(self, shares: dict[allocator.DeviceID, dict[str, _Share]]) -> None:
        self._shares = shares

    def __getitem__(self, device: allocator.DeviceID) -> Mapping[str, Quantity]:
        total: dict[str, Quantity] = {}
        for share in self._shares[device].values():
            for name, value in share.consumed.items():
                total[name] = total.get(name, Quantity()) + value
        return total

    def __contains__(self, device: object) -> bool:
        return device in self._shares

    def __iter__(self) -> Iterator[allocator.DeviceID]:
        return iter(self._shares)

    def __len__(self) -> int:
        return len(self._shares)


@dataclass(slots=True)
class _Share:
    consumed: dict[str, Quantity]
    # "stored" and/or the in-flight uid: a claim's in-flight copy and its stored version
    # carry the same share, counted once.
    holders: set[str] = field(default_factory=set)


class _AllocatedView(Set[allocator.DeviceID]):
    """Devices taken by stored claims or by in-flight allocations, without copying."""

    def __init__(self, manager: DraManager) -> None:
        self._m = manager

    @property
    def parts(self) -> tuple[Container[allocator.DeviceID], Container[allocator.DeviceID]]:
        """The two containers the view combines, for lookups in hot loops."""
        return self._m._allocated, self._m._in_flight_devices

    @property
    def pool_versions(self) -> Mapping[allocator.PoolID, int]:
        return self._m.pool_versions

    def __contains__(self, device: object) -> bool:
        return device in self._m._allocated or device in self._m._in_flight_devices

    def __iter__(self) -> Iterator[allocator.DeviceID]:
        yield from self._m._allocated
        yield from (d for d in self._m._in_flight_devices if d not in self._m._allocated)

    def __len__(self) -> int:
        return len(self._m._allocated | self._m._in_flight_devices.keys())


class DraManager:
    def __init__(self) -> None:
        self.class_cache = ExtendedResourceCache()
        self.classes: dict[str, resource_v1.DeviceClass] = {}
        self.slices: dict[str, resource_v1.ResourceSlice] = {}
        self.taint_rules: dict[str, resource_v1.DeviceTaintRule] = {}
        self.claims: dict[ClaimKey, resource_v1.ResourceClaim] = {}
        # controlling owner uid -> keys of the claims it controls, in arrival order
        self._controlled: dict[str, dict[ClaimKey, None]] = {}
        # device -> uid of the stored claim holding it
        self._allocated: dict[allocator.DeviceID, str] = {}
        # claim uid (the temporary one for a special claim) -> its in-flight allocated copy
        self._in_flight: dict[str, resource_v1.ResourceClaim] = {}
        self._in_flight_devices: dict[allocator.DeviceID, str] = {}
        # claim -> uid of its in-flight entry, kept because writing the allocation timed out
        # (it may have been applied): see `hold_pending_allocation`.
        self._held: dict[ClaimKey, str] = {}
        # (driver, pool) -> a number that changes whenever a device of the pool is taken
        # or freed: the allocator reuses a node's last answer while its pools stand still.
        self.pool_versions: dict[allocator.PoolID, int] = {}
        # Told of every change the DynamicResources Filter reads (`watch`).
        self._sinks: list[framework.NodeChangeSink] = []
        self._snapshot: allocator.Snapshot | None = None
        # claim -> (the resourceVersion awaited, the waiting PreBind's future)
        self._waiters: dict[ClaimKey, list[tuple[int, asyncio.Future[bool]]]] = {}
        # claim -> futures of PreBinds waiting for any change of it (binding conditions)
        self._change_waiters: dict[ClaimKey, list[asyncio.Future[None]]] = {}
        self.allocated = _AllocatedView(self)
        # device → shareID → its share (KEP-5075): taken by stored and in-flight claims.
        self._shares: dict[allocator.DeviceID, dict[str, _Share]] = {}
        self.shared = _SharedView(self._shares)

    # -- informer handlers ---------------------------------------------------------------
    def on_class_add(self, cls: resource_v1.DeviceClass) -> None:
        self._all_changed()
        self.classes[cls.metadata.name] = cls
        self.class_cache.on_add(cls)

    def on_class_update(self, old: resource_v1.DeviceClass, new: resource_v1.DeviceClass) -> None:
        self._all_changed()
        self.classes[new.metadata.name] = new
        self.class_cache.on_update(old, new)

    def on_class_delete(self, cls: resource_v1.DeviceClass) -> None:
        self._all_changed()
        self.classes.pop(cls.metadata.name, None)
        self.class_cache.on_delete(cls)

    def on_slice_add(self, s: resource_v1.ResourceSlice) -> None:
        self._all_changed()
        self.slices[s.metadata.name] = s
        self._snapshot = None

    def on_slice_update(
        self, old: resource_v1.ResourceSlice, new: resource_v1.ResourceSlice
    ) -> None:
        self.on_slice_add(new)

    def on_slice_delete(self, s: resource_v1.ResourceSlice) -> None:
        self._all_changed()
        self.slices.pop(s.metadata.name, None)
        self._snapshot = None

    def on_taint_rule_add(self, rule: resource_v1.DeviceTaintRule) -> None:
        self._all_changed()
        self.taint_rules[rule.metadata.name] = rule
        self._snapshot = None

    def on_taint_rule_update(
        self, old: resource_v1.DeviceTaintRule, new: resource_v1.DeviceTaintRule
    ) -> None:
        if old.spec != new.spec:  # the controller writing the status changes no device
            self.on_taint_rule_add(new)

    def on_taint_rule_delete(self, rule: resource_v1.DeviceTaintRule) -> None:
        self._all_changed()
        self.taint_rules.pop(rule.metadata.name, None)
        self._snapshot = None

    def on_claim_add(self, claim: resource_v1.ResourceClaim) -> None:
        self._store_claim(claim)

    def on_claim_update(
        self, old: resource_v1.ResourceClaim, new: resource_v1.ResourceClaim
    ) -> None:
        self._store_claim(new)

    def on_claim_delete(self, claim: resource_v1.ResourceClaim) -> None:
        key = (claim.metadata.namespace, claim.metadata.name)
        old = self.claims.pop(key, None)
        if old is not None:
            self._release(old)
            self._unindex(key, old)
        self._release_hold(key)
        self._notify(key)

    def _store_claim(self, claim: resource_v1.ResourceClaim) -> None:
        key = (claim.metadata.namespace, claim.metadata.name)
        uid = claim.metadata.uid
        devices = claim_devices(claim)
        old = self.claims.get(key)
        if old is not None:
            if _version(claim) < _version(old):
                return  # an informer event older than the claim assumed after our write
            if old.metadata.uid == uid:
                self._release(old, keep=devices, keep_shares=claim_shares(claim))
            else:
                self._release(old)
            self._unindex(key, old)
        self.claims[key] = claim
        self._hold_shares(claim_shares(claim), _STORED)
        for device in devices:
            if self._allocated.get(device) != uid:
                self._allocated[device] = uid
                if device not in self._in_flight_devices:
                    self._pool_changed(device)  # (an in-flight device was taken already)
        owner = claim.metadata.controller_ref()
        if owner is not None:
            self._controlled.setdefault(owner.uid, {})[key] = None
        if claim.status.allocation is not None:
            self._release_hold(key)  # its devices are taken by `_allocated` now
        self._notify(key)

    def _hold_shares(self, shares: Mapping[ShareKey, dict[str, Quantity]], holder: str) -> None:
        for (device, share_id), consumed in shares.items():
            by_id = self._shares.setdefault(device, {})
            share = by_id.get(share_id)
            if share is None:
                share = by_id[share_id] = _Share(consumed)
                self._pool_changed(device)
            share.holders.add(holder)

    def _drop_shares(
        self,
        shares: Mapping[ShareKey, object],
        holder: str,
        keep: Container[ShareKey] = (),
    ) -> None:
        for key in shares:
            device, share_id = key
            share = self._shares.get(device, {}).get(share_id)
            if share is None or key in keep:
                continue
            share.holders.discard(holder)
            if not share.holders:
                del self._shares[device][share_id]
                if not self._shares[device]:
                    del self._shares[device]
                self._pool_changed(device)

    def _release(
        self,
        claim: resource_v1.ResourceClaim,
        keep: Container[allocator.DeviceID] = (),
        keep_shares: Container[ShareKey] = (),
    ) -> None:
        """Free the claim's devices and shares, but those in `keep` and `keep_shares` (its
        newer version holds them)."""
        self._drop_shares(claim_shares(claim), _STORED, keep_shares)
        for device in claim_devices(claim):
            if device not in keep and self._allocated.get(device) == claim.metadata.uid:
                del self._allocated[device]
                if device not in self._in_flight_devices:
                    self._pool_changed(device)

    def _unindex(self, key: ClaimKey, claim: resource_v1.ResourceClaim) -> None:
        owner = claim.metadata.controller_ref()
        if owner is None:
            return
        keys = self._controlled.get(owner.uid, {})
        keys.pop(key, None)
        if not keys:
            self._controlled.pop(owner.uid, None)

    def assume_claim_after_api_call(self, claim: resource_v1.ResourceClaim) -> None:
        """Store a claim the scheduler has just written, before the informer reports it
        (upstream `AssumeClaimAfterAPICall`): PreBind drops its in-flight entry right after,
        and the devices must stay taken."""
        self._store_claim(claim)

    def _pool_changed(self, device: allocator.DeviceID) -> None:
        """A device of the pool was taken or freed (by stored claims and in-flight
        allocations together: one moving from one to the other changes nothing)."""
        pool = (device[0], device[1])
        self.pool_versions[pool] = self.pool_versions.get(pool, 0) + 1
        if not self._sinks or self._snapshot is None:
            # Without a snapshot no Filter has run since the last slice change, which
            # told the sinks that everything changed.
            return
        nodes = self._snapshot.pool_nodes.get(pool, ())
        for sink in self._sinks:
            if nodes is None:  # a pool shared by nodes selected by label, or all nodes
                sink.all_changed()
            else:
                for node_name in nodes:
                    sink.node_changed(node_name)

    def _all_changed(self) -> None:
        for sink in self._sinks:
            sink.all_changed()

    def watch(self, sink: framework.NodeChangeSink) -> None:
        """Tell `sink` of every change that can alter what the allocator finds on a node:
        a class or a slice (every node), a device taken or freed (the nodes its pool
        reaches). For `framework.VerdictCache`."""
        self._sinks.append(sink)

    # -- reading ---------------------------------------------------------------------------
    def resolve_device_class(self, name: str) -> resource_v1.DeviceClass | None:
        """The class an extended resource name maps to (upstream `DeviceClassResolver`), for
        NodeResourcesFit."""
        return self.class_cache.class_for(name)

    def snapshot(self) -> allocator.Snapshot:
        """The allocator's slice index; rebuilt only after a slice or a rule changed."""
        if self._snapshot is None:
            slices = device_taints.with_rule_taints(self.slices.values(), self.taint_rules.values())
            self._snapshot = allocator.Snapshot(slices)
        return self._snapshot

    def allocator(
        self,
        *,
        admin_access: bool = True,
        partitionable_devices: bool = True,
        consumable_capacity: bool = True,
    ) -> allocator.Allocator:
        """An allocator over the current slices, classes, allocated devices and shares,
        with the DRA gates it honours (see `allocator.Allocator`)."""
        return allocator.Allocator(
            self.snapshot(),
            self.classes,
            self.allocated,
            shared=self.shared,
            admin_access=admin_access,
            partitionable_devices=partitionable_devices,
            consumable_capacity=consumable_capacity,
        )

    def get_claim(self, namespace: str, name: str) -> resource_v1.ResourceClaim | None:
        """The stored (or assumed) claim. An in-flight allocation does not show here, as
        upstream's assume cache does not show it: ask `claim_is_pending_allocation`."""
        return self.claims.get((namespace, name))

    def list_claims(self, namespace: str = "") -> list[resource_v1.ResourceClaim]:
        return [c for (ns, _), c in self.claims.items() if not namespace or ns == namespace]

    def claims_controlled_by(self, uid: str) -> list[resource_v1.ResourceClaim]:
        """Claims whose controlling ownerReference has this uid, oldest arrival first: the
        candidates for a pod's special claim (upstream `findExtendedResourceClaim`) without
        scanning every claim."""
        return [self.claims[key] for key in self._controlled.get(uid, {})]

    def dra_capacity(self, node_info: framework.NodeInfo, name: str) -> tuple[int, int]:
        """(devices on the node of the class `name` maps to, how many of them are
        allocated, in-flight allocations included), for NodeResourcesFit's score of a
        DRA-served extended resource (upstream `calculateDRAExtendedResourceAllocatableRequest`,
        `pkg/scheduler/framework/plugins/noderesources/resource_allocation.go`); (0, 0) when
        no class maps `name`.
        """
        cls = self.class_cache.class_for(name)
        if cls is None:
            return 0, 0
        try:
            return allocator.node_device_capacity(
                node_info.node, self.snapshot(), cls, self.allocated
            )
        except allocator.AllocatorError as err:
            log.warning("scoring %s on node %s: %s", name, node_info.name, err)
            return 0, 0

    # -- in-flight allocations (the assume cache) -----------------------------------------
    def signal_claim_pending_allocation(self, uid: str, claim: resource_v1.ResourceClaim) -> None:
        """Reserve: the claim's devices are taken from now on, for every other pod."""
        self.remove_claim_pending_allocation(uid)
        self._in_flight[uid] = claim
        self._hold_shares(claim_shares(claim), uid)
        for device in claim_devices(claim):
            self._in_flight_devices[device] = uid
            if device not in self._allocated:
                self._pool_changed(device)

    def hold_pending_allocation(self, uid: str, namespace: str, name: str) -> None:
        """Writing this claim's allocation got no answer: the write may have happened. Keep
        its in-flight devices taken (`remove_claim_pending_allocation` leaves them) until
        the claim cache shows the claim allocated or deleted; otherwise another pod could
        get devices the API already gave this claim."""
        if uid in self._in_flight:
            self._held[(namespace, name)] = uid

    def _release_hold(self, key: ClaimKey) -> None:
        uid = self._held.pop(key, None)
        if uid is not None:
            self.remove_claim_pending_allocation(uid)

    def remove_claim_pending_allocation(self, uid: str) -> bool:
        if uid in self._held.values():
            return False  # held until the claim cache knows what was written
        claim = self._in_flight.pop(uid, None)
        if claim is None:
            return False
        self._drop_shares(claim_shares(claim), uid)
        for device in claim_devices(claim):
            if self._in_flight_devices.get(device) == uid:
                del self._in_flight_devices[device]
                if device not in self._allocated:
                    self._pool_changed(device)
        return True

    def claim_is_pending_allocation(self, uid: str) -> bool:
        return uid in self._in_flight

    def pending_allocations(self) -> list[resource_v1.ResourceClaim]:
        """The in-flight claims, each with its allocation, in Reserve order."""
        return list(self._in_flight.values())

    # -- waiting for the informer --------------------------------------------------------
    def _notify(self, key: ClaimKey) -> None:
        """Wake the PreBinds waiting for this claim whose wait is now over."""
        for fut in self._change_waiters.pop(key, ()):
            if not fut.done():
                fut.set_result(None)
        waiting = self._waiters.get(key)
        if not waiting:
            return
        claim = self.claims.get(key)
        version = _version(claim) if claim is not None else -1
        still = [(wanted, fut) for wanted, fut in waiting if not fut.done()]
        for wanted, fut in still:
            if version >= wanted:
                fut.set_result(True)
        still = [(wanted, fut) for wanted, fut in still if not fut.done()]
        if still:
            self._waiters[key] = still
        else:
            del self._waiters[key]

    async def wait_for_claim(
        self, namespace: str, name: str, resource_version: str, timeout: float
    ) -> bool:
        """Wait until the claim cache holds this claim at least at `resource_version`
        (upstream `waitForExtendedClaimInAssumeCache`); False on timeout, which the caller
        only logs."""
        key = (namespace, name)
        wanted = int(resource_version or 0)
        claim = self.claims.get(key)
        if claim is not None and _version(claim) >= wanted:
            return True
        fut: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._waiters.setdefault(key, []).append((wanted, fut))
        try:
            return await asyncio.wait_for(fut, timeout)
        except TimeoutError:
            return False
        finally:
            self._notify(key)  # (drops this waiter if it timed out)

    async def wait_for_claim_change(self, keys: Sequence[ClaimKey], timeout: float) -> None:
        """Return when any of these claims changes or goes, or after `timeout` seconds."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        for key in keys:
            self._change_waiters.setdefault(key, []).append(fut)
        try:
            await asyncio.wait_for(fut, timeout)
        except TimeoutError:
            pass
        finally:
            for key in keys:
                waiting = [f for f in self._change_waiters.get(key, ()) if f is not fut]
                if waiting:
                    self._change_waiters[key] = waiting
                else:
                    self._change_waiters.pop(key, None)


def _version(claim: resource_v1.ResourceClaim) -> int:
    return int(claim.metadata.resource_version or 0)
