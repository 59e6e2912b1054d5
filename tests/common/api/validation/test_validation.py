"""Validation of every served kind, table-driven: each case patches a valid object and names
the field errors Kubernetes would report (type and field path)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from drasim.common import codec
from drasim.common.api import core_v1, registry, resource_v1, validation
from drasim.common.api.meta_v1 import KubeObject
from drasim.common.api.validation import pod as pod_validation
from drasim.common.errors import FieldError

DELETE = object()


def _patch(doc: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    """A copy of `doc` with dotted paths (`spec.containers.0.image`) set or deleted."""
    doc = copy.deepcopy(doc)
    for path, value in changes.items():
        *parents, last = path.split(".")
        node: Any = doc
        for key in parents:
            node = node[int(key)] if isinstance(node, list) else node.setdefault(key, {})
        if isinstance(node, list):
            node[int(last)] = value
        elif value is DELETE:
            del node[last]
        else:
            node[last] = value
    return doc


def _obj(doc: dict[str, Any]) -> KubeObject:
    if doc["kind"] == "Binding":  # a subresource body, not in the registry
        return codec.convert(doc, core_v1.Binding)
    return codec.convert(doc, registry.by_api_version_kind(doc["apiVersion"], doc["kind"]).type)


def _short(errors: list[FieldError]) -> list[tuple[str, str]]:
    return [(e.type.removeprefix("FieldValue"), e.field) for e in errors]


def _container(name: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "image": "registry.k8s.io/pause:3.10"} | extra


POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "my-pod", "namespace": "default", "uid": "1234", "labels": {"app": "x"}},
    "spec": {
        "initContainers": [
            _container("init-con0", resources={"limits": {"example.com/gpu": 1}}),
            _container("sidecar-con1", restartPolicy="Always"),
        ],
        "containers": [
            _container(
                "con0",
                resources={
                    "requests": {"cpu": "500m", "example.com/gpu": 2},
                    "limits": {"cpu": "1", "example.com/gpu": 2},
                    "claims": [{"name": "gpu"}],
                },
            )
        ],
        "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "gpu-template"}],
        "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoSchedule"}],
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchFields": [
                                {"key": "metadata.name", "operator": "In", "values": ["w"]}
                            ]
                        }
                    ]
                }
            }
        },
    },
}

NODE = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {"name": "worker", "labels": {"kubernetes.io/hostname": "worker"}},
    "spec": {"taints": [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]},
    "status": {"allocatable": {"cpu": "4", "memory": "32Gi", "pods": 110, "example.com/gpu": 0}},
}

NAMESPACE = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}}

DEVICE_CLASS = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "DeviceClass",
    "metadata": {"name": "gpu.example.com"},
    "spec": {
        "selectors": [{"cel": {"expression": 'device.driver == "gpu.example.com"'}}],
        "config": [{"opaque": {"driver": "gpu.example.com", "parameters": {"a": 1}}}],
        "extendedResourceName": "example.com/gpu",
    },
}

SLICE = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceSlice",
    "metadata": {"name": "worker-gpu"},
    "spec": {
        "driver": "gpu.example.com",
        "nodeName": "worker",
        "pool": {"name": "worker", "generation": 1, "resourceSliceCount": 1},
        "devices": [
            {"name": "instance-1", "attributes": {"index": {"int": 0}, "v": {"version": "1.0.0"}}},
            {"name": "instance-2", "capacity": {"memory": {"value": "80Gi"}}},
        ],
    },
}

CLAIM = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceClaim",
    "metadata": {"name": "my-pod-extended-resources-abcde", "namespace": "default"},
    "spec": {
        "devices": {
            "requests": [
                {"name": "container-0-request-0", "exactly": {"deviceClassName": "gpu"}},
                {
                    "name": "alt",
                    "firstAvailable": [
                        {"name": "big", "deviceClassName": "gpu", "count": 2},
                        {"name": "all", "deviceClassName": "gpu", "allocationMode": "All"},
                    ],
                },
            ],
            "constraints": [
                {
                    "requests": ["container-0-request-0", "alt/big"],
                    "matchAttribute": "example.com/model",
                }
            ],
        }
    },
    "status": {
        "allocation": {
            "devices": {
                "results": [
                    {"request": "container-0-request-0", "driver": "gpu.example.com",
                     "pool": "worker", "device": "instance-1"},
                ]
            },
            "nodeSelector": {"nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["worker"]}]}
            ]},
        },
        "reservedFor": [{"resource": "pods", "name": "my-pod", "uid": "1234"}],
    },
}  # fmt: skip

TEMPLATE = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceClaimTemplate",
    "metadata": {"name": "gpu-template", "namespace": "default"},
    "spec": {
        "metadata": {"labels": {"app": "x"}},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}},
    },
}

DEPLOYMENT = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "gpu-deployment", "namespace": "default"},
    "spec": {
        "replicas": 2,
        "selector": {"matchLabels": {"app": "gpu-app"}},
        "template": {
            "metadata": {"labels": {"app": "gpu-app", "tier": "x"}},
            "spec": {
                "containers": [_container("app", resources={"limits": {"example.com/gpu": 1}})]
            },
        },
    },
}

REPLICA_SET = _patch(DEPLOYMENT, {"kind": "ReplicaSet", "metadata.name": "gpu-deployment-abc"})
LEASE = {
    "apiVersion": "coordination.k8s.io/v1",
    "kind": "Lease",
    "metadata": {"name": "worker", "namespace": "kube-node-lease"},
    "spec": {"holderIdentity": "worker", "leaseDurationSeconds": 40},
}
EVENT = {
    "apiVersion": "v1",
    "kind": "Event",
    "metadata": {"name": "my-pod.17f0", "namespace": "default"},
    "involvedObject": {"kind": "Pod", "namespace": "default", "name": "my-pod"},
    "reason": "FailedScheduling",
    "type": "Warning",
}
QUOTA = {
    "apiVersion": "v1",
    "kind": "ResourceQuota",
    "metadata": {"name": "gpu", "namespace": "default"},
    "spec": {
        "hard": {
            "requests.example.com/gpu": 4,
            "requests.deviceclass.resource.kubernetes.io/gpu": 4,
            "gpu.deviceclass.resource.k8s.io/devices": 4,
            "count/pods": 10,
            "pods": 10,
            "requests.cpu": "4",
        }
    },
}
BINDING = {
    "apiVersion": "v1",
    "kind": "Binding",
    "metadata": {"name": "my-pod", "namespace": "default"},
    "target": {"kind": "Node", "name": "worker"},
}


def _exact_requests(n: int) -> list[dict[str, Any]]:
    return [{"name": f"r-{i}", "exactly": {"deviceClassName": "c"}} for i in range(n)]


# (id, base object, patch, expected (type, field) pairs)
CREATE_CASES: list[tuple[str, dict[str, Any], dict[str, Any], list[tuple[str, str]]]] = [
    # Valid objects of every kind.
    ("pod-valid", POD, {}, []),
    ("node-valid", NODE, {}, []),
    ("namespace-valid", NAMESPACE, {}, []),
    ("deviceclass-valid", DEVICE_CLASS, {}, []),
    ("slice-valid", SLICE, {}, []),
    ("claim-valid", CLAIM, {}, []),
    ("template-valid", TEMPLATE, {}, []),
    ("deployment-valid", DEPLOYMENT, {}, []),
    ("replicaset-valid", REPLICA_SET, {}, []),
    ("lease-valid", LEASE, {}, []),
    ("event-valid", EVENT, {}, []),
    ("quota-valid", QUOTA, {}, []),
    ("binding-valid", BINDING, {}, []),
    # ObjectMeta
    ("name-missing", POD, {"metadata.name": DELETE}, [("Required", "metadata.name")]),
    ("generate-name", POD, {"metadata.name": DELETE, "metadata.generateName": "my-pod-"}, []),
    ("generate-name-invalid", POD, {"metadata.name": DELETE, "metadata.generateName": "My-"},
     [("Invalid", "metadata.generateName")]),
    ("name-not-subdomain", POD, {"metadata.name": "My_Pod"}, [("Invalid", "metadata.name")]),
    ("name-too-long", POD, {"metadata.name": "a" * 254}, [("Invalid", "metadata.name")]),
    ("namespace-missing", POD, {"metadata.namespace": DELETE},
     [("Required", "metadata.namespace")]),
    ("namespace-on-cluster-scope", NODE, {"metadata.namespace": "default"},
     [("Forbidden", "metadata.namespace")]),
    ("namespace-name-not-label", NAMESPACE, {"metadata.name": "team.a"},
     [("Invalid", "metadata.name")]),
    ("label-key-invalid", POD, {"metadata.labels": {"-bad": "x"}},
     [("Invalid", "metadata.labels")]),
    ("label-value-too-long", POD, {"metadata.labels": {"a": "v" * 64}},
     [("Invalid", "metadata.labels")]),
    ("annotation-key-invalid", POD, {"metadata.annotations": {"a/b/c": "x"}},
     [("Invalid", "metadata.annotations")]),
    ("annotation-key-any-case", POD, {"metadata.annotations": {"Example.COM/Key": "x"}}, []),
    ("annotations-too-large", POD, {"metadata.annotations": {"a": "x" * 262144}},
     [("TooLong", "metadata.annotations")]),
    ("two-controllers", POD, {"metadata.ownerReferences": [
        {"apiVersion": "v1", "kind": "A", "name": "a", "uid": "1", "controller": True},
        {"apiVersion": "v1", "kind": "B", "name": "b", "uid": "2", "controller": True}]},
     [("Invalid", "metadata.ownerReferences")]),
    ("owner-without-uid", POD, {"metadata.ownerReferences": [
        {"apiVersion": "v1", "kind": "A", "name": "a"}]},
     [("Invalid", "metadata.ownerReferences[0].uid")]),
    # Pod containers
    ("no-containers", POD, {"spec.containers": []}, [("Required", "spec.containers")]),
    ("container-name-missing", POD, {"spec.containers.0.name": ""},
     [("Required", "spec.containers[0].name")]),
    ("container-name-not-label", POD, {"spec.containers.0.name": "Con_0"},
     [("Invalid", "spec.containers[0].name")]),
    ("container-image-missing", POD, {"spec.containers.0.image": DELETE},
     [("Required", "spec.containers[0].image")]),
    ("init-name-duplicates-container", POD, {"spec.initContainers.0.name": "con0"},
     [("Duplicate", "spec.initContainers[0].name")]),
    ("ephemeral-name-duplicate", POD, {"spec.ephemeralContainers": [_container("sidecar-con1")]},
     [("Duplicate", "spec.ephemeralContainers[0].name")]),
    ("ephemeral-resources", POD,
     {"spec.ephemeralContainers": [_container("debug", resources={"limits": {"cpu": "1"}})]},
     [("Forbidden", "spec.ephemeralContainers[0].resources")]),
    ("init-restart-policy", POD, {"spec.initContainers.1.restartPolicy": "OnFailure"},
     [("NotSupported", "spec.initContainers[1].restartPolicy")]),
    ("container-restart-policy", POD, {"spec.containers.0.restartPolicy": "Always"},
     [("Forbidden", "spec.containers[0].restartPolicy")]),
    ("pod-restart-policy", POD, {"spec.restartPolicy": "Sometimes"},
     [("NotSupported", "spec.restartPolicy")]),
    # Container resources
    ("er-request-without-limit", POD,
     {"spec.containers.0.resources.limits": {"cpu": "1"}},
     [("Required", "spec.containers[0].resources.limits")]),
    ("er-request-differs-from-limit", POD,
     {"spec.containers.0.resources.requests": {"cpu": "500m", "example.com/gpu": 1}},
     [("Invalid", "spec.containers[0].resources.requests")]),
    ("er-not-integer", POD,
     {"spec.initContainers.0.resources.limits": {"example.com/gpu": "500m"}},
     [("Invalid", "spec.initContainers[0].resources.limits[example.com/gpu]")]),
    ("negative-quantity", POD, {"spec.initContainers.0.resources.limits": {"cpu": "-1"}},
     [("Invalid", "spec.initContainers[0].resources.limits[cpu]")]),
    ("cpu-request-over-limit", POD, {"spec.containers.0.resources.requests.cpu": "2"},
     [("Invalid", "spec.containers[0].resources.requests")]),
    ("cpu-request-only", POD, {"spec.initContainers.0.resources": {"requests": {"cpu": "1"}}}, []),
    ("unprefixed-nonstandard-name", POD,
     {"spec.initContainers.0.resources.limits": {"gpu": 1}},
     [("Invalid", "spec.initContainers[0].resources.limits[gpu]")]),
    ("pods-not-a-container-resource", POD,
     {"spec.initContainers.0.resources.limits": {"pods": 1}},
     [("Invalid", "spec.initContainers[0].resources.limits[pods]")]),
    ("hugepages-need-equal-limit", POD,
     {"spec.initContainers.0.resources": {"requests": {"hugepages-2Mi": "2Mi"}}},
     [("Required", "spec.initContainers[0].resources.limits")]),
    ("not-a-qualified-name", POD,
     {"spec.initContainers.0.resources.limits": {"example.com/gpu/x": 1}},
     [("Invalid", "spec.initContainers[0].resources.limits[example.com/gpu/x]")] * 2),
    ("kubernetes-io-prefixed", POD,
     {"spec.initContainers.0.resources.limits": {"example.kubernetes.io/foo": 1}}, []),
    # Upstream `ValidateContainerResourceName`: implicit names are native-prefixed, so
    # neither integer nor limit rules apply.
    ("implicit-name-request-only", POD,
     {"spec.initContainers.0.resources": {
         "requests": {"deviceclass.resource.kubernetes.io/gpu.example.com": 1}}}, []),
    ("implicit-name-class-too-long", POD,
     {"spec.initContainers.0.resources.limits": {
         "deviceclass.resource.kubernetes.io/" + "c" * 64: 1}},
     [("Invalid", "spec.initContainers[0].resources.limits[deviceclass.resource.kubernetes.io/"
                  + "c" * 64 + "]")]),
    ("overhead-negative", POD, {"spec.overhead": {"cpu": "-100m"}},
     [("Invalid", "spec.overhead.limits[cpu]")]),
    # Pod claims, scheduling fields
    ("container-claim-unknown", POD, {"spec.containers.0.resources.claims": [{"name": "other"}]},
     [("NotFound", "spec.containers[0].resources.claims[0]")]),
    ("pod-claim-two-sources", POD, {"spec.resourceClaims.0.resourceClaimName": "c"},
     [("Invalid", "spec.resourceClaims[0]")]),
    ("pod-claim-no-source", POD, {"spec.resourceClaims.0.resourceClaimTemplateName": DELETE},
     [("Invalid", "spec.resourceClaims[0]")]),
    ("pod-claim-duplicate", POD, {"spec.resourceClaims": [
        {"name": "gpu", "resourceClaimName": "a"}, {"name": "gpu", "resourceClaimName": "b"}]},
     [("Duplicate", "spec.resourceClaims[1].name")]),
    ("toleration-exists-with-value", POD, {"spec.tolerations.0.value": "v"},
     [("Invalid", "spec.tolerations[0].operator")]),
    ("toleration-seconds-needs-no-execute", POD, {"spec.tolerations.0.tolerationSeconds": 5},
     [("Invalid", "spec.tolerations[0].effect")]),
    ("node-name-invalid", POD, {"spec.nodeName": "Worker_1"}, [("Invalid", "spec.nodeName")]),
    ("node-selector-value-invalid", POD, {"spec.nodeSelector": {"zone": "a b"}},
     [("Invalid", "spec.nodeSelector")]),
    ("match-field-key", POD, {
        "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchFields": [
                {"key": "spec.nodeName", "operator": "In", "values": ["w"]}]}]}},
     [("NotSupported", "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
                       ".nodeSelectorTerms[0].matchFields[0].key")]),
    ("node-selector-terms-empty", POD, {
        "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": []}},
     [("Required", "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
                   ".nodeSelectorTerms")]),
    # Node
    ("node-taint-effect", NODE, {"spec.taints.0.effect": "Sometimes"},
     [("NotSupported", "spec.taints[0].effect")]),
    ("node-taint-duplicate", NODE, {"spec.taints": [
        {"key": "k", "effect": "NoSchedule"}, {"key": "k", "value": "v", "effect": "NoSchedule"}]},
     [("Duplicate", "spec.taints[1]")]),
    ("node-er-capacity-fraction", NODE, {"status.allocatable": {"example.com/gpu": "1500m"}},
     [("Invalid", "status.allocatable[example.com/gpu]")]),
    ("node-capacity-negative", NODE, {"status.capacity": {"cpu": "-1"}},
     [("Invalid", "status.capacity[cpu]")]),
    # DeviceClass (upstream `validateDeviceClassSpec`)
    ("class-without-er-name", DEVICE_CLASS, {"spec.extendedResourceName": DELETE}, []),
    ("class-er-name-implicit-prefix", DEVICE_CLASS,
     {"spec.extendedResourceName": "deviceclass.resource.kubernetes.io/gpu"},
     [("Invalid", "spec.extendedResourceName")]),
    ("class-er-name-kubernetes-io", DEVICE_CLASS,
     {"spec.extendedResourceName": "gpu.kubernetes.io/gpu"},
     [("Invalid", "spec.extendedResourceName")]),
    ("class-er-name-requests-prefix", DEVICE_CLASS,
     {"spec.extendedResourceName": "requests.example.com/gpu"},
     [("Invalid", "spec.extendedResourceName")]),
    ("class-er-name-no-slash", DEVICE_CLASS, {"spec.extendedResourceName": "gpu"},
     [("Invalid", "spec.extendedResourceName")]),
    ("class-er-name-too-long", DEVICE_CLASS,
     {"spec.extendedResourceName": "example.com/" + "g" * 64},
     [("Invalid", "spec.extendedResourceName")]),
    ("class-er-name-empty", DEVICE_CLASS, {"spec.extendedResourceName": ""},
     [("Invalid", "spec.extendedResourceName"), ("Invalid", "spec.extendedResourceName")]),
    ("class-selector-without-cel", DEVICE_CLASS, {"spec.selectors": [{}]},
     [("Required", "spec.selectors[0].cel")]),
    ("class-selector-does-not-compile", DEVICE_CLASS,
     {"spec.selectors.0.cel.expression": "device.driver =="},
     [("Invalid", "spec.selectors[0].cel.expression")]),
    ("class-selector-not-bool", DEVICE_CLASS, {"spec.selectors.0.cel.expression": "device.driver"},
     [("Invalid", "spec.selectors[0].cel.expression")]),
    ("class-selector-too-long", DEVICE_CLASS,
     {"spec.selectors.0.cel.expression": f'device.driver == "{"a" * 10240}"'},
     [("TooLong", "spec.selectors[0].cel.expression")]),
    ("claim-selector-does-not-compile", CLAIM,
     {"spec.devices.requests.0.exactly.selectors": [{"cel": {"expression": "x"}}]},
     [("Invalid", "spec.devices.requests[0].exactly.selectors[0].cel.expression")]),
    ("claim-subrequest-selector-does-not-compile", CLAIM,
     {"spec.devices.requests.1.firstAvailable.0.selectors": [{"cel": {"expression": "x"}}]},
     [("Invalid", "spec.devices.requests[1].firstAvailable[0].selectors[0].cel.expression")]),
    ("template-selector-does-not-compile", TEMPLATE,
     {"spec.spec.devices.requests.0.exactly.selectors": [{"cel": {"expression": "x"}}]},
     [("Invalid", "spec.spec.devices.requests[0].exactly.selectors[0].cel.expression")]),
    ("class-config-without-driver", DEVICE_CLASS, {"spec.config.0.opaque.driver": ""},
     [("Required", "spec.config[0].opaque.driver")]),
    ("class-config-parameters-not-object", DEVICE_CLASS, {"spec.config.0.opaque.parameters": [1]},
     [("Invalid", "spec.config[0].opaque.parameters")]),
    # ResourceSlice
    ("slice-too-many-devices", SLICE,
     {"spec.devices": [{"name": f"d-{i}"} for i in range(129)]},
     [("TooMany", "spec.devices")]),
    ("slice-128-devices", SLICE, {"spec.devices": [{"name": f"d-{i}"} for i in range(128)]}, []),
    ("slice-driver-missing", SLICE, {"spec.driver": ""}, [("Required", "spec.driver")]),
    ("slice-driver-invalid", SLICE, {"spec.driver": "gpu_example"}, [("Invalid", "spec.driver")]),
    ("slice-driver-too-long", SLICE, {"spec.driver": "a" * 64}, [("TooLong", "spec.driver")]),
    ("slice-pool-missing", SLICE, {"spec.pool.name": ""}, [("Required", "spec.pool.name")]),
    ("slice-count-zero", SLICE, {"spec.pool.resourceSliceCount": 0},
     [("Invalid", "spec.pool.resourceSliceCount")]),
    ("slice-no-node-selection", SLICE, {"spec.nodeName": DELETE}, [("Required", "spec")]),
    ("slice-two-node-selections", SLICE, {"spec.allNodes": True}, [("Invalid", "spec")]),
    ("slice-all-nodes", SLICE, {"spec.nodeName": DELETE, "spec.allNodes": True}, []),
    ("slice-device-duplicate", SLICE, {"spec.devices.1.name": "instance-1"},
     [("Duplicate", "spec.devices[1].name")]),
    ("slice-device-name-invalid", SLICE, {"spec.devices.1.name": "Instance_2"},
     [("Invalid", "spec.devices[1].name")]),
    ("slice-attribute-two-values", SLICE,
     {"spec.devices.0.attributes.index": {"int": 1, "bool": True}},
     [("Invalid", "spec.devices[0].attributes[index]")]),
    ("slice-attribute-bad-version", SLICE, {"spec.devices.0.attributes.v": {"version": "1.0"}},
     [("Invalid", "spec.devices[0].attributes[v].version")]),
    ("slice-attribute-bad-name", SLICE, {"spec.devices.0.attributes": {"a-b": {"int": 1}}},
     [("Invalid", "spec.devices[0].attributes[a-b]")]),
    ("slice-device-node-without-per-device", SLICE, {"spec.devices.0.nodeName": "worker"},
     [("Invalid", "spec.devices[0]")]),
    ("slice-per-device", SLICE, {"spec.nodeName": DELETE, "spec.perDeviceNodeSelection": True,
                                 "spec.devices.0.nodeName": "worker",
                                 "spec.devices.1.allNodes": True}, []),
    ("slice-per-device-missing", SLICE, {"spec.nodeName": DELETE,
                                         "spec.perDeviceNodeSelection": True,
                                         "spec.devices.0.nodeName": "worker"},
     [("Invalid", "spec.devices[1]")]),
    ("slice-node-selector-two-terms", SLICE, {"spec.nodeName": DELETE, "spec.nodeSelector": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "a", "operator": "Exists"}]},
                              {"matchExpressions": [{"key": "b", "operator": "Exists"}]}]}},
     [("Invalid", "spec.nodeSelector.nodeSelectorTerms")]),
    ("slice-taint-effect", SLICE, {"spec.devices.0.taints": [{"key": "k", "effect": "Prefer"}]},
     [("NotSupported", "spec.devices[0].taints[0].effect")]),
    # ResourceClaim (`DeviceRequestsMaxSize`: ≤32 requests)
    ("claim-32-requests", CLAIM, {"spec.devices.constraints": [], "status": {},
                                  "spec.devices.requests": _exact_requests(32)}, []),
    ("claim-33-requests", CLAIM, {"spec.devices.constraints": [], "status": {},
                                  "spec.devices.requests": _exact_requests(33)},
     [("TooMany", "spec.devices.requests")]),
    ("claim-request-name", CLAIM, {"spec.devices.requests.0.name": "Container_0",
                                   "spec.devices.constraints": []},
     [("Invalid", "spec.devices.requests[0].name")]),
    ("claim-request-duplicate", CLAIM, {"spec.devices.requests.1.name": "container-0-request-0",
                                        "spec.devices.constraints": []},
     [("Duplicate", "spec.devices.requests[1].name")]),
    ("claim-request-empty", CLAIM, {"spec.devices.requests.0.exactly": DELETE},
     [("Required", "spec.devices.requests[0]")]),
    ("claim-request-both", CLAIM, {"spec.devices.requests.1.exactly": {"deviceClassName": "c"}},
     [("Forbidden", "spec.devices.requests[1]")]),
    ("claim-class-missing", CLAIM, {"spec.devices.requests.0.exactly.deviceClassName": ""},
     [("Required", "spec.devices.requests[0].exactly.deviceClassName")]),
    ("claim-all-with-count", CLAIM,
     {"spec.devices.requests.0.exactly": {"deviceClassName": "c", "allocationMode": "All",
                                          "count": 2}},
     [("Invalid", "spec.devices.requests[0].exactly.count")]),
    ("claim-negative-count", CLAIM,
     {"spec.devices.requests.0.exactly": {"deviceClassName": "c", "count": -1}},
     [("Invalid", "spec.devices.requests[0].exactly.count")]),
    ("claim-bad-mode", CLAIM,
     {"spec.devices.requests.0.exactly": {"deviceClassName": "c", "allocationMode": "Some"}},
     [("NotSupported", "spec.devices.requests[0].exactly.allocationMode")]),
    ("claim-subrequest-duplicate", CLAIM,
     {"spec.devices.requests.1.firstAvailable.1.name": "big"},
     [("Duplicate", "spec.devices.requests[1].firstAvailable[1].name")]),
    ("claim-constraint-unknown-request", CLAIM, {"spec.devices.constraints.0.requests": ["nope"]},
     [("Invalid", "spec.devices.constraints[0].requests[0]")]),
    ("claim-constraint-without-domain", CLAIM,
     {"spec.devices.constraints.0.matchAttribute": "model"},
     [("Required", "spec.devices.constraints[0].matchAttribute")]),
    ("claim-config-unknown-request", CLAIM, {"spec.devices.config": [
        {"requests": ["nope"], "opaque": {"driver": "gpu.example.com", "parameters": {}}}]},
     [("Invalid", "spec.devices.config[0].requests[0]")]),
    ("template-spec-validated", TEMPLATE, {"spec.spec.devices.requests.0.name": "Bad"},
     [("Invalid", "spec.spec.devices.requests[0].name")]),
    # Deployment, ReplicaSet
    ("deploy-selector-missing", DEPLOYMENT, {"spec.selector": DELETE},
     [("Required", "spec.selector")]),
    ("deploy-selector-empty", DEPLOYMENT, {"spec.selector": {}}, [("Invalid", "spec.selector")]),
    ("deploy-selector-mismatch", DEPLOYMENT, {"spec.selector.matchLabels.app": "other"},
     [("Invalid", "spec.template.metadata.labels")]),
    ("deploy-selector-expressions", DEPLOYMENT, {"spec.selector": {"matchExpressions": [
        {"key": "tier", "operator": "In", "values": ["x", "y"]}]}}, []),
    ("deploy-replicas-negative", DEPLOYMENT, {"spec.replicas": -1},
     [("Invalid", "spec.replicas")]),
    ("deploy-template-restart-policy", DEPLOYMENT, {"spec.template.spec.restartPolicy": "Never"},
     [("NotSupported", "spec.template.spec.restartPolicy")]),
    ("deploy-template-container", DEPLOYMENT, {"spec.template.spec.containers.0.name": "A"},
     [("Invalid", "spec.template.spec.containers[0].name")]),
    ("deploy-strategy", DEPLOYMENT, {"spec.strategy": {"type": "Replace"}},
     [("NotSupported", "spec.strategy.type")]),
    ("replicaset-selector-mismatch", REPLICA_SET, {"spec.template.metadata.labels": {}},
     [("Invalid", "spec.template.metadata.labels")]),
    # Others
    ("lease-duration-zero", LEASE, {"spec.leaseDurationSeconds": 0},
     [("Invalid", "spec.leaseDurationSeconds")]),
    ("event-namespace-mismatch", EVENT, {"involvedObject.namespace": "other"},
     [("Invalid", "involvedObject.namespace")]),
    ("event-type", EVENT, {"type": "Error"}, [("NotSupported", "type")]),
    ("quota-bad-name", QUOTA, {"spec.hard": {"gpus": 1}}, [("Invalid", "spec.hard[gpus]")]),
    ("quota-negative", QUOTA, {"spec.hard": {"requests.example.com/gpu": -1}},
     [("Invalid", "spec.hard[requests.example.com/gpu]")]),
    ("quota-scopes", QUOTA, {"spec.hard": {"pods": 1, "requests.example.com/gpu": 1},
                             "spec.scopes": ["NotBestEffort", "Terminating"]}, []),
    ("quota-scope-unknown", QUOTA, {"spec.scopes": ["Gold"]}, [("Invalid", "spec.scopes")]),
    ("quota-scopes-conflict", QUOTA, {"spec.hard": {"pods": 1},
                                      "spec.scopes": ["BestEffort", "NotBestEffort"]},
     [("Invalid", "spec.scopes")]),
    ("quota-scope-resource", QUOTA, {"spec.hard": {"requests.cpu": 1},
                                     "spec.scopes": ["BestEffort"]},
     [("Invalid", "spec.scopes")]),
    ("quota-selector-operator", QUOTA, {"spec.hard": {"pods": 1}, "spec.scopeSelector": {
        "matchExpressions": [{"scopeName": "Terminating", "operator": "In", "values": ["x"]}]}},
     [("Invalid", "spec.scopeSelector.matchExpressions.operator")]),
    ("quota-selector-values", QUOTA, {"spec.hard": {"pods": 1}, "spec.scopeSelector": {
        "matchExpressions": [{"scopeName": "PriorityClass", "operator": "In"}]}},
     [("Required", "spec.scopeSelector.matchExpressions.values")]),
    ("quota-selector-priority", QUOTA, {"spec.hard": {"pods": 1}, "spec.scopeSelector": {
        "matchExpressions": [{"scopeName": "PriorityClass", "operator": "In",
                              "values": ["high"]}]}}, []),
    ("binding-target-missing", BINDING, {"target": {}}, [("Required", "target.name")]),
    ("binding-target-kind", BINDING, {"target.kind": "Pod"}, [("NotSupported", "target.kind")]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("base", "changes", "want"), [c[1:] for c in CREATE_CASES], ids=[c[0] for c in CREATE_CASES]
)
def test_validate(
    base: dict[str, Any], changes: dict[str, Any], want: list[tuple[str, str]]
) -> None:
    assert _short(validation.validate(_obj(_patch(base, changes)))) == want


@pytest.mark.parametrize(
    ("name", "messages"),
    [
        ("kubernetes.io/gpu", ['must not have "kubernetes.io/" domain']),
        ("requests.example.com/gpu", ['must not have "requests." prefix']),
        ("gpu", ["a name must be a domain-prefixed path, such as 'example.com/my-prop'"]),
    ],
)
def test_extended_resource_name_errors_name_the_rule(name: str, messages: list[str]) -> None:
    """As upstream's declarative format `k8s-extended-resource-name` words them."""
    dc = _obj(_patch(DEVICE_CLASS, {"spec.extendedResourceName": name}))
    errs = validation.validate(dc)
    assert [e.message for e in errs] == [f'Invalid value: "{name}": {m}' for m in messages]


