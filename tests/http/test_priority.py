"""PriorityClasses and the Priority admission over the HTTP API, as upstream answers: a pod's
priority and preemption policy come from its class (or the global default class), a class
that does not exist or a priority the pod sets itself is refused with 403, only one class
is the global default, and the system classes are there from the start."""

from __future__ import annotations

from typing import Any

import aiohttp

from drasim.common import codec
from tests.builders import make_pod
from tests.http.conftest import Cluster
from tests.http.test_api import call

CLASSES = "/apis/scheduling.k8s.io/v1/priorityclasses"
PODS = "/api/v1/namespaces/default/pods"


def priority_class(name: str, value: int, **fields: Any) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
        **fields,
    }


def pod(name: str, **spec: Any) -> dict[str, Any]:
    body = codec.to_builtins(make_pod(name).obj())
    body["spec"].update(spec)
    return body


async def pod_names(http: aiohttp.ClientSession) -> list[str]:
    listed, _ = await call(http, "GET", PODS, 200)
    return [p["metadata"]["name"] for p in listed["items"]]


async def test_system_classes_are_there_from_the_start(cluster: Cluster, http):
    listed, _ = await call(http, "GET", CLASSES, 200)
    found = {c["metadata"]["name"]: c for c in listed["items"]}
    assert found["system-node-critical"]["value"] == 2000001000
    assert found["system-cluster-critical"]["value"] == 2000000000
    assert found["system-cluster-critical"]["preemptionPolicy"] == "PreemptLowerPriority"
    assert not found["system-cluster-critical"].get("globalDefault")
    refused, _ = await call(http, "DELETE", f"{CLASSES}/system-node-critical", 403)
    assert refused["message"] == (
        'priorityclasses.scheduling.k8s.io "system-node-critical" is forbidden: this is a '
        "system priority class and cannot be deleted"
    )


async def test_a_pod_takes_its_class_priority_and_policy(cluster: Cluster, http):
    created, _ = await call(http, "POST", CLASSES, 201, json=priority_class("high", 1000))
    assert created["preemptionPolicy"] == "PreemptLowerPriority"  # defaulted
    await call(
        http, "POST", CLASSES, 201, json=priority_class("gentle", 500, preemptionPolicy="Never")
    )

    high, _ = await call(http, "POST", PODS, 201, json=pod("a", priorityClassName="high"))
    assert (high["spec"]["priority"], high["spec"]["preemptionPolicy"]) == (
        1000,
        "PreemptLowerPriority",
    )
    gentle, _ = await call(http, "POST", PODS, 201, json=pod("b", priorityClassName="gentle"))
    assert (gentle["spec"]["priority"], gentle["spec"]["preemptionPolicy"]) == (500, "Never")
    plain, _ = await call(http, "POST", PODS, 201, json=pod("c"))
    assert plain["spec"]["priority"] == 0
    assert plain["spec"]["preemptionPolicy"] == "PreemptLowerPriority"
    assert not plain["spec"].get("priorityClassName")
    # The same priority, given again, is accepted.
    await call(http, "POST", PODS, 201, json=pod("d", priorityClassName="high", priority=1000))


async def test_a_missing_class_or_another_priority_is_forbidden(cluster: Cluster, http):
    await call(http, "POST", CLASSES, 201, json=priority_class("high", 1000))
    refused, _ = await call(http, "POST", PODS, 403, json=pod("a", priorityClassName="nope"))
    assert refused["reason"] == "Forbidden"
    assert refused["message"] == 'pods "a" is forbidden: no PriorityClass with name nope was found'
    refused, _ = await call(
        http, "POST", PODS, 403, json=pod("b", priorityClassName="high", priority=7)
    )
    assert refused["message"] == (
        'pods "b" is forbidden: the integer value of priority (7) must not be provided in pod '
        "spec; priority admission controller computed 1000 from the given PriorityClass name"
    )
    refused, _ = await call(
        http, "POST", PODS, 403, json=pod("c", priorityClassName="high", preemptionPolicy="Never")
    )
    assert "the string value of PreemptionPolicy (Never) must not be provided" in refused["message"]
    assert await pod_names(http) == []  # nothing written


