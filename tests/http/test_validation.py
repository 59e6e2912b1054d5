"""Validation over HTTP as clients see it: every refused write is a 422 whose causes name
the field (`details.causes[].field`) and whose message names it too, and the request
checks that come before any object (options, selectors, resourceVersion, Accept, names
Postgres cannot store) answer 400/406/422 with upstream's words, never a 500."""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import pytest

from tests.http.test_api import call

PODS = "/api/v1/namespaces/default/pods"
CLASSES = "/apis/resource.k8s.io/v1/deviceclasses"
CLAIMS = "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims"
TEMPLATES = "/apis/resource.k8s.io/v1/namespaces/default/resourceclaimtemplates"
SLICES = "/apis/resource.k8s.io/v1/resourceslices"
DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"
REPLICASETS = "/apis/apps/v1/namespaces/default/replicasets"
MERGE = {"Content-Type": "application/merge-patch+json"}
JSON_PATCH = {"Content-Type": "application/json-patch+json"}
APPLY = {"Content-Type": "application/apply-patch+yaml"}
INT32_MAX = 2**31 - 1


def _container(**extra: Any) -> dict[str, Any]:
    return {"name": "app", "image": "registry.k8s.io/pause:3.10"} | extra


POD: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "p"},
    "spec": {"containers": [_container()]},
}
CLASS: dict[str, Any] = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "DeviceClass",
    "metadata": {"name": "gpu.example.com"},
    "spec": {
        "selectors": [{"cel": {"expression": 'device.driver == "gpu.example.com"'}}],
        "extendedResourceName": "example.com/gpu",
    },
}
CLAIM: dict[str, Any] = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceClaim",
    "metadata": {"name": "c"},
    "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}},
}
TEMPLATE: dict[str, Any] = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceClaimTemplate",
    "metadata": {"name": "t"},
    "spec": {"spec": copy.deepcopy(CLAIM["spec"])},
}
SLICE: dict[str, Any] = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceSlice",
    "metadata": {"name": "s"},
    "spec": {
        "driver": "gpu.example.com",
        "nodeName": "worker",
        "pool": {"name": "worker", "generation": 1, "resourceSliceCount": 1},
        "devices": [{"name": "gpu-0"}],
    },
}
DEPLOYMENT: dict[str, Any] = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "d"},
    "spec": {
        "replicas": 1,
        "selector": {"matchLabels": {"app": "d"}},
        "template": {"metadata": {"labels": {"app": "d"}}, "spec": {"containers": [_container()]}},
    },
}
REPLICASET = DEPLOYMENT | {"kind": "ReplicaSet", "metadata": {"name": "rs"}}
NODE: dict[str, Any] = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}}