def test_selector_error_text() -> None:
    dc = _obj(_patch(DEVICE_CLASS, {"spec.selectors.0.cel.expression": "device.nope == 1"}))
    (err,) = validation.validate(dc)
    assert str(err) == (
        'spec.selectors[0].cel.expression: Invalid value: "device.nope == 1": compilation '
        "failed: ERROR: <input>:1:7: undefined field 'nope'\n | device.nope == 1\n | ......^"
    )


@pytest.mark.parametrize(
    ("base", "selectors_path", "changes"),
    [
        (DEVICE_CLASS, "spec.selectors", {"spec.extendedResourceName": "example.com/other"}),
        (CLAIM, "spec.devices.requests.0.exactly.selectors", {"metadata.finalizers": []}),
        (TEMPLATE, "spec.spec.devices.requests.0.exactly.selectors", {"metadata.labels": {}}),
    ],
    ids=["class", "claim", "template"],
)
def test_stored_selectors_are_not_compiled_again(
    base: dict[str, Any], selectors_path: str, changes: dict[str, Any]
) -> None:
    """An object stored with a selector an older release accepted can still be updated (its
    finalizers removed, its labels changed), as upstream's `stored` option allows."""
    old = _obj(_patch(base, {selectors_path: [{"cel": {"expression": "device.nope == 1"}}]}))
    new = _obj(_patch(base, {selectors_path: [{"cel": {"expression": "device.nope == 1"}}]}
                      | changes))  # fmt: skip
    assert validation.validate(new, old=old) == []


