"""Job controller: pods until enough succeed, or the Job fails (upstream
`pkg/controller/job/job_controller.go`).

A Job runs up to `parallelism` pods of its template, no more than the completions still
missing; `Indexed` Jobs give each pod an index (its name `<job>-<index>-<random>`, the
`batch.kubernetes.io/job-completion-index` annotation and label, hostname `<job>-<index>`)
and finish when every index below `completions` has succeeded. Pods carry the
`batch.kubernetes.io/job-tracking` finalizer, so none is gone before it is counted: a
finished pod's uid goes first into `status.uncountedTerminatedPods`, then the finalizer is
removed, then the uid moves into `succeeded` or `failed`, each step written before the
next, so a controller killed between any two counts every pod exactly once.

Failures beyond `backoffLimit`, a pod failure policy's `FailJob` rule (its `Ignore` rules
do not count) or `activeDeadlineSeconds` running out make the Job `FailureTarget`: its
running pods are deleted, and once none is left it is `Failed`. Enough successes make it
`SuccessCriteriaMet`, then `Complete` with `completionTime`. Replacements of failed pods
wait upstream's back-off (10s doubling, at most 10 minutes). `suspend` deletes the running
pods (`Suspended`), resuming restarts the clock. Events as upstream's: SuccessfulCreate,
SuccessfulDelete, Completed, BackoffLimitExceeded (and the other failure reasons),
Suspended, Resumed.

Pods whose Job is gone or finished and which still hold the finalizer lose it (upstream's
orphan pod handling), so deleting a Job never leaves pods stuck.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime

import msgspec

from drasim.common import errors
from drasim.common.api import batch_v1, core_v1, meta_v1
from drasim.common.client import ApiClient
from drasim.common.informer import Informer, Key, key_of
from drasim.controllers import events, jobutil, owners, podutil, status_patch
from drasim.controllers.jobstatus import JobStatusBuilder
from drasim.controllers.queue import WorkQueue
from drasim.controllers.replicaset import pods_to_delete, slow_start_batch

__all__ = ["COMPONENT", "JobController", "pod_from_template"]

log = logging.getLogger(__name__)

COMPONENT = "job-controller"
MANAGED_BY = "kubernetes.io/job-controller"
FINALIZER = batch_v1.JOB_TRACKING_FINALIZER


def pod_from_template(job: batch_v1.Job, index: int | None) -> core_v1.Pod:
    """A new pod of the Job (`GetPodFromTemplate` and, Indexed, `addCompletionIndex...`)."""
    template = job.spec.template
    name = job.metadata.name
    labels = dict(template.metadata.labels)
    annotations = dict(template.metadata.annotations)
    spec = template.spec
    generate_name = f"{name}-"
    if index is not None:
        annotations[batch_v1.JOB_COMPLETION_INDEX_ANNOTATION] = str(index)
        labels[batch_v1.JOB_INDEX_LABEL] = str(index)
        generate_name = f"{name}-{index}-"
        if not spec.hostname:
            spec = _with_hostname(spec, f"{name}-{index}")
    return core_v1.Pod(
        metadata=meta_v1.ObjectMeta(
            generate_name=generate_name,
            namespace=job.metadata.namespace,
            labels=labels,
            annotations=annotations,
            finalizers=[*template.metadata.finalizers, FINALIZER],
            owner_references=[owners.new_controller_ref(job)],
        ),
        spec=spec,
    )


def _with_hostname(spec: core_v1.PodSpec, hostname: str) -> core_v1.PodSpec:
    return msgspec.structs.replace(spec, hostname=hostname)


class JobController:
    """Reconciles each Job's pods and status."""

    def __init__(
        self,
        api: ApiClient,
        *,
        jobs: Informer[batch_v1.Job],
        pods: Informer[core_v1.Pod],
        concurrency: int = 16,
        backoff_base: float = jobutil.DEFAULT_POD_FAILURE_BACKOFF,
        backoff_max: float = jobutil.MAX_POD_FAILURE_BACKOFF,
    ) -> None:
        self.api = api
        self.events = events.EventRecorder(api, component=COMPONENT)
        self.jobs = jobs
        self.pods = pods
        self.queue: WorkQueue[Key] = WorkQueue("job", self.sync, concurrency=concurrency)
        self.orphans: WorkQueue[Key] = WorkQueue("job-orphan-pods", self._release_orphan)
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self._pods_by_job = owners.OwnerIndex(kind="Job", api_version="batch/v1")
        self._pods_by_job.attach(pods)
        self._backoff: dict[Key, jobutil.BackoffRecord] = {}
        # Upstream's expectations: this controller's last pod write per Job, which the pod
        # cache must have seen before a sync counts pods again.
        self._written: dict[Key, int] = {}
        jobs.add_handlers(
            on_add=self._enqueue,
            on_update=lambda _old, new: self._enqueue(new),
            on_delete=self._on_delete,
        )
        pods.add_handlers(
            on_add=self._on_pod,
            on_update=lambda _old, new: self._on_pod(new),
            on_delete=self._on_pod,
        )

    def _enqueue(self, job: batch_v1.Job) -> None:
        self.queue.add(key_of(job))

    def _on_delete(self, job: batch_v1.Job) -> None:
        self.events.forget(job.metadata.uid)
        self._enqueue(job)
        for key in self._pods_by_job.keys(job.metadata.uid):
            self.orphans.add(key)

    def _on_pod(self, pod: core_v1.Pod) -> None:
        ref = owners.controller_ref(pod, kind="Job", api_version="batch/v1")
        if ref is None:
            if FINALIZER in pod.metadata.finalizers:
                self.orphans.add(key_of(pod))
            return
        self.queue.add((pod.metadata.namespace, ref.name))
        if FINALIZER in pod.metadata.finalizers:
            self.orphans.add(key_of(pod))

    # --- orphans -------------------------------------------------------------------------

    async def _release_orphan(self, key: Key) -> None:
        """Remove the finalizer of a pod no running Job of ours counts any more."""
        pod = self.pods.cache.get(key)
        if pod is None or FINALIZER not in pod.metadata.finalizers:
            return
        ref = owners.controller_ref(pod, kind="Job", api_version="batch/v1")
        job = self.jobs.get(ref.name, pod.metadata.namespace) if ref is not None else None
        if job is not None and job.metadata.uid == ref.uid and not jobutil.is_finished(job):
            return
        await self._remove_finalizer(pod)

    # --- sync ----------------------------------------------------------------------------

    async def sync(self, key: Key) -> None:
        namespace, name = key
        job = self.jobs.get(name, namespace)
        if job is None:
            self._backoff.pop(key, None)
            self._written.pop(key, None)
            return
        if job.spec.managed_by not in (None, MANAGED_BY) or jobutil.is_finished(job):
            self._backoff.pop(key, None)
            return
        if self.pods.resource_version < self._written.get(key, 0):
            return
        now = podutil.now()
        pods = self._pods_of(job)
        status = JobStatusBuilder(job, pods, now)
        status.new_backoff(self._backoff.get(key, jobutil.BackoffRecord()))
        failure = status.failure_condition()
        if failure is not None:
            deleted = await self._delete_pods(key, job, status.active_pods)
            if deleted != len(status.active_pods):
                failure = None
            status.note_deleted(deleted)
            status.finished = failure
        else:
            if job.metadata.deletion_timestamp is None:
                await self._manage(key, job, status, now)
            status.finished = status.success_condition()
            if status.finished is None:
                status.track_suspension(self.events)
        await self._track_and_flush(key, job, status)
        self._backoff[key] = status.backoff
        deadline = jobutil.past_active_deadline(job, now)
        if deadline is not None and deadline > 0 and status.finished is None:
            self.queue.add_after(key, deadline)

    def _pods_of(self, job: batch_v1.Job) -> list[core_v1.Pod]:
        keys = self._pods_by_job.keys(job.metadata.uid)
        return [p for k in keys if (p := self.pods.cache.get(k)) is not None]

    async def _manage(
        self, key: Key, job: batch_v1.Job, status: JobStatusBuilder, now: datetime
    ) -> None:
        """`manageJob`: delete what is too many, create what is missing (after back-off)."""
        active = status.active_pods
        if jobutil.is_suspended(job):
            deleted = await self._delete_pods(key, job, active, release=True)
            status.note_deleted(deleted)
            return
        want = jobutil.want_active(job, status.succeeded, len(active))
        if jobutil.is_indexed(job):
            await self._manage_indexed(key, job, status, now)
            return
        if len(active) > want:
            victims = pods_to_delete(active, len(active) - want)
            status.note_deleted(await self._delete_pods(key, job, victims, release=True))
            return
        missing = want - len(active)
        if job.spec.pod_replacement_policy == "Failed":
            missing = max(0, missing - status.terminating)
        if missing:
            await self._create_after_backoff(key, job, status, now, [None] * missing)

    async def _manage_indexed(
        self, key: Key, job: batch_v1.Job, status: JobStatusBuilder, now: datetime
    ) -> None:
        completions = job.spec.completions or 0
        by_index: dict[int, list[core_v1.Pod]] = {}
        for pod in status.active_pods:
            index = jobutil.completion_index(pod)
            by_index.setdefault(-1 if index is None or index >= completions else index, []).append(
                pod
            )
        # Duplicates, pods of indexes already done and pods without a valid index go.
        extra = by_index.pop(-1, [])
        for index, pods in by_index.items():
            if index in status.succeeded_indexes:
                extra += pods
            else:
                extra += pods[1:]
        if extra:
            status.note_deleted(await self._delete_pods(key, job, extra, release=True))
        running = {i for i, pods in by_index.items() if i not in status.succeeded_indexes}
        want = max(0, min(job.spec.parallelism or 0, completions - len(status.succeeded_indexes)))
        missing = want - len(running)
        if missing > 0:
            taken = status.succeeded_indexes | running
            indexes = jobutil.first_pending_indexes(completions, taken, missing)
            await self._create_after_backoff(key, job, status, now, indexes)

    async def _create_after_backoff(
        self,
        key: Key,
        job: batch_v1.Job,
        status: JobStatusBuilder,
        now: datetime,
        indexes: list[int | None],
    ) -> None:
        wait = status.backoff.remaining(now, self.backoff_base, self.backoff_max)
        if wait > 0:
            self.queue.add_after(key, wait)
            return
        pending = list(indexes)
        created: list[core_v1.Pod] = []

        async def create() -> None:
            index = pending.pop(0)
            try:
                pod = await self.api.create(pod_from_template(job, index))
            except errors.ApiError as exc:
                self.events.event(job, events.WARNING, "FailedCreate", f"Error creating: {exc}")
                raise
            created.append(pod)
            self.events.event(
                job, events.NORMAL, "SuccessfulCreate", f"Created pod: {pod.metadata.name}"
            )

        try:
            await slow_start_batch(len(indexes), create)
        finally:
            status.note_created(len(created))
            self._note_written(key, created)

    async def _delete_pods(
        self, key: Key, job: batch_v1.Job, pods: list[core_v1.Pod], *, release: bool = False
    ) -> int:
        """Delete the pods; how many went. Pods a failed Job deletes keep their finalizer
        until they are counted (as failed); those `manageJob` removes (`release`: too many,
        or suspended) lose it first, and are never counted (upstream's `deleteJobPods`)."""

        async def delete(pod: core_v1.Pod) -> core_v1.Pod | None:
            meta = pod.metadata
            try:
                if release and FINALIZER in meta.finalizers:
                    await self._remove_finalizer(pod)
                deleted = await self.api.delete(
                    core_v1.Pod, meta.name, namespace=meta.namespace, uid=meta.uid
                )
            except errors.NotFound:
                return None
            except errors.ApiError as exc:
                self.events.event(job, events.WARNING, "FailedDelete", f"Error deleting: {exc}")
                raise
            self.events.event(job, events.NORMAL, "SuccessfulDelete", f"Deleted pod: {meta.name}")
            return deleted

        results = await asyncio.gather(*(delete(p) for p in pods), return_exceptions=True)
        self._note_written(key, [r for r in results if isinstance(r, core_v1.Pod)])
        failures = [r for r in results if isinstance(r, BaseException)]
        if failures:
            raise failures[0]
        return len(pods)

    def _note_written(self, key: Key, pods: list[core_v1.Pod]) -> None:
        versions = [int(p.metadata.resource_version) for p in pods]
        if versions:
            self._written[key] = max(self._written.get(key, 0), *versions)

    # --- tracking ------------------------------------------------------------------------

    async def _track_and_flush(self, key: Key, job: batch_v1.Job, status: JobStatusBuilder) -> None:
        """`trackJobStatusAndRemoveFinalizers`: record the finished pods as uncounted, remove
        their finalizers, count them; then finish the Job if it is done."""
        release = status.record_uncounted()
        if status.changed():
            job = await self._write_status(job, status.status)
        if release:
            removed = await asyncio.gather(
                *(self._remove_finalizer(p) for p in release), return_exceptions=True
            )
            failures = [r for r in removed if isinstance(r, BaseException)]
            self._note_written(key, [r for r in removed if isinstance(r, core_v1.Pod)])
            if failures:
                raise failures[0]
            status.count_released({p.metadata.uid for p in release})
        if status.finish():
            self._record_finished(job, status)
        if status.changed():
            await self._write_status(job, status.status)

    def _record_finished(self, job: batch_v1.Job, status: JobStatusBuilder) -> None:
        finished = status.finished
        if finished is None:
            return
        if finished.type == "Complete":
            self.events.event(job, events.NORMAL, "Completed", "Job completed")
        else:
            self.events.event(job, events.WARNING, finished.reason, finished.message)

    async def _write_status(self, job: batch_v1.Job, status: batch_v1.JobStatus) -> batch_v1.Job:
        # Upstream updates the status of the Job it read: a Job the cache had not yet seen
        # at its last write conflicts, rather than counting backwards.
        patch = status_patch.merge_patch(status)
        # The uid lists by name: an empty one must empty what is stored.
        uncounted = status.uncounted_terminated_pods or batch_v1.UncountedTerminatedPods()
        patch["status"]["uncountedTerminatedPods"] = {
            "succeeded": uncounted.succeeded,
            "failed": uncounted.failed,
        }
        patch["metadata"] = {"resourceVersion": job.metadata.resource_version}
        updated = await self.api.patch(
            batch_v1.Job,
            job.metadata.name,
            patch,
            namespace=job.metadata.namespace,
            subresource="status",
        )
        return updated

    async def _remove_finalizer(self, pod: core_v1.Pod) -> core_v1.Pod | None:
        meta = pod.metadata
        try:
            return await self.api.patch(
                core_v1.Pod,
                meta.name,
                {"metadata": {"$deleteFromPrimitiveList/finalizers": [FINALIZER]}},
                namespace=meta.namespace,
                patch_type="strategic",
            )
        except errors.NotFound:
            return None
