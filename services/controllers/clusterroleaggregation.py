"""ClusterRole aggregation controller (upstream pkg/controller/clusterroleaggregation).

An aggregated ClusterRole (one with an `aggregationRule`) gets as `rules` what its
`clusterRoleSelectors` gather (`drasim.common.rbac_aggregation`): so a ClusterRole labelled
`rbac.authorization.k8s.io/aggregate-to-edit: "true"` extends `edit`, and through `edit`
(labelled aggregate-to-admin) `admin`. As upstream's, any ClusterRole added, changed or
deleted queues every aggregated one (there are few, and which selects which is not known
ahead), and a sync writes only when the rules differ. Upstream applies the rules
server-side with its field manager, falling back to an update; drasim updates (a conflict
with a newer role is retried from the cache).
"""

from __future__ import annotations

from drasim.common import codec, errors, rbac_aggregation
from drasim.common.api import rbac_v1
from drasim.common.client import ApiClient
from drasim.common.informer import Informer
from drasim.controllers.queue import WorkQueue


class ClusterRoleAggregationController:
    """Keeps every aggregated ClusterRole's rules the union its selectors gather."""

    def __init__(self, api: ApiClient, *, cluster_roles: Informer[rbac_v1.ClusterRole]) -> None:
        self.api = api
        self.cluster_roles = cluster_roles
        # Upstream's kube-controller-manager runs it with 5 workers.
        self.queue: WorkQueue[str] = WorkQueue("clusterrole-aggregation", self.sync, concurrency=5)
        cluster_roles.add_handlers(
            on_add=self._enqueue_all,
            on_update=lambda _old, new: self._enqueue_all(new),
            on_delete=self._enqueue_all,
        )

    def _enqueue_all(self, _changed: rbac_v1.ClusterRole) -> None:
        for role in self.cluster_roles.list():
            if role.aggregation_rule is not None:
                self.queue.add(role.metadata.name)

    async def sync(self, name: str) -> None:
        role = self.cluster_roles.get(name)
        if role is None or role.aggregation_rule is None:
            return
        rules = rbac_aggregation.aggregated_rules(role, self.cluster_roles.list())
        if rules == role.rules:
            return
        updated = codec.clone(role)
        updated.rules = rules
        try:
            await self.api.update(updated)
        except errors.NotFound:
            return
