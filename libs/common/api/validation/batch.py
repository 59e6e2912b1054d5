"""Validation of batch/v1 (`pkg/apis/batch/validation`): Jobs and CronJobs, whose pod
templates must not restart for ever (`OnFailure` or `Never`), and whose schedules are cron
as robfig/cron reads it."""

from __future__ import annotations

from drasim.common import codec, cron
from drasim.common.api import batch_v1
from drasim.common.api.meta_v1 import KubeObject
from drasim.common.api.validation import meta
from drasim.common.api.validation.apps import validate_pod_template, validate_selector
from drasim.common.errors import (
    FieldError,
    field_invalid,
    field_not_supported,
    field_required,
)

__all__ = ["STATUS_VALIDATORS", "VALIDATORS"]

_COMPLETION_MODES = ["NonIndexed", "Indexed"]
_POD_FAILURE_ACTIONS = ["Count", "FailIndex", "FailJob", "Ignore"]
_EXIT_CODE_OPERATORS = ["In", "NotIn"]
_CONCURRENCY_POLICIES = ["Allow", "Forbid", "Replace"]
# Upstream `maxParallelismForIndexedJob`.
_MAX_PARALLELISM_INDEXED = 100_000
# A CronJob's Jobs are named `<cronjob>-<minutes since the epoch>`, 11 characters more, and
# a Job's name must stay a DNS label (63).
_MAX_CRONJOB_NAME = 52


def _validate_job_spec(spec: batch_v1.JobSpec, path: str) -> list[FieldError]:
    """`validateJobSpec`: what a Job and a CronJob's job template share."""
    errs: list[FieldError] = []
    for name, value in (
        ("parallelism", spec.parallelism),
        ("completions", spec.completions),
        ("activeDeadlineSeconds", spec.active_deadline_seconds),
        ("backoffLimit", spec.backoff_limit),
        ("ttlSecondsAfterFinished", spec.ttl_seconds_after_finished),
        ("backoffLimitPerIndex", spec.backoff_limit_per_index),
        ("maxFailedIndexes", spec.max_failed_indexes),
    ):
        if value is not None:
            errs += meta.nonnegative(f"{path}.{name}", value)
    if spec.max_failed_indexes is not None and spec.backoff_limit_per_index is None:
        errs.append(
            field_required(f"{path}.backoffLimitPerIndex", "when maxFailedIndexes is specified")
        )
    mode = spec.completion_mode
    if mode is not None and mode not in _COMPLETION_MODES:
        errs.append(field_not_supported(f"{path}.completionMode", mode, _COMPLETION_MODES))
    if mode == "Indexed":
        if spec.completions is None:
            errs.append(field_required(f"{path}.completions", "when completion mode is Indexed"))
        if spec.parallelism is not None and spec.parallelism > _MAX_PARALLELISM_INDEXED:
            errs.append(
                field_invalid(
                    f"{path}.parallelism",
                    spec.parallelism,
                    f"must be less than or equal to {_MAX_PARALLELISM_INDEXED} when completion "
                    "mode is Indexed",
                )
            )
    else:
        for name, value in (
            ("backoffLimitPerIndex", spec.backoff_limit_per_index),
            ("maxFailedIndexes", spec.max_failed_indexes),
        ):
            if value is not None:
                errs.append(
                    field_invalid(f"{path}.{name}", value, "requires indexed completion mode")
                )
    if spec.pod_failure_policy is not None:
        errs += _validate_pod_failure_policy(spec, f"{path}.podFailurePolicy")
    replacement = spec.pod_replacement_policy
    if replacement is not None:
        allowed = (
            ["Failed"] if spec.pod_failure_policy is not None else ["Failed", "TerminatingOrFailed"]
        )
        if replacement not in allowed:
            errs.append(field_not_supported(f"{path}.podReplacementPolicy", replacement, allowed))
    errs += validate_pod_template(spec.template, f"{path}.template")
    policy = spec.template.spec.restart_policy
    policy_path = f"{path}.template.spec.restartPolicy"
    if policy in ("", "Always"):
        errs.append(field_required(policy_path, 'valid values: "OnFailure", "Never"'))
    elif policy not in ("OnFailure", "Never"):
        errs.append(field_not_supported(policy_path, policy, ["OnFailure", "Never"]))
    elif spec.pod_failure_policy is not None and policy != "Never":
        errs.append(
            field_invalid(
                policy_path, policy, 'only "Never" is supported when podFailurePolicy is specified'
            )
        )
    return errs


