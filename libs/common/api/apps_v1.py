"""apps/v1: Deployment and ReplicaSet."""

from __future__ import annotations

from typing import ClassVar

import msgspec

from drasim.common.api.core_v1 import PodTemplateSpec
from drasim.common.api.meta_v1 import KubeObject, KubeStruct, LabelSelector

__all__ = [
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
    replicas: int = 0
    fully_labeled_replicas: int = 0
    ready_replicas: int = 0
    available_replicas: int = 0
    observed_generation: int = 0
    conditions: list[ReplicaSetCondition] = []


class ReplicaSet(KubeObject):
    API_VERSION: ClassVar[str] = "apps/v1"
    KIND: ClassVar[str] = "ReplicaSet"

    spec: ReplicaSetSpec = msgspec.field(default_factory=ReplicaSetSpec)
    status: ReplicaSetStatus = msgspec.field(default_factory=ReplicaSetStatus)
