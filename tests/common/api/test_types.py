"""API types decode real Kubernetes YAML unchanged and round-trip through JSON."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from drasim.common import codec
from drasim.common.api import apps_v1, coordination_v1, core_v1, registry, resource_v1
from drasim.common.api.meta_v1 import KubeObject
from drasim.common.errors import FieldError, NotFound
from drasim.common.quantity import parse_quantity
from tests.builders import KEP_DEVICE_CLASS_YAML

DEVICE_CLASS_YAML = KEP_DEVICE_CLASS_YAML

DEPLOYMENT_YAML = """
apiVersion: apps/v1
kind: Deployment
metadata:
  name: gpu-deployment
  namespace: default
  labels:
    app: gpu-app
spec:
  replicas: 2
  selector:
    matchLabels:
      app: gpu-app
  strategy:
    type: RollingUpdate
    rollingUpdate:
      maxSurge: 25%
      maxUnavailable: 1
  template:
    metadata:
      creationTimestamp: null
      labels:
        app: gpu-app
    spec:
      containers:
      - name: app
        image: registry.k8s.io/pause:3.10
        command: ["sleep", "3600"]
        resources:
          limits:
            example.com/gpu: 1
"""

POD_YAML = """
apiVersion: v1
kind: Pod
metadata:
  name: my-pod
  namespace: default
  uid: "1234"
  ownerReferences:
  - apiVersion: apps/v1
    kind: ReplicaSet
    name: rs
    uid: abc
    controller: true
    blockOwnerDeletion: true
spec:
  nodeName: worker
  schedulerName: default-scheduler
  priority: 0
  restartPolicy: Always
  terminationGracePeriodSeconds: 30
  overhead:
    cpu: 100m
  nodeSelector:
    kubernetes.io/os: linux
  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms:
        - matchExpressions:
          - {key: zone, operator: In, values: [a, b]}
          matchFields:
          - {key: metadata.name, operator: In, values: [worker]}
  tolerations:
  - {key: node.kubernetes.io/not-ready, operator: Exists, effect: NoExecute, tolerationSeconds: 300}
  resourceClaims:
  - name: gpu
    resourceClaimTemplateName: gpu-template
  - name: shared
    resourceClaimName: shared-claim
  initContainers:
  - name: init-con0
    image: busybox
    resources:
      requests: {example.com/gpu: 1}
  - name: sidecar-con1
    image: busybox
    restartPolicy: Always
    resources:
      requests: {cpu: 250m, memory: 64Mi}
  containers:
  - name: con0
    image: nginx
    args: ["--port", "8080"]
    env:
    - {name: MODE, value: test}
    ports:
    - {containerPort: 8080, hostIP: 0.0.0.0, protocol: TCP}
    volumeMounts:
    - {name: data, mountPath: /data}
    resources:
      requests: {cpu: "1", memory: 1Gi, example.com/gpu: "2"}
      limits: {memory: 1Gi, example.com/gpu: "2"}
      claims:
      - name: gpu
  ephemeralContainers:
  - name: debugger
    image: busybox
    targetContainerName: con0
  volumes:
  - name: data
    emptyDir: {}
status:
  phase: Running
  hostIP: 10.0.0.1
  podIP: 10.1.0.5
  podIPs: [{ip: 10.1.0.5}]
  startTime: "2026-01-01T00:00:00Z"
  conditions:
  - type: PodScheduled
    status: "True"
    lastProbeTime: null
    lastTransitionTime: "2026-01-01T00:00:00Z"
  containerStatuses:
  - name: con0
    ready: true
    restartCount: 1
    started: true
    image: nginx
    imageID: docker.io/library/nginx@sha256:0
    containerID: containerd://c0
    state:
      running: {startedAt: "2026-01-01T00:00:01Z"}
    allocatedResourcesStatus:
    - name: claim:my-pod-extended-resources-x7k2p/container-2-request-0
      resources:
      - {resourceID: gpu-0, health: Healthy}
  resourceClaimStatuses:
  - {name: gpu, resourceClaimName: my-pod-gpu-abcde}
  extendedResourceClaimStatus:
    resourceClaimName: my-pod-extended-resources-x7k2p
    requestMappings:
    - {containerName: init-con0, resourceName: example.com/gpu, requestName: container-2-request-0}
    - {containerName: con0, resourceName: example.com/gpu, requestName: container-2-request-0}
