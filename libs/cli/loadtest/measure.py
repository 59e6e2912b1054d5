"""What `drasim loadtest` observes through its watches: clusterloader2's PodStartupLatency
and ResourceClaimAllocationLatency measurements, the Jobs' progress, and whether any
device is ever held twice at once: a DRA device by two claims (the claim watch), a
device-plugin device by two pods (the pod watch).

Each handler is an informer's (`drasim.common.informer`): called in event order, as the
event arrives, and stamps it with `time.monotonic()` then, as clusterloader2 stamps each
watch event with its receive time (`pkg/measurement/common/slos/pod_startup_latency.go`,
`resourceclaim_allocation_latency.go`):

- a pod's `create` is when the watch first shows it, `schedule` when it first shows a
  `spec.nodeName`, `run` when it first shows phase `Running`; its load-test phase
  (`fill`, `churn`) is its Job's `job-type` label, as the test's label selectors pick;
- a claim's `create` is when the watch first shows it unallocated (one first seen already
  allocated is left out, as upstream leaves it), `allocate` when it first shows it
  allocated (an allocation, a reservation or device status); its pod's `create` comes
  from the pod watch, through the claim's owner reference;
- a DRA device is held by a claim while the claim's allocation names it; a device-plugin
  device by a pod bound to its node, neither ended nor being deleted, whose container
  statuses name it in `allocatedResourcesStatus` (KEP-4680: what the device manager gave
  each container, by resource name and device id; the only place a cluster shows it
  outside the node, whose PodResources API drasim does not serve).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field

from drasim.cli.loadtest import slis, workload
from drasim.common.api import batch_v1, core_v1, resource_v1

__all__ = [
    "ClaimAllocations",
    "DeviceHolders",
    "Jobs",
    "PluginDeviceHolders",
    "PodStartups",
    "Progress",
    "plugin_devices",
]

CREATE, SCHEDULE, RUN = "create", "schedule", "run"
ALLOCATE, POD_CREATE = "allocate", "pod_create"
Clock = Callable[[], float]
# A device: (driver, pool, device) of a DRA one; (node, resource name, device id) of a
# device plugin's.
Device = tuple[str, str, str]
ENDED_PHASES = ("Succeeded", "Failed")
# KEP-4680 names a claim's entry in `allocatedResourcesStatus` `claim:<claim>/<request>`;
# any other name is a device plugin's resource.
_CLAIM_RESOURCE_PREFIX = "claim:"


class Progress:
    """Wakes whoever waits for the watched state to change (`wait_for`)."""

    def __init__(self) -> None:
        self._changed = asyncio.Event()

    def changed(self) -> None:
        self._changed.set()

    async def wait_for(self, done: Callable[[], bool], *, timeout: float, what: str) -> None:
        """Return once `done()` holds, checked at each change; TimeoutError naming `what`."""
        try:
            async with asyncio.timeout(timeout):
                while not done():
                    self._changed.clear()
                    await self._changed.wait()
        except TimeoutError:
            raise TimeoutError(f"{what}: not within {timeout:.0f} s") from None


def _key(obj: core_v1.Pod | resource_v1.ResourceClaim | batch_v1.Job) -> str:
    return f"{obj.metadata.namespace}/{obj.metadata.name}"


@dataclass
class PodStartups:
    """PodStartupLatency of the load test's pods, per phase, and the pods running now."""

    namespaces: Collection[str]
    progress: Progress
    clock: Clock = time.monotonic
    times: slis.TransitionTimes = field(default_factory=slis.TransitionTimes)
    phase_of: dict[str, str] = field(default_factory=dict)  # pod key → fill / churn
    running: dict[str, set[str]] = field(default_factory=dict)  # phase → pod keys

    def on_pod(self, pod: core_v1.Pod, _new: core_v1.Pod | None = None) -> None:
        """`on_add(pod)` and `on_update(old, new)` alike: what the newest version shows."""
        pod = _new or pod
        if pod.metadata.namespace not in self.namespaces:
            return
        now, key = self.clock(), _key(pod)
        if key not in self.phase_of:
            self.phase_of[key] = workload.phase_of_labels(pod.metadata.labels)
        running = self.running.setdefault(self.phase_of[key], set())
        if pod.spec.node_name:
            self.times.set_once(key, SCHEDULE, now)
        if pod.status.phase == "Running" and pod.metadata.deletion_timestamp is None:
            self.times.set_once(key, RUN, now)
            running.add(key)
        else:
            running.discard(key)
        self.times.set_once(key, CREATE, now)
        self.progress.changed()

    def on_delete(self, pod: core_v1.Pod) -> None:
        key = _key(pod)
        if key in self.phase_of:
            self.running.get(self.phase_of[key], set()).discard(key)
            self.progress.changed()

    def in_phase(self, phase: str) -> Callable[[str], bool]:
        return lambda key: self.phase_of.get(key) == phase

    def running_in(self, phase: str) -> int:
        return len(self.running.get(phase, ()))

    def created(self, phase: str) -> int:
        return sum(p == phase for p in self.phase_of.values())

    def started(self, phase: str) -> int:
        """Pods of `phase` seen running (those that have since finished included)."""
        return len(self.times.latencies(CREATE, RUN, keys=self.in_phase(phase)))

    def startup(self, phase: str) -> slis.LatencyMetric:
        """clusterloader2's `pod_startup`: first seen → first seen running."""
        return self.times.metric(CREATE, RUN, keys=self.in_phase(phase))

    def startup_by_window(self, phase: str, window: float) -> list[slis.LatencyMetric]:
        """`startup` of the pods first seen in each `window` seconds of `phase`."""
        return self.times.metric_by_window(CREATE, RUN, window, keys=self.in_phase(phase))

    def scheduling(self, phase: str) -> slis.LatencyMetric:
        """clusterloader2's `create_to_schedule`."""
        return self.times.metric(CREATE, SCHEDULE, keys=self.in_phase(phase))

    def create_time(self, key: str) -> float | None:
        return self.times.get(key, CREATE)


