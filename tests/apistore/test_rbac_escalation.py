"""Upstream's `Covers`, `CompactRules` and `CompactString` (the escalation check's pure
parts; the check itself over HTTP is in tests/http/test_rbac_escalation.py)."""

from __future__ import annotations

from typing import Any

import pytest

from drasim.apistore import rbac_escalation
from drasim.common import codec
from drasim.common.api import rbac_v1


def rule(**fields: Any) -> rbac_v1.PolicyRule:
    return codec.convert(fields, rbac_v1.PolicyRule)


@pytest.mark.parametrize(
    ("owner", "servant", "uncovered"),
    [
        (
            [rule(verbs=["*"], apiGroups=["*"], resources=["*"])],
            [rule(verbs=["get"], apiGroups=["apps"], resources=["deployments"])],
            [],
        ),
        (
            [rule(verbs=["get", "list"], apiGroups=[""], resources=["pods"])],
            [rule(verbs=["get", "watch"], apiGroups=[""], resources=["pods"])],
            [rule(verbs=["watch"], apiGroups=[""], resources=["pods"])],
        ),
        # `*/status` covers every resource's status, not the resource.
        (
            [rule(verbs=["get"], apiGroups=[""], resources=["*/status"])],
            [rule(verbs=["get"], apiGroups=[""], resources=["pods/status", "pods"])],
            [rule(verbs=["get"], apiGroups=[""], resources=["pods"])],
        ),
        # Names: an owner without names covers any; with names only those.
        (
            [rule(verbs=["get"], apiGroups=[""], resources=["pods"], resourceNames=["a"])],
            [
                rule(verbs=["get"], apiGroups=[""], resources=["pods"], resourceNames=["a", "b"]),
                rule(verbs=["get"], apiGroups=[""], resources=["pods"]),
            ],
            [
                rule(verbs=["get"], apiGroups=[""], resources=["pods"], resourceNames=["b"]),
                rule(verbs=["get"], apiGroups=[""], resources=["pods"]),
            ],
        ),
        # URLs: exact, or by a prefix ending in `*`.
        (
            [rule(verbs=["get"], nonResourceURLs=["/healthz", "/apis/*"])],
            [rule(verbs=["get", "post"], nonResourceURLs=["/apis/apps", "/metrics"])],
            [
                rule(verbs=["post"], nonResourceURLs=["/apis/apps"]),
                rule(verbs=["get"], nonResourceURLs=["/metrics"]),
                rule(verbs=["post"], nonResourceURLs=["/metrics"]),
            ],
        ),
    ],
    ids=["star", "verb", "subresource-star", "resource-names", "urls"],
)
def test_covers(
    owner: list[rbac_v1.PolicyRule],
    servant: list[rbac_v1.PolicyRule],
    uncovered: list[rbac_v1.PolicyRule],
) -> None:
    assert rbac_escalation.covers(owner, servant) == (not uncovered, uncovered)


def test_missing_rules_are_compacted_by_group_and_resource() -> None:
    missing = [
        rule(verbs=["get"], apiGroups=[""], resources=["nodes"]),
        rule(verbs=["get"], apiGroups=[""], resources=["pods"], resourceNames=["p"]),
        rule(verbs=["list"], apiGroups=[""], resources=["nodes"]),
        rule(verbs=["get"], nonResourceURLs=["/metrics"]),
    ]
    assert [rbac_escalation.compact_string(r) for r in rbac_escalation.compact_rules(missing)] == [
        '{APIGroups:[""], Resources:["pods"], ResourceNames:["p"], Verbs:["get"]}',
        '{NonResourceURLs:["/metrics"], Verbs:["get"]}',
        '{APIGroups:[""], Resources:["nodes"], Verbs:["get" "list"]}',
    ]