def test_changed_class_selectors_are_compiled() -> None:
    old = _obj(DEVICE_CLASS)
    new = _obj(_patch(DEVICE_CLASS, {"spec.selectors.0.cel.expression": "device.nope == 1"}))
    assert _short(validation.validate(new, old=old)) == [
        ("Invalid", "spec.selectors[0].cel.expression")
    ]


def test_device_class_error_text() -> None:
    dc = _obj(_patch(DEVICE_CLASS, {"spec.extendedResourceName": "example.kubernetes.io/gpu"}))
    (err,) = validation.validate(dc)
    assert str(err) == (
        'spec.extendedResourceName: Invalid value: "example.kubernetes.io/gpu": '
        'must not have "kubernetes.io/" domain'
    )


def test_quota_scope_error_text() -> None:
    scopes = {"spec.hard": {"pods": 1}, "spec.scopes": ["BestEffort", "NotBestEffort"]}
    messages = [str(e) for e in validation.validate(_obj(_patch(QUOTA, scopes)))]
    assert messages == [
        'spec.scopes: Invalid value: ["BestEffort","NotBestEffort"]: conflicting scopes'
    ]


def test_er_limit_text() -> None:
    pod = _obj(_patch(POD, {"spec.containers.0.resources.requests": {"example.com/gpu": 1}}))
    (err,) = validation.validate(pod)
    assert err.message == 'Invalid value: "1": must be equal to example.com/gpu limit of 2'


