"""apps/v1: Deployment, ReplicaSet, DaemonSet and StatefulSet (upstream
`staging/src/k8s.io/api/apps/v1/types.go`)."""

from __future__ import annotations

from typing import Any, ClassVar

import msgspec

from drasim.common.api.core_v1 import UNWRITTEN, PodTemplateSpec
from drasim.common.api.meta_v1 import KubeObject, KubeStruct, LabelSelector

__all__ = [
    "DaemonSet",
    "DaemonSetCondition",
    "DaemonSetSpec",
    "DaemonSetStatus",
    "DaemonSetUpdateStrategy",
    "RollingUpdateDaemonSet",
    "RollingUpdateStatefulSetStrategy",
    "StatefulSet",
    "StatefulSetCondition",
    "StatefulSetOrdinals",
    "StatefulSetPersistentVolumeClaimRetentionPolicy",
    "StatefulSetSpec",
    "StatefulSetStatus",
    "StatefulSetUpdateStrategy",
    "CONTROLLER_REVISION_HASH_LABEL",
    "POD_INDEX_LABEL",
    "STATEFULSET_POD_NAME_LABEL",
    "Deployment",
    "DeploymentCondition",
    "DeploymentSpec",
    "DeploymentStatus",
    "DeploymentStrategy",
    "ReplicaSet",
    "ReplicaSetCondition",
    "ReplicaSetSpec",
    "ReplicaSetStatus",
    "RollingUpdateDeployment",
]


# The labels the DaemonSet and StatefulSet controllers put on their pods (upstream
# `apps.ControllerRevisionHashLabelKey`, `apps.StatefulSetPodNameLabel`, `apps.PodIndexLabel`).
CONTROLLER_REVISION_HASH_LABEL = "controller-revision-hash"
STATEFULSET_POD_NAME_LABEL = "statefulset.kubernetes.io/pod-name"
POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"


def _always_written(status: KubeStruct, *fields: str) -> None:
    """Fields upstream's Go types write even when 0 (no `omitempty`): clients that read
    them as required (the official Python client's models) find them in a status nobody
    filled in yet, such as the one a create answers with."""
    for name in fields:
        if getattr(status, name) is UNWRITTEN:
            setattr(status, name, 0)


class RollingUpdateDeployment(KubeStruct):
    max_unavailable: int | str | None = None  # IntOrString: 1 or "25%"
    max_surge: int | str | None = None


class DeploymentStrategy(KubeStruct):
    type: str = ""  # RollingUpdate (the default), Recreate
    rolling_update: RollingUpdateDeployment | None = None


class DeploymentSpec(KubeStruct):
    replicas: int | None = None  # defaulted to 1
    selector: LabelSelector | None = None
    template: PodTemplateSpec = msgspec.field(default_factory=PodTemplateSpec)
    strategy: DeploymentStrategy = msgspec.field(default_factory=DeploymentStrategy)
    min_ready_seconds: int = 0
    revision_history_limit: int | None = None
    paused: bool = False
    progress_deadline_seconds: int | None = None


class DeploymentCondition(KubeStruct):
    type: str = ""  # Available, Progressing, ReplicaFailure
    status: str = ""
    last_update_time: str | None = None
    last_transition_time: str | None = None
    reason: str = ""
    message: str = ""


class DeploymentStatus(KubeStruct):
    observed_generation: int = 0
    replicas: int = 0
    updated_replicas: int = 0
    ready_replicas: int = 0
    available_replicas: int = 0
    unavailable_replicas: int = 0
    conditions: list[DeploymentCondition] = []
    collision_count: int | None = None


class Deployment(KubeObject):
    API_VERSION: ClassVar[str] = "apps/v1"
    KIND: ClassVar[str] = "Deployment"

    spec: DeploymentSpec = msgspec.field(default_factory=DeploymentSpec)
    status: DeploymentStatus = msgspec.field(default_factory=DeploymentStatus)


class ReplicaSetSpec(KubeStruct):
    replicas: int | None = None  # defaulted to 1
    min_ready_seconds: int = 0
    selector: LabelSelector | None = None
    template: PodTemplateSpec = msgspec.field(default_factory=PodTemplateSpec)


class ReplicaSetCondition(KubeStruct):
    type: str = ""  # ReplicaFailure
    status: str = ""
    last_transition_time: str | None = None
    reason: str = ""
    message: str = ""


class ReplicaSetStatus(KubeStruct):
    replicas: int = UNWRITTEN
    fully_labeled_replicas: int = 0
    ready_replicas: int = 0
    available_replicas: int = 0
    observed_generation: int = 0
    conditions: list[ReplicaSetCondition] = []

    def __post_init__(self) -> None:
        _always_written(self, "replicas")