def is_allocated(claim: resource_v1.ResourceClaim) -> bool:
    """Upstream measurement's `isAllocated`: the claim's status is no longer empty."""
    status = claim.status
    return status.allocation is not None or bool(status.reserved_for) or bool(status.devices)


@dataclass
class ClaimAllocations:
    """ResourceClaimAllocationLatency of the claims in the load test's namespaces."""

    namespaces: Collection[str]
    pods: PodStartups
    clock: Clock = time.monotonic
    times: slis.TransitionTimes = field(default_factory=slis.TransitionTimes)
    owner: dict[str, str] = field(default_factory=dict)  # claim key → its pod's key
    special: set[str] = field(default_factory=set)  # keys of special claims (KEP-5004)

    def on_claim(
        self, claim: resource_v1.ResourceClaim, _new: resource_v1.ResourceClaim | None = None
    ) -> None:
        claim = _new or claim
        if claim.metadata.namespace not in self.namespaces:
            return
        key, allocated = _key(claim), is_allocated(claim)
        if allocated and self.times.get(key, CREATE) is None:
            return  # first seen already allocated: upstream leaves it out
        now = self.clock()
        self.times.set_once(key, CREATE, now)
        if allocated:
            self.times.set_once(key, ALLOCATE, now)
        if key not in self.owner:
            pod = next((r.name for r in claim.metadata.owner_references if r.kind == "Pod"), "")
            if pod:
                self.owner[key] = f"{claim.metadata.namespace}/{pod}"
            annotations = claim.metadata.annotations
            if annotations.get(resource_v1.EXTENDED_RESOURCE_CLAIM_ANNOTATION) == "true":
                self.special.add(key)

    def _with_pod_times(self) -> slis.TransitionTimes:
        """The claims' times with their pod's `create` (`pod_create`) added."""
        for key, pod in self.owner.items():
            created = self.pods.create_time(pod)
            if created is not None:
                self.times.set_once(key, POD_CREATE, created)
        return self.times

    def _in_phase(self, phase: str) -> Callable[[str], bool]:
        return lambda key: self.pods.phase_of.get(self.owner.get(key, "")) == phase

    def allocation(self, phase: str) -> slis.LatencyMetric:
        """clusterloader2's `claim_allocation`: the claim first seen → first seen allocated."""
        return self.times.metric(CREATE, ALLOCATE, keys=self._in_phase(phase))

    def pod_create_to_claim_create(self, phase: str) -> slis.LatencyMetric:
        """clusterloader2's `pod_create_to_claim_create`."""
        times = self._with_pod_times()
        return times.metric(POD_CREATE, CREATE, keys=self._in_phase(phase))

    def pod_create_to_allocation(self, phase: str, *, special: bool) -> slis.LatencyMetric:
        """The pod first seen → its claim first seen allocated: for the special claim, which
        the scheduler creates and allocates at once, the allocation latency the pod sees."""
        times, in_phase = self._with_pod_times(), self._in_phase(phase)
        return times.metric(
            POD_CREATE, ALLOCATE, keys=lambda k: in_phase(k) and (k in self.special) == special
        )