UPDATE_CASES: list[tuple[str, dict[str, Any], dict[str, Any], list[tuple[str, str]]]] = [
    ("pod-unchanged", POD, {}, []),
    ("pod-image", POD, {"spec.containers.0.image": "nginx", "spec.initContainers.0.image": "x"},
     []),
    ("pod-add-toleration", POD, {"spec.tolerations": [
        {"key": "k", "operator": "Exists", "effect": "NoSchedule"}, {"operator": "Exists"}]}, []),
    ("pod-remove-toleration", POD, {"spec.tolerations": []}, [("Forbidden", "spec.tolerations")]),
    ("pod-node-name", POD, {"spec.nodeName": "worker"}, [("Forbidden", "spec")]),
    ("pod-resources", POD, {"spec.containers.0.resources.requests.cpu": "1"},
     [("Forbidden", "spec")]),
    ("pod-status-ignored", POD, {"status.phase": "Running"}, []),
    ("name-immutable", POD, {"metadata.name": "other"}, [("Invalid", "metadata.name")]),
    ("uid-immutable", POD, {"metadata.uid": "5678"}, [("Invalid", "metadata.uid")]),
    ("labels-mutable", POD, {"metadata.labels": {"b": "c"}}, []),
    ("claim-spec-immutable", CLAIM, {"spec.devices.requests.0.exactly.count": 2},
     [("Invalid", "spec")]),
    ("claim-finalizer-removal", CLAIM, {"metadata.finalizers": []}, []),
    ("template-spec-immutable", TEMPLATE, {"spec.metadata.labels": {}}, [("Invalid", "spec")]),
    ("class-mutable", DEVICE_CLASS, {"spec.extendedResourceName": "example.com/other"}, []),
    ("slice-driver-immutable", SLICE, {"spec.driver": "other.example.com"},
     [("Invalid", "spec.driver")]),
    ("slice-devices-mutable", SLICE, {"spec.devices": [{"name": "instance-3"}]}, []),
    ("deploy-selector-immutable", DEPLOYMENT, {"spec.selector.matchLabels": {"tier": "x"}},
     [("Invalid", "spec.selector")]),
    ("deploy-scale", DEPLOYMENT, {"spec.replicas": 5}, []),
    ("quota-hard-mutable", QUOTA, {"spec.hard.pods": 20}, []),
    ("quota-scopes-immutable", QUOTA, {"spec.scopes": ["NotTerminating"]},
     [("Invalid", "spec.scopes")]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("base", "changes", "want"), [c[1:] for c in UPDATE_CASES], ids=[c[0] for c in UPDATE_CASES]
)
def test_validate_update(
    base: dict[str, Any], changes: dict[str, Any], want: list[tuple[str, str]]
) -> None:
    old = _obj(base)
    new = _obj(_patch(base, changes))
    assert _short(validation.validate(new, old=old)) == want


# --- Pod status: extendedResourceClaimStatus (upstream validatePodExtendedResourceClaimStatus) --

ERCS = "status.extendedResourceClaimStatus"
POD_WITH_STATUS = _patch(
    POD,
    {
        "spec.ephemeralContainers": [_container("debugger")],
        "status.extendedResourceClaimStatus": {
            "resourceClaimName": "my-pod-extended-resources-abcde",
            "requestMappings": [
                {"containerName": "init-con0", "resourceName": "example.com/gpu",
                 "requestName": "container-0-request-0"},
                {"containerName": "con0", "resourceName": "example.com/gpu",
                 "requestName": "container-2-request-1"},
            ],
        },
    },
)  # fmt: skip

F6_CASES: list[tuple[str, dict[str, Any], list[tuple[str, str]]]] = [
    ("valid", {}, []),
    ("no-status", {"status": {}}, []),
    # Resources defaulted from limits count as requested (init-con0 only has a limit).
    ("limit-only-resource", {f"{ERCS}.requestMappings.1.containerName": "init-con0",
                             f"{ERCS}.requestMappings.1.requestName": "container-0-request-1"}, []),
    ("F6-unknown-container", {f"{ERCS}.requestMappings.0.containerName": "con9"},
     [("Invalid", f"{ERCS}.requestMappings[0].containerName")]),
    ("F6-ephemeral-container", {f"{ERCS}.requestMappings.0.containerName": "debugger"},
     [("Invalid", f"{ERCS}.requestMappings[0].containerName")]),
    ("F6-resource-not-requested", {f"{ERCS}.requestMappings.1.resourceName": "example.com/fpga"},
     [("Invalid", f"{ERCS}.requestMappings[1].resourceName")]),
    ("F6-resource-of-other-container", {f"{ERCS}.requestMappings.0.resourceName": "cpu"},
     [("Invalid", f"{ERCS}.requestMappings[0].resourceName")]),
    # Upstream reports a bad requestName without the mapping's index (its path bug).
    ("F6-request-name-not-dns-label", {f"{ERCS}.requestMappings.0.requestName": "Container_0"},
     [("Invalid", f"{ERCS}.requestName")]),
    ("F6-request-name-empty", {f"{ERCS}.requestMappings.0.requestName": ""},
     [("Invalid", f"{ERCS}.requestName")]),
    ("F6-empty-mappings", {f"{ERCS}.requestMappings": []},
     [("Required", f"{ERCS}.requestMappings")]),
    ("F6-empty-claim-name", {f"{ERCS}.resourceClaimName": ""},
     [("Required", f"{ERCS}.resourceClaimName")]),
    ("claim-name-not-subdomain", {f"{ERCS}.resourceClaimName": "My_Claim"},
     [("Invalid", f"{ERCS}.resourceClaimName")]),
    ("duplicate-mapping", {f"{ERCS}.requestMappings.1": {
        "containerName": "init-con0", "resourceName": "example.com/gpu",
        "requestName": "container-0-request-0"}},
     [("Duplicate", f"{ERCS}.requestMappings[1].containerName"),
      ("Duplicate", f"{ERCS}.requestMappings[1].resourceName"),
      ("Duplicate", f"{ERCS}.requestMappings[1].requestName")]),
    ("same-request-for-two-containers", {f"{ERCS}.requestMappings.1.requestName":
                                         "container-0-request-0"}, []),
]  # fmt: skip


@pytest.mark.parametrize(
    ("changes", "want"), [c[1:] for c in F6_CASES], ids=[c[0] for c in F6_CASES]
)
def test_validate_pod_status(changes: dict[str, Any], want: list[tuple[str, str]]) -> None:
    pod = _obj(_patch(POD_WITH_STATUS, changes))
    assert isinstance(pod, core_v1.Pod)
    assert _short(pod_validation.validate_pod_status(pod)) == want
    assert _short(validation.validate_status(pod, old=pod)) == want


def test_pod_status_error_text() -> None:
    pod = _obj(_patch(POD_WITH_STATUS, {f"{ERCS}.requestMappings.0.containerName": "con9"}))
    assert isinstance(pod, core_v1.Pod)
    (err,) = pod_validation.validate_pod_status(pod)
    assert str(err) == (
        f'{ERCS}.requestMappings[0].containerName: Invalid value: "con9": '
        "must match the name of an entry in spec.initContainers.name or spec.containers.name"
    )


# --- Status writes of other kinds ------------------------------------------------------------


def _claim_status_case(changes: dict[str, Any], *, old: dict[str, Any] | None = None) -> Any:
    return _obj(_patch(CLAIM, changes)), _obj(old if old is not None else CLAIM)


StatusCase = tuple[str, Callable[[], tuple[KubeObject, KubeObject]], list[tuple[str, str]]]
STATUS_CASES: list[StatusCase] = [
    ("claim-unchanged", lambda: _claim_status_case({}), []),
    ("claim-allocate", lambda: _claim_status_case({}, old=_patch(CLAIM, {"status": {}})), []),
    ("claim-deallocate", lambda: _claim_status_case({"status": {}}), []),
    ("claim-unknown-request", lambda: _claim_status_case(
        {"status.allocation.devices.results.0.request": "nope"},
        old=_patch(CLAIM, {"status": {}})),
     [("Invalid", "status.allocation.devices.results[0].request")]),
    ("claim-subrequest-result", lambda: _claim_status_case(
        {"status.allocation.devices.results.0.request": "alt/big"},
        old=_patch(CLAIM, {"status": {}})), []),
    ("claim-too-many-results", lambda: _claim_status_case(
        {"status.allocation.devices.results": [
            {"request": "alt/all", "driver": "d", "pool": "p", "device": f"d-{i}"}
            for i in range(33)]},
        old=_patch(CLAIM, {"status": {}})),
     [("TooMany", "status.allocation.devices.results")]),
    ("claim-allocation-immutable", lambda: _claim_status_case(
        {"status.allocation.devices.results.0.device": "instance-2"}),
     [("Invalid", "status.allocation")]),
    ("claim-reserved-without-allocation", lambda: _claim_status_case(
        {"status.allocation": DELETE}),
     [("Forbidden", "status.reservedFor")]),
    ("claim-reserved-duplicate", lambda: _claim_status_case(
        {"status.reservedFor": [{"resource": "pods", "name": "a", "uid": "1"},
                                {"resource": "pods", "name": "b", "uid": "1"}]}),
     [("Duplicate", "status.reservedFor[1].uid")]),
    ("claim-reserve-while-deleting", lambda: _claim_status_case(
        {"metadata.deletionTimestamp": "2026-01-01T00:00:00Z",
         "status.reservedFor": [{"resource": "pods", "name": "my-pod", "uid": "1234"},
                                {"resource": "pods", "name": "other", "uid": "5678"}]}),
     [("Forbidden", "status.reservedFor")]),
    ("claim-unreserve-while-deleting", lambda: _claim_status_case(
        {"metadata.deletionTimestamp": "2026-01-01T00:00:00Z", "status.reservedFor": []}), []),
    ("node-status", lambda: (_obj(_patch(NODE, {"status.capacity": {"example.com/gpu": "1.5"}})),
                             _obj(NODE)),
     [("Invalid", "status.capacity[example.com/gpu]")]),
    ("quota-status", lambda: (_obj(_patch(QUOTA, {"status.used": {"requests.example.com/gpu": 1}})),
                              _obj(QUOTA)), []),
    ("deploy-status", lambda: (_obj(_patch(DEPLOYMENT, {"status.readyReplicas": -1})),
                               _obj(DEPLOYMENT)),
     [("Invalid", "status.readyReplicas")]),
    ("status-name-immutable", lambda: (_obj(_patch(NODE, {"metadata.name": "x"})), _obj(NODE)),
     [("Invalid", "metadata.name")]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("make", "want"), [c[1:] for c in STATUS_CASES], ids=[c[0] for c in STATUS_CASES]
)
def test_validate_status(
    make: Callable[[], tuple[KubeObject, KubeObject]], want: list[tuple[str, str]]
) -> None:
    new, old = make()
    assert _short(validation.validate_status(new, old=old)) == want


def test_generated_claim_object_is_valid() -> None:
    """The special claim the scheduler creates (upstream `preFilterExtendedResources`)
    passes validation."""
    claim = resource_v1.ResourceClaim(
        metadata=codec.convert(
            {
                "generateName": "my-pod-extended-resources-",
                "namespace": "default",
                "annotations": {"resource.kubernetes.io/extended-resource-claim": "true"},
                "finalizers": ["resource.kubernetes.io/delete-protection"],
                "ownerReferences": [
                    {"apiVersion": "v1", "kind": "Pod", "name": "my-pod", "uid": "1234",
                     "controller": True}
                ],
            },
            type(resource_v1.ResourceClaim().metadata),
        ),
        spec=codec.convert(
            {"devices": {"requests": [
                {"name": "container-0-request-0",
                 "exactly": {"deviceClassName": "gpu.example.com", "allocationMode": "ExactCount",
                             "count": 1}}]}},
            resource_v1.ResourceClaimSpec,
        ),
    )  # fmt: skip
    assert validation.validate(claim) == []
