"""Disruption controller: the status of each PodDisruptionBudget (upstream
pkg/controller/disruption).

For each budget, from the pods its selector matches (a nil selector matches none, an empty
one every pod of the namespace):

- expectedPods and desiredHealthy: for an integer minAvailable, expectedPods is the number
  of matching pods and desiredHealthy is minAvailable. For maxUnavailable or a percentage
  minAvailable, expectedPods is the scale of the pods' controllers (a Deployment's replicas
  for pods of its ReplicaSets, else the ReplicaSet's), each controller counted once, and
  the percentage rounds up; pods without a controller are left out. A pod whose controller
  is not found fails the sync (then no disruption is allowed, condition reason SyncFailed).
- currentHealthy: matching pods that are Ready, not being deleted and not in
  disruptedPods.
- disruptedPods: the eviction API's entries whose pod still exists, is not being deleted
  and was evicted less than DELETION_TIMEOUT ago; the budget is looked at again when the
  oldest such entry expires.
- disruptionsAllowed = max(0, currentHealthy - desiredHealthy), 0 when no pod is expected;
  the DisruptionAllowed condition and observedGeneration follow.

Budgets are synced again when their pods, they themselves, or the ReplicaSets and
Deployments of their namespace change. As upstream's, a sync records the Event `NoPods`
when the selector matches no pod, the Warning `UnmanagedPods` when expectedPods leaves out
pods without a controller, and the Warning `CalculateExpectedPodCountFailed` when a pod's
controller is missing (source "controllermanager").
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from datetime import datetime, timedelta

import msgspec

from drasim.common import codec, disruption, errors, labels
from drasim.common.api import apps_v1, core_v1, meta_v1, policy_v1
from drasim.common.client import ApiClient
from drasim.common.informer import Informer, Key, key_of
from drasim.controllers import events, podutil
from drasim.controllers.queue import WorkQueue
from drasim.controllers.replicaset import replicas

log = logging.getLogger(__name__)

COMPONENT = "controllermanager"
"""The disruption controller's name in its Events' `source` (upstream's)."""

# Upstream `DeletionTimeout`: an evicted pod not seen going by then is healthy again.
DELETION_TIMEOUT = timedelta(minutes=2)

# (uid, replicas) of a pod's controller; None when the pod has none; raises LookupError
# when its controller is missing.
ScaleOf = Callable[[core_v1.Pod], tuple[str, int] | None]


def selected_pods(pdb: policy_v1.PodDisruptionBudget, pods: list[core_v1.Pod]) -> list[core_v1.Pod]:
    """The budget's pods, as upstream's controller selects them (`LabelSelectorAsSelector`:
    nil matches nothing, empty matches everything)."""
    if pdb.spec.selector is None:
        return []
    selector = labels.from_label_selector(pdb.spec.selector)
    return [
        p
        for p in pods
        if p.metadata.namespace == pdb.metadata.namespace and selector.matches(p.metadata.labels)
    ]


def scaled_value(value: int | str, total: int) -> int:
    """`intstr.GetScaledValueFromIntOrPercent(value, total, roundUp=true)`."""
    if isinstance(value, int):
        return value
    return math.ceil(int(value.rstrip("%")) * total / 100)


def expected_and_desired(
    pdb: policy_v1.PodDisruptionBudget, pods: list[core_v1.Pod], scale_of: ScaleOf
) -> tuple[int, int]:
    """Upstream `getExpectedPodCount`: (expectedPods, desiredHealthy)."""
    spec = pdb.spec
    if spec.max_unavailable is not None:
        expected = expected_scale(pods, scale_of)
        return expected, max(0, expected - scaled_value(spec.max_unavailable, expected))
    if isinstance(spec.min_available, int):
        return len(pods), spec.min_available
    if isinstance(spec.min_available, str):
        expected = expected_scale(pods, scale_of)
        return expected, scaled_value(spec.min_available, expected)
    return 0, 0


def unmanaged_pods(pdb: policy_v1.PodDisruptionBudget, pods: list[core_v1.Pod]) -> list[str]:
    """Names of the budget's pods that its expectedPods leaves out: those without a
    controller, when expectedPods comes from the controllers' scale (maxUnavailable or a
    percentage minAvailable)."""
    spec = pdb.spec
    if spec.max_unavailable is None and not isinstance(spec.min_available, str):
        return []
    return [p.metadata.name for p in pods if p.metadata.controller_ref() is None]


def expected_scale(pods: list[core_v1.Pod], scale_of: ScaleOf) -> int:
    """Upstream `getExpectedScale`: the replicas of the pods' controllers, each once."""
    seen: dict[str, int] = {}
    for pod in pods:
        scale = scale_of(pod)
        if scale is not None:
            seen.setdefault(*scale)
    return sum(seen.values())


def disrupted_pods(
    pdb: policy_v1.PodDisruptionBudget, pods: list[core_v1.Pod], now: datetime
) -> tuple[dict[str, str], datetime | None]:
    """Upstream `buildDisruptedPodMap`: the entries still pending, and when the earliest of
    them expires."""
    result: dict[str, str] = {}
    recheck: datetime | None = None
    for pod in pods:
        if pod.metadata.deletion_timestamp is not None:
            continue
        when = (pdb.status.disrupted_pods or {}).get(pod.metadata.name)
        evicted = podutil.parse_time(when)
        if when is None or evicted is None:
            continue
        expires = evicted + DELETION_TIMEOUT
        if expires < now:
            continue  # not deleted in time: healthy again
        recheck = expires if recheck is None else min(recheck, expires)
        result[pod.metadata.name] = when
    return result, recheck


def current_healthy(pods: list[core_v1.Pod], disrupted: dict[str, str], now: datetime) -> int:
    """Upstream `countHealthyPods`."""
    healthy = 0
    for pod in pods:
        if pod.metadata.deletion_timestamp is not None:
            continue
        evicted = podutil.parse_time(disrupted.get(pod.metadata.name))
        if evicted is not None and evicted + DELETION_TIMEOUT > now:
            continue
        healthy += disruption.is_pod_ready(pod)
    return healthy


def compute_status(
    pdb: policy_v1.PodDisruptionBudget,
    pods: list[core_v1.Pod],
    scale_of: ScaleOf,
    now: datetime,
) -> tuple[policy_v1.PodDisruptionBudgetStatus, datetime | None]:
    """The budget's new status from its pods (upstream `trySync` and `updatePdbStatus`),
    and when to look again; raises LookupError when a pod's controller is missing."""
    selected = selected_pods(pdb, pods)
    expected, desired = expected_and_desired(pdb, selected, scale_of)
    disrupted, recheck = disrupted_pods(pdb, selected, now)
    healthy = current_healthy(selected, disrupted, now)
    allowed = healthy - desired
    status = policy_v1.PodDisruptionBudgetStatus(
        observed_generation=pdb.metadata.generation,
        disrupted_pods=disrupted or msgspec.UNSET,
        disruptions_allowed=allowed if expected > 0 and allowed > 0 else 0,
        current_healthy=healthy,
        desired_healthy=desired,
        expected_pods=expected,
        conditions=[codec.clone(c) for c in pdb.status.conditions],
    )
    disruption.update_disruption_allowed_condition(status, podutil.format_time(now))
    return status, recheck


def failed_status(
    pdb: policy_v1.PodDisruptionBudget, message: str, now: datetime
) -> policy_v1.PodDisruptionBudgetStatus:
    """Upstream `failSafe`: no disruption allowed, condition SyncFailed."""
    status = codec.clone(pdb.status)
    status.disruptions_allowed = 0
    conditions = list(status.conditions)
    disruption.set_condition(
        conditions,
        meta_v1.Condition(
            type=policy_v1.DISRUPTION_ALLOWED_CONDITION,
            status="False",
            reason=policy_v1.SYNC_FAILED_REASON,
            message=message,
            observed_generation=status.observed_generation,
        ),
        podutil.format_time(now),
    )
    status.conditions = conditions
    return status


class DisruptionController:
    """Keeps every PodDisruptionBudget's status current."""

    def __init__(
        self,
        api: ApiClient,
        *,
        budgets: Informer[policy_v1.PodDisruptionBudget],
        pods: Informer[core_v1.Pod],
        replica_sets: Informer[apps_v1.ReplicaSet],
        deployments: Informer[apps_v1.Deployment],
        concurrency: int = 16,
    ) -> None:
        self.api = api
        self.events = events.EventRecorder(api, component=COMPONENT)
        self.budgets = budgets
        self.pods = pods
        self.replica_sets = replica_sets
        self.deployments = deployments
        self.queue: WorkQueue[Key] = WorkQueue("disruption", self.sync, concurrency=concurrency)
        budgets.add_handlers(
            on_add=self._enqueue,
            on_update=lambda _old, new: self._enqueue(new),
            on_delete=self._enqueue,
        )
        pods.add_handlers(
            on_add=self._enqueue_for_pod,
            on_update=self._on_pod_update,
            on_delete=self._enqueue_for_pod,
        )
        for workloads in (replica_sets, deployments):
            workloads.add_handlers(
                on_add=self._enqueue_namespace,
                on_update=lambda _old, new: self._enqueue_namespace(new),
                on_delete=self._enqueue_namespace,
            )

    def _enqueue(self, pdb: policy_v1.PodDisruptionBudget) -> None:
        self.queue.add(key_of(pdb))

    def _enqueue_for_pod(self, pod: core_v1.Pod) -> None:
        for pdb in self.budgets.list():
            if selected_pods(pdb, [pod]):
                self._enqueue(pdb)

    def _on_pod_update(self, old: core_v1.Pod, new: core_v1.Pod) -> None:
        self._enqueue_for_pod(new)
        if old.metadata.labels != new.metadata.labels:
            self._enqueue_for_pod(old)

    def _enqueue_namespace(self, workload: apps_v1.ReplicaSet | apps_v1.Deployment) -> None:
        for pdb in self.budgets.list():
            if pdb.metadata.namespace == workload.metadata.namespace:
                self._enqueue(pdb)

    def scale_of(self, pod: core_v1.Pod) -> tuple[str, int] | None:
        """Upstream's finders: the Deployment of the pod's ReplicaSet, else the ReplicaSet."""
        ref = pod.metadata.controller_ref()
        if ref is None:
            return None
        namespace = pod.metadata.namespace
        if ref.kind == "ReplicaSet" and ref.api_version == "apps/v1":
            rs = self.replica_sets.get(ref.name, namespace)
            if rs is None or rs.metadata.uid != ref.uid:
                raise LookupError(f"found no controllers for pod {pod.metadata.name!r}")
            owner = rs.metadata.controller_ref()
            if owner is not None and owner.kind == "Deployment" and owner.api_version == "apps/v1":
                deploy = self.deployments.get(owner.name, namespace)
                if deploy is None or deploy.metadata.uid != owner.uid:
                    raise LookupError(f"found no controllers for pod {pod.metadata.name!r}")
                return deploy.metadata.uid, replicas(deploy.spec)
            return rs.metadata.uid, replicas(rs.spec)
        raise LookupError(f"found no controllers for pod {pod.metadata.name!r}")

    async def sync(self, key: Key) -> None:
        namespace, name = key
        pdb = self.budgets.get(name, namespace)
        if pdb is None:
            return
        now = podutil.now()
        pods = [p for p in self.pods.list() if p.metadata.namespace == namespace]
        recheck = None
        selected = selected_pods(pdb, pods)
        if not selected:
            self.events.event(pdb, events.NORMAL, "NoPods", "No matching pods found")
        if unmanaged_pods(pdb, selected):
            self.events.event(
                pdb,
                events.WARNING,
                "UnmanagedPods",
                "Pods selected by this PodDisruptionBudget (selector: "
                f"{codec.encode(pdb.spec.selector).decode()}) were found to be unmanaged. As a "
                "result, the status of the PDB cannot be calculated correctly, which may "
                "result in undefined behavior. To account for these pods please set "
                '".spec.minAvailable" field of the PDB to an integer value.',
            )
        try:
            status, recheck = compute_status(pdb, pods, self.scale_of, now)
        except LookupError as exc:
            self.events.event(
                pdb,
                events.WARNING,
                "CalculateExpectedPodCountFailed",
                f"Failed to calculate the number of expected pods: {exc}",
            )
            status = failed_status(pdb, str(exc), now)
        if status != pdb.status:
            updated = codec.clone(pdb)
            updated.status = status
            try:
                await self.api.update_status(updated)
            except errors.NotFound:
                return
        if recheck is not None:
            self.queue.add_after(key, max((recheck - now).total_seconds(), 0.0))
