"""What an aggregated ClusterRole's selectors gather (upstream `syncClusterRole`), and the
bootstrap's aggregated admin, edit and view."""

from __future__ import annotations

from typing import Any

from drasim.apistore import bootstrappolicy
from drasim.apistore.rbac_escalation import covers
from drasim.common import codec, rbac_aggregation
from drasim.common.api import rbac_v1


def cluster_role(name: str, *rules: dict[str, Any], **fields: Any) -> rbac_v1.ClusterRole:
    labels = fields.pop("labels", {})
    return codec.convert(
        {"metadata": {"name": name, "labels": labels}, "rules": list(rules), **fields},
        rbac_v1.ClusterRole,
    )


def selects(*match_labels: dict[str, str]) -> dict[str, Any]:
    return {"clusterRoleSelectors": [{"matchLabels": m} for m in match_labels]}


PODS = {"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}
NODES = {"verbs": ["get"], "apiGroups": [""], "resources": ["nodes"]}
URLS = {"verbs": ["get"], "nonResourceURLs": ["/metrics"]}


def test_rules_come_per_selector_in_name_order_each_once() -> None:
    gatherer = cluster_role(
        "gatherer", NODES, aggregationRule=selects({"a": "1"}, {"b": "1"}), labels={"a": "1"}
    )
    roles = [
        gatherer,
        cluster_role("z", URLS, PODS, labels={"a": "1"}),
        cluster_role("m", PODS, labels={"a": "1", "b": "1"}),
        cluster_role("b-only", NODES, labels={"b": "1"}),
        cluster_role("unlabelled", {"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}),
    ]
    # Its own rules are replaced; it never selects itself.
    assert rbac_aggregation.aggregated_rules(gatherer, roles) == [
        codec.convert(r, rbac_v1.PolicyRule) for r in (PODS, URLS, NODES)
    ]
    assert rbac_aggregation.aggregated_rules(roles[1], roles) == []  # not aggregated


def _bootstrap_role(name: str) -> rbac_v1.ClusterRole:
    for resource, obj in bootstrappolicy.BOOTSTRAP:
        if resource == "clusterroles" and obj["metadata"]["name"] == name:
            return codec.convert(obj, rbac_v1.ClusterRole)
    raise LookupError(name)


def test_the_bootstrap_admin_edit_and_view_are_aggregated_and_filled() -> None:
    """Upstream's aggregated admin, edit and view, filled as the controller fills them (its
    first sync changes nothing), with what drasim's non-aggregated ones granted."""
    roles = [
        codec.convert(o, rbac_v1.ClusterRole)
        for r, o in bootstrappolicy.BOOTSTRAP
        if r == "clusterroles"
    ]
    edit = _bootstrap_role("edit")
    assert edit.metadata.labels["rbac.authorization.k8s.io/aggregate-to-admin"] == "true"
    assert edit.aggregation_rule is not None
    for name, granted in (
        ("admin", bootstrappolicy._ADMIN),
        ("edit", bootstrappolicy._EDIT),
        ("view", bootstrappolicy._VIEW),
    ):
        role = _bootstrap_role(name)
        assert rbac_aggregation.aggregated_rules(role, roles) == role.rules
        before = [codec.convert(r, rbac_v1.PolicyRule) for r in granted]
        assert covers(role.rules, before)[0] and covers(before, role.rules)[0]
