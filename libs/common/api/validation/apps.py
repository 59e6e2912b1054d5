"""Validation of apps/v1 (`pkg/apis/apps/validation`): Deployments and ReplicaSets, whose
pod template is checked as a pod's spec is."""

from __future__ import annotations

import msgspec

from drasim.common import codec, labels
from drasim.common.api import apps_v1
from drasim.common.api.meta_v1 import KubeObject
from drasim.common.api.validation import meta, pod
from drasim.common.errors import (
    FieldError,
    field_forbidden,
    field_invalid,
    field_not_supported,
    field_required,
)

__all__ = ["STATUS_VALIDATORS", "VALIDATORS"]


def _validate_replica_counts(
    status: apps_v1.DeploymentStatus | apps_v1.ReplicaSetStatus,
) -> list[FieldError]:
    errs = []
    for field in msgspec.structs.fields(status):
        value = getattr(status, field.name)
        if type(value) is int:  # the replica counts (int32) and observedGeneration (int64)
            errs += meta.nonnegative(f"status.{field.encode_name}", value)
            if field.name != "observed_generation":
                errs += meta.int32(f"status.{field.encode_name}", value)
    return errs


def _validate_workload(
    spec: apps_v1.DeploymentSpec | apps_v1.ReplicaSetSpec, kind: str
) -> list[FieldError]:
    errs = []
    if spec.replicas is not None:
        errs += meta.nonnegative_int32("spec.replicas", spec.replicas)
    errs += meta.nonnegative_int32("spec.minReadySeconds", spec.min_ready_seconds)
    template = spec.template
    if spec.selector is None:
        errs.append(field_required("spec.selector"))
    else:
        errs += meta.validate_label_selector(spec.selector, "spec.selector")
        if not spec.selector.match_labels and not spec.selector.match_expressions:
            errs.append(field_invalid("spec.selector", {}, f"empty selector is invalid for {kind}"))
        elif not labels.from_label_selector(spec.selector).matches(template.metadata.labels):
            errs.append(
                field_invalid(
                    "spec.template.metadata.labels",
                    template.metadata.labels,
                    "`selector` does not match template `labels`",
                )
            )
    errs += meta.validate_labels(template.metadata.labels, "spec.template.metadata.labels")
    errs += meta.validate_annotations(
        template.metadata.annotations, "spec.template.metadata.annotations"
    )
    errs += pod.validate_run_annotations(
        template.metadata.annotations, "spec.template.metadata.annotations"
    )
    errs += pod.validate_pod_spec(template.spec, "spec.template.spec")
    if template.spec.restart_policy not in ("", "Always"):
        errs.append(
            field_not_supported(
                "spec.template.spec.restartPolicy", template.spec.restart_policy, ["Always"]
            )
        )
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


def _validate_selector_update(
    new: apps_v1.Deployment | apps_v1.ReplicaSet, old: KubeObject | None
) -> list[FieldError]:
    if isinstance(old, type(new)) and new.spec.selector != old.spec.selector:
        return [
            field_invalid(
                "spec.selector", codec.to_builtins(new.spec.selector), "field is immutable"
            )
        ]
    return []


def _validate_status(
    obj: apps_v1.Deployment | apps_v1.ReplicaSet, old: KubeObject | None
) -> list[FieldError]:
    return _validate_replica_counts(obj.status)


VALIDATORS: dict[type[KubeObject], meta.Validator] = {
    apps_v1.Deployment: _validate_deployment,
    apps_v1.ReplicaSet: _validate_replica_set,
}
STATUS_VALIDATORS: dict[type[KubeObject], meta.Validator] = {
    apps_v1.Deployment: _validate_status,
    apps_v1.ReplicaSet: _validate_status,
}