def _with(doc: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    """A copy of `doc` with dotted paths set (`spec.containers.0.name`)."""
    doc = copy.deepcopy(doc)
    for path, value in changes.items():
        *parents, last = path.split(".")
        node: Any = doc
        for key in parents:
            node = node[int(key)] if isinstance(node, list) else node.setdefault(key, {})
        if isinstance(node, list):
            node[int(last)] = value
        else:
            node[last] = value
    return doc


# Upstream estimates 9,673,956 CEL cost units (32^4 iterations over attribute identifiers),
# above CELSelectorExpressionMaxCost (1,000,000).
TOO_COMPLEX = (
    'device.attributes["d"].all(a, device.attributes["d"].all(b, device.attributes["d"]'
    '.all(c, device.attributes["d"].all(x, a == x))))'
)


@dataclass
class Case:
    id: str
    method: str
    path: str
    body: Any
    fields: list[str]  # the field paths the causes must name, in order
    headers: dict[str, str] = field(default_factory=dict)


C = Case
CASES = [
    # Pod
    C("pod-name", "POST", PODS, _with(POD, {"metadata.name": "Not_A_Name"}), ["metadata.name"]),
    C("pod-generate-name", "POST", PODS,
      _with(POD, {"metadata": {"generateName": "Bad_"}}), ["metadata.generateName"]),
    C("pod-label-key", "POST", PODS, _with(POD, {"metadata.labels": {"a/b/c": "x"}}),
      ["metadata.labels"]),
    C("pod-label-value", "POST", PODS, _with(POD, {"metadata.labels": {"a": "v" * 64}}),
      ["metadata.labels"]),
    C("pod-annotation-key", "POST", PODS, _with(POD, {"metadata.annotations": {"a b": "x"}}),
      ["metadata.annotations"]),
    C("pod-owner-uid", "POST", PODS, _with(POD, {"metadata.ownerReferences": [
        {"apiVersion": "v1", "kind": "Pod", "name": "x", "uid": ""}]}),
      ["metadata.ownerReferences[0].uid"]),
    C("pod-finalizer", "POST", PODS, _with(POD, {"metadata.finalizers": ["a/b/c"]}),
      ["metadata.finalizers[0]"]),
    C("pod-no-containers", "POST", PODS, _with(POD, {"spec.containers": []}),
      ["spec.containers"]),
    C("pod-container-name", "POST", PODS, _with(POD, {"spec.containers.0.name": "App"}),
      ["spec.containers[0].name"]),
    C("pod-container-image", "POST", PODS, _with(POD, {"spec.containers.0.image": ""}),
      ["spec.containers[0].image"]),
    C("pod-container-duplicate", "POST", PODS,
      _with(POD, {"spec.containers": [_container(), _container()]}),
      ["spec.containers[1].name"]),
    C("pod-restart-policy", "POST", PODS, _with(POD, {"spec.restartPolicy": "Sometimes"}),
      ["spec.restartPolicy"]),
    C("pod-node-name", "POST", PODS, _with(POD, {"spec.nodeName": "Worker_1"}),
      ["spec.nodeName"]),
    # A Pod's negative grace period is defaulted to 1 (SetDefaults_Pod); a template's is not.
    C("template-grace-period", "POST", DEPLOYMENTS,
      _with(DEPLOYMENT, {"spec.template.spec.terminationGracePeriodSeconds": -1}),
      ["spec.template.spec.terminationGracePeriodSeconds"]),
    C("pod-label-type", "POST", PODS, _with(POD, {"metadata.labels": {"a": "x", "b": 1}}),
      ["metadata.labels[b]"]),
    C("pod-limit-quantity", "POST", PODS, _with(POD, {"spec.containers.0.resources": {
        "limits": {"memory": "1Gi", "cpu": "lots"}}}),
      ["spec.containers[0].resources.limits[cpu]"]),
    C("pod-toleration-operator", "POST", PODS,
      _with(POD, {"spec.tolerations": [{"key": "k", "operator": "Near"}]}),
      ["spec.tolerations[0].operator"]),
    C("pod-affinity-weight", "POST", PODS, _with(POD, {"spec.affinity": {"nodeAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 0, "preference": {}}]}}}),
      ["spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight"]),
    C("pod-extended-resource-request", "POST", PODS, _with(POD, {"spec.containers.0.resources": {
        "limits": {"example.com/gpu": "2"}, "requests": {"example.com/gpu": "1"}}}),
      ["spec.containers[0].resources.requests"]),
    C("pod-resource-name", "POST", PODS,
      _with(POD, {"spec.containers.0.resources": {"limits": {"gpus": "1"}}}),
      ["spec.containers[0].resources.limits[gpus]"]),
    C("pod-claim-unknown", "POST", PODS,
      _with(POD, {"spec.containers.0.resources": {"claims": [{"name": "nope"}]}}),
      ["spec.containers[0].resources.claims[0]"]),
    C("pod-resource-claim-source", "POST", PODS, _with(POD, {"spec.resourceClaims": [
        {"name": "gpu"}]}), ["spec.resourceClaims[0]"]),
    C("pod-ephemeral-resources", "POST", PODS, _with(POD, {"spec.ephemeralContainers": [
        _container(name="debug", resources={"limits": {"cpu": "1"}})]}),
      ["spec.ephemeralContainers[0].resources"]),
    C("pod-wrong-type", "POST", PODS, _with(POD, {"spec.containers.0.name": ["app"]}),
      ["spec.containers[0].name"]),
    C("pod-spec-not-object", "POST", PODS, _with(POD, {"spec": []}), ["spec"]),
    C("pod-status-phase", "PUT", f"{PODS}/base/status",
      _with(POD, {"metadata.name": "base", "status": {"phase": "Exploded"}}), ["status.phase"]),
    C("pod-merge-patch", "PATCH", f"{PODS}/base",
      {"metadata": {"labels": {"a": "-x-"}}}, ["metadata.labels"], MERGE),
    C("pod-json-patch", "PATCH", f"{PODS}/base",
      [{"op": "add", "path": "/metadata/finalizers", "value": ["a/b/c"]}],
      ["metadata.finalizers[0]"], JSON_PATCH),
    C("pod-update-spec", "PUT", f"{PODS}/base",
      _with(POD, {"metadata.name": "base", "spec.containers.0.name": "other"}), ["spec"]),
    C("pod-binding-target", "POST", f"{PODS}/base/binding",
      {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "base"}, "target": {}},
      ["target.name"]),
    C("pod-binding-target-name", "POST", f"{PODS}/base/binding",
      {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "base"},
       "target": {"name": "Not_A_Node"}}, ["target.name"]),
    # DeviceClass
    C("class-cel-syntax", "POST", CLASSES,
      _with(CLASS, {"spec.selectors.0.cel.expression": "device.driver =="}),
      ["spec.selectors[0].cel.expression"]),
    C("class-cel-field", "POST", CLASSES,
      _with(CLASS, {"spec.selectors.0.cel.expression": "device.model == 1"}),
      ["spec.selectors[0].cel.expression"]),
    C("class-cel-not-bool", "POST", CLASSES,
      _with(CLASS, {"spec.selectors.0.cel.expression": "device.driver"}),
      ["spec.selectors[0].cel.expression"]),
    C("class-cel-too-long", "POST", CLASSES,
      _with(CLASS, {"spec.selectors.0.cel.expression": f'device.driver == "{"a" * 10240}"'}),
      ["spec.selectors[0].cel.expression"]),
    C("class-selector-empty", "POST", CLASSES, _with(CLASS, {"spec.selectors": [{}]}),
      ["spec.selectors[0].cel"]),
    C("class-extended-resource-name", "POST", CLASSES,
      _with(CLASS, {"spec.extendedResourceName": "kubernetes.io/gpu"}),
      ["spec.extendedResourceName"]),
    C("class-config-driver", "POST", CLASSES,
      _with(CLASS, {"spec.config": [{"opaque": {"driver": "", "parameters": {}}}]}),
      ["spec.config[0].opaque.driver"]),
    C("class-name", "POST", CLASSES, _with(CLASS, {"metadata.name": "GPU"}), ["metadata.name"]),
    C("class-update-cel", "PUT", f"{CLASSES}/base.example.com",
      _with(CLASS, {"metadata.name": "base.example.com",
                    "spec.selectors.0.cel.expression": "nope"}),
      ["spec.selectors[0].cel.expression"]),
    # ResourceClaim, ResourceClaimTemplate
    C("claim-request-name", "POST", CLAIMS,
      _with(CLAIM, {"spec.devices.requests.0.name": "GPU"}), ["spec.devices.requests[0].name"]),
    C("claim-request-neither", "POST", CLAIMS,
      _with(CLAIM, {"spec.devices.requests": [{"name": "gpu"}]}), ["spec.devices.requests[0]"]),
    C("claim-class-missing", "POST", CLAIMS,
      _with(CLAIM, {"spec.devices.requests.0.exactly.deviceClassName": ""}),
      ["spec.devices.requests[0].exactly.deviceClassName"]),
    C("claim-allocation-mode", "POST", CLAIMS,
      _with(CLAIM, {"spec.devices.requests.0.exactly.allocationMode": "Some"}),
      ["spec.devices.requests[0].exactly.allocationMode"]),
    C("claim-count", "POST", CLAIMS, _with(CLAIM, {"spec.devices.requests.0.exactly.count": -1}),
      ["spec.devices.requests[0].exactly.count"]),
    C("claim-cel", "POST", CLAIMS, _with(CLAIM, {"spec.devices.requests.0.exactly.selectors": [
        {"cel": {"expression": "device.driver"}}]}),
      ["spec.devices.requests[0].exactly.selectors[0].cel.expression"]),
    C("claim-constraint-request", "POST", CLAIMS, _with(CLAIM, {"spec.devices.constraints": [
        {"requests": ["other"], "matchAttribute": "example.com/model"}]}),
      ["spec.devices.constraints[0].requests[0]"]),
    C("claim-status-reserved-without-allocation", "PUT", f"{CLAIMS}/base/status",
      _with(CLAIM, {"metadata.name": "base", "status": {"reservedFor": [
          {"resource": "pods", "name": "p", "uid": "1"}]}}), ["status.reservedFor"]),
    C("template-cel", "POST", TEMPLATES,
      _with(TEMPLATE, {"spec.spec.devices.requests.0.exactly.selectors": [
          {"cel": {"expression": "x"}}]}),
      ["spec.spec.devices.requests[0].exactly.selectors[0].cel.expression"]),
    C("template-cel-cost", "POST", TEMPLATES,
      _with(TEMPLATE, {"spec.spec.devices.requests.0.exactly.selectors": [
          {"cel": {"expression": TOO_COMPLEX}}]}),
      ["spec.spec.devices.requests[0].exactly.selectors[0].cel.expression"]),
    C("template-labels", "POST", TEMPLATES,
      _with(TEMPLATE, {"spec.metadata": {"labels": {"a": "-"}}}), ["spec.metadata.labels"]),
    # ResourceSlice
    C("slice-driver", "POST", SLICES, _with(SLICE, {"spec.driver": "Gpu_Driver"}),
      ["spec.driver"]),
    C("slice-pool", "POST", SLICES, _with(SLICE, {"spec.pool.name": ""}), ["spec.pool.name"]),
    C("slice-device-name", "POST", SLICES, _with(SLICE, {"spec.devices.0.name": "GPU"}),
      ["spec.devices[0].name"]),
    C("slice-node-selection", "POST", SLICES, _with(SLICE, {"spec.allNodes": True}), ["spec"]),
    # Deployment, ReplicaSet
    C("deploy-replicas-negative", "POST", DEPLOYMENTS, _with(DEPLOYMENT, {"spec.replicas": -1}),
      ["spec.replicas"]),
    C("deploy-replicas-int32", "POST", DEPLOYMENTS,
      _with(DEPLOYMENT, {"spec.replicas": INT32_MAX + 1}), ["spec.replicas"]),
    C("deploy-replicas-type", "POST", DEPLOYMENTS, _with(DEPLOYMENT, {"spec.replicas": "two"}),
      ["spec.replicas"]),
    C("deploy-selector-empty", "POST", DEPLOYMENTS, _with(DEPLOYMENT, {"spec.selector": {}}),
      ["spec.selector"]),
    C("deploy-selector-mismatch", "POST", DEPLOYMENTS,
      _with(DEPLOYMENT, {"spec.selector.matchLabels": {"app": "other"}}),
      ["spec.template.metadata.labels"]),
    C("deploy-selector-operator", "POST", DEPLOYMENTS, _with(DEPLOYMENT, {"spec.selector": {
        "matchLabels": {"app": "d"},
        "matchExpressions": [{"key": "app", "operator": "Like", "values": ["d"]}]}}),
      ["spec.selector.matchExpressions[0].operator"]),
    C("deploy-strategy", "POST", DEPLOYMENTS, _with(DEPLOYMENT, {"spec.strategy": {"type": "All"}}),
      ["spec.strategy.type"]),
    C("deploy-template-containers", "POST", DEPLOYMENTS,
      _with(DEPLOYMENT, {"spec.template.spec.containers": []}),
      ["spec.template.spec.containers"]),
    C("deploy-history", "POST", DEPLOYMENTS,
      _with(DEPLOYMENT, {"spec.revisionHistoryLimit": -1}), ["spec.revisionHistoryLimit"]),
    C("deploy-scale", "PUT", f"{DEPLOYMENTS}/base/scale",
      {"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "base"},
       "spec": {"replicas": -1}}, ["spec.replicas"]),
    C("deploy-status", "PUT", f"{DEPLOYMENTS}/base/status",
      _with(DEPLOYMENT, {"metadata.name": "base", "status": {"replicas": -1}}),
      ["status.replicas"]),
    C("replicaset-selector-mismatch", "POST", REPLICASETS,
      _with(REPLICASET, {"spec.selector.matchLabels": {"app": "other"}}),
      ["spec.template.metadata.labels"]),
    # Node, Namespace, Event, Lease, PodDisruptionBudget, PriorityClass, ResourceQuota
    C("node-taint-effect", "POST", "/api/v1/nodes",
      _with(NODE, {"spec.taints": [{"key": "k", "effect": "Sometimes"}]}),
      ["spec.taints[0].effect"]),
    C("node-capacity-name", "POST", "/api/v1/nodes",
      _with(NODE, {"status.capacity": {"gpus": "1"}}), ["status.capacity[gpus]"]),
    C("namespace-name", "POST", "/api/v1/namespaces",
      {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "Team.A"}},
      ["metadata.name"]),
    C("event-type", "POST", "/api/v1/namespaces/default/events",
      {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e"}, "type": "Fatal",
       "involvedObject": {"kind": "Pod", "name": "p"}}, ["type"]),
    C("lease-duration", "POST", "/apis/coordination.k8s.io/v1/namespaces/default/leases",
      {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "l"},
       "spec": {"leaseDurationSeconds": 0}}, ["spec.leaseDurationSeconds"]),
    C("pdb-both", "POST", "/apis/policy/v1/namespaces/default/poddisruptionbudgets",
      {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "b"},
       "spec": {"minAvailable": 1, "maxUnavailable": 1}}, ["spec"]),
    C("pdb-percent", "POST", "/apis/policy/v1/namespaces/default/poddisruptionbudgets",
      {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "b"},
       "spec": {"minAvailable": "120%"}}, ["spec.minAvailable"]),
    C("priority-class-value", "POST", "/apis/scheduling.k8s.io/v1/priorityclasses",
      {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "pc"},
       "value": 2_000_000_000}, ["value"]),
    C("priority-class-preemption-policy", "POST", "/apis/scheduling.k8s.io/v1/priorityclasses",
      {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "pc"},
       "value": 1, "preemptionPolicy": "Always"}, ["preemptionPolicy"]),
    C("quota-resource-name", "POST", "/api/v1/namespaces/default/resourcequotas",
      {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q"},
       "spec": {"hard": {"gpus": "1"}}}, ["spec.hard[gpus]"]),
    # Request options
    C("apply-without-field-manager", "PATCH", f"{PODS}/base",
      _with(POD, {"metadata.name": "base"}), ["fieldManager"], APPLY),
]  # fmt: skip


