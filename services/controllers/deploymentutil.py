"""Deployment helpers, as upstream's `pkg/controller/deployment/util`: the pod template hash,
template equality, maxSurge/maxUnavailable, revisions, and the status a Deployment reports.
"""

from __future__ import annotations

import math
import struct

import msgspec

from drasim.common import codec, errors
from drasim.common.api import apps_v1, core_v1
from drasim.controllers import podutil
from drasim.controllers.replicaset import replicas

POD_TEMPLATE_HASH_LABEL = "pod-template-hash"
REVISION_ANNOTATION = "deployment.kubernetes.io/revision"
ROLLING_UPDATE = "RollingUpdate"
RECREATE = "Recreate"
DEFAULT_MAX_SURGE = "25%"
DEFAULT_MAX_UNAVAILABLE = "25%"
DEFAULT_REVISION_HISTORY_LIMIT = 10
# `rand.SafeEncodeString`'s alphabet: no vowels (no words) and no 0/1/3 (no look-alikes).
SAFE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"

_FNV32_OFFSET = 0x811C9DC5
_FNV32_PRIME = 0x01000193


def _fnv1a_32(data: bytes, h: int = _FNV32_OFFSET) -> int:
    for byte in data:
        h = ((h ^ byte) * _FNV32_PRIME) & 0xFFFFFFFF
    return h


def pod_template_hash(template: core_v1.PodTemplateSpec, collision_count: int | None) -> str:
    """`controller.ComputeHash`: a short, stable name for a pod template, e.g. `5f6d967f48`.

    FNV-1a (32 bit) of the template, then of the collision count when there is one, printed
    in decimal with each digit mapped into `SAFE_ALPHABET`. Upstream hashes Go's dump of the
    struct, drasim its JSON with sorted keys: the same shape, not the same values.
    """
    h = _fnv1a_32(msgspec.json.encode(codec.to_builtins(template), order="sorted"))
    if collision_count is not None:
        h = _fnv1a_32(struct.pack("<Q", collision_count & 0xFFFFFFFF), h)
    return "".join(SAFE_ALPHABET[ord(digit) % len(SAFE_ALPHABET)] for digit in str(h))


def with_hash_label(labels: dict[str, str], value: str) -> dict[str, str]:
    return {**labels, POD_TEMPLATE_HASH_LABEL: value}


def _without_hash(template: core_v1.PodTemplateSpec) -> core_v1.PodTemplateSpec:
    labels = {k: v for k, v in template.metadata.labels.items() if k != POD_TEMPLATE_HASH_LABEL}
    metadata = msgspec.structs.replace(template.metadata, labels=labels)
    return msgspec.structs.replace(template, metadata=metadata)


def equal_ignore_hash(a: core_v1.PodTemplateSpec, b: core_v1.PodTemplateSpec) -> bool:
    """`deploymentutil.EqualIgnoreHash`: the same template but for `pod-template-hash`."""
    return _without_hash(a) == _without_hash(b)


def _scaled_value(value: int | str | None, default: str, total: int, *, round_up: bool) -> int:
    """`intstr.GetScaledValueFromIntOrPercent`: `2` is 2, `"25%"` is a share of `total`."""
    value = default if value is None else value
    if isinstance(value, int):
        return value
    if not value.endswith("%") or not value[:-1].isdigit():
        raise errors.Invalid(f"invalid value for IntOrString: {value!r} is not a percentage")
    share = total * int(value[:-1]) / 100
    return math.ceil(share) if round_up else math.floor(share)


def resolve_fenceposts(deployment: apps_v1.Deployment) -> tuple[int, int]:
    """`deploymentutil.ResolveFenceposts`: (maxSurge, maxUnavailable) in pods, never both 0."""
    desired = replicas(deployment.spec)
    rolling = deployment.spec.strategy.rolling_update or apps_v1.RollingUpdateDeployment()
    surge = _scaled_value(rolling.max_surge, DEFAULT_MAX_SURGE, desired, round_up=True)
    unavailable = _scaled_value(
        rolling.max_unavailable, DEFAULT_MAX_UNAVAILABLE, desired, round_up=False
    )
    if surge == 0 and unavailable == 0:
        unavailable = 1  # upstream: otherwise a rollout could never make progress
    return surge, unavailable