def _validate_pod_failure_policy(spec: batch_v1.JobSpec, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    containers = {c.name for c in spec.template.spec.all_containers()}
    for i, rule in enumerate(spec.pod_failure_policy.rules if spec.pod_failure_policy else []):
        rule_path = f"{path}.rules[{i}]"
        if not rule.action:
            errs.append(
                field_required(
                    f"{rule_path}.action", f"valid values: {_quoted(_POD_FAILURE_ACTIONS)}"
                )
            )
        elif rule.action not in _POD_FAILURE_ACTIONS:
            errs.append(
                field_not_supported(f"{rule_path}.action", rule.action, _POD_FAILURE_ACTIONS)
            )
        elif rule.action == "FailIndex" and spec.backoff_limit_per_index is None:
            errs.append(
                field_invalid(
                    f"{rule_path}.action",
                    rule.action,
                    "requires the backoffLimitPerIndex to be set",
                )
            )
        on_exit = rule.on_exit_codes
        if on_exit is not None and rule.on_pod_conditions:
            errs.append(
                field_invalid(
                    rule_path,
                    None,
                    "specifying both OnExitCodes and OnPodConditions is not supported",
                )
            )
        elif on_exit is None and not rule.on_pod_conditions:
            errs.append(
                field_invalid(
                    rule_path, None, "specifying one of OnExitCodes and OnPodConditions is required"
                )
            )
        if on_exit is not None:
            errs += _validate_on_exit_codes(on_exit, f"{rule_path}.onExitCodes", containers)
        for j, pattern in enumerate(rule.on_pod_conditions):
            status_path = f"{rule_path}.onPodConditions[{j}].status"
            if not pattern.status:
                errs.append(field_required(status_path, 'valid values: ["False" "True" "Unknown"]'))
            elif pattern.status not in ("False", "True", "Unknown"):
                errs.append(
                    field_not_supported(status_path, pattern.status, ["False", "True", "Unknown"])
                )
    return errs


def _quoted(values: list[str]) -> str:
    """Go's `%q` of a string slice: `["A" "B"]`."""
    return "[" + " ".join(f'"{v}"' for v in values) + "]"


def _validate_on_exit_codes(
    on_exit: batch_v1.PodFailurePolicyOnExitCodesRequirement, path: str, containers: set[str]
) -> list[FieldError]:
    errs: list[FieldError] = []
    if not on_exit.operator:
        errs.append(
            field_required(f"{path}.operator", f"valid values: {_quoted(_EXIT_CODE_OPERATORS)}")
        )
    elif on_exit.operator not in _EXIT_CODE_OPERATORS:
        errs.append(field_not_supported(f"{path}.operator", on_exit.operator, _EXIT_CODE_OPERATORS))
    if on_exit.container_name is not None and on_exit.container_name not in containers:
        errs.append(
            field_invalid(
                f"{path}.containerName",
                on_exit.container_name,
                "must be one of the container or initContainer names in the pod template",
            )
        )
    if not on_exit.values:
        errs.append(
            field_invalid(f"{path}.values", on_exit.values, "at least one value is required")
        )
    for k, value in enumerate(on_exit.values):
        if on_exit.operator == "In" and value == 0:
            errs.append(
                field_invalid(f"{path}.values[{k}]", value, "must not be 0 for the In operator")
            )
        if k and value == on_exit.values[k - 1]:
            errs.append(field_invalid(f"{path}.values[{k}]", value, "duplicate value"))
    if sorted(on_exit.values) != on_exit.values:
        errs.append(field_invalid(f"{path}.values", on_exit.values, "must be ordered"))
    return errs


def _validate_job(job: batch_v1.Job, old: KubeObject | None) -> list[FieldError]:
    spec = job.spec
    errs = _validate_job_spec(spec, "spec")
    errs += validate_selector(spec.selector, spec.template.metadata.labels, "job")
    if isinstance(old, batch_v1.Job):
        errs += _validate_job_update(spec, old.spec)
    return errs


def _validate_job_update(spec: batch_v1.JobSpec, old: batch_v1.JobSpec) -> list[FieldError]:
    """`ValidateJobSpecUpdate`: what a Job keeps once made. Its pod template changes only
    while it is suspended; an Indexed Job's completions only together with parallelism."""
    errs = []
    if spec.completion_mode == "Indexed":
        if (
            spec.completions != old.completions
            and spec.completions is not None
            and spec.completions != spec.parallelism
        ):
            errs.append(
                field_invalid(
                    "spec.completions",
                    spec.completions,
                    "can only be modified in tandem with spec.parallelism",
                )
            )
    elif spec.completions != old.completions:
        errs.append(field_invalid("spec.completions", spec.completions, "field is immutable"))
    for attr, name in (
        ("selector", "selector"),
        ("completion_mode", "completionMode"),
        ("pod_failure_policy", "podFailurePolicy"),
        ("backoff_limit_per_index", "backoffLimitPerIndex"),
        ("managed_by", "managedBy"),
        ("success_policy", "successPolicy"),
    ):
        value = getattr(spec, attr)
        if value != getattr(old, attr):
            errs.append(
                field_invalid(f"spec.{name}", codec.to_builtins(value), "field is immutable")
            )
    if not old.suspend and spec.template != old.template:
        errs.append(
            field_invalid("spec.template", codec.to_builtins(spec.template), "field is immutable")
        )
    return errs


def _validate_job_status(job: batch_v1.Job, old: KubeObject | None) -> list[FieldError]:
    status = job.status
    errs: list[FieldError] = []
    for name in ("active", "succeeded", "failed"):
        errs += meta.nonnegative(f"status.{name}", getattr(status, name))
    for name in ("terminating", "ready"):
        value = getattr(status, name)
        if value is not None:
            errs += meta.nonnegative(f"status.{name}", value)
    conditions = {c.type for c in status.conditions if c.status == "True"}
    if {"Complete", "Failed"} <= conditions:
        errs.append(
            field_invalid(
                "status.conditions", None, "cannot set Complete=True and Failed=true conditions"
            )
        )
    if "Complete" in conditions and status.completion_time is None:
        errs.append(
            field_required("status.completionTime", "completionTime is required for Complete jobs")
        )
    if isinstance(old, batch_v1.Job):
        for name in ("failed", "succeeded"):
            if getattr(status, name) < getattr(old.status, name):
                errs.append(
                    field_invalid(
                        f"status.{name}",
                        getattr(status, name),
                        f"cannot decrease the {name} counter",
                    )
                )
    return errs


def _validate_cron_job(cron_job: batch_v1.CronJob, old: KubeObject | None) -> list[FieldError]:
    spec = cron_job.spec
    old_spec = old.spec if isinstance(old, batch_v1.CronJob) else None
    errs: list[FieldError] = []
    if old_spec is None and len(cron_job.metadata.name) > _MAX_CRONJOB_NAME:
        errs.append(
            field_invalid(
                "metadata.name",
                cron_job.metadata.name,
                f"must be no more than {_MAX_CRONJOB_NAME} characters",
            )
        )
    if not spec.schedule:
        errs.append(field_required("spec.schedule"))
    else:
        try:
            cron.parse(spec.schedule)
        except cron.CronError as exc:
            errs.append(field_invalid("spec.schedule", spec.schedule, str(exc)))
        allow_tz = old_spec is not None and "TZ" in old_spec.schedule
        if allow_tz and "TZ" in spec.schedule and spec.time_zone is not None:
            errs.append(
                field_invalid(
                    "spec.schedule",
                    spec.schedule,
                    "cannot use both timeZone field and TZ or CRON_TZ in schedule",
                )
            )
        elif not allow_tz and "TZ" in spec.schedule:
            errs.append(
                field_invalid(
                    "spec.schedule",
                    spec.schedule,
                    "cannot use TZ or CRON_TZ in schedule, use timeZone field instead",
                )
            )
    if spec.starting_deadline_seconds is not None:
        errs += meta.nonnegative("spec.startingDeadlineSeconds", spec.starting_deadline_seconds)
    if old_spec is None or old_spec.time_zone != spec.time_zone:
        errs += _validate_time_zone(spec.time_zone)
    if not spec.concurrency_policy:
        errs.append(field_required("spec.concurrencyPolicy"))
    elif spec.concurrency_policy not in _CONCURRENCY_POLICIES:
        errs.append(
            field_not_supported(
                "spec.concurrencyPolicy", spec.concurrency_policy, _CONCURRENCY_POLICIES
            )
        )
    job_spec = spec.job_template.spec
    errs += _validate_job_spec(job_spec, "spec.jobTemplate.spec")
    if job_spec.selector is not None:
        errs.append(
            field_invalid(
                "spec.jobTemplate.spec.selector",
                codec.to_builtins(job_spec.selector),
                "`selector` will be auto-generated",
            )
        )
    if job_spec.manual_selector:
        errs.append(
            field_not_supported("spec.jobTemplate.spec.manualSelector", True, ["nil", "false"])
        )
    for name, value in (
        ("successfulJobsHistoryLimit", spec.successful_jobs_history_limit),
        ("failedJobsHistoryLimit", spec.failed_jobs_history_limit),
    ):
        if value is not None:
            errs += meta.nonnegative(f"spec.{name}", value)
    return errs


def _validate_time_zone(zone: str | None) -> list[FieldError]:
    if zone is None:
        return []
    if not zone:
        return [field_invalid("spec.timeZone", zone, "timeZone must be nil or non-empty string")]
    if zone.lower() == "local":
        return [
            field_invalid(
                "spec.timeZone",
                zone,
                "timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones",
            )
        ]
    try:
        cron.load_location(zone)
    except cron.CronError as exc:
        return [field_invalid("spec.timeZone", zone, str(exc))]
    return []


VALIDATORS: dict[type[KubeObject], meta.Validator] = {
    batch_v1.Job: _validate_job,
    batch_v1.CronJob: _validate_cron_job,
}
STATUS_VALIDATORS: dict[type[KubeObject], meta.Validator] = {
    batch_v1.Job: _validate_job_status,
}
