"""pods/eviction over the HTTP API, as upstream's eviction subresource answers: without a
budget the pod is deleted; a budget's disruptionsAllowed is spent one eviction at a time
and then refused with 429; JSON and protobuf Eviction bodies."""

from __future__ import annotations

from typing import Any

import aiohttp
import msgspec

from drasim.apistore.http import protobuf
from drasim.common import codec, errors
from drasim.common.api import core_v1, policy_v1
from tests.builders import make_node, make_pod
from tests.http.conftest import Cluster
from tests.http.test_api import call
from tests.http.test_protobuf import body as protobuf_body
from tests.http.test_protobuf import field

PODS = "/api/v1/namespaces/default/pods"


def eviction(name: str, **delete_options: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": name, "namespace": "default"},
    }
    if delete_options:
        doc["deleteOptions"] = delete_options
    return doc


async def running_pod(cluster: Cluster, name: str, *, ready: bool = True) -> core_v1.Pod:
    """A pod of app=web bound to n1 and reported Running (and Ready) by its kubelet."""
    if not any(n.metadata.name == "n1" for n in (await cluster.api.list(core_v1.Node))[0]):
        await cluster.api.create(make_node("n1"))
    await cluster.api.create(make_pod(name).labels(app="web").node("n1").obj())
    return await cluster.api.patch(
        core_v1.Pod,
        name,
        {
            "status": {
                "phase": "Running",
                "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
            }
        },
        namespace="default",
        subresource="status",
    )


async def budget(
    cluster: Cluster, name: str = "web", *, allowed: int, healthy: int = 3, desired: int = 2
) -> policy_v1.PodDisruptionBudget:
    """A budget over app=web whose status a disruption controller would have written."""
    pdb = await cluster.api.create(
        codec.convert(
            {
                "metadata": {"name": name, "namespace": "default"},
                "spec": {"minAvailable": desired, "selector": {"matchLabels": {"app": "web"}}},
            },
            policy_v1.PodDisruptionBudget,
        )
    )
    pdb.status = policy_v1.PodDisruptionBudgetStatus(
        observed_generation=pdb.metadata.generation,
        disruptions_allowed=allowed,
        current_healthy=healthy,
        desired_healthy=desired,
        expected_pods=healthy,
    )
    return await cluster.api.update_status(pdb)


async def gone(cluster: Cluster, name: str) -> bool:
    try:
        await cluster.api.get(core_v1.Pod, name, namespace="default")
    except errors.NotFound:
        return True
    return False


async def test_without_a_budget_the_pod_is_deleted(cluster: Cluster, http: aiohttp.ClientSession):
    await running_pod(cluster, "web-a")
    answer, _ = await call(
        http, "POST", f"{PODS}/web-a/eviction", 201, json=eviction("web-a", gracePeriodSeconds=0)
    )
    assert answer == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "code": 201,
    }
    assert await gone(cluster, "web-a")


async def test_default_grace_period_leaves_the_pod_terminating(
    cluster: Cluster, http: aiohttp.ClientSession
):
    await running_pod(cluster, "web-a")
    await call(http, "POST", f"{PODS}/web-a/eviction", 201, json=eviction("web-a"))
    pod = await cluster.api.get(core_v1.Pod, "web-a", namespace="default")
    assert pod.metadata.deletion_timestamp is not None
    assert pod.metadata.deletion_grace_period_seconds == 30
    # Marked before it was deleted, as upstream marks an evicted pod.
    [target] = [c for c in pod.status.conditions if c.type == "DisruptionTarget"]
    assert (target.status, target.reason, target.message) == (
        "True",
        "EvictionByEvictionAPI",
        "Eviction API: evicting",
    )
    assert target.last_transition_time


