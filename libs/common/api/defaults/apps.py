"""Defaulting of apps/v1 Deployments, ReplicaSets, DaemonSets and StatefulSets, as upstream's
`pkg/apis/apps/v1/defaults.go` and its `SetObjectDefaults_<Kind>`.

Their pod templates get every pod spec's defaults (`default_pod_spec`), not a Pod's: the
requests a Pod copies from its limits stay off the template, as upstream keeps them off.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from drasim.common.api import apps_v1
from drasim.common.api.defaults.core import default_pod_spec

__all__ = [
    "DEFAULTERS",
    "default_daemon_set",
    "default_deployment",
    "default_replica_set",
    "default_stateful_set",
]

_DEFAULT_MAX_UNAVAILABLE = "25%"
_DEFAULT_MAX_SURGE = "25%"
_DEFAULT_REVISION_HISTORY_LIMIT = 10
_DEFAULT_PROGRESS_DEADLINE_SECONDS = 600


def default_deployment(deployment: apps_v1.Deployment) -> None:
    spec = deployment.spec
    if spec.replicas is None:
        spec.replicas = 1
    strategy = spec.strategy
    if not strategy.type:
        strategy.type = "RollingUpdate"
    if strategy.type == "RollingUpdate":
        if strategy.rolling_update is None:
            strategy.rolling_update = apps_v1.RollingUpdateDeployment()
        if strategy.rolling_update.max_unavailable is None:
            strategy.rolling_update.max_unavailable = _DEFAULT_MAX_UNAVAILABLE
        if strategy.rolling_update.max_surge is None:
            strategy.rolling_update.max_surge = _DEFAULT_MAX_SURGE
    if spec.revision_history_limit is None:
        spec.revision_history_limit = _DEFAULT_REVISION_HISTORY_LIMIT
    if spec.progress_deadline_seconds is None:
        spec.progress_deadline_seconds = _DEFAULT_PROGRESS_DEADLINE_SECONDS
    default_pod_spec(spec.template.spec)


def default_replica_set(replica_set: apps_v1.ReplicaSet) -> None:
    if replica_set.spec.replicas is None:
        replica_set.spec.replicas = 1
    default_pod_spec(replica_set.spec.template.spec)


def default_daemon_set(daemon_set: apps_v1.DaemonSet) -> None:
    spec = daemon_set.spec
    strategy = spec.update_strategy
    if not strategy.type:
        strategy.type = "RollingUpdate"
    if strategy.type == "RollingUpdate":
        if strategy.rolling_update is None:
            strategy.rolling_update = apps_v1.RollingUpdateDaemonSet()
        if strategy.rolling_update.max_unavailable is None:
            strategy.rolling_update.max_unavailable = 1
        if strategy.rolling_update.max_surge is None:
            strategy.rolling_update.max_surge = 0
    if spec.revision_history_limit is None:
        spec.revision_history_limit = _DEFAULT_REVISION_HISTORY_LIMIT
    default_pod_spec(spec.template.spec)


def default_stateful_set(stateful_set: apps_v1.StatefulSet) -> None:
    """Upstream's, with 1.37's MaxUnavailableStatefulSet (on by default): a rolling
    update's maxUnavailable defaults to 1."""
    spec = stateful_set.spec
    if not spec.pod_management_policy:
        spec.pod_management_policy = "OrderedReady"
    strategy = spec.update_strategy
    if not strategy.type:
        strategy.type = "RollingUpdate"
        if strategy.rolling_update is None:
            strategy.rolling_update = apps_v1.RollingUpdateStatefulSetStrategy()
    if strategy.type == "RollingUpdate" and strategy.rolling_update is not None:
        if strategy.rolling_update.partition is None:
            strategy.rolling_update.partition = 0
        if strategy.rolling_update.max_unavailable is None:
            strategy.rolling_update.max_unavailable = 1
    policy = spec.persistent_volume_claim_retention_policy
    if policy is None:
        policy = spec.persistent_volume_claim_retention_policy = (
            apps_v1.StatefulSetPersistentVolumeClaimRetentionPolicy()
        )
    policy.when_deleted = policy.when_deleted or "Retain"
    policy.when_scaled = policy.when_scaled or "Retain"
    if spec.replicas is None:
        spec.replicas = 1
    if spec.revision_history_limit is None:
        spec.revision_history_limit = _DEFAULT_REVISION_HISTORY_LIMIT
    default_pod_spec(spec.template.spec)


DEFAULTERS: dict[type, Callable[[Any], None]] = {
    apps_v1.Deployment: default_deployment,
    apps_v1.ReplicaSet: default_replica_set,
    apps_v1.DaemonSet: default_daemon_set,
    apps_v1.StatefulSet: default_stateful_set,
}
