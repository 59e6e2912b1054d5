"""Validation of apps/v1 (`pkg/apis/apps/validation`): Deployments and ReplicaSets, whose
pod template is checked as a pod's spec is."""

from __future__ import annotations

from drasim.common import codec, labels
from drasim.common.api import apps_v1, core_v1
from drasim.common.api.meta_v1 import KubeObject, LabelSelector
from drasim.common.api.validation import meta, names, pod
from drasim.common.errors import (
    FieldError,
    field_forbidden,
    field_invalid,
    field_not_supported,
    field_required,
)

__all__ = ["STATUS_VALIDATORS", "VALIDATORS", "validate_pod_template", "validate_selector"]


def _validate_replica_counts(
    status: apps_v1.DeploymentStatus
    | apps_v1.ReplicaSetStatus
    | apps_v1.DaemonSetStatus
    | apps_v1.StatefulSetStatus,
) -> list[FieldError]:
    errs = []
    for name, wire in codec.field_names(type(status)):
        value = getattr(status, name)
        if type(value) is int:  # the replica counts (int32) and observedGeneration (int64)
            errs += meta.nonnegative(f"status.{wire}", value)
            if name != "observed_generation":
                errs += meta.int32(f"status.{wire}", value)
    return errs


def _validate_workload(
    spec: apps_v1.DeploymentSpec | apps_v1.ReplicaSetSpec, kind: str
) -> list[FieldError]:
    errs = []
    if spec.replicas is not None:
        errs += meta.nonnegative_int32("spec.replicas", spec.replicas)
    errs += meta.nonnegative_int32("spec.minReadySeconds", spec.min_ready_seconds)
    template = spec.template
    errs += validate_selector(spec.selector, template.metadata.labels, kind)
    return errs + validate_pod_template(template, "spec.template", restart_policies=["Always"])


def validate_pod_template(
    template: core_v1.PodTemplateSpec, path: str, *, restart_policies: list[str] | None = None
) -> list[FieldError]:
    """A workload's pod template (`ValidatePodTemplateSpec`): its labels, annotations and
    pod spec; `restart_policies`, when given, are the only ones the workload runs."""
    errs = meta.validate_labels(template.metadata.labels, f"{path}.metadata.labels")
    errs += meta.validate_annotations(template.metadata.annotations, f"{path}.metadata.annotations")
    errs += pod.validate_run_annotations(
        template.metadata.annotations, f"{path}.metadata.annotations"
    )
    errs += pod.validate_pod_spec(template.spec, f"{path}.spec")
    policy = template.spec.restart_policy
    if restart_policies is not None and policy and policy not in restart_policies:
        errs.append(field_not_supported(f"{path}.spec.restartPolicy", policy, restart_policies))
    return errs


def _validate_deployment(deploy: apps_v1.Deployment, old: KubeObject | None) -> list[FieldError]:
    errs = _validate_workload(deploy.spec, "deployment")
    strategy = deploy.spec.strategy
    if strategy.type and strategy.type not in ("RollingUpdate", "Recreate"):
        errs.append(
            field_not_supported("spec.strategy.type", strategy.type, ["Recreate", "RollingUpdate"])
        )
    if strategy.type == "Recreate" and strategy.rolling_update is not None:
        errs.append(
            field_forbidden(
                "spec.strategy.rollingUpdate",
                "may not be specified when strategy `type` is 'Recreate'",
            )
        )
    if deploy.spec.revision_history_limit is not None:
        errs += meta.nonnegative_int32(
            "spec.revisionHistoryLimit", deploy.spec.revision_history_limit
        )
    return errs + _validate_selector_update(deploy, old)


def _validate_replica_set(rs: apps_v1.ReplicaSet, old: KubeObject | None) -> list[FieldError]:
    return _validate_workload(rs.spec, "replicaset") + _validate_selector_update(rs, old)


def validate_selector(
    selector: LabelSelector | None, template_labels: dict[str, str], kind: str, path: str = "spec"
) -> list[FieldError]:
    """A workload's selector: required, valid, not empty, and matching its template."""
    if selector is None:
        return [field_required(f"{path}.selector")]
    errs = meta.validate_label_selector(selector, f"{path}.selector")
    if not selector.match_labels and not selector.match_expressions:
        errs.append(field_invalid(f"{path}.selector", {}, f"empty selector is invalid for {kind}"))
    elif not labels.from_label_selector(selector).matches(template_labels):
        errs.append(
            field_invalid(
                f"{path}.template.metadata.labels",
                template_labels,
                "`selector` does not match template `labels`",
            )
        )
    return errs