async def _setup(http: aiohttp.ClientSession) -> None:
    """The objects the updates and subresource writes of `CASES` address."""
    for path, body in (
        (PODS, _with(POD, {"metadata.name": "base"})),
        (CLASSES, _with(CLASS, {"metadata.name": "base.example.com"})),
        (CLAIMS, _with(CLAIM, {"metadata.name": "base"})),
        (DEPLOYMENTS, _with(DEPLOYMENT, {"metadata.name": "base"})),
    ):
        await call(http, "POST", path, 201, json=body)


async def test_every_refusal_names_its_fields(http: aiohttp.ClientSession) -> None:
    """One table over the kinds and verbs (checked in one cluster: each case is a request):
    a 422 Invalid whose causes carry the field paths and whose message names them."""
    await _setup(http)
    failures = []
    for case in CASES:
        async with http.request(
            case.method,
            case.path,
            data=json.dumps(case.body),
            headers={"Content-Type": "application/json"} | case.headers,
        ) as response:
            status = await response.json()
        causes = (status.get("details") or {}).get("causes") or []
        fields = [c.get("field", "") for c in causes]
        problems = []
        if response.status != 422 or status.get("reason") != "Invalid":
            problems.append(f"{response.status} {status.get('reason')}")
        if fields[: len(case.fields)] != case.fields:
            problems.append(f"causes name {fields}, want {case.fields}")
        problems += [f"message misses {f!r}" for f in fields if f not in status.get("message", "")]
        if problems:
            failures.append(f"{case.id}: {'; '.join(problems)}: {status.get('message')}")
    assert not failures, "\n".join(failures)


