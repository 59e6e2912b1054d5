"""The disruption controller: the status arithmetic of PodDisruptionBudgets (as upstream's
pkg/controller/disruption), then the controller against a real apistore."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from drasim.common import codec
from drasim.common.api import apps_v1, core_v1, meta_v1, policy_v1
from drasim.common.client import ApiClient
from drasim.controllers import ControllerManager, disruption
from drasim.controllers.disruption import DELETION_TIMEOUT, compute_status
from tests.builders import make_pod
from tests.controllers.conftest import Changes, FakeKubelet

NOW = datetime(2026, 7, 1, 12, 0, 0, tzinfo=UTC)


def stamp(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def pod(name: str, *, ready: bool = True, owner: str = "rs-uid", deleting: bool = False) -> Any:
    meta: dict[str, Any] = {"name": name, "namespace": "default", "labels": {"app": "web"}}
    if owner:
        meta["ownerReferences"] = [
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": owner,
             "controller": True}
        ]  # fmt: skip
    if deleting:
        meta["deletionTimestamp"] = stamp(NOW)
    status = {"phase": "Running", "conditions": [{"type": "Ready", "status": str(ready)}]}
    return codec.convert({"metadata": meta, "status": status}, core_v1.Pod)


def budget(disrupted: dict[str, str] | None = None, **spec: Any) -> policy_v1.PodDisruptionBudget:
    return codec.convert(
        {
            "metadata": {"name": "web", "namespace": "default", "generation": 2},
            "spec": {"selector": {"matchLabels": {"app": "web"}}, **spec},
            "status": {"disruptedPods": disrupted or {}},
        },
        policy_v1.PodDisruptionBudget,
    )


def scale_of_five(p: core_v1.Pod) -> tuple[str, int] | None:
    ref = p.metadata.controller_ref()
    return (ref.uid, 5) if ref is not None else None


THREE = [pod("a"), pod("b"), pod("c")]


@pytest.mark.parametrize(
    ("pdb", "pods", "want"),
    [
        # (expectedPods, desiredHealthy, currentHealthy, disruptionsAllowed)
        (budget(minAvailable=2), THREE, (3, 2, 3, 1)),
        (budget(minAvailable=3), THREE, (3, 3, 3, 0)),
        (budget(minAvailable=2), [pod("a"), pod("b", ready=False), pod("c")], (3, 2, 2, 0)),
        (budget(minAvailable=2), [*THREE, pod("d", deleting=True)], (4, 2, 3, 1)),
        # Percentages and maxUnavailable count the controllers' scale (5), rounding up.
        (budget(minAvailable="50%"), THREE, (5, 3, 3, 0)),
        (budget(maxUnavailable=1), THREE, (5, 4, 3, 0)),
        (budget(maxUnavailable="40%"), THREE, (5, 3, 3, 0)),
        # Pods without a controller are left out of the scale.
        (budget(maxUnavailable=1), [pod("a", owner=""), pod("b", owner="")], (0, 0, 2, 0)),
        # A nil selector selects nothing; an empty one every pod of the namespace.
        (budget(minAvailable=1, selector=None), THREE, (0, 1, 0, 0)),
        (budget(minAvailable=1, selector={}), THREE, (3, 1, 3, 2)),
        # An evicted pod is not healthy while its eviction is fresh, and healthy again after.
        (budget({"a": stamp(NOW - timedelta(seconds=30))}, minAvailable=1), THREE, (3, 1, 2, 1)),
        (budget({"a": stamp(NOW - DELETION_TIMEOUT * 2)}, minAvailable=1), THREE, (3, 1, 3, 2)),
    ],
    ids=[
        "min-2-of-3", "min-3-of-3", "one-unready", "deleting-not-healthy", "min-percent",
        "max-unavailable", "max-percent", "unmanaged", "nil-selector", "empty-selector",
        "fresh-eviction", "stale-eviction",
    ],
)  # fmt: skip
def test_status_arithmetic(pdb, pods, want) -> None:
    status, _ = compute_status(pdb, pods, scale_of_five, NOW)
    got = (status.expected_pods, status.desired_healthy, status.current_healthy,
           status.disruptions_allowed)  # fmt: skip
    assert got == want
    assert status.observed_generation == 2
    [condition] = status.conditions
    assert (condition.type, condition.status, condition.reason) == (
        ("DisruptionAllowed", "True", "SufficientPods")
        if want[3]
        else ("DisruptionAllowed", "False", "InsufficientPods")
    )


def test_disrupted_pods_are_kept_until_their_pod_goes_or_times_out() -> None:
    fresh = stamp(NOW - timedelta(seconds=30))
    pdb = budget(
        {"a": fresh, "gone": fresh, "b": stamp(NOW - DELETION_TIMEOUT * 2), "d": fresh},
        minAvailable=1,
    )
    pods = [pod("a"), pod("b"), pod("d", deleting=True)]
    status, recheck = compute_status(pdb, pods, scale_of_five, NOW)
    assert status.disrupted_pods == {"a": fresh}
    assert recheck == NOW - timedelta(seconds=30) + DELETION_TIMEOUT


WEB = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "web", "namespace": "default"},
    "spec": {
        "replicas": 3,
        "selector": {"matchLabels": {"app": "web"}},
        "template": {
            "metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "c", "image": "pause"}]},
        },
    },
}


async def test_controller_reports_min_available_2_of_3_ready_replicas(
    api: ApiClient, manager: ControllerManager, kubelet: FakeKubelet, changes: Changes
) -> None:
    await api.create(codec.convert(WEB, apps_v1.Deployment))
    pdb = await api.create(budget(minAvailable=2))

    def settled() -> policy_v1.PodDisruptionBudget | None:
        got = manager.pod_disruption_budgets.get("web", "default")
        return got if got and got.status.current_healthy == 3 else None

    got = await changes.until(settled)
    assert got.status.observed_generation == pdb.metadata.generation
    assert (got.status.expected_pods, got.status.desired_healthy) == (3, 2)
    assert got.status.disruptions_allowed == 1
    [condition] = got.status.conditions
    assert (condition.status, condition.reason) == ("True", "SufficientPods")

    # A percentage counts the Deployment's scale: ceil(3 * 90%) = 3 leaves no room.
    got.spec.min_available = "90%"
    await api.update(got)

    def recomputed() -> policy_v1.PodDisruptionBudget | None:
        now = manager.pod_disruption_budgets.get("web", "default")
        return now if now and now.status.observed_generation == 2 else None

    got = await changes.until(recomputed)
    assert (got.status.expected_pods, got.status.desired_healthy) == (3, 3)
    assert got.status.disruptions_allowed == 0
    assert got.status.conditions[0].reason == "InsufficientPods"


def test_unmanaged_pods_count_only_where_expected_pods_come_from_controllers() -> None:
    owned = make_pod("owned").labels(app="web").obj()
    owned.metadata.owner_references = [
        meta_v1.OwnerReference(
            api_version="apps/v1", kind="ReplicaSet", name="rs", uid="u-rs", controller=True
        )
    ]
    bare = make_pod("bare").labels(app="web").obj()
    pods = [owned, bare]
    assert disruption.unmanaged_pods(budget(maxUnavailable=1), pods) == ["bare"]
    assert disruption.unmanaged_pods(budget(minAvailable="50%"), pods) == ["bare"]
    assert disruption.unmanaged_pods(budget(minAvailable=1), pods) == []