async def test_a_stale_resource_version_precondition_is_a_conflict_and_keeps_the_pod(
    cluster: Cluster, http: aiohttp.ClientSession
):
    pod = await running_pod(cluster, "web-a")
    stale = str(int(pod.metadata.resource_version) - 1)
    body = eviction("web-a", preconditions={"resourceVersion": stale})
    await call(http, "POST", f"{PODS}/web-a/eviction", 409, json=body)
    kept = await cluster.api.get(core_v1.Pod, "web-a", namespace="default")
    assert kept.metadata.deletion_timestamp is None
    assert not [c for c in kept.status.conditions if c.type == "DisruptionTarget"]
    # The current version goes through (the pod is marked, then deleted at that version).
    body = eviction("web-a", preconditions={"resourceVersion": pod.metadata.resource_version})
    await call(http, "POST", f"{PODS}/web-a/eviction", 201, json=body)
    assert (
        await cluster.api.get(core_v1.Pod, "web-a", namespace="default")
    ).metadata.deletion_timestamp


async def test_a_budget_allowing_one_disruption_lets_one_eviction_through(
    cluster: Cluster, http: aiohttp.ClientSession
):
    for name in ("web-a", "web-b", "web-c"):
        await running_pod(cluster, name)
    await budget(cluster, allowed=1)

    await call(
        http, "POST", f"{PODS}/web-a/eviction", 201, json=eviction("web-a", gracePeriodSeconds=0)
    )
    assert await gone(cluster, "web-a")
    pdb = await cluster.api.get(policy_v1.PodDisruptionBudget, "web", namespace="default")
    assert pdb.status.disruptions_allowed == 0
    assert list(pdb.status.disrupted_pods) == ["web-a"]
    [condition] = pdb.status.conditions
    assert (condition.type, condition.status, condition.reason) == (
        "DisruptionAllowed", "False", "InsufficientPods",
    )  # fmt: skip

    refused, _ = await call(
        http, "POST", f"{PODS}/web-b/eviction", 429, json=eviction("web-b", gracePeriodSeconds=0)
    )
    assert refused == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "Cannot evict pod as it would violate the pod's disruption budget.",
        "reason": "TooManyRequests",
        "details": {
            "causes": [
                {
                    "reason": "DisruptionBudget",
                    "message": "The disruption budget web needs 2 healthy pods and has 3 currently",
                }
            ]
        },
        "code": 429,
    }
    assert not await gone(cluster, "web-b")


async def test_a_budget_not_yet_observed_is_still_being_processed(
    cluster: Cluster, http: aiohttp.ClientSession
):
    await running_pod(cluster, "web-a")
    pdb = await budget(cluster, allowed=1)
    pdb.spec.min_available = 1  # a new generation the controller has not seen
    await cluster.api.update(pdb)
    refused, _ = await call(http, "POST", f"{PODS}/web-a/eviction", 429, json=eviction("web-a"))
    assert refused["details"] == {
        "causes": [
            {
                "reason": "DisruptionBudget",
                "message": "The disruption budget web is still being processed by the server.",
            }
        ],
        "retryAfterSeconds": 10,
    }


async def test_unready_pod_goes_while_the_application_is_healthy(
    cluster: Cluster, http: aiohttp.ClientSession
):
    await running_pod(cluster, "web-a", ready=False)
    await budget(cluster, allowed=0, healthy=2, desired=2)
    await call(
        http, "POST", f"{PODS}/web-a/eviction", 201, json=eviction("web-a", gracePeriodSeconds=0)
    )
    assert await gone(cluster, "web-a")
    pdb = await cluster.api.get(policy_v1.PodDisruptionBudget, "web", namespace="default")
    assert pdb.status.disrupted_pods is msgspec.UNSET  # nothing spent


async def test_pending_pods_are_deleted_without_looking_at_budgets(
    cluster: Cluster, http: aiohttp.ClientSession
):
    await cluster.api.create(make_pod("web-a").labels(app="web").obj())
    await budget(cluster, allowed=0)
    await call(http, "POST", f"{PODS}/web-a/eviction", 201, json=eviction("web-a"))
    assert await gone(cluster, "web-a")