"""

RESOURCE_SLICE_YAML = """
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata:
  name: worker-gpu.example.com-abcde
spec:
  driver: gpu.example.com
  nodeName: worker
  pool:
    name: worker
    generation: 1
    resourceSliceCount: 1
  devices:
  - name: instance-1
    attributes:
      index: {int: 0}
      healthy: {bool: true}
      model: {string: LATEST-GPU-MODEL}
      driverVersion: {version: 1.0.0}
    capacity:
      memory: {value: 80Gi}
    taints:
    - {key: maintenance, effect: NoSchedule}
  - name: instance-2
"""

ALLOCATED_CLAIM_YAML = """
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata:
  name: my-pod-extended-resources-x7k2p
  namespace: default
  annotations:
    resource.kubernetes.io/extended-resource-claim: "true"
  finalizers: [resource.kubernetes.io/delete-protection]
  ownerReferences:
  - {apiVersion: v1, kind: Pod, name: my-pod, uid: "1234", controller: true}
spec:
  devices:
    requests:
    - name: container-0-request-0
      exactly:
        deviceClassName: gpu.example.com
        allocationMode: ExactCount
        count: 1
    - name: fallback
      firstAvailable:
      - {name: big, deviceClassName: gpu.example.com, count: 2}
      - {name: small, deviceClassName: gpu.example.com, allocationMode: All}
    constraints:
    - requests: [container-0-request-0]
      matchAttribute: gpu.example.com/model
    config:
    - requests: [container-0-request-0]
      opaque:
        driver: gpu.example.com
        parameters: {sharing: {strategy: TimeSlicing}}
status:
  allocation:
    devices:
      results:
      - {request: container-0-request-0, driver: gpu.example.com, pool: worker, device: instance-1}
      - request: fallback/big
        driver: gpu.example.com
        pool: worker
        device: instance-2
        shareID: s-1
    nodeSelector:
      nodeSelectorTerms:
      - matchFields:
        - {key: metadata.name, operator: In, values: [worker]}
  reservedFor:
  - {resource: pods, name: my-pod, uid: "1234"}
