"""The CronJob controller against a real apistore, on a clock the test moves: a Job per
scheduled time, named by it, the concurrency policies, the starting deadline and the
history limits; and the schedule arithmetic on its own."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from drasim.common import codec, cron
from drasim.common.api import batch_v1, core_v1
from drasim.common.client import ApiClient
from drasim.common.informer import Informer
from drasim.controllers import ControllerManager
from drasim.controllers.cronjob import job_name, most_recent_schedule_time
from tests.controllers.conftest import Changes, about
from tests.controllers.test_job import finish

CRON_JOB = """\
apiVersion: batch/v1
kind: CronJob
metadata:
  name: tick
spec:
  schedule: "*/5 * * * *"
  jobTemplate:
    metadata:
      labels: {team: a}
    spec:
      template:
        spec:
          restartPolicy: Never
          containers:
          - name: bench
            image: registry.k8s.io/pause:3.10
"""


def make_cron_job(**spec: object) -> batch_v1.CronJob:
    [document] = codec.load_yaml_documents(CRON_JOB)
    document["spec"].update(spec)
    return codec.convert(document, batch_v1.CronJob)


class Clock:
    """The controller's now, moved by the test; each move pokes the CronJob."""

    def __init__(self, manager: ControllerManager) -> None:
        self.now = datetime.now(UTC)
        self.manager = manager
        manager.cron_job.clock = lambda: self.now

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)
        self.manager.cron_job.queue.add(("default", "tick"))


def jobs_of(manager: ControllerManager) -> list[batch_v1.Job]:
    return sorted(
        (j for j in manager.jobs.cache.values() if j.metadata.deletion_timestamp is None),
        key=lambda j: j.metadata.name,
    )


def cron_status(manager: ControllerManager) -> batch_v1.CronJobStatus:
    found = manager.cron_jobs.get("tick", "default")
    return found.status if found is not None else batch_v1.CronJobStatus()


def test_the_most_recent_time_and_the_missed_count() -> None:
    cron_job = make_cron_job()
    cron_job.metadata.creation_timestamp = "2026-12-02T10:00:30Z"
    schedule = cron.parse("*/5 * * * *")
    now = datetime(2026, 12, 2, 10, 17, tzinfo=UTC)
    _, latest, missed = most_recent_schedule_time(cron_job, now, schedule, with_deadline=False)
    assert (latest, missed) == (datetime(2026, 12, 2, 10, 15, tzinfo=UTC), 3)
    cron_job.spec.starting_deadline_seconds = 60
    _, latest, _ = most_recent_schedule_time(cron_job, now, schedule, with_deadline=True)
    assert latest is None  # 10:15 is older than the deadline allows
    decades = datetime(2046, 12, 2, 10, 17, tzinfo=UTC)
    _, latest, missed = most_recent_schedule_time(cron_job, decades, schedule, with_deadline=False)
    assert latest == datetime(2046, 12, 2, 10, 15, tzinfo=UTC) and missed > 100
    assert job_name(cron_job, datetime(2026, 12, 2, 10, 15, tzinfo=UTC)) == "tick-29936775"


async def test_a_job_per_scheduled_time(
    api: ApiClient, manager: ControllerManager, changes: Changes
) -> None:
    clock = Clock(manager)
    await api.create(make_cron_job())
    clock.advance(minutes=5)
    (job,) = await changes.until(lambda: jobs_of(manager))
    scheduled = podutil_minute(clock.now)
    assert job.metadata.name == f"tick-{int(scheduled.timestamp()) // 60}"
    assert job.metadata.labels["team"] == "a"
    stamp = job.metadata.annotations[batch_v1.CRONJOB_SCHEDULED_TIMESTAMP_ANNOTATION]
    assert datetime.fromisoformat(stamp) == scheduled
    (ref,) = job.metadata.owner_references
    assert (ref.kind, ref.name, ref.controller) == ("CronJob", "tick", True)
    status = await changes.until(lambda: cron_status(manager).active and cron_status(manager))
    assert [r.name for r in status.active] == [job.metadata.name]
    assert datetime.fromisoformat(status.last_schedule_time) == scheduled
    # Allow (the default) starts the next one beside the running one.
    clock.advance(minutes=5)
    await changes.until(lambda: len(jobs_of(manager)) == 2)


def podutil_minute(when: datetime) -> datetime:
    """The latest `*/5` time at or before `when`."""
    return when.replace(minute=when.minute - when.minute % 5, second=0, microsecond=0)


@pytest.mark.parametrize(
    ("policy", "reason"), [("Forbid", "JobAlreadyActive"), ("Replace", "SuccessfulDelete")]
)
async def test_forbid_skips_and_replace_replaces(
    api: ApiClient,
    manager: ControllerManager,
    seen: Informer[core_v1.Event],
    watch: Changes,
    policy: str,
    reason: str,
) -> None:
    clock = Clock(manager)
    await api.create(make_cron_job(concurrencyPolicy=policy))
    clock.advance(minutes=5)
    (first,) = await watch.until(lambda: jobs_of(manager))
    clock.advance(minutes=5)
    (event,) = await watch.until(lambda: about(seen, "CronJob", "tick", reason) or None)
    names = [j.metadata.name for j in jobs_of(manager)]
    if policy == "Forbid":
        assert event.message == (
            "Not starting job because prior execution is running and concurrency policy is Forbid"
        )
        assert names == [first.metadata.name]
    else:
        assert event.message == f"Deleted job {first.metadata.name}"
        (second,) = await watch.until(
            lambda: (
                (jobs := jobs_of(manager))
                and first.metadata.name not in {j.metadata.name for j in jobs}
                and jobs
            )
        )
        assert second.metadata.name > first.metadata.name


async def test_finished_jobs_leave_active_and_history_is_limited(
    api: ApiClient, manager: ControllerManager, changes: Changes
) -> None:
    clock = Clock(manager)
    await api.create(make_cron_job(successfulJobsHistoryLimit=1))
    for _ in range(2):
        clock.advance(minutes=5)
        (pod,) = await changes.until(
            lambda: [p for p in manager.pods.cache.values() if p.status.phase == "Pending"]
        )
        await finish(api, pod, "Succeeded")
        await changes.until(lambda: not cron_status(manager).active)
    # The older successful Job is gone, the newer kept.
    (kept,) = await changes.until(lambda: len(jobs_of(manager)) == 1 and jobs_of(manager))
    assert cron_status(manager).last_successful_time == kept.status.completion_time
