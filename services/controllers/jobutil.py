"""The Job controller's pure rules (upstream `pkg/controller/job`: `job_controller.go`,
`indexed_job_utils.go`, `pod_failure_policy.go`, `backoff_utils.go`): which pods count as
failed, how many should run, which indexes are done, what a pod failure policy says, and
how long a Job waits before it replaces failed pods. No I/O: `job.py` acts on them."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from drasim.common.api import batch_v1, core_v1
from drasim.controllers import podutil

__all__ = [
    "BackoffRecord",
    "completion_index",
    "first_pending_indexes",
    "format_indexes",
    "is_finished",
    "is_pod_failed",
    "match_pod_failure_policy",
    "parse_indexes",
    "want_active",
]

# Upstream `DefaultJobPodFailureBackOff` and `MaxJobPodFailureBackOff`.
DEFAULT_POD_FAILURE_BACKOFF = 10.0
MAX_POD_FAILURE_BACKOFF = 600.0
# The condition reasons and messages upstream writes.
REASON_COMPLETIONS_REACHED = "CompletionsReached"
MESSAGE_COMPLETIONS_REACHED = "Reached expected number of succeeded pods"
REASON_BACKOFF_LIMIT_EXCEEDED = "BackoffLimitExceeded"
MESSAGE_BACKOFF_LIMIT_EXCEEDED = "Job has reached the specified backoff limit"
REASON_DEADLINE_EXCEEDED = "DeadlineExceeded"
MESSAGE_DEADLINE_EXCEEDED = "Job was active longer than specified deadline"
REASON_POD_FAILURE_POLICY = "PodFailurePolicy"


def condition(job: batch_v1.Job, type_: str) -> batch_v1.JobCondition | None:
    return next((c for c in job.status.conditions if c.type == type_), None)


def is_condition_true(job: batch_v1.Job, type_: str) -> bool:
    found = condition(job, type_)
    return found is not None and found.status == "True"


def is_finished(job: batch_v1.Job) -> bool:
    """`IsJobFinished`: Complete or Failed is True."""
    return is_condition_true(job, "Complete") or is_condition_true(job, "Failed")


def finish_time(job: batch_v1.Job) -> datetime | None:
    """When the Job finished: its Complete or Failed condition's transition."""
    for type_ in ("Complete", "Failed"):
        found = condition(job, type_)
        if found is not None and found.status == "True":
            return podutil.parse_time(found.last_transition_time)
    return None


def is_indexed(job: batch_v1.Job) -> bool:
    return job.spec.completion_mode == "Indexed"


def is_suspended(job: batch_v1.Job) -> bool:
    return bool(job.spec.suspend)


def is_pod_failed(pod: core_v1.Pod, job: batch_v1.Job) -> bool:
    """`isPodFailed`: Failed, or (unless only failed pods are replaced) deleted before it
    succeeded: an orphan that never reaches Failed still counts."""
    if pod.status.phase == "Failed":
        return True
    if job.spec.pod_replacement_policy == "Failed":
        return False
    return pod.metadata.deletion_timestamp is not None and pod.status.phase != "Succeeded"


def is_terminating(pod: core_v1.Pod) -> bool:
    """`controller.CountTerminatingPods`: being deleted, not yet ended."""
    return pod.metadata.deletion_timestamp is not None and not podutil.is_pod_terminal(pod)


def want_active(job: batch_v1.Job, succeeded: int, active: int) -> int:
    """How many pods should run (`manageJob`): up to parallelism, no more than the
    completions still missing; with no completions set, none once a pod succeeded (the
    running ones are left to finish)."""
    parallelism = job.spec.parallelism or 0
    if job.spec.completions is None:
        return active if succeeded > 0 else parallelism
    return max(0, min(job.spec.completions - succeeded, parallelism))


# --- Indexed Jobs ------------------------------------------------------------------------


def completion_index(pod: core_v1.Pod) -> int | None:
    """The pod's `batch.kubernetes.io/job-completion-index` annotation, None when absent or
    not a non-negative number."""
    value = pod.metadata.annotations.get(batch_v1.JOB_COMPLETION_INDEX_ANNOTATION, "")
    return int(value) if value.isdigit() else None


def parse_indexes(text: str, completions: int) -> set[int]:
    """A `completedIndexes` string ("1,3-5,7") as the set of indexes below `completions`."""
    found: set[int] = set()
    for part in filter(None, text.split(",")):
        first, _, last = part.partition("-")
        low, high = int(first), int(last or first)
        found.update(range(low, min(high, completions - 1) + 1))
    return found


