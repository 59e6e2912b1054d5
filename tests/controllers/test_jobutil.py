"""The Job controller's pure rules: how many pods run, which count as failed, indexes, the
pod failure policy and the back-off."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from drasim.common import codec
from drasim.common.api import batch_v1, core_v1
from drasim.controllers import jobutil

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


def job(**spec: Any) -> batch_v1.Job:
    return codec.convert({"metadata": {"name": "j"}, "spec": spec}, batch_v1.Job)


def pod(
    phase: str = "Running", *, deleting: bool = False, exit_code: int | None = None
) -> core_v1.Pod:
    status: dict[str, Any] = {"phase": phase}
    if exit_code is not None:
        status["containerStatuses"] = [
            {"name": "c", "state": {"terminated": {"exitCode": exit_code}}}
        ]
    meta: dict[str, Any] = {"name": "p", "namespace": "ns"}
    if deleting:
        meta["deletionTimestamp"] = "2026-12-02T12:00:00Z"
    return codec.convert({"metadata": meta, "status": status}, core_v1.Pod)


@pytest.mark.parametrize(
    ("spec", "succeeded", "active", "want"),
    [
        ({"completions": 10, "parallelism": 3}, 0, 0, 3),
        ({"completions": 10, "parallelism": 3}, 8, 2, 2),
        ({"completions": 10, "parallelism": 3}, 10, 0, 0),
        ({"parallelism": 4}, 0, 0, 4),
        ({"parallelism": 4}, 1, 3, 3),  # one succeeded: the others may finish, none is added
    ],
    ids=["start", "near-the-end", "done", "work-queue", "work-queue-after-a-success"],
)
def test_want_active(spec: dict[str, int], succeeded: int, active: int, want: int) -> None:
    assert jobutil.want_active(job(**spec), succeeded, active) == want


def test_a_deleted_pod_counts_as_failed_unless_only_failed_pods_are_replaced() -> None:
    deleted = pod(deleting=True)
    assert jobutil.is_pod_failed(deleted, job(podReplacementPolicy="TerminatingOrFailed"))
    assert not jobutil.is_pod_failed(deleted, job(podReplacementPolicy="Failed"))
    assert not jobutil.is_pod_failed(pod("Succeeded", deleting=True), job())
    assert jobutil.is_pod_failed(pod("Failed"), job(podReplacementPolicy="Failed"))


@pytest.mark.parametrize(
    ("indexes", "text"),
    [([], ""), ([0], "0"), ([0, 1], "0,1"), ([0, 1, 2, 5, 7, 8], "0-2,5,7,8"), ([3, 1, 2], "1-3")],
)
def test_completed_indexes_are_written_as_upstreams_intervals(
    indexes: list[int], text: str
) -> None:
    assert jobutil.format_indexes(indexes) == text
    assert jobutil.parse_indexes(text, 100) == set(indexes)


def test_pending_indexes_skip_the_done_and_running() -> None:
    assert jobutil.first_pending_indexes(6, {0, 2, 3}, 2) == [1, 4]


def test_the_first_matching_failure_rule_decides() -> None:
    policy = {
        "rules": [
            {"action": "Ignore", "onExitCodes": {"operator": "In", "values": [3]}},
            {"action": "FailJob", "onExitCodes": {"operator": "NotIn", "values": [3, 5]}},
        ]
    }
    spec = job(podFailurePolicy=policy)
    assert jobutil.match_pod_failure_policy(spec, pod("Failed", exit_code=3)).count_failed is False
    counted = jobutil.match_pod_failure_policy(spec, pod("Failed", exit_code=5))
    assert (counted.count_failed, counted.action) == (True, None)
    fatal = jobutil.match_pod_failure_policy(spec, pod("Failed", exit_code=9))
    assert fatal.fail_job_message == (
        "Container c for pod ns/p failed with exit code 9 matching FailJob rule at index 1"
    )


def test_back_off_doubles_per_failure_and_a_success_resets_it() -> None:
    record = jobutil.BackoffRecord().updated(succeeded=0, failed=1, now=NOW)
    assert record.remaining(NOW, 10, 600) == 10
    record = record.updated(succeeded=0, failed=2, now=NOW)
    assert record.remaining(NOW + timedelta(seconds=5), 10, 600) == 35
    assert record.updated(succeeded=1, failed=0, now=NOW).remaining(NOW, 10, 600) == 0
    many = jobutil.BackoffRecord(failures_after_last_success=20, last_failure=NOW)
    assert many.remaining(NOW, 10, 600) == 600
