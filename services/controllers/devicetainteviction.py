"""Device taint eviction controller (KEP-5055; upstream
`pkg/controller/devicetainteviction/device_taint_eviction.go`).

A pod bound to a node is evicted when a device allocated to one of its claims has a
NoExecute taint that the claim does not tolerate: the claim's own, one made from a
template, or the scheduler's special claim for extended resources (v1.37.2's controller
evicts for all three). A taint comes from the device's ResourceSlice or from a
DeviceTaintRule selecting the device. Tolerations are read from the allocation result
(copied there from the request by the allocator); only a toleration with effect NoExecute
delays eviction: without `tolerationSeconds` forever, else until `timeAdded` plus the
smallest `tolerationSeconds` among those that match (negative counts as 0).

Evicting a pod, as upstream does: record the Normal Event `DeviceTaintManagerEviction`
"Marking for deletion", set the pod condition DisruptionTarget (reason
DeletionByDeviceTaintManager), then delete the pod with its UID as precondition. A pod whose
eviction was pending when the taint went away (or became tolerated) gets the Event
"Cancelling deletion".

Each DeviceTaintRule's status gets the condition `EvictionInProgress`: at once when the
rule is made or its spec changes, then at most every `rule_status_period` seconds while
pods are being evicted for it, with upstream's reasons and messages (PodsPendingEviction,
Completed, NotStarted, NoEffect, OtherEffect).

Everything is level-triggered: informer handlers only queue the pods (and rules) a change
may concern, and a worker decides from the caches. What a restart forgets is the count of
pods evicted "since starting the controller", as upstream's does.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec

from drasim.common import codec, device_taints, errors, tables
from drasim.common.api import core_v1, meta_v1, resource_v1
from drasim.common.client import ApiClient
from drasim.common.informer import Informer, Key
from drasim.controllers import claimutil, events
from drasim.controllers.queue import WorkQueue

__all__ = ["DeviceTaintEvictionController"]

log = logging.getLogger(__name__)

COMPONENT = "device-taint-eviction-controller"
EVICTION_REASON = "DeviceTaintManagerEviction"
CONDITION_REASON = "DeletionByDeviceTaintManager"
CONDITION_MESSAGE = "Device Taint manager: deleting due to NoExecute taint"
EVICTION_IN_PROGRESS = "EvictionInProgress"
# Upstream `ruleStatusPeriod`: the shortest time between two status updates of a rule.
RULE_STATUS_PERIOD = 10.0

_NO_EXECUTE = resource_v1.DEVICE_TAINT_EFFECT_NO_EXECUTE
_NONE = resource_v1.DEVICE_TAINT_EFFECT_NONE
_EPOCH = datetime.fromtimestamp(0, UTC)
PoolID = tuple[str, str]


@dataclass(frozen=True, slots=True)
class _Eviction:
    """When a pod must go, and the rules among the reasons (by name)."""

    when: datetime
    rules: frozenset[str] = frozenset()

    def join(self, other: _Eviction | None) -> _Eviction:
        if other is None:
            return self
        return _Eviction(min(self.when, other.when), self.rules | other.rules)


@dataclass(slots=True)
class _RuleStats:
    uid: str
    evicted: int = 0


@dataclass(slots=True)
class _Counts:
    """What a rule's status message reports."""

    pending_pods: int = 0
    namespaces: set[str] = field(default_factory=set)
    slice_devices: int = 0
    allocated_devices: int = 0


