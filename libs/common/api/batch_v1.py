"""batch/v1: Job and CronJob (upstream `staging/src/k8s.io/api/batch/v1/types.go`)."""

from __future__ import annotations

from typing import ClassVar

import msgspec

from drasim.common.api.core_v1 import ObjectReference, PodTemplateSpec
from drasim.common.api.meta_v1 import KubeObject, KubeStruct, LabelSelector, ObjectMeta

__all__ = [
    "CONTROLLER_UID_LABEL",
    "CronJob",
    "CronJobSpec",
    "CronJobStatus",
    "JOB_COMPLETION_INDEX_ANNOTATION",
    "JOB_NAME_LABEL",
    "JOB_TRACKING_FINALIZER",
    "JOB_INDEX_LABEL",
    "CRONJOB_SCHEDULED_TIMESTAMP_ANNOTATION",
    "Job",
    "JobCondition",
    "JobSpec",
    "JobStatus",
    "JobTemplateSpec",
    "LEGACY_CONTROLLER_UID_LABEL",
    "LEGACY_JOB_NAME_LABEL",
    "PodFailurePolicy",
    "PodFailurePolicyOnExitCodesRequirement",
    "PodFailurePolicyOnPodConditionsPattern",
    "PodFailurePolicyRule",
    "SuccessPolicy",
    "SuccessPolicyRule",
    "UncountedTerminatedPods",
]

# Labels the Job strategy puts on the template (and selects), and the pods' finalizer and
# index annotation the Job controller uses (upstream `batch.JobNameLabel` and siblings).
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
LEGACY_JOB_NAME_LABEL = "job-name"
CONTROLLER_UID_LABEL = "batch.kubernetes.io/controller-uid"
LEGACY_CONTROLLER_UID_LABEL = "controller-uid"
JOB_TRACKING_FINALIZER = "batch.kubernetes.io/job-tracking"
JOB_COMPLETION_INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"
JOB_INDEX_LABEL = "batch.kubernetes.io/job-completion-index"
CRONJOB_SCHEDULED_TIMESTAMP_ANNOTATION = "batch.kubernetes.io/cronjob-scheduled-timestamp"


class PodFailurePolicyOnExitCodesRequirement(KubeStruct):
    container_name: str | None = None
    operator: str = ""  # In, NotIn
    values: list[int] = []


class PodFailurePolicyOnPodConditionsPattern(KubeStruct):
    type: str = ""
    status: str = ""  # defaulted to True


class PodFailurePolicyRule(KubeStruct):
    action: str = ""  # FailJob, FailIndex, Ignore, Count
    on_exit_codes: PodFailurePolicyOnExitCodesRequirement | None = None
    on_pod_conditions: list[PodFailurePolicyOnPodConditionsPattern] = []


class PodFailurePolicy(KubeStruct):
    rules: list[PodFailurePolicyRule] = []


class SuccessPolicyRule(KubeStruct):
    succeeded_indexes: str | None = None
    succeeded_count: int | None = None


class SuccessPolicy(KubeStruct):
    rules: list[SuccessPolicyRule] = []


class JobSpec(KubeStruct):
    parallelism: int | None = None
    completions: int | None = None
    active_deadline_seconds: int | None = None
    pod_failure_policy: PodFailurePolicy | None = None
    success_policy: SuccessPolicy | None = None
    backoff_limit: int | None = None
    backoff_limit_per_index: int | None = None
    max_failed_indexes: int | None = None
    selector: LabelSelector | None = None
    manual_selector: bool | None = None
    template: PodTemplateSpec = msgspec.field(default_factory=PodTemplateSpec)
    ttl_seconds_after_finished: int | None = None
    completion_mode: str | None = None  # NonIndexed, Indexed
    suspend: bool | None = None
    pod_replacement_policy: str | None = None  # TerminatingOrFailed, Failed
    managed_by: str | None = None


class JobCondition(KubeStruct):
    # Complete, Failed, Suspended, FailureTarget, SuccessCriteriaMet
    type: str = ""
    status: str = ""
    last_probe_time: str | None = None
    last_transition_time: str | None = None
    reason: str = ""
    message: str = ""


class UncountedTerminatedPods(KubeStruct):
    succeeded: list[str] = []
    failed: list[str] = []


class JobStatus(KubeStruct):
    conditions: list[JobCondition] = []
    start_time: str | None = None
    completion_time: str | None = None
    active: int = 0
    succeeded: int = 0
    failed: int = 0
    terminating: int | None = None
    completed_indexes: str = ""
    failed_indexes: str | None = None
    uncounted_terminated_pods: UncountedTerminatedPods | None = None
    ready: int | None = None


class Job(KubeObject):
    API_VERSION: ClassVar[str] = "batch/v1"
    KIND: ClassVar[str] = "Job"

    spec: JobSpec = msgspec.field(default_factory=JobSpec)
    status: JobStatus = msgspec.field(default_factory=JobStatus)


class JobTemplateSpec(KubeStruct):
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: JobSpec = msgspec.field(default_factory=JobSpec)


class CronJobSpec(KubeStruct):
    schedule: str = ""
    time_zone: str | None = None
    starting_deadline_seconds: int | None = None
    concurrency_policy: str = ""  # Allow (the default), Forbid, Replace
    suspend: bool | None = None
    job_template: JobTemplateSpec = msgspec.field(default_factory=JobTemplateSpec)
    successful_jobs_history_limit: int | None = None
    failed_jobs_history_limit: int | None = None


class CronJobStatus(KubeStruct):
    active: list[ObjectReference] = []
    last_schedule_time: str | None = None
    last_successful_time: str | None = None


class CronJob(KubeObject):
    API_VERSION: ClassVar[str] = "batch/v1"
    KIND: ClassVar[str] = "CronJob"

    spec: CronJobSpec = msgspec.field(default_factory=CronJobSpec)
    status: CronJobStatus = msgspec.field(default_factory=CronJobStatus)
