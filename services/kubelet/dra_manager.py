"""The kubelet's DRA manager for one node (upstream `pkg/kubelet/cm/dra/manager.go`).

Prepare (upstream `prepareResources`): a pod's claims are its `spec.resourceClaims` (a
template's claim is
named in `status.resourceClaimStatuses`) plus the special claim named in
`status.extendedResourceClaimStatus`. Each is read from the API; the pod must be in its
`status.reservedFor` (ownership is not checked, so the scheduler-made special claim
passes); its drivers come from the allocation results, and each driver gets one
NodePrepareResources call for all of the pod's claims it serves.

Claims are cached by (namespace, name) with the pods using them, and unprepared when the
last of those pods goes (upstream `unprepareResourcesForPod`). The cache is checkpointed,
so a restarted kubelet still
knows what it prepared: it neither prepares a running pod's claims again nor forgets to
unprepare those of a pod deleted while it was down.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from pathlib import Path
from typing import TypeVar

import msgspec

from drasim.common import errors
from drasim.common.api import core_v1, resource_v1
from drasim.common.bus.client import Bus
from drasim.common.client import ApiClient
from drasim.drivers import dra_api
from drasim.drivers.checkpoint import Checkpoint
from drasim.drivers.errors import TemporaryError
from drasim.kubelet import metrics

T = TypeVar("T")
# A driver call's result for one claim.
R = TypeVar("R", dra_api.NodePrepareResourceResponse, dra_api.NodeUnprepareResourceResponse)

__all__ = ["ClaimInfo", "DraManager", "DraManagerState", "claim_names"]


class ClaimInfo(msgspec.Struct, kw_only=True):
    """One claim on this node: who uses it and what each driver prepared for it."""

    namespace: str
    name: str
    uid: str
    drivers: list[str]
    pod_uids: set[str] = set()
    prepared: dict[str, list[dra_api.PreparedDevice]] = {}  # by driver, once prepared

    def is_prepared(self) -> bool:
        return self.prepared.keys() >= set(self.drivers)

    def ref(self) -> dra_api.Claim:
        return dra_api.Claim(namespace=self.namespace, uid=self.uid, name=self.name)


class DraManagerState(msgspec.Struct, kw_only=True):
    claims: list[ClaimInfo] = []


def claim_names(pod: core_v1.Pod) -> list[str]:
    """The ResourceClaims a pod uses, the special claim last (upstream `prepareResources`)."""
    names = []
    for pod_claim in pod.spec.resource_claims:
        if pod_claim.resource_claim_name:
            names.append(pod_claim.resource_claim_name)
            continue
        status = next(
            (s for s in pod.status.resource_claim_statuses if s.name == pod_claim.name), None
        )
        if status is None:
            raise TemporaryError(
                f"pod {pod.metadata.name}: the ResourceClaim of pod claim {pod_claim.name} "
                "has not been created yet"
            )
        if status.resource_claim_name:  # None: no claim was needed
            names.append(status.resource_claim_name)
    extended = pod.status.extended_resource_claim_status
    if extended is not None:
        names.append(extended.resource_claim_name)
    return names


class DraManager:
    def __init__(
        self, *, api: ApiClient, bus: Bus, node: str, checkpoint_path: Path | None = None
    ) -> None:
        self.api = api
        self.bus = bus
        self.node = node
        self._checkpoint = Checkpoint(checkpoint_path, DraManagerState, DraManagerState)
        self.claims: dict[tuple[str, str], ClaimInfo] = {
            (c.namespace, c.name): c for c in self._checkpoint.load().claims
        }
        # `(operation, is_error, seconds)` of each prepare and unprepare, for the
        # process's `dra_operations_duration_seconds`.
        self.observe_operation: Callable[[str, bool, float], None] | None = None
        # `(driver, method, grpc status code, seconds)` of each driver call, for the
        # process's `dra_grpc_operations_duration_seconds`.
        self.observe_driver_call: Callable[[str, str, str, float], None] | None = None
        # The node's pods are synced concurrently; their prepares and unprepares take
        # turns, so that one never works on claims another has in hand (two unprepares
        # would both find a claim unused and unprepare it twice; a prepare could admit a
        # pod to a claim an unprepare is releasing).
        self._lock = asyncio.Lock()

    def claims_of(self, pod_uid: str) -> list[ClaimInfo]:
        return [c for c in self.claims.values() if pod_uid in c.pod_uids]

    async def prepare(self, pod: core_v1.Pod) -> dict[str, ClaimInfo]:
        """Prepare every claim of `pod`; claim name → its prepared info.

        Raises `TemporaryError` with upstream's messages: a claim that cannot be read, is
        not reserved for the pod, or that a driver failed to prepare.
        """
        return await self._measured(metrics.PREPARE_RESOURCES, self._prepare(pod))

    async def _prepare(self, pod: core_v1.Pod) -> dict[str, ClaimInfo]:
        async with self._lock:
            return await self._prepare_locked(pod)

    async def _prepare_locked(self, pod: core_v1.Pod) -> dict[str, ClaimInfo]:
        namespace, uid = pod.metadata.namespace, pod.metadata.uid
        found: dict[str, ClaimInfo] = {}
        for name in claim_names(pod):
            info = self.claims.get((namespace, name))
            if info is None or uid not in info.pod_uids or not info.is_prepared():
                info = await self._admit_claim(pod, name, info)
            found[name] = info
        await self._save()
        by_driver: dict[str, list[ClaimInfo]] = {}
        for info in found.values():
            for driver in info.drivers:
                if driver not in info.prepared:
                    by_driver.setdefault(driver, []).append(info)
        for driver, infos in by_driver.items():
            client = dra_api.DraPluginClient(self.bus, node=self.node, driver=driver)
            response = await self._driver_call(
                driver, "NodePrepareResources", client.prepare([info.ref() for info in infos])
            )
            try:
                for info, result in self._results("NodePrepareResources", infos, response.claims):
                    info.prepared[driver] = result.devices
            finally:  # what was prepared before a failed claim is saved too
                await self._save()
        return found

    def _results(
        self, operation: str, infos: list[ClaimInfo], results: Mapping[str, R]
    ) -> Iterator[tuple[ClaimInfo, R]]:
        """Each claim's result of one driver call, in order; a missing or failed one raises
        TemporaryError (the pod is retried), once the caller has saved what was done."""
        for info in infos:
            result = results.get(info.uid)
            if result is None or result.error:
                problem = result.error if result else "no result for the claim"
                raise TemporaryError(f"{operation} failed for ResourceClaim {info.name}: {problem}")
            yield info, result

    async def _admit_claim(self, pod: core_v1.Pod, name: str, info: ClaimInfo | None) -> ClaimInfo:
        namespace = pod.metadata.namespace
        try:
            claim = await self.api.get(resource_v1.ResourceClaim, name, namespace=namespace)
        except errors.ApiError as exc:
            raise TemporaryError(f"fetch ResourceClaim {name}: {exc.message}") from exc
        claim_uid = claim.metadata.uid
        if info is not None and info.uid != claim_uid:
            raise TemporaryError(
                f"old ResourceClaim with same name {name} and different UID {info.uid} "
                "still exists (previous pod not terminated?)"
            )
        if not any(ref.uid == pod.metadata.uid for ref in claim.status.reserved_for):
            raise TemporaryError(
                f"pod {pod.metadata.name} ({pod.metadata.uid}) is not allowed to use "
                f"ResourceClaim {name} ({claim_uid})"
            )
        allocation = claim.status.allocation
        if allocation is None:
            raise TemporaryError(f"ResourceClaim {name} ({claim_uid}) is not allocated")
        drivers = sorted({r.driver for r in allocation.devices.results})
        if "" in drivers:
            raise TemporaryError(f"ResourceClaim {name}: an allocation result has no driver")
        if info is None:
            info = ClaimInfo(namespace=namespace, name=name, uid=claim_uid, drivers=drivers)
            self.claims[(namespace, name)] = info
        info.pod_uids.add(pod.metadata.uid)
        return info

    async def unprepare(self, pod_uid: str) -> None:
        """Release the pod's claims; unprepare those no pod uses any more (upstream
        `unprepareResourcesForPod`).

        Claims left unused by an earlier failed call are retried too, which is what
        upstream's reconcile loop does.
        """
        await self._measured(metrics.UNPREPARE_RESOURCES, self._unprepare(pod_uid))

    async def _unprepare(self, pod_uid: str) -> None:
        async with self._lock:
            await self._unprepare_locked(pod_uid)

    async def _unprepare_locked(self, pod_uid: str) -> None:
        for info in self.claims_of(pod_uid):
            info.pod_uids.discard(pod_uid)
        await self._save()
        unused = [info for info in self.claims.values() if not info.pod_uids]
        by_driver: dict[str, list[ClaimInfo]] = {}
        for info in unused:
            for driver in info.prepared:
                by_driver.setdefault(driver, []).append(info)
        for driver, infos in by_driver.items():
            client = dra_api.DraPluginClient(self.bus, node=self.node, driver=driver)
            response = await self._driver_call(
                driver, "NodeUnprepareResources", client.unprepare([info.ref() for info in infos])
            )
            try:
                for info, _ in self._results("NodeUnprepareResources", infos, response.claims):
                    del info.prepared[driver]
            except TemporaryError:
                await self._save()  # what was unprepared before the failed claim
                raise
        for info in unused:
            if not info.prepared:
                del self.claims[(info.namespace, info.name)]
        await self._save()

    async def _measured(self, operation: str, work: Awaitable[T]) -> T:
        """Await `work`, timing it as upstream times each PrepareResources and
        UnprepareResources call (a cancelled call is not counted)."""
        observe = self.observe_operation
        if observe is None:
            return await work
        return await _timed(work, lambda failed, seconds: observe(operation, failed, seconds))

    async def _driver_call(self, driver: str, method: str, call: Awaitable[T]) -> T:
        """Await one call to a driver, timing it as upstream's plugin client times each
        gRPC call: status `OK`, or `Unknown` for an error that is no gRPC status."""
        observe = self.observe_driver_call
        if observe is None:
            return await call
        return await _timed(
            call,
            lambda failed, seconds: observe(driver, method, "Unknown" if failed else "OK", seconds),
        )

    async def _save(self) -> None:
        await self._checkpoint.save(DraManagerState(claims=list(self.claims.values())))


async def _timed(work: Awaitable[T], observe: Callable[[bool, float], None]) -> T:
    """Await `work` and pass `observe` whether it failed and the seconds it took."""
    started = time.perf_counter()
    try:
        result = await work
    except Exception:
        observe(True, time.perf_counter() - started)
        raise
    observe(False, time.perf_counter() - started)
    return result