"""


def _load(text: str) -> dict[str, Any]:
    (doc,) = codec.load_yaml_documents(text)
    return doc


def test_device_class_from_kep() -> None:
    dc = codec.convert(_load(DEVICE_CLASS_YAML), resource_v1.DeviceClass)
    assert dc.api_version == "resource.k8s.io/v1"
    assert dc.kind == "DeviceClass"
    assert dc.metadata.name == "gpu.example.com"
    assert dc.spec.extended_resource_name == "example.com/gpu"
    (selector,) = dc.spec.selectors
    assert selector.cel is not None
    assert selector.cel.expression == 'device.driver == "gpu.example.com"'


def test_deployment_from_kep() -> None:
    deploy = codec.convert(_load(DEPLOYMENT_YAML), apps_v1.Deployment)
    assert deploy.spec.replicas == 2
    assert deploy.spec.selector is not None
    assert deploy.spec.selector.match_labels == {"app": "gpu-app"}
    assert deploy.spec.strategy.rolling_update is not None
    assert deploy.spec.strategy.rolling_update.max_surge == "25%"
    assert deploy.spec.strategy.rolling_update.max_unavailable == 1
    template = deploy.spec.template
    assert template.metadata.creation_timestamp is None
    (container,) = template.spec.containers
    assert container.resources.limits == {"example.com/gpu": parse_quantity("1")}
    assert container.resources.requests == {}


def test_pod_with_init_sidecar_and_ephemeral_containers() -> None:
    pod = codec.convert(_load(POD_YAML), core_v1.Pod)
    spec = pod.spec
    assert [c.name for c in spec.all_containers()] == ["init-con0", "sidecar-con1", "con0"]
    assert spec.init_containers[0].restart_policy is None
    assert spec.init_containers[1].restart_policy == "Always"
    assert spec.ephemeral_containers[0].target_container_name == "con0"
    con0 = spec.containers[0]
    assert con0.resources.requests["memory"] == parse_quantity("1Gi")
    assert con0.resources.requests["example.com/gpu"].as_int64() == 2
    assert con0.resources.claims[0].name == "gpu"
    assert con0.ports[0].host_ip == "0.0.0.0"
    assert spec.overhead == {"cpu": parse_quantity("100m")}
    assert spec.resource_claims[0].resource_claim_template_name == "gpu-template"
    assert spec.resource_claims[1].resource_claim_name == "shared-claim"
    assert spec.affinity is not None and spec.affinity.node_affinity is not None
    required = spec.affinity.node_affinity.required_during_scheduling_ignored_during_execution
    assert required is not None
    assert required.node_selector_terms[0].match_fields[0].values == ["worker"]
    assert spec.tolerations[0].toleration_seconds == 300
    assert pod.metadata.controller_ref() is not None

    status = pod.status
    assert status.host_ip == "10.0.0.1" and status.pod_ips[0].ip == "10.1.0.5"
    assert status.conditions[0].last_probe_time is None
    cs = status.container_statuses[0]
    assert (cs.ready, cs.restart_count, cs.started) == (True, 1, True)
    assert cs.image_id.startswith("docker.io") and cs.container_id == "containerd://c0"
    assert cs.state.running is not None and cs.state.waiting is None
    assert cs.allocated_resources_status[0].resources[0].resource_id == "gpu-0"
    ers = status.extended_resource_claim_status
    assert ers is not None
    assert ers.resource_claim_name == "my-pod-extended-resources-x7k2p"
    assert [m.container_name for m in ers.request_mappings] == ["init-con0", "con0"]


def test_resource_slice() -> None:
    rs = codec.convert(_load(RESOURCE_SLICE_YAML), resource_v1.ResourceSlice)
    assert rs.spec.node_name == "worker" and rs.spec.all_nodes is None
    assert rs.spec.pool.resource_slice_count == 1
    device = rs.spec.devices[0]
    attrs = device.attributes
    assert attrs["index"].int_value == 0 and attrs["index"].value == 0
    assert attrs["healthy"].value is True
    assert attrs["model"].string_value == "LATEST-GPU-MODEL"
    assert attrs["driverVersion"].version_value == "1.0.0"
    assert device.capacity["memory"].value == parse_quantity("80Gi")
    assert device.taints[0].effect == "NoSchedule"
    assert rs.spec.devices[1].attributes == {}


def test_allocated_resource_claim() -> None:
    claim = codec.convert(_load(ALLOCATED_CLAIM_YAML), resource_v1.ResourceClaim)
    first, fallback = claim.spec.devices.requests
    assert first.exactly is not None and first.exactly.count == 1
    assert first.exactly.allocation_mode == resource_v1.ALLOCATION_MODE_EXACT_COUNT
    assert fallback.exactly is None
    assert fallback.first_available[1].allocation_mode == resource_v1.ALLOCATION_MODE_ALL
    assert claim.spec.devices.constraints[0].match_attribute == "gpu.example.com/model"
    opaque = claim.spec.devices.config[0].opaque
    assert opaque is not None and opaque.parameters == {"sharing": {"strategy": "TimeSlicing"}}
    allocation = claim.status.allocation
    assert allocation is not None
    assert [r.device for r in allocation.devices.results] == ["instance-1", "instance-2"]
    assert allocation.devices.results[1].share_id == "s-1"
    assert allocation.node_selector is not None
    assert allocation.node_selector.node_selector_terms[0].match_fields[0].key == "metadata.name"
    (consumer,) = claim.status.reserved_for
    assert (consumer.api_group, consumer.resource, consumer.uid) == ("", "pods", "1234")


ROUND_TRIP_CASES = [
    (DEVICE_CLASS_YAML, resource_v1.DeviceClass),
    (DEPLOYMENT_YAML, apps_v1.Deployment),
    (POD_YAML, core_v1.Pod),
    (RESOURCE_SLICE_YAML, resource_v1.ResourceSlice),
    (ALLOCATED_CLAIM_YAML, resource_v1.ResourceClaim),
]


@pytest.mark.parametrize(
    ("text", "type_"), ROUND_TRIP_CASES, ids=[t.__name__ for _, t in ROUND_TRIP_CASES]
)
def test_round_trip(text: str, type_: type[KubeObject]) -> None:
    obj = codec.convert(_load(text), type_)
    wire = codec.encode(obj)
    assert codec.decode(wire, type_) == obj
    assert codec.convert(codec.to_builtins(obj), type_) == obj
    assert codec.decode(wire.decode(), type_) == obj


def test_device_class_wire_form_is_the_input() -> None:
    """Absent fields stay absent: the KEP's class encodes back to exactly what was written."""
    doc = _load(DEVICE_CLASS_YAML)
    dc = codec.convert(doc, resource_v1.DeviceClass)
    assert codec.to_builtins(dc) == doc