async def test_the_global_default_class_names_itself_on_pods_without_one(cluster: Cluster, http):
    await call(http, "POST", CLASSES, 201, json=priority_class("normal", 100, globalDefault=True))
    created, _ = await call(http, "POST", PODS, 201, json=pod("a"))
    assert created["spec"]["priorityClassName"] == "normal"
    assert created["spec"]["priority"] == 100
    refused, _ = await call(
        http, "POST", CLASSES, 403, json=priority_class("other", 200, globalDefault=True)
    )
    assert refused["message"] == (
        'priorityclasses.scheduling.k8s.io "other" is forbidden: PriorityClass normal is '
        "already marked as default. Only one default can exist"
    )
    # Once it is no longer the default, another class may be.
    normal, _ = await call(http, "GET", f"{CLASSES}/normal", 200)
    normal["globalDefault"] = False
    await call(http, "PUT", f"{CLASSES}/normal", 200, json=normal)
    await call(http, "POST", CLASSES, 201, json=priority_class("other", 200, globalDefault=True))
    created, _ = await call(http, "POST", PODS, 201, json=pod("b"))
    assert (created["spec"]["priorityClassName"], created["spec"]["priority"]) == ("other", 200)


async def test_class_values_and_names_are_validated(cluster: Cluster, http):
    refused, _ = await call(http, "POST", CLASSES, 422, json=priority_class("huge", 1_000_000_001))
    assert [c["field"] for c in refused["details"]["causes"]] == ["value"]
    assert "maximum allowed value of a user defined priority is 1000000000" in refused["message"]
    refused, _ = await call(http, "POST", CLASSES, 422, json=priority_class("system-mine", 5))
    assert [c["field"] for c in refused["details"]["causes"]] == ["metadata.name"]
    assert "system-mine is not a known system priority class" in refused["message"]
    refused, _ = await call(
        http, "POST", CLASSES, 422, json=priority_class("odd", 5, preemptionPolicy="Sometimes")
    )
    assert [c["field"] for c in refused["details"]["causes"]] == ["preemptionPolicy"]

    created, _ = await call(http, "POST", CLASSES, 201, json=priority_class("high", 1000))
    created["value"] = 2000
    refused, _ = await call(http, "PUT", f"{CLASSES}/high", 422, json=created)
    assert (
        refused["details"]["causes"][0]["message"] == "Forbidden: may not be changed in an update."
    )
    kept, _ = await call(http, "GET", f"{CLASSES}/high", 200)
    assert kept["value"] == 1000


async def test_a_pod_replaced_without_its_priority_keeps_it(cluster: Cluster, http):
    await call(http, "POST", CLASSES, 201, json=priority_class("high", 1000))
    created, _ = await call(http, "POST", PODS, 201, json=pod("a", priorityClassName="high"))
    body = pod("a", priorityClassName="high")
    body["metadata"]["resourceVersion"] = created["metadata"]["resourceVersion"]
    replaced, _ = await call(http, "PUT", f"{PODS}/a", 200, json=body)
    assert replaced["spec"]["priority"] == 1000
    assert replaced["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    body["spec"]["priority"] = 5
    refused, _ = await call(http, "PUT", f"{PODS}/a", 422, json=body)
    assert refused["details"]["causes"][0]["field"] == "spec"


async def test_priority_classes_print_as_kubectl_prints_them(cluster: Cluster, http):
    await call(http, "POST", CLASSES, 201, json=priority_class("high", 1000, globalDefault=True))
    table, _ = await call(
        http,
        "GET",
        f"{CLASSES}/high",
        200,
        headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"},
    )
    assert [c["name"] for c in table["columnDefinitions"]] == [
        "Name", "Value", "Global-Default", "Age", "PreemptionPolicy",
    ]  # fmt: skip
    cells = table["rows"][0]["cells"]
    assert cells[:3] == ["high", 1000, True] and cells[4] == "PreemptLowerPriority"