@dataclass
class _Holders:
    """Which holders (claims, pods) hold each device, as a watch shows them one event after
    the other: `twice` keeps every device ever held by two at the same time, `seen` every
    device ever held."""

    holders: dict[Device, set[str]] = field(default_factory=dict)
    held: dict[str, set[Device]] = field(default_factory=dict)
    twice: set[Device] = field(default_factory=set)
    seen: set[Device] = field(default_factory=set)

    def _hold(self, key: str, devices: set[Device]) -> None:
        before = self.held.pop(key, set())
        for device in before - devices:
            self.holders[device].discard(key)
        for device in devices - before:
            holders = self.holders.setdefault(device, set())
            holders.add(key)
            self.seen.add(device)
            if len(holders) > 1:
                self.twice.add(device)
        if devices:
            self.held[key] = devices


@dataclass
class DeviceHolders(_Holders):
    """DRA devices by the claims whose allocation holds them (admin access left out: it
    shares a device by design)."""

    def on_claim(
        self, claim: resource_v1.ResourceClaim, _new: resource_v1.ResourceClaim | None = None
    ) -> None:
        claim = _new or claim
        allocation = claim.status.allocation
        results = allocation.devices.results if allocation is not None else []
        devices = {(r.driver, r.pool, r.device) for r in results if not r.admin_access}
        self._hold(_key(claim), devices)

    def on_delete(self, claim: resource_v1.ResourceClaim) -> None:
        self._hold(_key(claim), set())


def plugin_devices(pod: core_v1.Pod) -> set[Device]:
    """The device-plugin devices `pod` holds now, as (node, resource name, device id), from
    its containers' `allocatedResourcesStatus`: none once the pod has ended or is being
    deleted, when its kubelet gives them back for other pods."""
    node = pod.spec.node_name
    ended = pod.status.phase in ENDED_PHASES or pod.metadata.deletion_timestamp is not None
    if not node or ended:
        return set()
    statuses = [*pod.status.init_container_statuses, *pod.status.container_statuses]
    return {
        (node, resource.name, health.resource_id)
        for status in statuses
        for resource in status.allocated_resources_status
        if not resource.name.startswith(_CLAIM_RESOURCE_PREFIX)
        for health in resource.resources
    }


@dataclass
class PluginDeviceHolders(_Holders):
    """Device-plugin devices by the pods holding them (`plugin_devices`). A regular init
    container hands its devices on to the containers after it: one pod, one holder."""

    def on_pod(self, pod: core_v1.Pod, _new: core_v1.Pod | None = None) -> None:
        pod = _new or pod
        self._hold(_key(pod), plugin_devices(pod))

    def on_delete(self, pod: core_v1.Pod) -> None:
        self._hold(_key(pod), set())


@dataclass
class Jobs:
    """The load test's Jobs per phase: how many were seen, finished (`Complete` or
    `Failed`), failed, or deleted before they finished; counted as they change, since
    waiters ask at every change."""

    namespaces: Collection[str]
    progress: Progress
    phase_of: dict[str, str] = field(default_factory=dict)
    finished: set[str] = field(default_factory=set)
    counts: dict[tuple[str, str], int] = field(default_factory=dict)  # (phase, what) → n

    def _count(self, key: str, what: str) -> None:
        at = (self.phase_of[key], what)
        self.counts[at] = self.counts.get(at, 0) + 1

    def on_job(self, job: batch_v1.Job, _new: batch_v1.Job | None = None) -> None:
        job = _new or job
        if job.metadata.namespace not in self.namespaces:
            return
        key = _key(job)
        if key not in self.phase_of:
            self.phase_of[key] = workload.phase_of_labels(job.metadata.labels)
            self._count(key, "seen")
        for condition in job.status.conditions:
            ended = condition.status == "True" and condition.type in ("Complete", "Failed")
            if ended and key not in self.finished:
                self.finished.add(key)
                self._count(key, "finished")
                if condition.type == "Failed":
                    self._count(key, "failed")
        self.progress.changed()

    def on_delete(self, job: batch_v1.Job) -> None:
        key = _key(job)
        if key in self.phase_of and key not in self.finished:
            self._count(key, "deleted")
        self.progress.changed()

    def count(self, phase: str, what: str) -> int:
        """Jobs of `phase` `seen`, `finished`, `failed`, or `deleted` before finishing."""
        return self.counts.get((phase, what), 0)

    def unfinished(self, phase: str) -> int:
        """Jobs of `phase` neither finished nor deleted."""
        seen, finished = self.count(phase, "seen"), self.count(phase, "finished")
        return seen - finished - self.count(phase, "deleted")