# --- Regression tests, one per refusal (issue #15 items 9 and 10) -----------------------------


async def test_a_device_class_whose_cel_does_not_compile_is_refused(http):
    """Refused at create, as upstream, instead of stored and leaving every pod of its
    extended resource Pending with "CEL compile error"."""
    body = _with(CLASS, {"spec.selectors.0.cel.expression": "device.driver =="})
    status, _ = await call(http, "POST", CLASSES, 422, json=body)
    assert status["reason"] == "Invalid"
    [cause] = status["details"]["causes"]
    assert cause["field"] == "spec.selectors[0].cel.expression"
    assert cause["reason"] == "FieldValueInvalid"
    assert cause["message"].startswith(
        'Invalid value: "device.driver ==": compilation failed: ERROR: <input>:1:17: '
        "Syntax error: mismatched input '<EOF>'"
    )
    assert status["message"].startswith(
        'DeviceClass.resource.k8s.io "gpu.example.com" is invalid: '
        "spec.selectors[0].cel.expression: "
    )
    await call(http, "GET", f"{CLASSES}/gpu.example.com", 404)


COST_CASES = [
    (CLASSES, _with(CLASS, {"spec.selectors.0.cel.expression": TOO_COMPLEX}),
     "spec.selectors[0].cel.expression", 'DeviceClass.resource.k8s.io "gpu.example.com"'),
    (CLAIMS, _with(CLAIM, {"spec.devices.requests.0.exactly.selectors": [
        {"cel": {"expression": 'device.driver == "gpu.example.com"'}},
        {"cel": {"expression": TOO_COMPLEX}}]}),
     "spec.devices.requests[0].exactly.selectors[1].cel.expression",
     'ResourceClaim.resource.k8s.io "c"'),
]  # fmt: skip


