"""The Job controller against a real apistore: pods up to parallelism until enough succeed,
counted through the tracking finalizer; failures, the failure policy, suspension, Indexed
Jobs and deletion. Pods finish as a kubelet reports it: a status patch to a terminal phase."""

from __future__ import annotations

import contextlib

import pytest

from drasim.common import codec, errors
from drasim.common.api import batch_v1, core_v1
from drasim.common.client import ApiClient
from drasim.controllers import ControllerManager
from tests.controllers.conftest import Changes

JOB = """\
apiVersion: batch/v1
kind: Job
metadata:
  name: bench
spec:
  completions: 10
  parallelism: 3
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: bench
        image: registry.k8s.io/pause:3.10
        resources:
          limits:
            example.com/gpu: 1
"""


def make_job(**spec: object) -> batch_v1.Job:
    [document] = codec.load_yaml_documents(JOB)
    document["spec"].update(spec)
    return codec.convert(document, batch_v1.Job)


def pods_of(manager: ControllerManager, job: str) -> list[core_v1.Pod]:
    return [
        p
        for p in manager.pods.cache.values()
        if p.metadata.labels.get(batch_v1.JOB_NAME_LABEL) == job
    ]


def active(manager: ControllerManager, job: str) -> list[core_v1.Pod]:
    return [
        p
        for p in pods_of(manager, job)
        if p.status.phase not in ("Succeeded", "Failed") and not p.metadata.deletion_timestamp
    ]


def job_of(manager: ControllerManager, name: str = "bench") -> batch_v1.Job | None:
    return manager.jobs.get(name, "default")


def true_conditions(job: batch_v1.Job | None) -> list[str]:
    return [c.type for c in job.status.conditions if c.status == "True"] if job else []


async def finish(api: ApiClient, pod: core_v1.Pod, phase: str, exit_code: int = 0) -> None:
    """What a kubelet reports when the pod's container exits."""
    terminated = {"exitCode": exit_code, "reason": "Completed" if exit_code == 0 else "Error"}
    with contextlib.suppress(errors.NotFound):
        await api.patch(
            core_v1.Pod,
            pod.metadata.name,
            {
                "status": {
                    "phase": phase,
                    "containerStatuses": [
                        {"name": "bench", "ready": False, "state": {"terminated": terminated}}
                    ],
                }
            },
            namespace="default",
            subresource="status",
        )


@pytest.fixture
def fast_backoff(manager: ControllerManager) -> None:
    manager.job.backoff_base = 0.05


async def test_a_job_of_ten_completions_runs_three_at_a_time_and_completes(
    api: ApiClient, manager: ControllerManager, changes: Changes
) -> None:
    await api.create(make_job())
    done = 0
    seen_most = 0
    while done < 10:
        running = await changes.until(lambda: active(manager, "bench"))
        assert len(running) <= 3
        seen_most = max(seen_most, len(running))
        for pod in running[: 10 - done]:
            await finish(api, pod, "Succeeded")
            done += 1
        await changes.until(lambda d=done: job_of(manager).status.succeeded >= d)
    assert seen_most == 3
    job = await changes.until(
        lambda: "Complete" in true_conditions(job_of(manager)) and job_of(manager)
    )
    assert true_conditions(job) == ["SuccessCriteriaMet", "Complete"]
    complete = job.status.conditions[-1]
    assert (complete.reason, complete.message) == (
        "CompletionsReached",
        "Reached expected number of succeeded pods",
    )
    assert (job.status.succeeded, job.status.failed, job.status.active) == (10, 0, 0)
    assert job.status.completion_time is not None and job.status.start_time is not None
    assert job.status.uncounted_terminated_pods == batch_v1.UncountedTerminatedPods()
    # Every pod was counted, so none keeps the tracking finalizer.
    pods = pods_of(manager, "bench")
    assert len(pods) == 10
    assert all(batch_v1.JOB_TRACKING_FINALIZER not in p.metadata.finalizers for p in pods)
    await manager.job.events.flush()
    reasons = [e.reason for e in (await api.list(core_v1.Event, namespace="default"))[0]]
    assert reasons.count("SuccessfulCreate") == 10 and "Completed" in reasons


async def test_pods_are_made_as_upstreams(
    api: ApiClient, manager: ControllerManager, changes: Changes
) -> None:
    job = await api.create(make_job(completions=1, parallelism=1))
    (pod,) = await changes.until(lambda: active(manager, "bench"))
    assert pod.metadata.name.startswith("bench-")
    assert pod.metadata.finalizers == [batch_v1.JOB_TRACKING_FINALIZER]
    (ref,) = pod.metadata.owner_references
    assert (ref.kind, ref.name, ref.uid, ref.controller) == ("Job", "bench", job.metadata.uid, True)
    assert pod.metadata.labels[batch_v1.CONTROLLER_UID_LABEL] == job.metadata.uid
    assert pod.spec.restart_policy == "Never"


