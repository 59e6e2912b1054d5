"""The RBAC authorizer's rule matching (upstream `RuleAllows`) and bootstrap policy."""

from __future__ import annotations

from typing import Any

import pytest

from drasim.apistore import bootstrappolicy, rbac
from drasim.common import codec
from drasim.common.api import rbac_v1, registry, validation


def rule(**fields: Any) -> rbac_v1.PolicyRule:
    return codec.convert(fields, rbac_v1.PolicyRule)


PODS = rbac.Attributes("get", namespace="default", resource="pods", name="p")


@pytest.mark.parametrize(
    ("the_rule", "attrs", "allowed"),
    [
        (rule(verbs=["get"], apiGroups=[""], resources=["pods"]), PODS, True),
        (rule(verbs=["list"], apiGroups=[""], resources=["pods"]), PODS, False),
        (rule(verbs=["*"], apiGroups=["*"], resources=["*"]), PODS, True),
        (rule(verbs=["get"], apiGroups=["apps"], resources=["pods"]), PODS, False),
        (rule(verbs=["get"], apiGroups=[""], resources=["pods"], resourceNames=["p"]), PODS, True),
        (rule(verbs=["get"], apiGroups=[""], resources=["pods"], resourceNames=["q"]), PODS, False),
        # A subresource is matched as "resource/subresource", or by "*/subresource".
        (
            rule(verbs=["get"], apiGroups=[""], resources=["pods"]),
            rbac.Attributes("get", resource="pods", subresource="log", name="p"),
            False,
        ),
        (
            rule(verbs=["get"], apiGroups=[""], resources=["pods/log"]),
            rbac.Attributes("get", resource="pods", subresource="log", name="p"),
            True,
        ),
        (
            rule(verbs=["update"], apiGroups=["apps"], resources=["*/scale"]),
            rbac.Attributes("update", group="apps", resource="deployments", subresource="scale"),
            True,
        ),
        # Non-resource URLs: exact, or a prefix ending in "*"; never a resource rule.
        (
            rule(verbs=["get"], nonResourceURLs=["/apis/*"]),
            rbac.Attributes("get", resource_request=False, path="/apis/apps/v1"),
            True,
        ),
        (
            rule(verbs=["get"], nonResourceURLs=["/healthz"]),
            rbac.Attributes("get", resource_request=False, path="/healthz/etcd"),
            False,
        ),
        (
            rule(verbs=["get"], apiGroups=["*"], resources=["*"]),
            rbac.Attributes("get", resource_request=False, path="/healthz"),
            False,
        ),
    ],
)
def test_rule_allows(the_rule: rbac_v1.PolicyRule, attrs: rbac.Attributes, allowed: bool) -> None:
    assert rbac.rule_allows(attrs, the_rule) is allowed


@pytest.mark.parametrize(("resource", "obj"), bootstrappolicy.BOOTSTRAP)
def test_the_bootstrap_policy_is_valid(resource: str, obj: dict[str, Any]) -> None:
    typed = codec.convert(obj, registry.by_plural(resource).type)
    assert validation.validate(typed) == []


def test_decisions_are_kept_until_the_policy_changes() -> None:
    policy = rbac.Policy.of(bootstrappolicy.BOOTSTRAP)
    groups = ("system:authenticated",)
    bind = rbac.Attributes("create", namespace="a", resource="pods", subresource="binding")
    assert policy.authorize("system:kube-scheduler", groups, bind).allowed
    # One decision for every pod bound: no rule names pods.
    for name in ("p", "q"):
        named = rbac.Attributes(
            "create", namespace="a", resource="pods", subresource="binding", name=name
        )
        assert policy.authorize("system:kube-scheduler", groups, named).allowed
    assert len(policy._decisions) == 1
    # Leases are named in a rule: their names count.
    lease = rbac.Attributes(
        "get", namespace="kube-system", group="coordination.k8s.io", resource="leases"
    )
    ours = rbac.Attributes(
        "get", namespace="kube-system", group="coordination.k8s.io", resource="leases",
        name="kube-scheduler",
    )  # fmt: skip
    theirs = rbac.Attributes(
        "get", namespace="kube-system", group="coordination.k8s.io", resource="leases",
        name="kube-controller-manager",
    )  # fmt: skip
    assert not policy.authorize("system:kube-scheduler", groups, lease).allowed
    assert policy.authorize("system:kube-scheduler", groups, ours).allowed
    assert not policy.authorize("system:kube-scheduler", groups, theirs).allowed
    # A change of the roles or bindings starts the decisions over: without its binding,
    # the scheduler may bind no pod.
    policy.replace("clusterrolebindings", b'{"resource_version": 1, "items": []}')
    assert not policy.authorize("system:kube-scheduler", groups, bind).allowed