def _int_or_percent(value: int | str | None) -> int | None:
    """`getIntOrPercentValue`: the number of an int or of a percentage, None for neither."""
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.endswith("%") and value[:-1].isdigit():
        return int(value[:-1])
    return None


def _validate_positive_int_or_percent(value: int | str | None, path: str) -> list[FieldError]:
    """`ValidatePositiveIntOrPercent` and `IsNotMoreThan100Percent`."""
    if value is None:
        return []
    number = _int_or_percent(value)
    if number is None:
        return [field_invalid(path, value, "must be an integer or percentage (e.g '5%')")]
    errs = meta.nonnegative(path, number)
    if isinstance(value, str) and number > 100:
        errs.append(field_invalid(path, value, "must not be greater than 100%"))
    return errs


def _validate_daemon_set(ds: apps_v1.DaemonSet, old: KubeObject | None) -> list[FieldError]:
    spec = ds.spec
    errs = validate_selector(spec.selector, spec.template.metadata.labels, "daemonset")
    errs += validate_pod_template(spec.template, "spec.template", restart_policies=["Always"])
    errs += _forbid_active_deadline(spec.template, "DaemonSet")
    errs += meta.nonnegative_int32("spec.minReadySeconds", spec.min_ready_seconds)
    if spec.revision_history_limit is not None:
        errs += meta.nonnegative_int32("spec.revisionHistoryLimit", spec.revision_history_limit)
    strategy = spec.update_strategy
    if strategy.type == "RollingUpdate":
        rolling = strategy.rolling_update
        if rolling is None:
            errs.append(field_required("spec.updateStrategy.rollingUpdate"))
        else:
            path = "spec.updateStrategy.rollingUpdate"
            errs += _validate_positive_int_or_percent(
                rolling.max_unavailable, f"{path}.maxUnavailable"
            )
            errs += _validate_positive_int_or_percent(rolling.max_surge, f"{path}.maxSurge")
            unavailable = bool(_int_or_percent(rolling.max_unavailable))
            surge = bool(_int_or_percent(rolling.max_surge))
            if unavailable and surge:
                errs.append(
                    field_invalid(
                        f"{path}.maxSurge",
                        rolling.max_surge,
                        "may not be set when maxUnavailable is non-zero",
                    )
                )
            elif not unavailable and not surge:
                errs.append(
                    field_required(f"{path}.maxUnavailable", "cannot be 0 when maxSurge is 0")
                )
    elif strategy.type != "OnDelete":
        errs.append(
            field_not_supported(
                "spec.updateStrategy", codec.to_builtins(strategy), ["RollingUpdate", "OnDelete"]
            )
        )
    return errs + _validate_selector_update(ds, old)


def _forbid_active_deadline(template: core_v1.PodTemplateSpec, kind: str) -> list[FieldError]:
    if template.spec.active_deadline_seconds is None:
        return []
    return [
        field_forbidden(
            "spec.template.spec.activeDeadlineSeconds",
            f"activeDeadlineSeconds in {kind} is not Supported",
        )
    ]


# What an update of a StatefulSet's spec may not change (`ValidateStatefulSetUpdate`).
_STATEFUL_SET_IMMUTABLE = (
    ("selector", "selector"),
    ("volume_claim_templates", "volumeClaimTemplates"),
    ("service_name", "serviceName"),
    ("pod_management_policy", "podManagementPolicy"),
)


