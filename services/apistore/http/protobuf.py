"""Request bodies in Kubernetes' protobuf encoding (`application/vnd.kubernetes.protobuf`).

kubectl's typed clients send some bodies only as protobuf: `kubectl create namespace`,
`kubectl create deployment`, `kubectl create job`, `kubectl create cronjob`,
`kubectl create quota`, `kubectl create poddisruptionbudget`, `kubectl create priorityclass`,
`kubectl create configmap` (secret generic, serviceaccount, service),
`kubectl create role` (clusterrole, rolebinding,
clusterrolebinding), the SelfSubjectAccessReview of `kubectl auth can-i` (and the
SelfSubjectRulesReview of its `--list`),
and the DeleteOptions and Evictions of `kubectl drain`. There is no fallback to JSON for
protobuf, so drasim reads the messages those commands send: a decoder of the
wire format driven by tables of field numbers (taken from upstream's `generated.proto`,
whose numbers never change), giving the same builtins a JSON body decodes to. A field
outside the tables is refused with 415 naming it, never dropped silently. Answers stay JSON
(kubectl accepts them).

Kubernetes' Go marshalling writes every non-pointer field, set or not; so zero values are
dropped as JSON's `omitempty` would, except for fields that are pointers in Go (marked
`keep`), whose presence means they were set.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

from drasim.common import tables

MEDIA_TYPE = "application/vnd.kubernetes.protobuf"
MAGIC = b"k8s\x00"

# Wire types read: varints and length-delimited fields (no message here has others).
_VARINT, _LEN = 0, 2


@dataclass(frozen=True, slots=True)
class F:
    """One field: its JSON name, what it holds (a scalar kind or a message name), whether
    it repeats, and whether a zero value is kept (a pointer field in Go)."""

    name: str
    kind: str
    repeated: bool = False
    keep: bool = False


# Scalar kinds: str, int, bool, map (string→string entries), bytesmap (string→bytes
# entries, base64 in JSON), quantities (string→Quantity
# entries), time (metav1.Time), intstr (IntOrString), status (skipped: the bodies read here
# create objects or delete them, and a new object's status is the apistore's to set).
# Anything else names a message.
MESSAGES: dict[str, dict[int, F]] = {
    "ObjectMeta": {
        1: F("name", "str"),
        2: F("generateName", "str"),
        3: F("namespace", "str"),
        4: F("selfLink", "str"),
        5: F("uid", "str"),
        6: F("resourceVersion", "str"),
        7: F("generation", "int"),
        8: F("creationTimestamp", "time"),
        9: F("deletionTimestamp", "time"),
        10: F("deletionGracePeriodSeconds", "int", keep=True),
        11: F("labels", "map"),
        12: F("annotations", "map"),
        13: F("ownerReferences", "OwnerReference", repeated=True),
        14: F("finalizers", "str", repeated=True),
    },
    "OwnerReference": {
        1: F("kind", "str"),
        3: F("name", "str"),
        4: F("uid", "str"),
        5: F("apiVersion", "str"),
        6: F("controller", "bool", keep=True),
        7: F("blockOwnerDeletion", "bool", keep=True),
    },
    "LabelSelector": {
        1: F("matchLabels", "map"),
        2: F("matchExpressions", "LabelSelectorRequirement", repeated=True),
    },
    "LabelSelectorRequirement": {
        1: F("key", "str"),
        2: F("operator", "str"),
        3: F("values", "str", repeated=True),
    },
    "DeleteOptions": {
        1: F("gracePeriodSeconds", "int", keep=True),
        2: F("preconditions", "Preconditions"),
        3: F("orphanDependents", "bool", keep=True),
        4: F("propagationPolicy", "str", keep=True),
        5: F("dryRun", "str", repeated=True),
    },
    "Preconditions": {1: F("uid", "str", keep=True), 2: F("resourceVersion", "str", keep=True)},
    # policy/v1: the body of pods/eviction (`kubectl drain`), and `kubectl create pdb`.
    "Eviction": {1: F("metadata", "ObjectMeta"), 2: F("deleteOptions", "DeleteOptions")},
    "PodDisruptionBudget": {
        1: F("metadata", "ObjectMeta"),
        2: F("spec", "PodDisruptionBudgetSpec"),
        3: F("status", "status"),
    },
    "PodDisruptionBudgetSpec": {
        1: F("minAvailable", "intstr", keep=True),
        2: F("selector", "LabelSelector", keep=True),
        3: F("maxUnavailable", "intstr", keep=True),
        4: F("unhealthyPodEvictionPolicy", "str", keep=True),
    },
    # core/v1: `kubectl create configmap|secret|serviceaccount|service`.
    "ConfigMap": {
        1: F("metadata", "ObjectMeta"),
        2: F("data", "map"),
        3: F("binaryData", "bytesmap"),
        4: F("immutable", "bool", keep=True),
    },
    "Secret": {
        1: F("metadata", "ObjectMeta"),
        2: F("data", "bytesmap"),
        3: F("type", "str"),
        4: F("stringData", "map"),
        5: F("immutable", "bool", keep=True),
    },
    "ServiceAccount": {
        1: F("metadata", "ObjectMeta"),
        2: F("secrets", "ObjectReference", repeated=True),
        3: F("imagePullSecrets", "LocalObjectReference", repeated=True),
        4: F("automountServiceAccountToken", "bool", keep=True),
    },
    "ObjectReference": {
        1: F("kind", "str"),
        2: F("namespace", "str"),
        3: F("name", "str"),
        4: F("uid", "str"),
        5: F("apiVersion", "str"),
        6: F("resourceVersion", "str"),
        7: F("fieldPath", "str"),
    },
    "LocalObjectReference": {1: F("name", "str")},
    "Service": {
        1: F("metadata", "ObjectMeta"),
        2: F("spec", "ServiceSpec"),
        3: F("status", "status"),
    },
    "ServiceSpec": {
        1: F("ports", "ServicePort", repeated=True),
        2: F("selector", "map"),
        3: F("clusterIP", "str"),
        4: F("type", "str"),
        5: F("externalIPs", "str", repeated=True),
        7: F("sessionAffinity", "str"),
        8: F("loadBalancerIP", "str"),
        9: F("loadBalancerSourceRanges", "str", repeated=True),
        10: F("externalName", "str"),
        11: F("externalTrafficPolicy", "str"),
        12: F("healthCheckNodePort", "int"),
        13: F("publishNotReadyAddresses", "bool"),
        17: F("ipFamilyPolicy", "str", keep=True),
        18: F("clusterIPs", "str", repeated=True),
        19: F("ipFamilies", "str", repeated=True),
        20: F("allocateLoadBalancerNodePorts", "bool", keep=True),
        21: F("loadBalancerClass", "str", keep=True),
        22: F("internalTrafficPolicy", "str", keep=True),
        23: F("trafficDistribution", "str", keep=True),
    },
    "ServicePort": {
        1: F("name", "str"),
        2: F("protocol", "str"),
        3: F("port", "int"),
        4: F("targetPort", "intstr"),
        5: F("nodePort", "int"),
        6: F("appProtocol", "str", keep=True),
    },
    # scheduling.k8s.io/v1: `kubectl create priorityclass`.
    "PriorityClass": {
        1: F("metadata", "ObjectMeta"),
        2: F("value", "int"),
        3: F("globalDefault", "bool"),
        4: F("description", "str"),
        5: F("preemptionPolicy", "str", keep=True),
    },
    # rbac.authorization.k8s.io/v1: `kubectl create role|clusterrole|rolebinding|
    # clusterrolebinding`.
    "Role": {1: F("metadata", "ObjectMeta"), 2: F("rules", "PolicyRule", repeated=True)},
    "ClusterRole": {
        1: F("metadata", "ObjectMeta"),
        2: F("rules", "PolicyRule", repeated=True),
        3: F("aggregationRule", "AggregationRule", keep=True),
    },
    "PolicyRule": {
        1: F("verbs", "str", repeated=True),
        2: F("apiGroups", "str", repeated=True),
        3: F("resources", "str", repeated=True),
        4: F("resourceNames", "str", repeated=True),
        5: F("nonResourceURLs", "str", repeated=True),
    },
    "AggregationRule": {1: F("clusterRoleSelectors", "LabelSelector", repeated=True)},
    "RoleBinding": {
        1: F("metadata", "ObjectMeta"),
        2: F("subjects", "Subject", repeated=True),
        3: F("roleRef", "RoleRef"),
    },
    "ClusterRoleBinding": {
        1: F("metadata", "ObjectMeta"),
        2: F("subjects", "Subject", repeated=True),
        3: F("roleRef", "RoleRef"),
    },
    "Subject": {
        1: F("kind", "str"),
        2: F("apiGroup", "str"),
        3: F("name", "str"),
        4: F("namespace", "str"),
    },
    "RoleRef": {1: F("apiGroup", "str"), 2: F("kind", "str"), 3: F("name", "str")},
    # authorization.k8s.io/v1: `kubectl auth can-i`.
    "SelfSubjectAccessReview": {
        1: F("metadata", "ObjectMeta"),
        2: F("spec", "SelfSubjectAccessReviewSpec"),
        3: F("status", "status"),
    },
    "SelfSubjectAccessReviewSpec": {
        1: F("resourceAttributes", "ResourceAttributes", keep=True),
        2: F("nonResourceAttributes", "NonResourceAttributes", keep=True),
    },
    "ResourceAttributes": {
        1: F("namespace", "str"),
        2: F("verb", "str"),
        3: F("group", "str"),
        4: F("version", "str"),
        5: F("resource", "str"),
        6: F("subresource", "str"),
        7: F("name", "str"),
        8: F("fieldSelector", "FieldSelectorAttributes", keep=True),
        9: F("labelSelector", "LabelSelectorAttributes", keep=True),
    },
    "FieldSelectorAttributes": {
        1: F("rawSelector", "str"),
        2: F("requirements", "FieldSelectorRequirement", repeated=True),
    },
    "FieldSelectorRequirement": {
        1: F("key", "str"),
        2: F("operator", "str"),
        3: F("values", "str", repeated=True),
    },
    "LabelSelectorAttributes": {
        1: F("rawSelector", "str"),
        2: F("requirements", "LabelSelectorRequirement", repeated=True),
    },
    "NonResourceAttributes": {1: F("path", "str"), 2: F("verb", "str")},
    # `kubectl auth can-i --list`.
    "SelfSubjectRulesReview": {
        1: F("metadata", "ObjectMeta"),
        2: F("spec", "SelfSubjectRulesReviewSpec"),
        3: F("status", "status"),
    },
    "SelfSubjectRulesReviewSpec": {1: F("namespace", "str")},
    "Namespace": {
        1: F("metadata", "ObjectMeta"),
        2: F("spec", "NamespaceSpec"),
        3: F("status", "status"),
    },
    "NamespaceSpec": {1: F("finalizers", "str", repeated=True)},
    "ResourceQuota": {
        1: F("metadata", "ObjectMeta"),
        2: F("spec", "ResourceQuotaSpec"),
        3: F("status", "status"),
    },
    "ResourceQuotaSpec": {
        1: F("hard", "quantities"),
        2: F("scopes", "str", repeated=True),
        3: F("scopeSelector", "ScopeSelector"),
    },
    "ScopeSelector": {1: F("matchExpressions", "ScopedResourceSelectorRequirement", repeated=True)},
    "ScopedResourceSelectorRequirement": {
        1: F("scopeName", "str"),
        2: F("operator", "str"),
        3: F("values", "str", repeated=True),
    },
    "Deployment": {
        1: F("metadata", "ObjectMeta"),
        2: F("spec", "DeploymentSpec"),
        3: F("status", "status"),
    },
    "DeploymentSpec": {
        1: F("replicas", "int", keep=True),
        2: F("selector", "LabelSelector"),
        3: F("template", "PodTemplateSpec"),
        4: F("strategy", "DeploymentStrategy"),
        5: F("minReadySeconds", "int"),
        6: F("revisionHistoryLimit", "int", keep=True),
        7: F("paused", "bool"),
        9: F("progressDeadlineSeconds", "int", keep=True),
    },
    "DeploymentStrategy": {1: F("type", "str"), 2: F("rollingUpdate", "RollingUpdateDeployment")},
    "RollingUpdateDeployment": {1: F("maxUnavailable", "intstr"), 2: F("maxSurge", "intstr")},
    # batch/v1: `kubectl create job` and `kubectl create cronjob`.
    "Job": {1: F("metadata", "ObjectMeta"), 2: F("spec", "JobSpec"), 3: F("status", "status")},
    "JobSpec": {
        1: F("parallelism", "int", keep=True),
        2: F("completions", "int", keep=True),
        3: F("activeDeadlineSeconds", "int", keep=True),
        4: F("selector", "LabelSelector", keep=True),
        5: F("manualSelector", "bool", keep=True),
        6: F("template", "PodTemplateSpec"),
        7: F("backoffLimit", "int", keep=True),
        8: F("ttlSecondsAfterFinished", "int", keep=True),
        9: F("completionMode", "str", keep=True),
        10: F("suspend", "bool", keep=True),
        12: F("backoffLimitPerIndex", "int", keep=True),
        13: F("maxFailedIndexes", "int", keep=True),
        14: F("podReplacementPolicy", "str", keep=True),
        15: F("managedBy", "str", keep=True),
    },
    "CronJob": {
        1: F("metadata", "ObjectMeta"),
        2: F("spec", "CronJobSpec"),
        3: F("status", "status"),
    },
    "CronJobSpec": {
        1: F("schedule", "str"),
        2: F("startingDeadlineSeconds", "int", keep=True),
        3: F("concurrencyPolicy", "str"),
        4: F("suspend", "bool", keep=True),
        5: F("jobTemplate", "JobTemplateSpec"),
        6: F("successfulJobsHistoryLimit", "int", keep=True),
        7: F("failedJobsHistoryLimit", "int", keep=True),
        8: F("timeZone", "str", keep=True),
    },
    "JobTemplateSpec": {1: F("metadata", "ObjectMeta"), 2: F("spec", "JobSpec")},
    "PodTemplateSpec": {1: F("metadata", "ObjectMeta"), 2: F("spec", "PodSpec")},
    "PodSpec": {
        2: F("containers", "Container", repeated=True),
        3: F("restartPolicy", "str"),
        4: F("terminationGracePeriodSeconds", "int", keep=True),
        5: F("activeDeadlineSeconds", "int", keep=True),
        6: F("dnsPolicy", "str"),
        7: F("nodeSelector", "map"),
        8: F("serviceAccountName", "str"),
        9: F("serviceAccount", "str"),
        10: F("nodeName", "str"),
        11: F("hostNetwork", "bool"),
        12: F("hostPID", "bool"),
        13: F("hostIPC", "bool"),
        16: F("hostname", "str"),
        17: F("subdomain", "str"),
        19: F("schedulerName", "str"),
        20: F("initContainers", "Container", repeated=True),
        22: F("tolerations", "Toleration", repeated=True),
        24: F("priorityClassName", "str"),
        25: F("priority", "int", keep=True),
        30: F("enableServiceLinks", "bool", keep=True),
    },
    "Container": {
        1: F("name", "str"),
        2: F("image", "str"),
        3: F("command", "str", repeated=True),
        4: F("args", "str", repeated=True),
        5: F("workingDir", "str"),
        6: F("ports", "ContainerPort", repeated=True),
        7: F("env", "EnvVar", repeated=True),
        8: F("resources", "ResourceRequirements"),
        13: F("terminationMessagePath", "str"),
        14: F("imagePullPolicy", "str"),
        16: F("stdin", "bool"),
        17: F("stdinOnce", "bool"),
        18: F("tty", "bool"),
        20: F("terminationMessagePolicy", "str"),
    },
    "ContainerPort": {
        1: F("name", "str"),
        2: F("hostPort", "int"),
        3: F("containerPort", "int"),
        4: F("protocol", "str"),
        5: F("hostIP", "str"),
    },
    "EnvVar": {1: F("name", "str"), 2: F("value", "str")},
    "ResourceRequirements": {
        1: F("limits", "quantities"),
        2: F("requests", "quantities"),
        3: F("claims", "ResourceClaim", repeated=True),
    },
    "ResourceClaim": {1: F("name", "str"), 2: F("request", "str")},
    "Toleration": {
        1: F("key", "str"),
        2: F("operator", "str"),
        3: F("value", "str"),
        4: F("effect", "str"),
        5: F("tolerationSeconds", "int", keep=True),
    },
}

# Per message, the fields whose zero value is kept.
_KEPT = {
    message: {f.name for f in fields.values() if f.keep} for message, fields in MESSAGES.items()
}

# The kinds a body may carry, by the envelope's `kind`.
TOP_LEVEL = frozenset(
    {
        "Namespace",
        "Deployment",
        "Job",
        "CronJob",
        "ResourceQuota",
        "DeleteOptions",
        "Eviction",
        "PodDisruptionBudget",
        "PriorityClass",
        "ConfigMap",
        "Secret",
        "ServiceAccount",
        "Service",
        "SelfSubjectAccessReview",
        "SelfSubjectRulesReview",
        "Role",
        "ClusterRole",
        "RoleBinding",
        "ClusterRoleBinding",
    }
)


class Unsupported(web.HTTPUnsupportedMediaType):
    def __init__(self, detail: str) -> None:
        super().__init__(
            text=f"the body of the request was in protobuf, which drasim reads only for "
            f"{', '.join(sorted(TOP_LEVEL))} objects: {detail}; send it as application/json"
        )


def decode_body(data: bytes) -> dict[str, Any]:
    """A protobuf request body (`k8s\\0` + runtime.Unknown) as the JSON builtins of its
    object, with `apiVersion` and `kind` from the envelope."""
    if not data.startswith(MAGIC):
        raise Unsupported("it does not start with the k8s protobuf prefix")
    envelope = dict(_fields(data[len(MAGIC) :]))
    type_meta = dict(_fields(envelope.get(1, b"")))
    api_version = _text(type_meta.get(1, b""))
    kind = _text(type_meta.get(2, b""))
    if kind not in TOP_LEVEL:
        raise Unsupported(f"kind {kind or '(none)'!r}")
    obj = decode_message(kind, envelope.get(2, b""))
    if api_version:
        obj["apiVersion"] = api_version
    obj["kind"] = kind
    return obj


def decode_message(message: str, data: bytes) -> dict[str, Any]:
    """One message of `MESSAGES` as JSON builtins."""
    fields = MESSAGES[message]
    out: dict[str, Any] = {}
    for number, value in _fields(data):
        field = fields.get(number)
        if field is None:
            raise Unsupported(f"field {number} of {message}")
        decoded = _value(field, value, message, number)
        if field.kind in ("map", "bytesmap", "quantities"):
            out.setdefault(field.name, {}).update(decoded)
        elif field.repeated:
            out.setdefault(field.name, []).append(decoded)
        else:
            out[field.name] = decoded
    return {
        name: value
        for name, value in out.items()
        if name in _KEPT[message] or value not in (None, "", 0, False, [], {})
    }


def _value(field: F, value: int | bytes, message: str, number: int) -> Any:
    kind = field.kind
    if kind in ("int", "bool"):
        if not isinstance(value, int):
            raise Unsupported(f"field {number} of {message} is not a varint")
        if kind == "bool":
            return bool(value)
        return value - (1 << 64) if value >= 1 << 63 else value  # int64 two's complement
    if not isinstance(value, bytes):
        raise Unsupported(f"field {number} of {message} is not length-delimited")
    if kind == "str":
        return _text(value)
    if kind == "status":
        return None
    if kind in ("map", "bytesmap", "quantities"):
        entry = dict(_fields(value))
        key = _text(entry.get(1, b""))
        raw = entry.get(2, b"")
        if not isinstance(raw, bytes):
            raise Unsupported(f"an entry of field {number} of {message}")
        if kind == "bytesmap":  # bytes are base64 in JSON
            return {key: base64.b64encode(raw).decode()}
        item = _text(dict(_fields(raw)).get(1, b"")) if kind == "quantities" else _text(raw)
        return {key: item}
    if kind == "time":
        parts = dict(_fields(value))
        seconds = parts.get(1, 0)
        if not isinstance(seconds, int) or not seconds:
            return None
        return tables.format_time(datetime.fromtimestamp(seconds, UTC))
    if kind == "intstr":
        parts = dict(_fields(value))
        return _text(parts.get(3, b"")) if parts.get(1) == 1 else parts.get(2, 0)
    return decode_message(kind, value)


def _text(value: int | bytes) -> str:
    if not isinstance(value, bytes):
        raise Unsupported("a string field is not length-delimited")
    try:
        return value.decode()
    except UnicodeDecodeError:
        raise Unsupported("a string field is not UTF-8") from None


def _fields(data: bytes) -> list[tuple[int, int | bytes]]:
    """(field number, varint or bytes) of each field, in order; fixed-size fields (no
    message above uses them) are refused."""
    out: list[tuple[int, int | bytes]] = []
    pos, end = 0, len(data)
    while pos < end:
        tag, pos = _varint(data, pos)
        number, wire = tag >> 3, tag & 7
        if wire == _VARINT:
            value, pos = _varint(data, pos)
            out.append((number, value))
        elif wire == _LEN:
            size, pos = _varint(data, pos)
            if pos + size > end:
                raise Unsupported("a length runs past the end of the body")
            out.append((number, data[pos : pos + size]))
            pos += size
        else:
            raise Unsupported(f"wire type {wire} of field {number}")
    return out


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise Unsupported("a varint runs past the end of the body")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
