"""Strategies of rbac.authorization.k8s.io/v1: Roles, ClusterRoles and their bindings, whose
storage refuses a write that would grant more than its writer holds (upstream's
`pkg/registry/rbac/<kind>/policybased`, see `drasim.apistore.rbac_escalation`)."""

from __future__ import annotations

from typing import Any

from drasim.apistore import rbac_escalation
from drasim.apistore.request import Context
from drasim.apistore.strategies.base import Admission, Strategy

__all__ = ["STRATEGIES"]


class PolicyBasedStrategy(Strategy):
    def __init__(self, resource: str) -> None:
        self.resource = resource

    def guard_create(self, obj: Any, ctx: Context, batch: Admission) -> None:
        rbac_escalation.admit_create(batch.policy, ctx.actor, ctx.groups, self.resource, obj)

    def guard_update(self, new: Any, old: Any, name: str, ctx: Context, batch: Admission) -> None:
        rbac_escalation.admit_update(
            batch.policy, ctx.actor, ctx.groups, self.resource, old, new, name
        )


STRATEGIES: dict[str, Strategy] = {
    resource: PolicyBasedStrategy(resource)
    for resource in ("roles", "clusterroles", "rolebindings", "clusterrolebindings")
}