class DeviceTaintEvictionController:
    """Evicts the pods using devices with NoExecute taints they do not tolerate."""

    def __init__(
        self,
        api: ApiClient,
        *,
        pods: Informer[core_v1.Pod],
        claims: Informer[resource_v1.ResourceClaim],
        slices: Informer[resource_v1.ResourceSlice],
        rules: Informer[resource_v1.DeviceTaintRule] | None,
        rule_status_period: float = RULE_STATUS_PERIOD,
    ) -> None:
        self.api = api
        self.pods = pods
        self.claims = claims
        self.slices = slices
        self.rules = rules  # None while DRADeviceTaintRules is off: no rule is looked at
        self.rule_status_period = rule_status_period
        self.events = events.EventRecorder(api, component=COMPONENT)
        self.queue: WorkQueue[Key] = WorkQueue("devicetainteviction", self._sync_pod)
        self.rule_queue: WorkQueue[str] = WorkQueue("devicetaintrule-status", self._sync_rule)
        self._pools: dict[PoolID, dict[str, resource_v1.ResourceSlice]] = {}
        self._pending: dict[Key, str] = {}  # pods whose eviction is scheduled -> their uid
        self._rule_stats: dict[str, _RuleStats] = {}  # by rule name
        # Wake-ups at a time (an eviction due, a rule's next status): the queues' own
        # delayed adds are their retries, which a successful run cancels.
        # Each pending wake-up: when it is due, and its handle (see `WorkQueue.add_after`).
        self._timers: dict[tuple[str, Key | str], tuple[float, asyncio.Handle]] = {}
        pods.add_handlers(on_add=self._pod_added, on_update=self._pod_updated)
        pods.add_handlers(on_delete=lambda pod: self._pending.pop(_key(pod), None))
        claims.add_handlers(
            on_add=lambda c: self._claim_changed(None, c),
            on_update=self._claim_changed,
            on_delete=lambda c: self._claim_changed(c, None),
        )
        slices.add_handlers(
            on_add=lambda s: self._slice_changed(None, s),
            on_update=self._slice_changed,
            on_delete=lambda s: self._slice_changed(s, None),
        )
        if rules is not None:
            rules.add_handlers(
                on_add=lambda r: self._rule_changed(None, r),
                on_update=self._rule_changed,
                on_delete=lambda r: self._rule_changed(r, None),
            )

    @property
    def queues(self) -> list[WorkQueue[str] | WorkQueue[Key]]:
        return [self.queue, self.rule_queue]

    def stop_timers(self) -> None:
        for _, handle in self._timers.values():
            handle.cancel()
        self._timers.clear()

    def _later(self, queue: WorkQueue[Any], key: Key | str, delay: float) -> None:
        """Queue `key` in `delay` seconds; an earlier wake-up already set wins."""
        loop = asyncio.get_running_loop()
        timer_key = (queue.name, key)
        when = loop.time() + delay
        pending = self._timers.get(timer_key)
        if pending is not None:
            if pending[0] <= when:
                return
            pending[1].cancel()

        def wake() -> None:
            del self._timers[timer_key]
            queue.add(key)

        self._timers[timer_key] = (when, loop.call_later(delay, wake))

    # -- what a change concerns ----------------------------------------------------------
    def _pod_added(self, pod: core_v1.Pod) -> None:
        if pod.spec.node_name:
            self.queue.add(_key(pod))

    def _pod_updated(self, old: core_v1.Pod, new: core_v1.Pod) -> None:
        """Only binding or a change of its claims can change a pod's fate (upstream's
        check also keeps the condition written at eviction from queueing it again)."""
        if (
            old.spec.node_name != new.spec.node_name
            or old.status.resource_claim_statuses != new.status.resource_claim_statuses
            or old.status.extended_resource_claim_status
            != new.status.extended_resource_claim_status
        ):
            self._pod_added(new)

    def _claim_changed(
        self, old: resource_v1.ResourceClaim | None, new: resource_v1.ResourceClaim | None
    ) -> None:
        if old is not None and new is not None and old.status == new.status:
            return
        for claim in (old, new):
            if claim is not None:
                self._queue_consumers(claim)

    def _slice_changed(
        self, old: resource_v1.ResourceSlice | None, new: resource_v1.ResourceSlice | None
    ) -> None:
        slice_ = new if new is not None else old
        assert slice_ is not None
        pool_id = (slice_.spec.driver, slice_.spec.pool.name)
        before = _no_execute_taints(self._pools.get(pool_id, {}).values())
        pool = self._pools.setdefault(pool_id, {})
        if new is None:
            pool.pop(slice_.metadata.name, None)
            if not pool:
                del self._pools[pool_id]
        else:
            pool[slice_.metadata.name] = new
        after = _no_execute_taints(pool.values())
        if before == after:
            return
        changed = {device for device, _ in before ^ after}
        for claim in self.claims.list():
            if any((r.driver, r.pool) == pool_id and r.device in changed for r in _results(claim)):
                self._queue_consumers(claim)

    def _rule_changed(
        self, old: resource_v1.DeviceTaintRule | None, new: resource_v1.DeviceTaintRule | None
    ) -> None:
        if new is None:
            assert old is not None
            self._rule_stats.pop(old.metadata.name, None)
        elif old is None or old.spec != new.spec:
            # The status tells at once what the new rule (or spec) does.
            self.rule_queue.add(new.metadata.name)
        if old is not None and new is not None and old.spec == new.spec:
            return
        evicting = [r for r in (old, new) if r is not None and r.spec.taint.effect == _NO_EXECUTE]
        for claim in self.claims.list():
            if any(_rule_matches(rule, result) for rule in evicting for result in _results(claim)):
                self._queue_consumers(claim)

    def _queue_consumers(self, claim: resource_v1.ResourceClaim) -> None:
        for ref in claim.status.reserved_for:
            if ref.api_group == "" and ref.resource == "pods":
                self.queue.add((claim.metadata.namespace or "", ref.name))

    # -- the pods ------------------------------------------------------------------------
    async def _sync_pod(self, key: Key) -> None:
        namespace, name = key
        pod = self.pods.get(name, namespace)
        if pod is None:
            self._pending.pop(key, None)
            return
        eviction = self._pod_eviction(pod)
        if eviction is None:
            if self._pending.pop(key, None) == pod.metadata.uid:
                self.events.event(pod, events.NORMAL, EVICTION_REASON, "Cancelling deletion")
            return
        if pod.metadata.deletion_timestamp:
            return
        self._pending[key] = pod.metadata.uid
        for rule in eviction.rules:
            self._later(self.rule_queue, rule, self.rule_status_period)
        delay = (eviction.when - datetime.now(UTC)).total_seconds()
        if delay > 0:
            self._later(self.queue, key, delay)
            return
        await self._evict(pod)
        self._pending.pop(key, None)
        for name in eviction.rules:
            rule = self.rules.get(name) if self.rules is not None else None
            if rule is not None:
                self._stats(rule).evicted += 1

    async def _evict(self, pod: core_v1.Pod) -> None:
        """Upstream `addConditionAndDeletePod`: the Event, the condition, the delete."""
        self.events.event(pod, events.NORMAL, EVICTION_REASON, "Marking for deletion")
        condition = core_v1.PodCondition(
            type="DisruptionTarget",
            status="True",
            reason=CONDITION_REASON,
            message=CONDITION_MESSAGE,
            last_transition_time=tables.format_time(),
        )
        namespace = pod.metadata.namespace or ""
        try:
            if not any(
                c.type == condition.type and c.status == "True" and c.reason == CONDITION_REASON
                for c in pod.status.conditions
            ):
                patch = {"status": {"conditions": [codec.to_builtins(condition)]}}
                await self.api.patch(
                    core_v1.Pod,
                    pod.metadata.name,
                    patch,
                    namespace=namespace,
                    subresource="status",
                    patch_type="strategic",
                )
            await self.api.delete(
                core_v1.Pod, pod.metadata.name, namespace=namespace, uid=pod.metadata.uid
            )
        except (errors.NotFound, errors.Conflict):
            return  # gone, or replaced by another pod of the same name: nothing to evict

    def _pod_eviction(
        self, pod: core_v1.Pod, simulated: resource_v1.DeviceTaintRule | None = None
    ) -> _Eviction | None:
        """Upstream `podEvictionTime`: the earliest eviction of the pod's claims reserved
        for it, None if none is tainted (or it is not scheduled)."""
        if not pod.spec.node_name:
            return None
        eviction: _Eviction | None = None
        for claim in self._pod_claims(pod):
            claim_eviction = self._claim_eviction(claim, simulated)
            if claim_eviction is not None:
                eviction = claim_eviction.join(eviction)
        return eviction

    def _pod_claims(self, pod: core_v1.Pod) -> Iterator[resource_v1.ResourceClaim]:
        namespace = pod.metadata.namespace or ""
        names: list[tuple[str, bool]] = []
        for pod_claim in pod.spec.resource_claims:
            resolved = claimutil.claim_name(pod, pod_claim)
            if resolved is not None and resolved.name is not None:
                names.append((resolved.name, resolved.must_check_owner))
        special = pod.status.extended_resource_claim_status
        if special is not None and special.resource_claim_name:
            names.append((special.resource_claim_name, True))
        for name, must_check_owner in names:
            claim = self.claims.get(name, namespace)
            if claim is None or claim.status.allocation is None:
                continue
            if must_check_owner and not claimutil.is_for_pod(pod, claim):
                continue
            if claimutil.is_reserved_for_pod(pod, claim):
                yield claim

    def _claim_eviction(
        self, claim: resource_v1.ResourceClaim, simulated: resource_v1.DeviceTaintRule | None
    ) -> _Eviction | None:
        """Upstream `claimEvictionTime`: per NoExecute taint of an allocated device that
        no NoExecute toleration of its result tolerates forever, `timeAdded` plus the
        smallest matching `tolerationSeconds`; the earliest of them."""
        eviction: _Eviction | None = None
        for result in _results(claim):
            for taint, rule in self._evicting_taints(result, simulated):
                seconds: int | None = None
                forever = False
                for toleration in result.tolerations:
                    if toleration.effect != _NO_EXECUTE or not device_taints.tolerates(
                        toleration, taint
                    ):
                        continue
                    if toleration.toleration_seconds is None:
                        forever = True
                        break
                    given = max(toleration.toleration_seconds, 0)
                    seconds = given if seconds is None else min(seconds, given)
                if forever:
                    continue
                when = tables.parse_time(taint.time_added) or _EPOCH
                when += timedelta(seconds=seconds or 0)
                rules = frozenset([rule]) if rule else frozenset()
                eviction = _Eviction(when, rules).join(eviction)
        return eviction

    def _evicting_taints(
        self,
        result: resource_v1.DeviceRequestAllocationResult,
        simulated: resource_v1.DeviceTaintRule | None,
    ) -> Iterator[tuple[resource_v1.DeviceTaint, str]]:
        """The NoExecute taints of an allocated device: its slice's (rule name ""), then
        the rules' (a `simulated` rule counts as NoExecute in place of its stored self)."""
        device = self._device(result.driver, result.pool, result.device)
        for taint in device.taints if device is not None else ():
            if taint.effect == _NO_EXECUTE:
                yield taint, ""
        for rule in self.rules.list() if self.rules is not None else ():
            if simulated is not None and rule.metadata.name == simulated.metadata.name:
                continue
            if rule.spec.taint.effect == _NO_EXECUTE and _rule_matches(rule, result):
                yield rule.spec.taint, rule.metadata.name
        if simulated is not None and _rule_matches(simulated, result):
            taint = msgspec.structs.replace(simulated.spec.taint, effect=_NO_EXECUTE)
            yield taint, simulated.metadata.name

    def _device(self, driver: str, pool: str, name: str) -> resource_v1.Device | None:
        """The device in the newest generation of its pool's slices."""
        for slice_ in _newest(self._pools.get((driver, pool), {}).values()):
            for device in slice_.spec.devices:
                if device.name == name:
                    return device
        return None

    # -- the rules' status ---------------------------------------------------------------
    async def _sync_rule(self, name: str) -> None:
        assert self.rules is not None
        rule = self.rules.get(name)
        if rule is None:
            return
        stats = self._stats(rule)
        existing = next((c for c in rule.status.conditions if c.type == EVICTION_IN_PROGRESS), None)
        now = datetime.now(UTC)
        if existing is not None and existing.observed_generation == rule.metadata.generation:
            since = now - (tables.parse_time(existing.last_transition_time) or _EPOCH)
            wait = self.rule_status_period - since.total_seconds()
            if wait > 0:
                self._later(self.rule_queue, name, wait)
                return
        condition = self._rule_condition(rule, stats)
        if existing is not None and _same(existing, condition):
            return
        condition.last_transition_time = tables.format_time(now)
        await self.api.patch(
            resource_v1.DeviceTaintRule,
            name,
            {"status": {"conditions": [codec.to_builtins(condition)]}},
            subresource="status",
            patch_type="strategic",
        )

    def _stats(self, rule: resource_v1.DeviceTaintRule) -> _RuleStats:
        """The rule's counts, new for a rule made again under the same name."""
        stats = self._rule_stats.get(rule.metadata.name)
        if stats is None or stats.uid != rule.metadata.uid:
            stats = self._rule_stats[rule.metadata.name] = _RuleStats(rule.metadata.uid)
        return stats

    def _rule_condition(
        self, rule: resource_v1.DeviceTaintRule, stats: _RuleStats
    ) -> meta_v1.Condition:
        """Upstream `maybeUpdateRuleStatus`'s condition, but for its transition time."""
        effect = rule.spec.taint.effect
        condition = meta_v1.Condition(
            type=EVICTION_IN_PROGRESS,
            status="False",
            observed_generation=rule.metadata.generation or 0,
        )
        if effect == _NO_EXECUTE:
            counts = self._count(rule, simulated=None)
            if counts.pending_pods:
                condition.reason, condition.status = "PodsPendingEviction", "True"
                condition.message = (
                    f"{_pods(counts.pending_pods)} {_need(counts.pending_pods)} to be evicted "
                    f"in {_namespaces(len(counts.namespaces))}."
                )
            else:
                condition.reason = "Completed" if stats.evicted else "NotStarted"
        elif effect == _NONE:
            counts = self._count(rule, simulated=rule)
            condition.reason = "NoEffect"
            condition.message = (
                f"{_n(counts.slice_devices, 'published device')} selected. "
                f"{_n(counts.allocated_devices, 'allocated device')} selected. "
                f"{_pods(counts.pending_pods)} would be evicted in "
                f"{_namespaces(len(counts.namespaces))} if the effect was NoExecute. "
                "This information will not be updated again. Recreate the DeviceTaintRule to "
                "trigger an update."
            )
        else:
            condition.reason = "OtherEffect"
            condition.message = "Eviction only happens for the NoExecute effect."
        if stats.evicted:
            evicted = f"{_pods(stats.evicted)} evicted since starting the controller."
            condition.message = f"{condition.message} {evicted}".lstrip()
        return condition

    def _count(
        self, rule: resource_v1.DeviceTaintRule, simulated: resource_v1.DeviceTaintRule | None
    ) -> _Counts:
        counts = _Counts()
        for pod in self.pods.list():
            if pod.metadata.deletion_timestamp:
                continue
            eviction = self._pod_eviction(pod, simulated)
            if eviction is not None and rule.metadata.name in eviction.rules:
                counts.pending_pods += 1
                counts.namespaces.add(pod.metadata.namespace or "")
        if simulated is not None:
            for (driver, pool), slices in self._pools.items():
                for slice_ in _newest(slices.values()):
                    counts.slice_devices += sum(
                        device_taints.rule_matches_device(rule, driver, pool, d.name)
                        for d in slice_.spec.devices
                    )
            for claim in self.claims.list():
                counts.allocated_devices += sum(_rule_matches(rule, r) for r in _results(claim))
        return counts