def test_absent_fields_stay_absent() -> None:
    pod = codec.convert(_load(POD_YAML), core_v1.Pod)
    wire = msgspec.json.decode(codec.encode(pod))
    init = wire["spec"]["initContainers"][0]
    assert "restartPolicy" not in init
    assert "ports" not in init and "env" not in init
    assert "limits" not in init["resources"]
    assert "extendedResourceClaimStatus" in wire["status"]
    assert "message" not in wire["status"] and "nominatedNodeName" not in wire["status"]
    # Quantities are written as canonical strings, whatever form they were read in.
    assert wire["spec"]["containers"][0]["resources"]["requests"] == {
        "cpu": "1",
        "memory": "1Gi",
        "example.com/gpu": "2",
    }
    # Raw fields drasim does not model survive.
    assert wire["spec"]["volumes"] == [{"name": "data", "emptyDir": {}}]
    assert wire["spec"]["containers"][0]["volumeMounts"] == [{"name": "data", "mountPath": "/data"}]


@pytest.mark.parametrize(
    "type_",
    [info.type for info in registry.RESOURCES],
    ids=[info.kind for info in registry.RESOURCES],
)
def test_every_kind_carries_api_version_and_kind(type_: type[KubeObject]) -> None:
    info = registry.by_type(type_)
    obj = type_()
    assert (obj.api_version, obj.kind) == (info.api_version, info.kind)
    wire = msgspec.json.decode(codec.encode(obj))
    assert (wire["apiVersion"], wire["kind"]) == (info.api_version, info.kind)
    assert codec.decode(b"{}", type_) == obj


def test_unknown_fields_are_ignored() -> None:
    node = codec.decode(
        b'{"kind":"Node","metadata":{"name":"n","future":1},"spec":{"newField":true},'
        b'"status":{"allocatable":{"example.com/gpu":"4","pods":110}}}',
        core_v1.Node,
    )
    assert node.metadata.name == "n"
    assert node.status.allocatable == {
        "example.com/gpu": parse_quantity("4"),
        "pods": parse_quantity("110"),
    }


def test_nulls_count_as_absent() -> None:
    lease = codec.decode(
        b'{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"labels":null},'
        b'"spec":{"holderIdentity":"node-1","leaseDurationSeconds":40,"renewTime":null}}',
        coordination_v1.Lease,
    )
    assert lease.metadata.labels == {}
    assert lease.spec.holder_identity == "node-1" and lease.spec.renew_time is None


