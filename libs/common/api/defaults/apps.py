"""Defaulting of apps/v1 Deployments and ReplicaSets, as upstream's
`pkg/apis/apps/v1/defaults.go` and `SetObjectDefaults_Deployment` / `_ReplicaSet`.

Their pod templates get every pod spec's defaults (`default_pod_spec`), not a Pod's: the
requests a Pod copies from its limits stay off the template, as upstream keeps them off.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from drasim.common.api import apps_v1
from drasim.common.api.defaults.core import default_pod_spec

__all__ = ["DEFAULTERS", "default_deployment", "default_replica_set"]

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


DEFAULTERS: dict[type, Callable[[Any], None]] = {
    apps_v1.Deployment: default_deployment,
    apps_v1.ReplicaSet: default_replica_set,
}
