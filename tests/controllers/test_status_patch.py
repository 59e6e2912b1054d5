"""The status merge patch the controllers write: every field named, zeros included."""

from __future__ import annotations

from drasim.common import codec
from drasim.common.api import batch_v1
from drasim.controllers.status_patch import merge_patch


def test_a_status_patch_names_every_field_so_counts_can_fall_to_zero() -> None:
    status = batch_v1.JobStatus(active=0, succeeded=1, start_time="2026-12-03T10:00:00Z")
    patch = merge_patch(status)["status"]
    assert patch["active"] == 0 and patch["succeeded"] == 1 and patch["conditions"] == []
    assert patch["startTime"] == "2026-12-03T10:00:00Z"
    assert patch["completionTime"] is None  # a None pointer deletes the field
    assert list(patch) == [
        "conditions",
        "startTime",
        "completionTime",
        "active",
        "succeeded",
        "failed",
        "terminating",
        "completedIndexes",
        "failedIndexes",
        "uncountedTerminatedPods",
        "ready",
    ]


def test_field_names_are_the_structs_wire_names_worked_out_once() -> None:
    names = codec.field_names(batch_v1.JobStatus)
    assert names[:2] == (("conditions", "conditions"), ("start_time", "startTime"))
    assert codec.field_names(batch_v1.JobStatus) is names