def _key(pod: core_v1.Pod) -> Key:
    return (pod.metadata.namespace or "", pod.metadata.name)


def _results(claim: resource_v1.ResourceClaim) -> list[resource_v1.DeviceRequestAllocationResult]:
    allocation = claim.status.allocation
    return allocation.devices.results if allocation is not None else []


def _rule_matches(
    rule: resource_v1.DeviceTaintRule, result: resource_v1.DeviceRequestAllocationResult
) -> bool:
    return device_taints.rule_matches_device(rule, result.driver, result.pool, result.device)


def _newest(slices: Iterable[resource_v1.ResourceSlice]) -> list[resource_v1.ResourceSlice]:
    """The slices of a pool's newest generation: only they describe its devices."""
    listed = list(slices)
    newest = max((s.spec.pool.generation for s in listed), default=0)
    return [s for s in listed if s.spec.pool.generation == newest]


def _no_execute_taints(
    slices: Iterable[resource_v1.ResourceSlice],
) -> set[tuple[str, bytes]]:
    """(device, the taint as JSON) of every NoExecute taint in the pool's newest slices."""
    return {
        (device.name, codec.encode(taint))
        for slice_ in _newest(slices)
        for device in slice_.spec.devices
        for taint in device.taints
        if taint.effect == _NO_EXECUTE
    }


def _same(a: meta_v1.Condition, b: meta_v1.Condition) -> bool:
    """Equal but for the transition time, which moves only when something else does."""
    return (a.status, a.reason, a.message, a.observed_generation) == (
        b.status,
        b.reason,
        b.message,
        b.observed_generation,
    )


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def _pods(count: int) -> str:
    return _n(count, "pod")


def _need(count: int) -> str:
    return "needs" if count == 1 else "need"


def _namespaces(count: int) -> str:
    """Upstream's wording: "1 namespace", else "N different namespaces"."""
    return "1 namespace" if count == 1 else f"{count} different namespaces"
