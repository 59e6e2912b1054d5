"""ClusterRole aggregation: an aggregated ClusterRole's rules are those of the ClusterRoles
its aggregationRule selects.

As upstream's clusterrole-aggregation controller (`pkg/controller/clusterroleaggregation`,
`syncClusterRole`): for each of its `clusterRoleSelectors` in turn, the ClusterRoles whose
labels match it, in name order and leaving out the role itself, give their rules, each
rule once. The controller manager keeps aggregated roles so
(`drasim.controllers.clusterroleaggregation`); the apistore fills its bootstrap `admin`,
`edit` and `view` the same way when it creates them.
"""

from __future__ import annotations

from collections.abc import Iterable

from drasim.common import labels
from drasim.common.api import rbac_v1

__all__ = ["aggregated_rules"]


def aggregated_rules(
    role: rbac_v1.ClusterRole, cluster_roles: Iterable[rbac_v1.ClusterRole]
) -> list[rbac_v1.PolicyRule]:
    """The rules `role`'s aggregationRule gathers from `cluster_roles` (none without one)."""
    if role.aggregation_rule is None:
        return []
    others = sorted(
        (r for r in cluster_roles if r.metadata.name != role.metadata.name),
        key=lambda r: r.metadata.name,
    )
    rules: list[rbac_v1.PolicyRule] = []
    for selector in role.aggregation_rule.cluster_role_selectors:
        chosen = labels.from_label_selector(selector)
        for other in others:
            if not chosen.matches(other.metadata.labels or {}):
                continue
            for rule in other.rules:
                if rule not in rules:
                    rules.append(rule)
    return rules