@pytest.mark.parametrize(("path", "body", "field", "kind"), COST_CASES, ids=["class", "claim"])
async def test_a_selector_over_the_cost_limit_is_refused(http, path, body, field, kind):
    """Upstream `validateCELSelector`: `field.Forbidden(<path>.expression, "too complex,
    exceeds cost limit")` when the estimated worst case exceeds the limit, instead of
    storing a selector that could keep the scheduler busy for every device."""
    status, _ = await call(http, "POST", path, 422, json=body)
    assert status["reason"] == "Invalid"
    assert status["details"]["causes"] == [
        {
            "reason": "FieldValueForbidden",
            "field": field,
            "message": "Forbidden: too complex, exceeds cost limit",
        }
    ]
    assert status["message"] == (
        f"{kind} is invalid: {field}: Forbidden: too complex, exceeds cost limit"
    )
    await call(http, "GET", f"{path}/{body['metadata']['name']}", 404)


async def test_a_nul_in_a_continue_token_is_a_bad_request(http):
    """Postgres refuses NUL in text: refused before any read, never a 500 (which also failed
    every request batched with it). Names and namespaces with a NUL match nothing, as
    upstream's (tests/http/test_api.py)."""
    status, _ = await call(http, "GET", PODS, 400, params={"limit": "1", "continue": "AA=="})
    assert status["reason"] == "BadRequest"
    assert status["message"].startswith("invalid continue token")