@pytest.mark.parametrize(
    ("data", "want"),
    [
        (
            b'{"spec":{"containers":[{"name":1}]}}',
            FieldError(
                "FieldValueTypeInvalid", "spec.containers[0].name", "Expected `str`, got `int`"
            ),
        ),
        (
            b'{"spec":{"containers":[{"name":"c","resources":{"limits":{"cpu":"1K"}}}]}}',
            FieldError(
                "FieldValueInvalid",
                "spec.containers[0].resources.limits[...]",
                "invalid quantity '1K': unknown suffix 'K'",
            ),
        ),
        (
            b'{"metadata":[]}',
            FieldError("FieldValueTypeInvalid", "metadata", "Expected `object`, got `array`"),
        ),
        (b"[]", FieldError("FieldValueTypeInvalid", "", "Expected `object`, got `array`")),
    ],
    ids=["wrong-type", "bad-quantity", "wrong-container", "root"],
)
def test_decode_errors(data: bytes, want: FieldError) -> None:
    with pytest.raises(msgspec.ValidationError) as info:
        codec.decode(data, core_v1.Pod)
    assert codec.decode_errors(info.value) == [want]


class _Required(msgspec.Struct):
    name: str


class _Outer(msgspec.Struct):
    inner: _Required


def test_missing_required_field_is_reported_at_the_field() -> None:
    with pytest.raises(msgspec.ValidationError) as info:
        codec.convert({"inner": {}}, _Outer)
    assert codec.decode_errors(info.value) == [
        FieldError("FieldValueRequired", "inner.name", "Required value")
    ]


def test_unquoted_yaml_timestamps_stay_strings() -> None:
    (doc,) = codec.load_yaml_documents(
        "kind: Lease\nspec:\n  renewTime: 2026-01-01T00:00:00.000000Z\n  holderIdentity: n\n"
    )
    lease = codec.convert(doc, coordination_v1.Lease)
    assert lease.spec.renew_time == "2026-01-01T00:00:00.000000Z"


def test_load_yaml_documents_skips_empty_ones() -> None:
    docs = codec.load_yaml_documents("---\n" + DEVICE_CLASS_YAML + "---\n---\n" + DEPLOYMENT_YAML)
    assert [d["kind"] for d in docs] == ["DeviceClass", "Deployment"]


RESOLVE_CASES = [
    ("pods", "pods"),
    ("pod", "pods"),
    ("Pod", "pods"),
    ("po", "pods"),
    ("no", "nodes"),
    ("ns", "namespaces"),
    ("deploy", "deployments"),
    ("rs", "replicasets"),
    ("ev", "events"),
    ("quota", "resourcequotas"),
    ("ResourceClaim", "resourceclaims"),
    ("resourceclaims.resource.k8s.io", "resourceclaims"),
    ("DEVICECLASS", "deviceclasses"),
    ("lease", "leases"),
]


@pytest.mark.parametrize(("name", "plural"), RESOLVE_CASES, ids=[c[0] for c in RESOLVE_CASES])
def test_registry_resolve(name: str, plural: str) -> None:
    assert registry.resolve(name).plural == plural


@pytest.mark.parametrize("name", ["widgets", "resourceclaims.apps", "", "p"])
def test_registry_resolve_unknown(name: str) -> None:
    with pytest.raises(NotFound, match="doesn't have a resource type"):
        registry.resolve(name)


def test_registry_lookups() -> None:
    claims = registry.by_plural("resourceclaims")
    assert claims.api_version == "resource.k8s.io/v1" and claims.namespaced
    assert claims.group == "resource.k8s.io" and claims.version == "v1"
    assert registry.by_kind("Node").api_version == "v1"
    assert not registry.by_kind("Node").namespaced
    assert registry.by_api_version_kind("apps/v1", "Deployment").plural == "deployments"
    assert "binding" in registry.by_plural("pods").subresources
    with pytest.raises(NotFound):
        registry.by_api_version_kind("v1", "Deployment")
    with pytest.raises(NotFound):
        registry.by_plural("Pods")
    with pytest.raises(NotFound):
        registry.by_kind("pod")
