"""The pod evaluator and the scope rules, as upstream's `pods_test.go`."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from drasim.common.api import core_v1
from drasim.common.quota import generic, pods
from tests.builders import make_pod

NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)


def _usage(pod: core_v1.Pod) -> dict[str, str]:
    return {name: str(q) for name, q in pods.pod_usage(pod, NOW).items()}


def test_compute_resources_and_extended_resources() -> None:
    pod = (
        make_pod("p")
        .container(
            "a",
            requests={"cpu": "500m", "memory": "1Gi"},
            limits={"cpu": "1", "memory": "2Gi", "example.com/gpu": "1"},
        )
        .container("b", limits={"deviceclass.resource.kubernetes.io/gpu": "2"})
        .obj()
    )
    assert _usage(pod) == {
        "count/pods": "1",
        "pods": "1",
        "cpu": "500m",
        "requests.cpu": "500m",
        "limits.cpu": "1",
        "memory": "1Gi",
        "requests.memory": "1Gi",
        "limits.memory": "2Gi",
        # A limit alone is the request (API defaulting), which quota charges.
        "requests.example.com/gpu": "1",
        "requests.deviceclass.resource.kubernetes.io/gpu": "2",
    }


def test_init_containers_count_at_their_peak() -> None:
    pod = (
        make_pod("p")
        .init_container("init", requests={"example.com/gpu": "3", "cpu": "2"})
        .init_container("sidecar", sidecar=True, requests={"example.com/gpu": "1"})
        .container("main", requests={"example.com/gpu": "1", "cpu": "1"})
        .obj()
    )
    usage = _usage(pod)
    assert usage["requests.example.com/gpu"] == "3"  # the init container alone
    assert usage["requests.cpu"] == "2"


@pytest.mark.parametrize("phase", ["Succeeded", "Failed"])
def test_terminal_pods_keep_only_their_object_count(phase: str) -> None:
    pod = make_pod("p").requests({"cpu": "1", "example.com/gpu": "1"}).obj()
    pod.status.phase = phase
    assert _usage(pod) == {"count/pods": "1"}


def test_past_its_grace_period_a_pod_is_not_charged() -> None:
    pod = make_pod("p").requests({"cpu": "1"}).obj()
    pod.metadata.deletion_timestamp = "2026-01-01T11:59:00Z"
    pod.metadata.deletion_grace_period_seconds = 30
    assert _usage(pod) == {"count/pods": "1"}
    pod.metadata.deletion_grace_period_seconds = 120
    assert _usage(pod)["pods"] == "1"


def test_matching_resources() -> None:
    evaluator = pods.PodEvaluator(lambda: NOW)
    names = [
        "pods",
        "count/pods",
        "requests.cpu",
        "limits.memory",
        "requests.example.com/gpu",
        "requests.deviceclass.resource.kubernetes.io/gpu",
        "hugepages-2Mi",
        "example.com/gpu",  # only `requests.` counts extended resources
        "limits.example.com/gpu",
        "count/resourceclaims.resource.k8s.io",
    ]
    assert evaluator.matching_resources(names) == sorted(names[:7])


def test_constraints_name_containers_without_cpu_or_memory() -> None:
    pod = (
        make_pod("p")
        .container("a", requests={"cpu": "1"})
        .container("b", limits={"memory": "1Gi"})
        .obj()
    )
    message = pods.missing_constraints(["requests.cpu", "limits.memory", "pods"], pod)
    assert message == "must specify limits.memory for: a; requests.cpu for: b"
    assert pods.missing_constraints(["pods", "requests.example.com/gpu"], pod) is None


def _scope(name: str, operator: str = "Exists", *values: str):
    return core_v1.ScopedResourceSelectorRequirement(
        scope_name=name, operator=operator, values=list(values)
    )


def test_scopes() -> None:
    best_effort = make_pod("p").obj()
    burstable = make_pod("q").requests({"cpu": "100m"}).obj()
    burstable.spec.active_deadline_seconds = 60
    burstable.spec.priority_class_name = "high"
    assert pods.matches_scope(_scope("BestEffort"), best_effort)
    assert not pods.matches_scope(_scope("BestEffort"), burstable)
    assert pods.matches_scope(_scope("NotBestEffort"), burstable)
    assert pods.matches_scope(_scope("Terminating"), burstable)
    assert pods.matches_scope(_scope("NotTerminating"), best_effort)
    assert pods.matches_scope(_scope("PriorityClass"), burstable)
    assert not pods.matches_scope(_scope("PriorityClass"), best_effort)
    assert pods.matches_scope(_scope("PriorityClass", "In", "high", "low"), burstable)
    assert not pods.matches_scope(_scope("PriorityClass", "In", "low"), burstable)
    assert pods.matches_scope(_scope("PriorityClass", "NotIn", "low"), best_effort)
    assert pods.matches_scope(_scope("PriorityClass", "DoesNotExist"), best_effort)


def test_handles_creates_and_changes_of_the_terminating_scope() -> None:
    evaluator = pods.PodEvaluator(lambda: NOW)
    old = make_pod("p").obj()
    new = make_pod("p").obj()
    assert evaluator.handles(generic.CREATE, new, None)
    assert not evaluator.handles(generic.UPDATE, new, old)
    new.spec.active_deadline_seconds = 10
    assert evaluator.handles(generic.UPDATE, new, old)


def test_calculate_usage_adds_up_a_namespace() -> None:
    """The controller's sum: zero for what nothing uses, masked to the quota's names."""
    quota = core_v1.ResourceQuota(
        spec=core_v1.ResourceQuotaSpec(hard={"pods": 10, "requests.cpu": 4, "limits.cpu": 8})
    )
    running = make_pod("a").requests({"cpu": "1"}).obj()
    done = make_pod("b").requests({"cpu": "1"}).obj()
    done.status.phase = "Succeeded"
    evaluator = pods.PodEvaluator(lambda: NOW)
    used = generic.calculate_usage(quota, [evaluator], lambda _: [running, done])
    assert {n: str(q) for n, q in used.items()} == {
        "pods": "1",
        "requests.cpu": "1",
        "limits.cpu": "0",
    }
