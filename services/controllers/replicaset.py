"""ReplicaSet controller: `spec.replicas` pods of the template (upstream pkg/controller/replicaset).

Pods are named `<replicaset>-<5 random>` (generateName), carry the template's labels,
annotations and finalizers and a controller ownerReference to the ReplicaSet, and copy its
pod spec. Pods are found through that ownerReference; orphans matching the selector are not
adopted (upstream adopts them). Scaling down deletes the pods that matter least first, in
upstream's order (`controller.ActivePodsWithRanks`): unscheduled before scheduled, Pending
before Unknown before Running, not ready before ready, more pods of the set on the same node
before fewer, ready for less time before longer, more restarts before fewer, newer before
older. Status (replicas, fullyLabeledReplicas, readyReplicas, availableReplicas,
observedGeneration) is written through the status subresource.

A sync does not walk the set's pods: `owners.PodOwnerIndex` keeps the counts the status
reports current as pod events arrive, so a sync costs the same for 3 pods or 10,000. It
walks them only to pick the pods a scale-down deletes, to recount fullyLabeledReplicas
after the template's labels changed, and, with `minReadySeconds` > 0, to see which ready
pods have become available (a matter of time, not of events).

Each pod written is an Event on the ReplicaSet, as upstream's `RealPodControl` records
them: `SuccessfulCreate` "Created pod: NAME", `SuccessfulDelete` "Deleted pod: NAME", and
the Warnings `FailedCreate` "Error creating: ERROR" and `FailedDelete` "Error deleting:
ERROR" (a pod already gone is no failure).
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from drasim.common import errors, labels
from drasim.common.api import apps_v1, core_v1, meta_v1
from drasim.common.client import ApiClient
from drasim.common.informer import Informer, Key, key_of
from drasim.controllers import events, owners, podutil, status_patch
from drasim.controllers.queue import WorkQueue

log = logging.getLogger(__name__)

COMPONENT = "replicaset-controller"
"""The controller's name in its Events' `source` (upstream's)."""

# Event reasons (upstream `controller.FailedCreatePodReason` and its siblings).
SUCCESSFUL_CREATE = "SuccessfulCreate"
FAILED_CREATE = "FailedCreate"
SUCCESSFUL_DELETE = "SuccessfulDelete"
FAILED_DELETE = "FailedDelete"

# Upstream `burstReplicas`: at most this many pods are created or deleted by one sync.
BURST_REPLICAS = 500
# Upstream `controller.SlowStartInitialBatchSize`: creations go out in batches of 1, 2, 4, ...
# and stop at the first batch with an error, so a doomed create (quota, a bad template) is
# tried a few times rather than 500 times.
SLOW_START_INITIAL_BATCH_SIZE = 1


def replicas(spec: apps_v1.ReplicaSetSpec | apps_v1.DeploymentSpec) -> int:
    """`spec.replicas`, defaulted to 1 as the API server would."""
    return 1 if spec.replicas is None else spec.replicas


def pod_from_template(rs: apps_v1.ReplicaSet) -> core_v1.Pod:
    """`controller.GetPodFromTemplate`: a new pod of the set, named by the API server."""
    template = rs.spec.template
    return core_v1.Pod(
        metadata=meta_v1.ObjectMeta(
            generate_name=f"{rs.metadata.name}-",
            namespace=rs.metadata.namespace,
            labels=dict(template.metadata.labels),
            annotations=dict(template.metadata.annotations),
            finalizers=list(template.metadata.finalizers),
            owner_references=[owners.new_controller_ref(rs)],
        ),
        spec=template.spec,
    )


def pods_to_delete(pods: list[core_v1.Pod], count: int) -> list[core_v1.Pod]:
    """The `count` pods a scale-down removes, in upstream's `ActivePodsWithRanks` order."""
    colocated = Counter(p.spec.node_name for p in pods if p.spec.node_name)
    return sorted(pods, key=lambda p: _deletion_order(p, colocated))[:count]


_PHASE_ORDER = {"Pending": 0, "Unknown": 1, "Running": 2}


def _deletion_order(pod: core_v1.Pod, colocated: Counter[str]) -> tuple[Any, ...]:
    """Smaller sorts first and is deleted first; a missing timestamp counts as newest."""
    ready = podutil.is_pod_ready(pod)
    condition = podutil.ready_condition(pod)
    ready_since = podutil.parse_time(condition.last_transition_time) if condition else None
    created = podutil.parse_time(pod.metadata.creation_timestamp)
    restarts = max((c.restart_count for c in pod.status.container_statuses), default=0)
    return (
        bool(pod.spec.node_name),
        _PHASE_ORDER.get(pod.status.phase, 0),
        ready,
        -colocated[pod.spec.node_name] if pod.spec.node_name else 0,
        # Both ready: the one ready for less time goes first.
        _newest_first(ready_since) if ready else 0.0,
        -restarts,
        _newest_first(created),
    )


def _newest_first(when: datetime | None) -> float:
    return -when.timestamp() if when is not None else float("-inf")


@dataclass(frozen=True, slots=True)
class PodCounts:
    """A ReplicaSet's active pods as one sync counts them. Upstream lists the pods once per
    sync and both manages the replicas and computes the status from that list, though pod
    events arrive meanwhile; so these are taken once, at the start."""

    replicas: int
    fully_labeled_replicas: int
    ready_replicas: int
    available_replicas: int  # with minReadySeconds 0
    # With minReadySeconds > 0: the ready pods, whose availability depends on the time.
    ready: tuple[core_v1.Pod, ...] = ()


def calculate_status(
    rs: apps_v1.ReplicaSet, counts: PodCounts, now: datetime
) -> apps_v1.ReplicaSetStatus:
    """Upstream `calculateStatus`: the status `counts` make, at `now`."""
    min_ready = rs.spec.min_ready_seconds
    available = (
        sum(podutil.is_pod_available(p, min_ready, now) for p in counts.ready)
        if min_ready
        else counts.available_replicas
    )
    return apps_v1.ReplicaSetStatus(
        replicas=counts.replicas,
        fully_labeled_replicas=counts.fully_labeled_replicas,
        ready_replicas=counts.ready_replicas,
        available_replicas=available,
        observed_generation=rs.metadata.generation,
        conditions=rs.status.conditions,
    )


async def slow_start_batch(count: int, call: Callable[[], Awaitable[object]]) -> None:
    """`controller.slowStartBatch`: `call` `count` times in batches of 1, 2, 4, ...

    Stops after the first batch with a failure and raises its first error.
    """
    done, batch = 0, SLOW_START_INITIAL_BATCH_SIZE
    while done < count:
        size = min(batch, count - done)
        results = await asyncio.gather(*(call() for _ in range(size)), return_exceptions=True)
        failures = [r for r in results if isinstance(r, BaseException)]
        if failures:
            raise failures[0]
        done += size
        batch *= 2


class ReplicaSetController:
    """Reconciles each ReplicaSet's pods toward `spec.replicas` and reports its status."""

    def __init__(
        self,
        api: ApiClient,
        *,
        pods: Informer[core_v1.Pod],
        replica_sets: Informer[apps_v1.ReplicaSet],
        concurrency: int = 16,
        pods_by_owner: owners.PodOwnerIndex | None = None,
    ) -> None:
        self.api = api
        self.events = events.EventRecorder(api, component=COMPONENT)
        self.pods = pods
        self.replica_sets = replica_sets
        self.queue: WorkQueue[Key] = WorkQueue("replicaset", self.sync, concurrency=concurrency)
        self._pods_by_owner = pods_by_owner or owners.attached_pod_index(pods)
        # Upstream's "expectations": the resourceVersion of this controller's last pod write
        # per ReplicaSet. Until the pod cache has seen it, a sync would count stale pods and
        # create or delete twice; the write's own event requeues the ReplicaSet.
        self._written: dict[Key, int] = {}
        replica_sets.add_handlers(
            on_add=self._enqueue,
            on_update=lambda _old, new: self._enqueue(new),
            on_delete=self._on_delete,
        )
        pods.add_handlers(
            on_add=self._enqueue_owner,
            on_update=self._on_pod_update,
            on_delete=self._enqueue_owner,
        )

    def _enqueue(self, rs: apps_v1.ReplicaSet) -> None:
        self.queue.add(key_of(rs))

    def _on_delete(self, rs: apps_v1.ReplicaSet) -> None:
        self.events.forget(rs.metadata.uid)
        self._enqueue(rs)

    def _enqueue_owner(self, pod: core_v1.Pod) -> None:
        ref = owners.controller_ref(pod, kind="ReplicaSet", api_version="apps/v1")
        if ref is not None:
            self.queue.add((pod.metadata.namespace, ref.name))

    def _on_pod_update(self, old: core_v1.Pod, new: core_v1.Pod) -> None:
        self._enqueue_owner(new)
        if old.metadata.controller_ref() != new.metadata.controller_ref():
            self._enqueue_owner(old)

    async def sync(self, key: Key) -> None:
        namespace, name = key
        rs = self.replica_sets.get(name, namespace)
        if rs is None:
            self._written.pop(key, None)
            return
        if self.pods.resource_version < self._written.get(key, 0):
            return
        counts = self.count_pods(rs)
        try:
            if rs.metadata.deletion_timestamp is None:
                await self._manage_replicas(key, rs, counts)
        finally:
            await self._update_status(key, rs, counts)

    def count_pods(self, rs: apps_v1.ReplicaSet) -> PodCounts:
        """The set's active pods, counted from the index (no walk over them but the
        fallbacks the module docstring names)."""
        uid = rs.metadata.uid
        active = self._pods_by_owner.active(uid)
        template = labels.from_match_labels(rs.spec.template.metadata.labels)
        ready: tuple[core_v1.Pod, ...] = ()
        if rs.spec.min_ready_seconds:
            ready = tuple(p for k in active.ready if (p := self.pods.cache.get(k)) is not None)
        return PodCounts(
            replicas=len(active.active),
            fully_labeled_replicas=self._pods_by_owner.fully_labeled(uid, template),
            ready_replicas=len(active.ready),
            available_replicas=len(active.available),
            ready=ready,
        )

    def active_pods(self, rs: apps_v1.ReplicaSet) -> list[core_v1.Pod]:
        """The set's active pods (a walk: only a scale-down needs them)."""
        keys = self._pods_by_owner.active_keys(rs.metadata.uid)
        return [p for k in keys if (p := self.pods.cache.get(k)) is not None]

    async def _manage_replicas(self, key: Key, rs: apps_v1.ReplicaSet, counts: PodCounts) -> None:
        diff = counts.replicas - replicas(rs.spec)
        if diff < 0:
            want = min(-diff, BURST_REPLICAS)
            created: list[core_v1.Pod] = []

            async def create() -> None:
                try:
                    pod = await self.api.create(pod_from_template(rs))
                except errors.ApiError as exc:
                    self.events.event(rs, events.WARNING, FAILED_CREATE, f"Error creating: {exc}")
                    raise
                created.append(pod)
                self.events.event(
                    rs, events.NORMAL, SUCCESSFUL_CREATE, f"Created pod: {pod.metadata.name}"
                )

            try:
                await slow_start_batch(want, create)
            finally:
                self._note_written(key, created)
        elif diff > 0:
            # Before any await, so these are the pods `counts` counted.
            victims = pods_to_delete(self.active_pods(rs), min(diff, BURST_REPLICAS))
            results = await asyncio.gather(
                *(self._delete_pod(rs, pod) for pod in victims), return_exceptions=True
            )
            self._note_written(key, [r for r in results if isinstance(r, core_v1.Pod)])
            failures = [r for r in results if isinstance(r, BaseException)]
            if failures:
                raise failures[0]

    async def _delete_pod(self, rs: apps_v1.ReplicaSet, pod: core_v1.Pod) -> core_v1.Pod | None:
        meta = pod.metadata
        try:
            deleted = await self.api.delete(
                core_v1.Pod, meta.name, namespace=meta.namespace, uid=meta.uid
            )
        except errors.NotFound:
            return None
        except errors.ApiError as exc:
            self.events.event(rs, events.WARNING, FAILED_DELETE, f"Error deleting: {exc}")
            raise
        self.events.event(rs, events.NORMAL, SUCCESSFUL_DELETE, f"Deleted pod: {meta.name}")
        return deleted

    def _note_written(self, key: Key, pods: list[core_v1.Pod]) -> None:
        versions = [int(p.metadata.resource_version) for p in pods]
        if versions:
            self._written[key] = max(self._written.get(key, 0), *versions)

    async def _update_status(self, key: Key, rs: apps_v1.ReplicaSet, counts: PodCounts) -> None:
        min_ready = rs.spec.min_ready_seconds
        status = calculate_status(rs, counts, podutil.now())
        if status != rs.status:
            await self.api.patch(
                apps_v1.ReplicaSet,
                rs.metadata.name,
                status_patch.merge_patch(status),
                namespace=rs.metadata.namespace,
                subresource="status",
            )
        # Ready pods become available `minReadySeconds` later, and no event says when.
        if min_ready and status.ready_replicas > status.available_replicas:
            self.queue.add_after(key, float(min_ready))
