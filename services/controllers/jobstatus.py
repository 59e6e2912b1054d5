"""One Job sync's picture of its pods and the status it writes (upstream's `syncJobCtx`
and the bookkeeping of `syncJob` / `trackJobStatusAndRemoveFinalizers`): pure, so the
controller (`job.py`) only reads it and writes what it says."""

from __future__ import annotations

from datetime import datetime

import msgspec

from drasim.common.api import batch_v1, core_v1
from drasim.controllers import events, jobutil, podutil

__all__ = ["JobStatusBuilder"]


def _condition(
    type_: str, status: str, reason: str, message: str, now: datetime
) -> batch_v1.JobCondition:
    when = podutil.format_time(now)
    return batch_v1.JobCondition(
        type=type_,
        status=status,
        last_probe_time=when,
        last_transition_time=when,
        reason=reason,
        message=message,
    )


class JobStatusBuilder:
    """The Job's pods as one sync sees them, and its next status (`status`), built in the
    order upstream's sync builds it."""

    def __init__(self, job: batch_v1.Job, pods: list[core_v1.Pod], now: datetime) -> None:
        self.job = job
        self.pods = pods
        self.now = now
        self.status = msgspec.structs.replace(job.status, conditions=list(job.status.conditions))
        uncounted = job.status.uncounted_terminated_pods or batch_v1.UncountedTerminatedPods()
        self.uncounted_succeeded = list(uncounted.succeeded)
        self.uncounted_failed = list(uncounted.failed)
        self.active_pods = [p for p in pods if podutil.is_pod_active(p)]
        self.active = len(self.active_pods)
        self.ready = sum(podutil.is_pod_ready(p) for p in self.active_pods)
        self.terminating = sum(jobutil.is_terminating(p) for p in pods)
        self.with_finalizer = {
            p.metadata.uid for p in pods if batch_v1.JOB_TRACKING_FINALIZER in p.metadata.finalizers
        }
        fresh = [p for p in pods if p.metadata.uid in self.with_finalizer]
        self.new_succeeded = [
            p for p in fresh
            if p.status.phase == "Succeeded" and p.metadata.uid not in self.uncounted_succeeded
        ]  # fmt: skip
        self.new_failed = [
            p for p in fresh
            if jobutil.is_pod_failed(p, job) and p.metadata.uid not in self.uncounted_failed
        ]  # fmt: skip
        counted_failures = sum(
            jobutil.match_pod_failure_policy(job, p).count_failed for p in self.new_failed
        )
        self.succeeded = (
            job.status.succeeded + len(self.new_succeeded) + len(self.uncounted_succeeded)
        )
        self.failed = job.status.failed + counted_failures + len(self.uncounted_failed)
        self.succeeded_indexes: set[int] = set()
        if jobutil.is_indexed(job):
            completions = job.spec.completions or 0
            self.succeeded_indexes = jobutil.parse_indexes(
                job.status.completed_indexes, completions
            )
            for pod in pods:
                index = jobutil.completion_index(pod)
                if pod.status.phase == "Succeeded" and index is not None and index < completions:
                    self.succeeded_indexes.add(index)
            self.succeeded = len(self.succeeded_indexes)
        if self.status.start_time is None and not jobutil.is_suspended(job):
            self.status.start_time = podutil.format_time(now)
        self.backoff = jobutil.BackoffRecord()
        # The condition the Job ends with (Complete or Failed) once its pods are counted.
        self.finished: batch_v1.JobCondition | None = None
        self._written = job.status

    def new_backoff(self, previous: jobutil.BackoffRecord) -> None:
        self.backoff = previous.updated(len(self.new_succeeded), len(self.new_failed), self.now)

    def failure_condition(self) -> batch_v1.JobCondition | None:
        """What ends the Job before its pods are managed (upstream's order): a
        SuccessCriteriaMet or FailureTarget already recorded, a FailJob rule, too many
        failures, or the active deadline passed."""
        job = self.job
        found = jobutil.condition(job, "SuccessCriteriaMet")
        if found is not None and found.status == "True":
            return found
        found = jobutil.condition(job, "FailureTarget")
        if found is not None and found.status == "True":
            return found
        for pod in self.pods:
            if jobutil.is_pod_failed(pod, job) and pod.metadata.uid in self.with_finalizer:
                message = jobutil.match_pod_failure_policy(job, pod).fail_job_message
                if message is not None:
                    return self._failure(jobutil.REASON_POD_FAILURE_POLICY, message)
        if self.failed > (job.spec.backoff_limit if job.spec.backoff_limit is not None else 6):
            return self._failure(
                jobutil.REASON_BACKOFF_LIMIT_EXCEEDED, jobutil.MESSAGE_BACKOFF_LIMIT_EXCEEDED
            )
        left = jobutil.past_active_deadline(job, self.now)
        if left is not None and left <= 0:
            return self._failure(
                jobutil.REASON_DEADLINE_EXCEEDED, jobutil.MESSAGE_DEADLINE_EXCEEDED
            )
        return None

    def _failure(self, reason: str, message: str) -> batch_v1.JobCondition:
        return _condition("FailureTarget", "True", reason, message, self.now)

    def success_condition(self) -> batch_v1.JobCondition | None:
        completions = self.job.spec.completions
        enough = self.succeeded > 0 if completions is None else self.succeeded >= completions
        if enough and self.active == 0:
            return _condition(
                "SuccessCriteriaMet",
                "True",
                jobutil.REASON_COMPLETIONS_REACHED,
                jobutil.MESSAGE_COMPLETIONS_REACHED,
                self.now,
            )
        return None

    def note_created(self, count: int) -> None:
        self.active += count

    def note_deleted(self, count: int) -> None:
        self.active -= count
        self.terminating += count
        self.ready = min(self.ready, self.active)

    def track_suspension(self, recorder: events.EventRecorder) -> None:
        """The Suspended condition and its Events (`ensureJobConditionStatus`): set while
        suspended, turned False on resume, which restarts `startTime`."""
        if jobutil.is_suspended(self.job):
            if self._ensure_condition("Suspended", "True", "JobSuspended", "Job suspended"):
                recorder.event(self.job, events.NORMAL, "Suspended", "Job suspended")
                self.status.start_time = None
        elif self._ensure_condition("Suspended", "False", "JobResumed", "Job resumed"):
            recorder.event(self.job, events.NORMAL, "Resumed", "Job resumed")
            self.status.start_time = podutil.format_time(self.now)

    def _ensure_condition(self, type_: str, status: str, reason: str, message: str) -> bool:
        conditions = self.status.conditions
        for i, existing in enumerate(conditions):
            if existing.type == type_:
                if (existing.status, existing.reason, existing.message) == (
                    status,
                    reason,
                    message,
                ):
                    return False
                transition = (
                    podutil.format_time(self.now)
                    if existing.status != status
                    else existing.last_transition_time
                )
                conditions[i] = msgspec.structs.replace(
                    existing,
                    status=status,
                    reason=reason,
                    message=message,
                    last_probe_time=podutil.format_time(self.now),
                    last_transition_time=transition,
                )
                return True
        if status != "True":
            return False
        conditions.append(_condition(type_, status, reason, message, self.now))
        return True

    def record_uncounted(self) -> list[core_v1.Pod]:
        """Put the pods whose finalizer may go into `uncountedTerminatedPods` (Indexed:
        their indexes into `completedIndexes`), turn the finish into its interim condition,
        and return those pods."""
        release: list[core_v1.Pod] = []
        job, finished = self.job, self.finished
        ending = finished is not None and finished.type != "SuccessCriteriaMet"
        for pod in self.pods:
            if pod.metadata.uid not in self.with_finalizer:
                continue
            failed = jobutil.is_pod_failed(pod, job)
            if not (podutil.is_pod_terminal(pod) or failed or finished is not None):
                continue
            release.append(pod)
            uid = pod.metadata.uid
            if pod.status.phase == "Succeeded" and uid not in self.uncounted_failed:
                if not jobutil.is_indexed(job) and uid not in self.uncounted_succeeded:
                    self.uncounted_succeeded.append(uid)
            elif (
                (failed or ending)
                and uid not in self.uncounted_failed
                and jobutil.match_pod_failure_policy(job, pod).count_failed
            ):
                self.uncounted_failed.append(uid)
        if jobutil.is_indexed(job):
            self.status.completed_indexes = jobutil.format_indexes(self.succeeded_indexes)
            self.status.succeeded = len(self.succeeded_indexes)
        if finished is not None and finished.type in ("FailureTarget", "SuccessCriteriaMet"):
            if not jobutil.is_condition_true(job, finished.type):
                self.status.conditions.append(finished)
            final = "Failed" if finished.type == "FailureTarget" else "Complete"
            self.finished = _condition(final, "True", finished.reason, finished.message, self.now)
        self._set_counts()
        return release

    def count_released(self, released: set[str]) -> None:
        """The pods whose finalizer is gone are counted: their uids leave
        `uncountedTerminatedPods` for `succeeded` / `failed`."""
        still = self.with_finalizer - released
        succeeded = [u for u in self.uncounted_succeeded if u not in still]
        failed = [u for u in self.uncounted_failed if u not in still]
        self.uncounted_succeeded = [u for u in self.uncounted_succeeded if u in still]
        self.uncounted_failed = [u for u in self.uncounted_failed if u in still]
        if not jobutil.is_indexed(self.job):
            self.status.succeeded += len(succeeded)
        self.status.failed += len(failed)
        self.with_finalizer = still
        self._set_counts()

    def finish(self) -> bool:
        """`enactJobFinished`: once every finished pod is counted and none is still
        terminating, the final condition (and a Complete Job's completionTime)."""
        finished = self.finished
        if finished is None or self.uncounted_succeeded or self.uncounted_failed:
            return False
        if self.terminating > 0:
            return False
        self.status.conditions = [c for c in self.status.conditions if c.type != finished.type]
        self.status.conditions.append(finished)
        if finished.type == "Complete":
            self.status.completion_time = finished.last_transition_time
        return True

    def _set_counts(self) -> None:
        status = self.status
        status.active = self.active
        status.ready = self.ready
        status.terminating = self.terminating
        status.uncounted_terminated_pods = batch_v1.UncountedTerminatedPods(
            succeeded=list(self.uncounted_succeeded), failed=list(self.uncounted_failed)
        )

    def changed(self) -> bool:
        """Whether `status` differs from what was last written (and note it as written)."""
        self._set_counts()
        if self.status == self._written:
            return False
        self._written = msgspec.structs.replace(
            self.status, conditions=list(self.status.conditions)
        )
        return True