def max_unavailable(deployment: apps_v1.Deployment) -> int:
    """`deploymentutil.MaxUnavailable`: 0 unless rolling, and at most `replicas`."""
    desired = replicas(deployment.spec)
    if strategy(deployment) != ROLLING_UPDATE or desired == 0:
        return 0
    return min(resolve_fenceposts(deployment)[1], desired)


def strategy(deployment: apps_v1.Deployment) -> str:
    return deployment.spec.strategy.type or ROLLING_UPDATE


def revision(rs: apps_v1.ReplicaSet) -> int:
    value = rs.metadata.annotations.get(REVISION_ANNOTATION, "")
    return int(value) if value.isdigit() else 0


def deployment_complete(deployment: apps_v1.Deployment, status: apps_v1.DeploymentStatus) -> bool:
    """`deploymentutil.DeploymentComplete`: every pod updated and available."""
    desired = replicas(deployment.spec)
    return (
        status.updated_replicas == desired
        and status.replicas == desired
        and status.available_replicas == desired
        and status.observed_generation >= deployment.metadata.generation
    )


def calculate_status(
    deployment: apps_v1.Deployment,
    new_rs: apps_v1.ReplicaSet | None,
    all_sets: list[apps_v1.ReplicaSet],
) -> apps_v1.DeploymentStatus:
    """Upstream `calculateStatus`, from the ReplicaSets' own statuses."""
    available = sum(rs.status.available_replicas for rs in all_sets)
    status = apps_v1.DeploymentStatus(
        observed_generation=deployment.metadata.generation,
        replicas=sum(rs.status.replicas for rs in all_sets),
        updated_replicas=new_rs.status.replicas if new_rs is not None else 0,
        ready_replicas=sum(rs.status.ready_replicas for rs in all_sets),
        available_replicas=available,
        unavailable_replicas=max(sum(replicas(rs.spec) for rs in all_sets) - available, 0),
        conditions=list(deployment.status.conditions),
        collision_count=deployment.status.collision_count,
    )
    now = podutil.format_time(podutil.now())
    if available >= replicas(deployment.spec) - max_unavailable(deployment):
        set_condition(
            status,
            "Available",
            "True",
            "MinimumReplicasAvailable",
            "Deployment has minimum availability.",
            now,
        )
    else:
        set_condition(
            status,
            "Available",
            "False",
            "MinimumReplicasUnavailable",
            "Deployment does not have minimum availability.",
            now,
        )
    if new_rs is not None:
        name = new_rs.metadata.name
        if deployment_complete(deployment, status):
            reason, message = "NewReplicaSetAvailable", "has successfully progressed."
        else:
            reason, message = "ReplicaSetUpdated", "is progressing."
        set_condition(status, "Progressing", "True", reason, f'ReplicaSet "{name}" {message}', now)
    return status


def set_condition(
    status: apps_v1.DeploymentStatus,
    type_: str,
    value: str,
    reason: str,
    message: str,
    now: str,
) -> None:
    """`deploymentutil.SetDeploymentCondition`: a condition changes when its status or reason
    does; its transition time only when its status does."""
    current = next((c for c in status.conditions if c.type == type_), None)
    if current is not None and current.status == value and current.reason == reason:
        return
    transition = current.last_transition_time if current and current.status == value else now
    status.conditions = [c for c in status.conditions if c.type != type_] + [
        apps_v1.DeploymentCondition(
            type=type_,
            status=value,
            last_update_time=now,
            last_transition_time=transition,
            reason=reason,
            message=message,
        )
    ]