async def test_a_nul_in_a_field_manager_or_binding_target_is_invalid(http):
    await call(http, "POST", PODS, 201, json=_with(POD, {"metadata.name": "base"}))
    status, _ = await call(http, "POST", PODS, 422, json=POD, params={"fieldManager": "m\0"})
    assert status["message"] == (
        'CreateOptions.meta.k8s.io "" is invalid: fieldManager: Invalid value: "m\\u0000": '
        "invalid character U+0000 (at position 1)"
    )
    binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "base"},
               "target": {"name": "node\0"}}  # fmt: skip
    status, _ = await call(http, "POST", f"{PODS}/base/binding", 422, json=binding)
    assert status["details"]["causes"][0]["field"] == "target.name"


async def test_a_nul_in_a_field_selector_selects_nothing(http):
    await call(http, "POST", PODS, 201, json=POD)
    for selector in ("metadata.name=p\0", "spec.nodeName=n\0"):
        listing, _ = await call(http, "GET", PODS, 200, params={"fieldSelector": selector})
        assert listing["items"] == []


async def test_replicas_are_an_int32(http):
    biggest = _with(DEPLOYMENT, {"spec.replicas": INT32_MAX})
    await call(http, "POST", DEPLOYMENTS, 201, json=biggest, params={"dryRun": "All"})
    status, _ = await call(
        http, "POST", DEPLOYMENTS, 422, json=_with(DEPLOYMENT, {"spec.replicas": INT32_MAX + 1})
    )
    assert status["message"] == (
        'Deployment.apps "d" is invalid: spec.replicas: Invalid value: 2147483648: '
        "must be less than or equal to 2147483647"
    )


async def test_a_pod_phase_must_be_a_pod_phase(http):
    await call(http, "POST", PODS, 201, json=POD)
    body = _with(POD, {"status": {"phase": "Exploded"}})
    status, _ = await call(http, "PUT", f"{PODS}/p/status", 422, json=body)
    assert status["message"] == (
        'Pod "p" is invalid: status.phase: Unsupported value: "Exploded": supported values: '
        '"Pending", "Running", "Succeeded", "Failed", "Unknown"'
    )
    pod, _ = await call(http, "PUT", f"{PODS}/p/status", 200,
                        json=_with(POD, {"status": {"phase": "Running"}}))  # fmt: skip
    assert pod["status"]["phase"] == "Running"