async def test_two_budgets_for_one_pod_are_not_supported(
    cluster: Cluster, http: aiohttp.ClientSession
):
    await running_pod(cluster, "web-a")
    await budget(cluster, "one", allowed=1)
    await budget(cluster, "two", allowed=1)
    answer, _ = await call(http, "POST", f"{PODS}/web-a/eviction", 500, json=eviction("web-a"))
    assert answer["message"] == (
        "This pod has more than one PodDisruptionBudget, which the eviction subresource does "
        "not support."
    )
    assert not await gone(cluster, "web-a")


async def test_eviction_errors(cluster: Cluster, http: aiohttp.ClientSession):
    await running_pod(cluster, "web-a")
    await call(http, "POST", f"{PODS}/web-a/eviction", 400, json=eviction("web-b"))
    await call(http, "POST", f"{PODS}/nobody/eviction", 404, json=eviction("nobody"))
    await call(http, "GET", f"{PODS}/web-a/eviction", 405)
    await call(http, "POST", f"{PODS}/web-a/eviction?dryRun=All", 201, json=eviction("web-a"))
    assert not await gone(cluster, "web-a")


async def test_protobuf_eviction_body(cluster: Cluster, http: aiohttp.ClientSession):
    """What kubectl drain's typed client posts: metadata = 1, deleteOptions = 2."""
    await running_pod(cluster, "web-a")
    meta = field(1, b"web-a") + field(3, b"default")
    delete_options = field(1, 0)  # gracePeriodSeconds 0, a pointer's zero
    raw = protobuf_body("Eviction", field(1, meta) + field(2, delete_options), "policy/v1")
    assert protobuf.decode_body(raw) == {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": "web-a", "namespace": "default"},
        "deleteOptions": {"gracePeriodSeconds": 0},
    }
    await call(
        http,
        "POST",
        f"{PODS}/web-a/eviction",
        201,
        data=raw,
        headers={"Content-Type": protobuf.MEDIA_TYPE},
    )
    assert await gone(cluster, "web-a")


async def test_discovery_and_table(cluster: Cluster, http: aiohttp.ClientSession):
    core, _ = await call(http, "GET", "/api/v1", 200)
    [sub] = [r for r in core["resources"] if r["name"] == "pods/eviction"]
    assert (sub["group"], sub["version"], sub["kind"], sub["verbs"]) == (
        "policy", "v1", "Eviction", ["create"],
    )  # fmt: skip
    policy, _ = await call(http, "GET", "/apis/policy/v1", 200)
    names = {r["name"]: r for r in policy["resources"]}
    assert names["poddisruptionbudgets"]["shortNames"] == ["pdb"]
    assert "poddisruptionbudgets/status" in names

    await budget(cluster, allowed=1)
    table, _ = await call(
        http,
        "GET",
        "/apis/policy/v1/namespaces/default/poddisruptionbudgets",
        200,
        headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"},
    )
    assert [c["name"] for c in table["columnDefinitions"]] == [
        "Name", "Min Available", "Max Unavailable", "Allowed Disruptions", "Age",
    ]  # fmt: skip
    assert table["rows"][0]["cells"][:4] == ["web", "2", "N/A", 1]


async def test_a_budget_reads_back_with_its_zero_counts(
    cluster: Cluster, http: aiohttp.ClientSession
):
    """As upstream's, whose counts have no omitempty: a jsonpath on them prints 0; the
    empty map of disrupted pods is left out (it has omitempty)."""
    await budget(cluster, allowed=0)
    pdb, _ = await call(
        http, "GET", "/apis/policy/v1/namespaces/default/poddisruptionbudgets/web", 200
    )
    assert pdb["status"]["disruptionsAllowed"] == 0
    assert {"currentHealthy", "desiredHealthy", "expectedPods"} <= pdb["status"].keys()
    assert "disruptedPods" not in pdb["status"]


async def test_invalid_budget_is_422_with_field_paths(http: aiohttp.ClientSession):
    answer, _ = await call(
        http,
        "POST",
        "/apis/policy/v1/namespaces/default/poddisruptionbudgets",
        422,
        json={
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "bad"},
            "spec": {"minAvailable": "120%", "maxUnavailable": 1},
        },
    )
    assert [c["field"] for c in answer["details"]["causes"]] == ["spec", "spec.minAvailable"]