class ReplicaSet(KubeObject):
    API_VERSION: ClassVar[str] = "apps/v1"
    KIND: ClassVar[str] = "ReplicaSet"

    spec: ReplicaSetSpec = msgspec.field(default_factory=ReplicaSetSpec)
    status: ReplicaSetStatus = msgspec.field(default_factory=ReplicaSetStatus)


class RollingUpdateDaemonSet(KubeStruct):
    max_unavailable: int | str | None = None  # defaulted to 1
    max_surge: int | str | None = None  # defaulted to 0


class DaemonSetUpdateStrategy(KubeStruct):
    type: str = ""  # RollingUpdate (the default), OnDelete
    rolling_update: RollingUpdateDaemonSet | None = None


class DaemonSetSpec(KubeStruct):
    selector: LabelSelector | None = None
    template: PodTemplateSpec = msgspec.field(default_factory=PodTemplateSpec)
    update_strategy: DaemonSetUpdateStrategy = msgspec.field(
        default_factory=DaemonSetUpdateStrategy
    )
    min_ready_seconds: int = 0
    revision_history_limit: int | None = None


class DaemonSetCondition(KubeStruct):
    type: str = ""
    status: str = ""
    last_transition_time: str | None = None
    reason: str = ""
    message: str = ""


class DaemonSetStatus(KubeStruct):
    current_number_scheduled: int = UNWRITTEN
    number_misscheduled: int = UNWRITTEN
    desired_number_scheduled: int = UNWRITTEN
    number_ready: int = UNWRITTEN
    observed_generation: int = 0
    updated_number_scheduled: int = 0
    number_available: int = 0
    number_unavailable: int = 0
    collision_count: int | None = None
    conditions: list[DaemonSetCondition] = []

    def __post_init__(self) -> None:
        _always_written(
            self,
            "current_number_scheduled",
            "number_misscheduled",
            "desired_number_scheduled",
            "number_ready",
        )


class DaemonSet(KubeObject):
    API_VERSION: ClassVar[str] = "apps/v1"
    KIND: ClassVar[str] = "DaemonSet"

    spec: DaemonSetSpec = msgspec.field(default_factory=DaemonSetSpec)
    status: DaemonSetStatus = msgspec.field(default_factory=DaemonSetStatus)


class RollingUpdateStatefulSetStrategy(KubeStruct):
    partition: int | None = None
    max_unavailable: int | str | None = None


class StatefulSetUpdateStrategy(KubeStruct):
    type: str = ""  # RollingUpdate (the default), OnDelete
    rolling_update: RollingUpdateStatefulSetStrategy | None = None


class StatefulSetPersistentVolumeClaimRetentionPolicy(KubeStruct):
    when_deleted: str = ""  # Retain (the default), Delete
    when_scaled: str = ""


class StatefulSetOrdinals(KubeStruct):
    start: int = 0


class StatefulSetSpec(KubeStruct):
    replicas: int | None = None  # defaulted to 1
    selector: LabelSelector | None = None
    template: PodTemplateSpec = msgspec.field(default_factory=PodTemplateSpec)
    # PersistentVolumeClaims, kept as their JSON (core/v1 PersistentVolumeClaim).
    volume_claim_templates: list[dict[str, Any]] = []
    service_name: str = ""
    pod_management_policy: str = ""  # OrderedReady (the default), Parallel
    update_strategy: StatefulSetUpdateStrategy = msgspec.field(
        default_factory=StatefulSetUpdateStrategy
    )
    revision_history_limit: int | None = None
    min_ready_seconds: int = 0
    persistent_volume_claim_retention_policy: (
        StatefulSetPersistentVolumeClaimRetentionPolicy | None
    ) = None
    ordinals: StatefulSetOrdinals | None = None


class StatefulSetCondition(KubeStruct):
    type: str = ""
    status: str = ""
    last_transition_time: str | None = None
    reason: str = ""
    message: str = ""


class StatefulSetStatus(KubeStruct):
    observed_generation: int = 0
    replicas: int = UNWRITTEN
    ready_replicas: int = 0
    current_replicas: int = 0
    updated_replicas: int = 0
    current_revision: str = ""
    update_revision: str = ""
    collision_count: int | None = None
    conditions: list[StatefulSetCondition] = []
    available_replicas: int = UNWRITTEN

    def __post_init__(self) -> None:
        _always_written(self, "replicas", "available_replicas")


class StatefulSet(KubeObject):
    API_VERSION: ClassVar[str] = "apps/v1"
    KIND: ClassVar[str] = "StatefulSet"

    spec: StatefulSetSpec = msgspec.field(default_factory=StatefulSetSpec)
    status: StatefulSetStatus = msgspec.field(default_factory=StatefulSetStatus)