def format_indexes(indexes: Iterable[int]) -> str:
    """Upstream's interval form (`orderedIntervals.String`): sorted, a run of three or
    more consecutive indexes as `a-b`, a pair as `a,b`: "0-2,5,6,9"."""
    parts: list[str] = []
    run: list[int] = []
    for index in sorted(set(indexes)):
        if run and index == run[-1] + 1:
            run.append(index)
            continue
        if run:
            parts.append(_interval(run))
        run = [index]
    if run:
        parts.append(_interval(run))
    return ",".join(parts)


def _interval(run: list[int]) -> str:
    if len(run) == 1:
        return str(run[0])
    return f"{run[0]},{run[1]}" if len(run) == 2 else f"{run[0]}-{run[-1]}"


def first_pending_indexes(completions: int, taken: set[int], count: int) -> list[int]:
    """The lowest `count` indexes below `completions` that are neither done nor running
    (`firstPendingIndexes`)."""
    pending: list[int] = []
    for index in range(completions):
        if len(pending) == count:
            break
        if index not in taken:
            pending.append(index)
    return pending


# --- pod failure policy -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PolicyMatch:
    """What a failure policy makes of a failed pod: whether it counts toward backoffLimit,
    the rule's action, and for FailJob the message the Job's condition carries."""

    count_failed: bool = True
    action: str | None = None
    fail_job_message: str | None = None


def match_pod_failure_policy(job: batch_v1.Job, pod: core_v1.Pod) -> PolicyMatch:
    """`matchPodFailurePolicy`: the first rule that matches, in order."""
    policy = job.spec.pod_failure_policy
    if policy is None:
        return PolicyMatch()
    meta = pod.metadata
    for index, rule in enumerate(policy.rules):
        message = None
        if rule.on_exit_codes is not None:
            status = _matching_exit_code(pod, rule.on_exit_codes)
            if status is None:
                continue
            code = status.state.terminated.exit_code if status.state.terminated else 0
            message = (
                f"Container {status.name} for pod {meta.namespace}/{meta.name} failed with exit "
                f"code {code} matching {rule.action} rule at index {index}"
            )
        elif rule.on_pod_conditions:
            matched = _matching_condition(pod, rule.on_pod_conditions)
            if matched is None:
                continue
            message = (
                f"Pod {meta.namespace}/{meta.name} has condition {matched.type} matching "
                f"{rule.action} rule at index {index}"
            )
        else:
            continue
        if rule.action == "Ignore":
            return PolicyMatch(count_failed=False, action="Ignore")
        if rule.action == "FailJob":
            return PolicyMatch(action="FailJob", fail_job_message=message)
        return PolicyMatch(action=rule.action)
    return PolicyMatch()


def _matching_exit_code(
    pod: core_v1.Pod, requirement: batch_v1.PodFailurePolicyOnExitCodesRequirement
) -> core_v1.ContainerStatus | None:
    statuses = [*pod.status.container_statuses, *pod.status.init_container_statuses]
    for status in statuses:
        terminated = status.state.terminated if status.state else None
        if terminated is None or terminated.exit_code == 0:
            continue
        if requirement.container_name not in (None, status.name):
            continue
        inside = terminated.exit_code in requirement.values
        if (requirement.operator == "In" and inside) or (
            requirement.operator == "NotIn" and not inside
        ):
            return status
    return None


def _matching_condition(
    pod: core_v1.Pod, patterns: list[batch_v1.PodFailurePolicyOnPodConditionsPattern]
) -> core_v1.PodCondition | None:
    for pod_condition in pod.status.conditions:
        for pattern in patterns:
            if pod_condition.type == pattern.type and pod_condition.status == pattern.status:
                return pod_condition
    return None


# --- back-off ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BackoffRecord:
    """`backoffRecord`: failures since the last success, and when the last one was seen.
    New pods wait `base * 2^(failures-1)` (capped) after the last failure."""

    failures_after_last_success: int = 0
    last_failure: datetime | None = None

    def updated(self, succeeded: int, failed: int, now: datetime) -> BackoffRecord:
        if succeeded:
            return BackoffRecord(
                failures_after_last_success=failed, last_failure=now if failed else None
            )
        if failed:
            return BackoffRecord(self.failures_after_last_success + failed, now)
        return self

    def remaining(self, now: datetime, base: float, cap: float) -> float:
        """Seconds left before a replacement may be created (0: now)."""
        if not self.failures_after_last_success or self.last_failure is None:
            return 0.0
        delay = min(base * 2 ** (self.failures_after_last_success - 1), cap)
        waited = (now - self.last_failure).total_seconds()
        return max(0.0, delay - waited)


def past_active_deadline(job: batch_v1.Job, now: datetime) -> float | None:
    """Seconds until `activeDeadlineSeconds` runs out (<= 0: it has), None without one or
    while suspended."""
    deadline = job.spec.active_deadline_seconds
    start = podutil.parse_time(job.status.start_time)
    if deadline is None or start is None or is_suspended(job):
        return None
    return (start + timedelta(seconds=deadline) - now).total_seconds()