async def test_label_selectors_parse_as_upstream(http):
    """`a==` and `a in ()` are upstream's spellings of the empty value; keys and values are
    checked, and a bad selector is a 400 with upstream's message."""
    await call(http, "POST", PODS, 201, json=_with(POD, {"metadata.labels": {"a": ""}}))
    await call(http, "POST", PODS, 201,
               json=_with(POD, {"metadata.name": "q", "metadata.labels": {"a": "x"}}))  # fmt: skip
    for selector, names in (("a==", ["p"]), ("a in ()", ["p"]), ("a notin ()", ["q"])):
        listing, _ = await call(http, "GET", PODS, 200, params={"labelSelector": selector})
        assert [i["metadata"]["name"] for i in listing["items"]] == names, selector
    key = "k" * 64
    for selector, message in (
        (f"{key}=v", f'unable to parse requirement: <nil>: Invalid value: "{key}": '
                     "name part must be no more than 63 characters"),
        ("a in (", "unable to parse requirement: found '', expected: ',', ')' or identifier"),
        ("a=b=c", "found '=', expected: ',' or 'end of string'"),
    ):  # fmt: skip
        status, _ = await call(http, "GET", PODS, 400, params={"labelSelector": selector})
        assert (status["reason"], status["message"]) == ("BadRequest", message)


async def test_an_apply_patch_needs_a_field_manager(http):
    await call(http, "POST", PODS, 201, json=POD)
    status, _ = await call(http, "PATCH", f"{PODS}/p", 422, data=json.dumps(POD), headers=APPLY)
    assert status == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: '
        "is required for apply patch",
        "reason": "Invalid",
        "details": {
            "group": "meta.k8s.io",
            "kind": "PatchOptions",
            "causes": [
                {
                    "reason": "FieldValueRequired",
                    "message": "Required value: is required for apply patch",
                    "field": "fieldManager",
                }
            ],
        },
        "code": 422,
    }
    status, _ = await call(http, "PATCH", f"{PODS}/p", 422, data="{}", headers=MERGE,
                           params={"force": "true"})  # fmt: skip
    assert status["message"] == (
        'PatchOptions.meta.k8s.io "" is invalid: force: Forbidden: '
        "may not be specified for non-apply patch"
    )
    await call(http, "PATCH", f"{PODS}/p", 200, data=json.dumps(POD), headers=APPLY,
               params={"fieldManager": "me"})  # fmt: skip


@pytest.mark.parametrize(
    ("accept", "want"),
    [
        ("application/xml", 406),
        ("text/plain", 406),
        ("application/json;q=0, application/xml", 406),
        ("application/xml, */*;q=0.1", 200),
        ("application/yaml", 200),  # answered in JSON, which client-go decodes by its type
        ("application/vnd.kubernetes.protobuf, application/json", 200),
        ("application/json;as=Table;v=v1;g=meta.k8s.io, application/json", 200),
    ],
)
async def test_accept_is_negotiated(http, accept: str, want: int):
    await call(http, "POST", PODS, 201, json=POD)
    for path in (PODS, f"{PODS}/p"):
        status, response = await call(http, "GET", path, want, headers={"Accept": accept})
        assert response.headers["Content-Type"].startswith("application/json")
    if want == 406:
        assert status == {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": "only the following media types are accepted: application/json, "
            "application/yaml, application/vnd.kubernetes.protobuf",
            "reason": "NotAcceptable",
            "code": 406,
        }
        # Refused before anything is done: nothing was deleted.
        await call(http, "DELETE", f"{PODS}/p", 406, headers={"Accept": accept})
        await call(http, "GET", f"{PODS}/p", 200)


@pytest.mark.parametrize("body", [[], "pod", 1, None], ids=["array", "string", "number", "null"])
async def test_a_body_that_is_no_object_is_a_bad_request(http, body: Any):
    headers = {"Content-Type": "application/json"}
    status, _ = await call(http, "POST", PODS, 400, data=json.dumps(body), headers=headers)
    assert status["reason"] == "BadRequest"
    assert status["message"].startswith(
        "Object 'Kind' is missing in 'null'"
        if body is None
        else 'Pod in version "v1" cannot be handled as a Pod: '
        "couldn't get version/kind; json parse error: json: cannot unmarshal "
    )
