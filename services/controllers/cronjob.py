"""CronJob controller: a Job per scheduled time (upstream
`pkg/controller/cronjob/cronjob_controllerv2.go` and `utils.go`).

Each sync looks at the CronJob's Jobs: finished ones leave `status.active`
(`SawCompletedJob`) and a completed one moves `lastSuccessfulTime`; then, unless the
CronJob is suspended or being deleted, it finds the most recent scheduled time since the
last one (or since its creation, or within `startingDeadlineSeconds`) in its `timeZone`
(UTC without one, the controller manager's zone here). A time later than the starting
deadline allows is missed (`MissSchedule`); `Forbid` skips a time while a Job runs
(`JobAlreadyActive`); `Replace` deletes the running Jobs first. The Job is named
`<cronjob>-<scheduled time in minutes since the epoch>`, so a time is never run twice,
carries the `batch.kubernetes.io/cronjob-scheduled-timestamp` annotation and the
template's labels, and is recorded in `status.active` and `lastScheduleTime`. Finished
Jobs beyond `successfulJobsHistoryLimit` / `failedJobsHistoryLimit` are deleted, oldest
first. The CronJob is looked at again at its next scheduled time.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, tzinfo

import msgspec

from drasim.common import cron, errors
from drasim.common.api import batch_v1, core_v1, meta_v1
from drasim.common.client import ApiClient
from drasim.common.informer import Informer, Key, key_of
from drasim.controllers import events, jobutil, owners, podutil, status_patch
from drasim.controllers.queue import WorkQueue

__all__ = ["COMPONENT", "CronJobController", "job_name", "most_recent_schedule_time"]

log = logging.getLogger(__name__)

COMPONENT = "cronjob-controller"
# Upstream `nextScheduleDelta`: wake a little after the scheduled time.
NEXT_SCHEDULE_DELTA = timedelta(milliseconds=100)
# More missed times than this is a clock gone wrong (upstream's `manyMissed`).
TOO_MANY_MISSED = 100


def job_name(cron_job: batch_v1.CronJob, scheduled: datetime) -> str:
    """`getJobName`: the name is the scheduled time in minutes since the epoch."""
    return f"{cron_job.metadata.name}-{int(scheduled.timestamp()) // 60}"


def most_recent_schedule_time(
    cron_job: batch_v1.CronJob, now: datetime, schedule: cron.Schedule, *, with_deadline: bool
) -> tuple[datetime, datetime | None, int]:
    """`mostRecentScheduleTime`: (the earliest time considered, the latest scheduled time
    in (earliest, now] or None, about how many times were missed). The count is upstream's
    estimate from the first interval, so a clock off by years costs no walk over them."""
    stamp = cron_job.status.last_schedule_time or cron_job.metadata.creation_timestamp
    earliest = (podutil.parse_time(stamp) or now).astimezone(now.tzinfo)
    deadline = cron_job.spec.starting_deadline_seconds
    if with_deadline and deadline is not None:
        earliest = max(earliest, now - timedelta(seconds=deadline))
    first = schedule.next_after(earliest)
    second = schedule.next_after(first) if first is not None else None
    if first is None or now < first:
        return earliest, None, 0
    if second is None or now < second:
        return earliest, first, 1
    interval = (second - first).total_seconds()
    if interval < 1:
        return earliest, None, 0
    missed = int((now - first).total_seconds() // interval) + 1
    latest: datetime | None = None
    moment = schedule.next_after(first + timedelta(seconds=(missed - 2) * interval))
    while moment is not None and moment <= now:
        latest = moment
        moment = schedule.next_after(moment)
    return earliest, latest, missed


def _location(cron_job: batch_v1.CronJob) -> tzinfo:
    return cron.load_location(cron_job.spec.time_zone or "UTC")


class CronJobController:
    """Makes each CronJob's Jobs on schedule and keeps its status and history."""

    def __init__(
        self,
        api: ApiClient,
        *,
        cron_jobs: Informer[batch_v1.CronJob],
        jobs: Informer[batch_v1.Job],
        clock: Callable[[], datetime] = podutil.now,
    ) -> None:
        self.api = api
        self.events = events.EventRecorder(api, component=COMPONENT)
        self.cron_jobs = cron_jobs
        self.jobs = jobs
        self.clock = clock
        self.queue: WorkQueue[Key] = WorkQueue("cronjob", self.sync)
        # Expectations: the last CronJob status and Job this controller wrote per CronJob,
        # which the caches must have seen before a sync decides on them again.
        self._written: dict[Key, tuple[int, int]] = {}
        self._jobs_by_owner = owners.OwnerIndex(kind="CronJob", api_version="batch/v1")
        self._jobs_by_owner.attach(jobs)
        cron_jobs.add_handlers(
            on_add=self._enqueue,
            on_update=lambda _old, new: self._enqueue(new),
            on_delete=lambda cj: self.events.forget(cj.metadata.uid),
        )
        jobs.add_handlers(
            on_add=self._enqueue_owner,
            on_update=lambda _old, new: self._enqueue_owner(new),
            on_delete=self._enqueue_owner,
        )

    def _enqueue(self, cron_job: batch_v1.CronJob) -> None:
        self.queue.add(key_of(cron_job))

    def _enqueue_owner(self, job: batch_v1.Job) -> None:
        ref = owners.controller_ref(job, kind="CronJob", api_version="batch/v1")
        if ref is not None:
            self.queue.add((job.metadata.namespace, ref.name))

    async def sync(self, key: Key) -> None:
        namespace, name = key
        cron_job = self.cron_jobs.get(name, namespace)
        if cron_job is None:
            self._written.pop(key, None)
            return
        status_rv, job_rv = self._written.get(key, (0, 0))
        if self.cron_jobs.resource_version < status_rv or self.jobs.resource_version < job_rv:
            return
        jobs = [
            j for k in self._jobs_by_owner.keys(cron_job.metadata.uid)
            if (j := self.jobs.cache.get(k)) is not None
        ]  # fmt: skip
        status = msgspec.structs.replace(cron_job.status, active=list(cron_job.status.active))
        self._track_jobs(cron_job, status, jobs)
        wake = None
        if cron_job.metadata.deletion_timestamp is None and not cron_job.spec.suspend:
            wake = await self._schedule(cron_job, status)
        await self._clean_history(cron_job, status, jobs)
        if status != cron_job.status:
            written = await self.api.patch(
                batch_v1.CronJob,
                name,
                status_patch.merge_patch(status),
                namespace=namespace,
                subresource="status",
            )
            self._note(key, status_rv=int(written.metadata.resource_version))
        if wake is not None:
            self.queue.add_after(key, max(0.0, wake.total_seconds()))

    def _track_jobs(
        self, cron_job: batch_v1.CronJob, status: batch_v1.CronJobStatus, jobs: list[batch_v1.Job]
    ) -> None:
        uids = {j.metadata.uid for j in jobs}
        for job in jobs:
            if not jobutil.is_finished(job):
                continue
            if any(ref.uid == job.metadata.uid for ref in status.active):
                status.active = [r for r in status.active if r.uid != job.metadata.uid]
                condition = "Complete" if jobutil.is_condition_true(job, "Complete") else "Failed"
                self.events.event(
                    cron_job, events.NORMAL, "SawCompletedJob",
                    f"Saw completed job: {job.metadata.name}, condition: {condition}",
                )  # fmt: skip
            completed = job.status.completion_time
            if completed and (
                status.last_successful_time is None
                or podutil.parse_time(completed) > podutil.parse_time(status.last_successful_time)
            ):
                status.last_successful_time = completed
        for ref in list(status.active):
            if ref.uid not in uids and self.jobs.get(ref.name, ref.namespace) is None:
                self.events.event(
                    cron_job, events.NORMAL, "MissingJob", f"Active job went missing: {ref.name}"
                )
                status.active = [r for r in status.active if r.uid != ref.uid]

    async def _schedule(
        self, cron_job: batch_v1.CronJob, status: batch_v1.CronJobStatus
    ) -> timedelta | None:
        """Start the Job of the most recent scheduled time, if one is due; how long until
        the CronJob should be looked at again."""
        try:
            location = _location(cron_job)
        except cron.CronError as exc:
            self.events.event(
                cron_job, events.WARNING, "UnknownTimeZone",
                f'invalid timeZone: "{cron_job.spec.time_zone}": {exc}',
            )  # fmt: skip
            return None
        try:
            schedule = cron.parse(cron_job.spec.schedule)
        except cron.CronError as exc:
            self.events.event(
                cron_job, events.WARNING, "UnparseableSchedule",
                f'unparseable schedule: "{cron_job.spec.schedule}" : {exc}',
            )  # fmt: skip
            return None
        now = self.clock().astimezone(location)
        scheduled_view = msgspec.structs.replace(cron_job, status=status)
        _, scheduled, missed = most_recent_schedule_time(
            scheduled_view, now, schedule, with_deadline=True
        )
        if missed > TOO_MANY_MISSED:
            self.events.event(
                cron_job, events.WARNING, "TooManyMissedTimes",
                "too many missed start times. Set or decrease .spec.startingDeadlineSeconds "
                "or check clock skew",
            )  # fmt: skip
        wake = self._next_wake(scheduled_view, now, schedule)
        if scheduled is None:
            return wake
        deadline = cron_job.spec.starting_deadline_seconds
        if deadline is not None and scheduled + timedelta(seconds=deadline) < now:
            when = scheduled.astimezone(UTC).strftime("%a, %d %b %Y %H:%M:%S +0000")
            self.events.event(
                cron_job, events.WARNING, "MissSchedule",
                f"Missed scheduled time to start a job: {when}",
            )  # fmt: skip
            return wake
        name = job_name(cron_job, scheduled)
        last = podutil.parse_time(status.last_schedule_time)
        if any(r.name == name for r in status.active) or last == scheduled:
            return wake
        policy = cron_job.spec.concurrency_policy
        if policy == "Forbid" and status.active:
            self.events.event(
                cron_job, events.NORMAL, "JobAlreadyActive",
                "Not starting job because prior execution is running and concurrency policy is "
                "Forbid",
            )  # fmt: skip
            return wake
        if policy == "Replace":
            for ref in list(status.active):
                await self._delete_job(cron_job, ref.name)
                status.active = [r for r in status.active if r.uid != ref.uid]
        job = await self._create_job(cron_job, scheduled, location)
        if job is None:
            return wake
        status.active.append(
            core_v1.ObjectReference(
                kind="Job",
                namespace=job.metadata.namespace,
                name=job.metadata.name,
                uid=job.metadata.uid,
                api_version="batch/v1",
                resource_version=job.metadata.resource_version,
            )
        )
        status.last_schedule_time = podutil.format_time(scheduled)
        return self._next_wake(msgspec.structs.replace(cron_job, status=status), now, schedule)

    def _next_wake(
        self, cron_job: batch_v1.CronJob, now: datetime, schedule: cron.Schedule
    ) -> timedelta | None:
        """`nextScheduleTimeDuration`: until the next scheduled time after the latest one."""
        earliest, latest, missed = most_recent_schedule_time(
            cron_job, now, schedule, with_deadline=False
        )
        base = latest or (earliest if not missed else now)
        following = schedule.next_after(base)
        return None if following is None else following + NEXT_SCHEDULE_DELTA - now

    async def _create_job(
        self, cron_job: batch_v1.CronJob, scheduled: datetime, location: tzinfo
    ) -> batch_v1.Job | None:
        """`getJobFromTemplate2` and its create; an existing Job of that name is ours
        (already counted) or another's (left alone)."""
        template = cron_job.spec.job_template
        annotations = dict(template.metadata.annotations)
        annotations[batch_v1.CRONJOB_SCHEDULED_TIMESTAMP_ANNOTATION] = (
            scheduled.astimezone(location).isoformat().replace("+00:00", "Z")
        )
        job = batch_v1.Job(
            metadata=meta_v1.ObjectMeta(
                name=job_name(cron_job, scheduled),
                namespace=cron_job.metadata.namespace,
                labels=dict(template.metadata.labels),
                annotations=annotations,
                owner_references=[owners.new_controller_ref(cron_job)],
            ),
            spec=template.spec,
        )
        try:
            created = await self.api.create(job)
        except errors.AlreadyExists:
            return None
        except errors.ApiError as exc:
            self.events.event(
                cron_job, events.WARNING, "FailedCreate", f"Error creating job: {exc}"
            )
            raise
        self.events.event(
            cron_job, events.NORMAL, "SuccessfulCreate", f"Created job {created.metadata.name}"
        )
        self._note(key_of(cron_job), job_rv=int(created.metadata.resource_version))
        return created

    def _note(self, key: Key, *, status_rv: int = 0, job_rv: int = 0) -> None:
        old_status, old_job = self._written.get(key, (0, 0))
        self._written[key] = (max(old_status, status_rv), max(old_job, job_rv))

    async def _delete_job(self, cron_job: batch_v1.CronJob, name: str) -> None:
        try:
            await self.api.delete(
                batch_v1.Job,
                name,
                namespace=cron_job.metadata.namespace,
                propagation_policy="Background",
            )
        except errors.NotFound:
            pass
        except errors.ApiError as exc:
            self.events.event(cron_job, events.WARNING, "FailedDelete", f"Deleted job: {exc}")
            raise
        self.events.event(cron_job, events.NORMAL, "SuccessfulDelete", f"Deleted job {name}")

    async def _clean_history(
        self, cron_job: batch_v1.CronJob, status: batch_v1.CronJobStatus, jobs: list[batch_v1.Job]
    ) -> None:
        """`cleanupFinishedJobs`: the oldest finished Jobs beyond each history limit go."""
        for kind, limit in (
            ("Complete", cron_job.spec.successful_jobs_history_limit),
            ("Failed", cron_job.spec.failed_jobs_history_limit),
        ):
            if limit is None:
                continue
            finished = sorted(
                (j for j in jobs if jobutil.is_condition_true(j, kind)),
                key=lambda j: (j.status.start_time or "", j.metadata.name),
            )
            for job in finished[: max(0, len(finished) - limit)]:
                await self._delete_job(cron_job, job.metadata.name)
