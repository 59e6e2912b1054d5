"""Defaulting of batch/v1 Jobs and CronJobs, as upstream's `pkg/apis/batch/v1/defaults.go`
and `SetObjectDefaults_Job` / `_CronJob`. A CronJob's job template gets its pod spec's
defaults and its failure policy's, not a Job's own (backoffLimit, completions...): those
come when the CronJob controller creates the Job."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from drasim.common.api import batch_v1
from drasim.common.api.defaults.core import default_pod_spec

__all__ = ["DEFAULTERS", "default_cron_job", "default_job"]

_DEFAULT_BACKOFF_LIMIT = 6
_INT32_MAX = 2**31 - 1


def default_job(job: batch_v1.Job) -> None:
    spec = job.spec
    if spec.completions is None and spec.parallelism is None:
        spec.completions = 1
        spec.parallelism = 1
    if spec.parallelism is None:
        spec.parallelism = 1
    if spec.backoff_limit is None:
        per_index = spec.backoff_limit_per_index is not None
        spec.backoff_limit = _INT32_MAX if per_index else _DEFAULT_BACKOFF_LIMIT
    template_labels = spec.template.metadata.labels
    if template_labels and not job.metadata.labels:
        # The same map, as Go's assignment shares it: the labels the Job strategy adds to
        # the template then show on the Job too.
        job.metadata.labels = template_labels
    if spec.completion_mode is None:
        spec.completion_mode = "NonIndexed"
    if spec.suspend is None:
        spec.suspend = False
    if spec.pod_replacement_policy is None:
        failed_only = spec.pod_failure_policy is not None
        spec.pod_replacement_policy = "Failed" if failed_only else "TerminatingOrFailed"
    if spec.manual_selector is None:
        spec.manual_selector = False
    _default_job_spec_parts(spec)


def _default_job_spec_parts(spec: batch_v1.JobSpec) -> None:
    """What every JobSpec gets, a CronJob's template included."""
    if spec.pod_failure_policy is not None:
        for rule in spec.pod_failure_policy.rules:
            for pattern in rule.on_pod_conditions:
                if not pattern.status:
                    pattern.status = "True"
    default_pod_spec(spec.template.spec)


def default_cron_job(cron_job: batch_v1.CronJob) -> None:
    spec = cron_job.spec
    if not spec.concurrency_policy:
        spec.concurrency_policy = "Allow"
    if spec.suspend is None:
        spec.suspend = False
    if spec.successful_jobs_history_limit is None:
        spec.successful_jobs_history_limit = 3
    if spec.failed_jobs_history_limit is None:
        spec.failed_jobs_history_limit = 1
    _default_job_spec_parts(spec.job_template.spec)


DEFAULTERS: dict[type, Callable[[Any], None]] = {
    batch_v1.Job: default_job,
    batch_v1.CronJob: default_cron_job,
}