async def test_failures_beyond_the_backoff_limit_fail_the_job(
    api: ApiClient, manager: ControllerManager, changes: Changes, fast_backoff: None
) -> None:
    await api.create(make_job(completions=1, parallelism=1, backoffLimit=1))
    for attempt in range(2):
        (pod,) = await changes.until(lambda: active(manager, "bench"))
        await finish(api, pod, "Failed", exit_code=1)
        await changes.until(lambda a=attempt: job_of(manager).status.failed == a + 1)
    job = await changes.until(
        lambda: "Failed" in true_conditions(job_of(manager)) and job_of(manager)
    )
    assert true_conditions(job) == ["FailureTarget", "Failed"]
    failed = job.status.conditions[-1]
    assert (failed.reason, failed.message) == (
        "BackoffLimitExceeded",
        "Job has reached the specified backoff limit",
    )
    assert job.status.failed == 2 and job.status.completion_time is None
    assert not active(manager, "bench")


async def test_a_fail_job_rule_fails_at_once_and_ignore_does_not_count(
    api: ApiClient, manager: ControllerManager, changes: Changes, fast_backoff: None
) -> None:
    policy = {
        "rules": [
            {"action": "Ignore", "onExitCodes": {"operator": "In", "values": [3]}},
            {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [42]}},
        ]
    }
    await api.create(
        make_job(completions=1, parallelism=1, backoffLimit=0, podFailurePolicy=policy)
    )
    (first,) = await changes.until(lambda: active(manager, "bench"))
    await finish(api, first, "Failed", exit_code=3)  # ignored: no failure, a new pod
    (second,) = await changes.until(
        lambda: [p for p in active(manager, "bench") if p.metadata.name != first.metadata.name]
    )
    assert job_of(manager).status.failed == 0
    await finish(api, second, "Failed", exit_code=42)
    job = await changes.until(
        lambda: "Failed" in true_conditions(job_of(manager)) and job_of(manager)
    )
    failed = job.status.conditions[-1]
    assert failed.reason == "PodFailurePolicy"
    assert failed.message == (
        f"Container bench for pod default/{second.metadata.name} failed with exit code 42 "
        "matching FailJob rule at index 1"
    )


async def test_suspend_deletes_the_pods_and_resume_makes_them_again(
    api: ApiClient, manager: ControllerManager, changes: Changes
) -> None:
    await api.create(make_job(completions=4, parallelism=2))
    await changes.until(lambda: len(active(manager, "bench")) == 2)
    await api.patch(batch_v1.Job, "bench", {"spec": {"suspend": True}}, namespace="default")
    job = await changes.until(
        lambda: "Suspended" in true_conditions(job_of(manager)) and job_of(manager)
    )
    assert job.status.start_time is None
    await changes.until(lambda: not active(manager, "bench"))
    await api.patch(batch_v1.Job, "bench", {"spec": {"suspend": False}}, namespace="default")
    await changes.until(lambda: len(active(manager, "bench")) == 2)
    suspended = await changes.until(
        lambda: next(
            (
                c
                for c in job_of(manager).status.conditions
                if c.type == "Suspended" and c.status == "False"
            ),
            None,
        )
    )
    assert (suspended.status, suspended.reason, suspended.message) == (
        "False",
        "JobResumed",
        "Job resumed",
    )


async def test_an_indexed_job_runs_each_index_once(
    api: ApiClient, manager: ControllerManager, changes: Changes
) -> None:
    await api.create(make_job(completions=3, parallelism=3, completionMode="Indexed"))
    pods = await changes.until(
        lambda: len(active(manager, "bench")) == 3 and active(manager, "bench")
    )
    by_index = {p.metadata.annotations[batch_v1.JOB_COMPLETION_INDEX_ANNOTATION]: p for p in pods}
    assert sorted(by_index) == ["0", "1", "2"]
    for index, pod in by_index.items():
        assert pod.metadata.name.startswith(f"bench-{index}-")
        assert pod.metadata.labels[batch_v1.JOB_INDEX_LABEL] == index
        assert pod.spec.hostname == f"bench-{index}"
    await finish(api, by_index["0"], "Succeeded")
    await finish(api, by_index["2"], "Succeeded")
    job = await changes.until(lambda: job_of(manager).status.succeeded == 2 and job_of(manager))
    assert job.status.completed_indexes == "0,2"
    await finish(api, by_index["1"], "Succeeded")
    job = await changes.until(
        lambda: "Complete" in true_conditions(job_of(manager)) and job_of(manager)
    )
    assert job.status.completed_indexes == "0-2"


async def test_deleting_a_job_releases_and_removes_its_pods(
    api: ApiClient, manager: ControllerManager, changes: Changes
) -> None:
    await api.create(make_job(completions=2, parallelism=2))
    await changes.until(lambda: len(active(manager, "bench")) == 2)
    await api.delete(batch_v1.Job, "bench", namespace="default", propagation_policy="Background")
    await changes.until(lambda: not pods_of(manager, "bench"))


async def test_a_finished_job_is_deleted_after_its_ttl(
    api: ApiClient, manager: ControllerManager, changes: Changes
) -> None:
    await api.create(make_job(completions=1, parallelism=1, ttlSecondsAfterFinished=0))
    (pod,) = await changes.until(lambda: active(manager, "bench"))
    await finish(api, pod, "Succeeded")
    await changes.until(lambda: job_of(manager) is None and not pods_of(manager, "bench"))