def _validate_stateful_set(sts: apps_v1.StatefulSet, old: KubeObject | None) -> list[FieldError]:
    spec = sts.spec
    errs: list[FieldError] = []
    if not spec.pod_management_policy:
        errs.append(field_required("spec.podManagementPolicy"))
    elif spec.pod_management_policy not in ("OrderedReady", "Parallel"):
        errs.append(
            field_invalid(
                "spec.podManagementPolicy",
                spec.pod_management_policy,
                "must be 'OrderedReady' or 'Parallel'",
            )
        )
    strategy = spec.update_strategy
    if not strategy.type:
        errs.append(field_required("spec.updateStrategy"))
    elif strategy.type == "OnDelete" and strategy.rolling_update is not None:
        errs.append(
            field_invalid(
                "spec.updateStrategy.rollingUpdate",
                codec.to_builtins(strategy.rolling_update),
                "only allowed for updateStrategy 'RollingUpdate'",
            )
        )
    elif strategy.type == "RollingUpdate" and strategy.rolling_update is not None:
        path = "spec.updateStrategy.rollingUpdate"
        rolling = strategy.rolling_update
        errs += meta.nonnegative(f"{path}.partition", rolling.partition or 0)
        if rolling.max_unavailable is not None:
            errs += _validate_positive_int_or_percent(
                rolling.max_unavailable, f"{path}.maxUnavailable"
            )
            if _int_or_percent(rolling.max_unavailable) == 0:
                errs.append(
                    field_invalid(f"{path}.maxUnavailable", rolling.max_unavailable, "cannot be 0")
                )
    elif strategy.type not in ("OnDelete", "RollingUpdate"):
        errs.append(
            field_invalid(
                "spec.updateStrategy",
                codec.to_builtins(strategy),
                "must be 'RollingUpdate' or 'OnDelete'",
            )
        )
    policy = spec.persistent_volume_claim_retention_policy
    if policy is not None:
        for name, value in (
            ("whenDeleted", policy.when_deleted),
            ("whenScaled", policy.when_scaled),
        ):
            if value not in ("Retain", "Delete"):
                errs.append(
                    field_not_supported(
                        f"spec.persistentVolumeClaimRetentionPolicy.{name}",
                        value,
                        ["Retain", "Delete"],
                    )
                )
    if spec.replicas is not None:
        errs += meta.nonnegative_int32("spec.replicas", spec.replicas)
    errs += meta.nonnegative_int32("spec.minReadySeconds", spec.min_ready_seconds)
    if spec.ordinals is not None:
        errs += meta.nonnegative("spec.ordinals.start", spec.ordinals.start)
    if spec.service_name:
        errs += meta.each(
            "spec.serviceName", spec.service_name, names.is_dns1123_label(spec.service_name)
        )
    errs += validate_selector(spec.selector, spec.template.metadata.labels, "statefulset")
    errs += validate_pod_template(spec.template, "spec.template")
    if spec.template.spec.restart_policy != "Always":
        errs.append(
            field_not_supported(
                "spec.template.spec.restartPolicy", spec.template.spec.restart_policy, ["Always"]
            )
        )
    errs += _forbid_active_deadline(spec.template, "StatefulSet")
    if isinstance(old, apps_v1.StatefulSet):
        for attr, name in _STATEFUL_SET_IMMUTABLE:
            value = getattr(spec, attr)
            if value != getattr(old.spec, attr):
                errs.append(
                    field_invalid(f"spec.{name}", codec.to_builtins(value), "field is immutable")
                )
    return errs


def _validate_selector_update(
    new: apps_v1.Deployment | apps_v1.ReplicaSet | apps_v1.DaemonSet, old: KubeObject | None
) -> list[FieldError]:
    if isinstance(old, type(new)) and new.spec.selector != old.spec.selector:
        return [
            field_invalid(
                "spec.selector", codec.to_builtins(new.spec.selector), "field is immutable"
            )
        ]
    return []


def _validate_status(
    obj: apps_v1.Deployment | apps_v1.ReplicaSet | apps_v1.DaemonSet | apps_v1.StatefulSet,
    old: KubeObject | None,
) -> list[FieldError]:
    return _validate_replica_counts(obj.status)


VALIDATORS: dict[type[KubeObject], meta.Validator] = {
    apps_v1.Deployment: _validate_deployment,
    apps_v1.ReplicaSet: _validate_replica_set,
    apps_v1.DaemonSet: _validate_daemon_set,
    apps_v1.StatefulSet: _validate_stateful_set,
}
STATUS_VALIDATORS: dict[type[KubeObject], meta.Validator] = {
    apps_v1.Deployment: _validate_status,
    apps_v1.ReplicaSet: _validate_status,
    apps_v1.DaemonSet: _validate_status,
    apps_v1.StatefulSet: _validate_status,
}
