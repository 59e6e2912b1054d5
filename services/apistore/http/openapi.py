"""OpenAPI v3 documents (`/openapi/v3`), generated from the msgspec API types.

kubectl reads them for two things: `kubectl explain` finds a kind's schema by its
`x-kubernetes-group-version-kind` (reached from a path of the resource) and prints field
types and descriptions; `kubectl apply`/`create` look for a `fieldValidation` parameter on
each kind's PATCH operation and, finding it, leave unknown-field checks to the server.
Schemas are named as upstream (`io.k8s.api.core.v1.Pod`); lists carry the patch strategy
and merge key the apistore's strategic merge patch uses, so clients merge the same way.
"""

from __future__ import annotations

import functools
import hashlib
from typing import Any

import msgspec
import msgspec.inspect as mi
from aiohttp import web

from drasim.apistore import patches
from drasim.apistore.http import discovery, keys, negotiation, options
from drasim.common.api import customresources, meta_v1, registry
from drasim.common.quantity import Quantity
from drasim.common.runtime_config import RuntimeConfig
from drasim.common.version import GIT_VERSION

_PACKAGES = {
    "drasim.common.api.meta_v1": "io.k8s.apimachinery.pkg.apis.meta.v1",
    "drasim.common.api.core_v1": "io.k8s.api.core.v1",
    "drasim.common.api.core_v1_app": "io.k8s.api.core.v1",
    "drasim.common.api.discovery_v1": "io.k8s.api.discovery.v1",
    "drasim.common.api.networking_v1": "io.k8s.api.networking.v1",
    "drasim.common.api.apps_v1": "io.k8s.api.apps.v1",
    "drasim.common.api.admissionregistration_v1": "io.k8s.api.admissionregistration.v1",
    "drasim.common.api.apiextensions_v1": (
        "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1"
    ),
    "drasim.common.api.batch_v1": "io.k8s.api.batch.v1",
    "drasim.common.api.coordination_v1": "io.k8s.api.coordination.v1",
    "drasim.common.api.policy_v1": "io.k8s.api.policy.v1",
    "drasim.common.api.rbac_v1": "io.k8s.api.rbac.v1",
    "drasim.common.api.resource_v1": "io.k8s.api.resource.v1",
    "drasim.common.api.resource_v1beta1": "io.k8s.api.resource.v1beta1",
    "drasim.common.api.scheduling_v1": "io.k8s.api.scheduling.v1",
}
QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"
INT_OR_STRING = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
_API_CONVENTIONS = (
    "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md"
)

# rbac.authorization.k8s.io/v1's kinds and fields (upstream's text).
RBAC_DESCRIPTIONS: dict[str, str] = {
    "Role": (
        "Role is a namespaced, logical grouping of PolicyRules that can be referenced as a "
        "unit by a RoleBinding."
    ),
    "ClusterRole": (
        "ClusterRole is a cluster level, logical grouping of PolicyRules that can be "
        "referenced as a unit by a RoleBinding or ClusterRoleBinding."
    ),
    "RoleBinding": (
        "RoleBinding references a role, but does not contain it.  It can reference a Role in "
        "the same namespace or a ClusterRole in the global namespace. It adds who information "
        "via Subjects and namespace information by which namespace it exists in.  "
        "RoleBindings in a given namespace only have effect in that namespace."
    ),
    "ClusterRoleBinding": (
        "ClusterRoleBinding references a ClusterRole, but not contain it.  It can reference "
        "a ClusterRole in the global namespace, and adds who information via Subject."
    ),
    "PolicyRule": (
        "PolicyRule holds information that describes a policy rule, but does not contain "
        "information about who the rule applies to or which namespace the rule applies to."
    ),
    "Subject": (
        "Subject contains a reference to the object or user identities a role binding "
        "applies to.  This can either hold a direct API object reference, or a value for "
        "non-objects such as user and group names."
    ),
    "RoleRef": "RoleRef contains information that points to the role being used",
    "AggregationRule": (
        "AggregationRule describes how to locate ClusterRoles to aggregate into the ClusterRole"
    ),
    "Role.rules": "Rules holds all the PolicyRules for this Role",
    "ClusterRole.rules": "Rules holds all the PolicyRules for this ClusterRole",
    "ClusterRole.aggregationRule": (
        "AggregationRule is an optional field that describes how to build the Rules for this "
        "ClusterRole. If AggregationRule is set, then the Rules are controller managed and "
        "direct changes to Rules will be stomped by the controller."
    ),
    "AggregationRule.clusterRoleSelectors": (
        "ClusterRoleSelectors holds a list of selectors which will be used to find "
        "ClusterRoles and create the rules. If any of the selectors match, then the "
        "ClusterRole's permissions will be added"
    ),
    "RoleBinding.subjects": "Subjects holds references to the objects the role applies to.",
    "RoleBinding.roleRef": (
        "RoleRef can reference a Role in the current namespace or a ClusterRole in the "
        "global namespace. If the RoleRef cannot be resolved, the Authorizer must return an "
        "error. This field is immutable."
    ),
    "ClusterRoleBinding.subjects": (
        "Subjects holds references to the objects the role applies to."
    ),
    "ClusterRoleBinding.roleRef": (
        "RoleRef can only reference a ClusterRole in the global namespace. If the RoleRef "
        "cannot be resolved, the Authorizer must return an error. This field is immutable."
    ),
    "PolicyRule.verbs": (
        "Verbs is a list of Verbs that apply to ALL the ResourceKinds contained in this "
        "rule. '*' represents all verbs."
    ),
    "PolicyRule.apiGroups": (
        "APIGroups is the name of the APIGroup that contains the resources.  If multiple API "
        "groups are specified, any action requested against one of the enumerated resources "
        'in any API group will be allowed. "" represents the core API group and "*" '
        "represents all API groups."
    ),
    "PolicyRule.resources": (
        "Resources is a list of resources this rule applies to. '*' represents all resources."
    ),
    "PolicyRule.resourceNames": (
        "ResourceNames is an optional white list of names that the rule applies to.  An "
        "empty set means that everything is allowed."
    ),
    "PolicyRule.nonResourceURLs": (
        "NonResourceURLs is a set of partial urls that a user should have access to.  *s are "
        "allowed, but only as the full, final step in the path Since non-resource URLs are "
        "not namespaced, this field is only applicable for ClusterRoles referenced from a "
        'ClusterRoleBinding. Rules can either apply to API resources (such as "pods" or '
        '"secrets") or non-resource URL paths (such as "/api"),  but not both.'
    ),
    "Subject.kind": (
        'Kind of object being referenced. Values defined by this API group are "User", '
        '"Group", and "ServiceAccount". If the Authorizer does not recognized the kind value, '
        "the Authorizer should report an error."
    ),
    "Subject.apiGroup": (
        'APIGroup holds the API group of the referenced subject. Defaults to "" for '
        'ServiceAccount subjects. Defaults to "rbac.authorization.k8s.io" for User and '
        "Group subjects."
    ),
    "Subject.name": "Name of the object being referenced.",
    "Subject.namespace": (
        "Namespace of the referenced object.  If the object kind is non-namespace, such as "
        '"User" or "Group", and this value is not empty the Authorizer should report an '
        "error."
    ),
    "RoleRef.apiGroup": "APIGroup is the group for the resource being referenced",
    "RoleRef.kind": "Kind is the type of resource being referenced",
    "RoleRef.name": "Name is the name of resource being referenced",
}

# Field descriptions, by "<type>.<jsonName>" (upstream's text, shortened where long). The
# type modules stay free of documentation strings; fields not listed here have none.
DESCRIPTIONS: dict[str, str] = {
    "apiVersion": (
        "APIVersion defines the versioned schema of this representation of an object. "
        "Servers should convert recognized schemas to the latest internal value, and may "
        f"reject unrecognized values. More info: {_API_CONVENTIONS}#resources"
    ),
    "kind": (
        "Kind is a string value representing the REST resource this object represents. "
        "Servers may infer this from the endpoint the client submits requests to. Cannot be "
        f"updated. In CamelCase. More info: {_API_CONVENTIONS}#types-kinds"
    ),
    "metadata": f"Standard object's metadata. More info: {_API_CONVENTIONS}#metadata",
    "spec": f"Spec defines the desired state of the object. More info: {_API_CONVENTIONS}"
    "#spec-and-status",
    "status": "Status represents the current state of the object, populated by the system. "
    f"Read-only. More info: {_API_CONVENTIONS}#spec-and-status",
    "ObjectMeta.name": (
        "Name must be unique within a namespace. Is required when creating resources, "
        "although some resources may allow a client to request the generation of an "
        "appropriate name automatically. Cannot be updated."
    ),
    "ObjectMeta.generateName": (
        "GenerateName is an optional prefix, used by the server, to generate a unique name "
        "ONLY IF the Name field has not been provided."
    ),
    "ObjectMeta.namespace": (
        "Namespace defines the space within which each name must be unique. An empty "
        'namespace is equivalent to the "default" namespace.'
    ),
    "ObjectMeta.labels": (
        "Map of string keys and values that can be used to organize and categorize (scope "
        "and select) objects."
    ),
    "ObjectMeta.annotations": (
        "Annotations is an unstructured key value map stored with a resource that may be set "
        "by external tools to store and retrieve arbitrary metadata."
    ),
    "ObjectMeta.resourceVersion": (
        "An opaque value that represents the internal version of this object that can be "
        "used by clients to determine when objects have changed. In drasim it is the "
        "sequence number of the event that last wrote the object."
    ),
    "ObjectMeta.ownerReferences": (
        "List of objects depended by this object. If ALL objects in the list have been "
        "deleted, this object will be garbage collected."
    ),
    "ObjectMeta.finalizers": (
        "Must be empty before the object is deleted from the registry. Each entry is an "
        "identifier for the responsible component that will remove the entry from the list."
    ),
    "Namespace": "Namespace provides a scope for Names.",
    "Node": "Node is a worker node; drasim's kubelet emulators register and run them.",
    "Pod": (
        "Pod is a collection of containers that can run on a host. This resource is "
        "created by clients and scheduled onto hosts."
    ),
    "Event": "Event is a report of an event somewhere in the cluster.",
    "ResourceQuota": "ResourceQuota sets aggregate quota restrictions enforced per namespace",
    "Lease": "Lease defines a lease concept.",
    "PriorityClass": (
        "PriorityClass defines mapping from a priority class name to the priority integer "
        "value. The value can be any valid integer."
    ),
    **RBAC_DESCRIPTIONS,
    "PodDisruptionBudget": (
        "PodDisruptionBudget is an object to define the max disruption that can be caused "
        "to a collection of pods"
    ),
    "PodDisruptionBudgetSpec.minAvailable": (
        'An eviction is allowed if at least "minAvailable" pods selected by "selector" will '
        "still be available after the eviction, i.e. even in the absence of the evicted pod. "
        'So for example you can prevent all voluntary evictions by specifying "100%".'
    ),
    "PodDisruptionBudgetSpec.maxUnavailable": (
        'An eviction is allowed if at most "maxUnavailable" pods selected by "selector" are '
        "unavailable after the eviction, i.e. even in absence of the evicted pod. For "
        "example, one can prevent all voluntary evictions by specifying 0. This is a mutually "
        'exclusive setting with "minAvailable".'
    ),
    "PodDisruptionBudgetSpec.selector": (
        "Label query over pods whose evictions are managed by the disruption budget. A null "
        "selector will match no pods, while an empty ({}) selector will select all pods "
        "within the namespace."
    ),
    "PodDisruptionBudgetStatus.disruptionsAllowed": (
        "Number of pod disruptions that are currently allowed."
    ),
    "PodDisruptionBudgetStatus.disruptedPods": (
        "DisruptedPods contains information about pods whose eviction was processed by the "
        "API server eviction subresource handler but has not yet been observed by the "
        "PodDisruptionBudget controller."
    ),
    "Deployment": "Deployment enables declarative updates for Pods and ReplicaSets.",
    "ReplicaSet": (
        "ReplicaSet ensures that a specified number of pod replicas are running at any given time."
    ),
    "DaemonSet": "DaemonSet represents the configuration of a daemon set.",
    "StatefulSet": (
        "StatefulSet represents a set of pods with consistent identities. Identities are "
        "defined as:\n  - Network: A single stable DNS and hostname.\n  - Storage: As many "
        "VolumeClaims as requested.\n\nThe StatefulSet guarantees that a given network "
        "identity will always map to the same storage identity."
    ),
    "Job": "Job represents the configuration of a single job.",
    "CronJob": "CronJob represents the configuration of a single cron job.",
    "JobSpec.parallelism": (
        "Specifies the maximum desired number of pods the job should run at any given time. "
        "The actual number of pods running in steady state will be less than this number "
        "when ((.spec.completions - .status.successful) < .spec.parallelism), i.e. when the "
        "work left to do is less than max parallelism."
    ),
    "JobSpec.completions": (
        "Specifies the desired number of successfully finished pods the job should be run "
        "with.  Setting to null means that the success of any pod signals the success of all "
        "pods, and allows parallelism to have any positive value.  Setting to 1 means that "
        "parallelism is limited to 1 and the success of that pod signals the success of the "
        "job."
    ),
    "JobSpec.backoffLimit": (
        "Specifies the number of retries before marking this job failed. Defaults to 6, "
        "unless backoffLimitPerIndex (only Indexed Job) is specified."
    ),
    "JobSpec.ttlSecondsAfterFinished": (
        "ttlSecondsAfterFinished limits the lifetime of a Job that has finished execution "
        "(either Complete or Failed). If this field is set, ttlSecondsAfterFinished after the "
        "Job finishes, it is eligible to be automatically deleted."
    ),
    "JobSpec.suspend": (
        "suspend specifies whether the Job controller should create Pods or not. If a Job is "
        "created with suspend set to true, no Pods are created by the Job controller. If a "
        "Job is suspended after creation (i.e. the flag goes from false to true), the Job "
        "controller will delete all active Pods associated with this Job."
    ),
    "CronJobSpec.schedule": (
        "The schedule in Cron format, see https://en.wikipedia.org/wiki/Cron."
    ),
    "CronJobSpec.timeZone": (
        "The time zone name for the given schedule, see "
        "https://en.wikipedia.org/wiki/List_of_tz_database_time_zones. If not specified, "
        "this will default to the time zone of the kube-controller-manager process."
    ),
    "CronJobSpec.concurrencyPolicy": (
        "Specifies how to treat concurrent executions of a Job. Valid values are:\n\n- "
        '"Allow" (default): allows CronJobs to run concurrently; - "Forbid": forbids '
        "concurrent runs, skipping next run if previous run hasn't finished yet; - "
        '"Replace": cancels currently running job and replaces it with a new one'
    ),
    "StatefulSetSpec.podManagementPolicy": (
        "podManagementPolicy controls how pods are created during initial scale up, when "
        "replacing pods on nodes, or when scaling down. The default policy is `OrderedReady`, "
        "where pods are created in increasing order (pod-0, then pod-1, etc) and the "
        "controller will wait until each pod is ready before continuing. When scaling down, "
        "the pods are removed in the opposite order. The alternative policy is `Parallel` "
        "which will create pods in parallel to match the desired scale without waiting, and "
        "on scale down will delete all pods at once."
    ),
    "DeviceClass": (
        "DeviceClass is a vendor- or admin-provided resource that contains device "
        "configuration and selectors. It can be referenced in the device requests of a "
        "claim to apply these presets. Cluster scoped."
    ),
    "ResourceSlice": (
        "ResourceSlice represents one or more resources in a pool of similar resources, "
        "managed by a common driver."
    ),
    "ResourceClaim": (
        "ResourceClaim describes a request for access to resources in the cluster, for use "
        "by workloads. The scheduler also creates one per pod for the pod's extended "
        "resources backed by DRA (KEP-5004)."
    ),
    "ResourceClaimTemplate": ("ResourceClaimTemplate is used to produce ResourceClaim objects."),
    "DeviceClass.spec": "Spec defines what can be allocated and how to configure it.",
    "DeviceClassSpec.selectors": (
        "Each selector must be satisfied by a device which is claimed via this class."
    ),
    "DeviceClassSpec.config": (
        "Config defines configuration parameters that apply to each device that is claimed "
        "via this class. They are passed to the driver, but are not considered while "
        "allocating the claim."
    ),
    "DeviceClassSpec.extendedResourceName": (
        "ExtendedResourceName is the extended resource name for the devices of this class. "
        "The devices of this class can be used to satisfy a pod's extended resource "
        "requests. It has the same format as the name of a pod's extended resource. It "
        "should be unique among all the device classes in a cluster. If two device classes "
        "have the same name, then the class created later is picked to satisfy a pod's "
        "extended resource requests. If two classes are created at the same time, then the "
        "name of the class lexicographically sorted first is picked."
    ),
    "CELDeviceSelector.expression": (
        "Expression is a CEL expression which evaluates a single device. It must evaluate "
        "to true when the device under consideration satisfies the desired criteria, and "
        "false when it does not."
    ),
    "PodStatus.extendedResourceClaimStatus": (
        "Status of extended resource claim backed by DRA: the ResourceClaim the scheduler "
        "created for the pod's extended resource requests, and which of its device requests "
        "serves which container's extended resource."
    ),
    "PodExtendedResourceClaimStatus.requestMappings": (
        "RequestMappings identifies the mapping of <container, extended resource backed by "
        "DRA> to device request in the generated ResourceClaim."
    ),
    "PodExtendedResourceClaimStatus.resourceClaimName": (
        "ResourceClaimName is the name of the ResourceClaim that was generated for the Pod "
        "in the namespace of the Pod."
    ),
    "ContainerExtendedResourceRequest.containerName": (
        "The name of the container requesting resources."
    ),
    "ContainerExtendedResourceRequest.resourceName": (
        "The name of the extended resource in that container which gets backed by DRA."
    ),
    "ContainerExtendedResourceRequest.requestName": (
        "The name of the request in the special ResourceClaim which corresponds to the "
        "extended resource."
    ),
    "ResourceRequirements.limits": (
        "Limits describes the maximum amount of compute resources allowed, e.g. example.com/gpu: 1."
    ),
    "ResourceRequirements.requests": (
        "Requests describes the minimum amount of compute resources required. If omitted "
        "for a container, it defaults to Limits if that is explicitly specified."
    ),
    "PodSpec.nodeName": (
        "NodeName indicates in which node this pod is scheduled. It is set by the scheduler "
        "through the pods/binding subresource."
    ),
    "PodSpec.resourceClaims": (
        "ResourceClaims defines which ResourceClaims must be allocated and reserved before "
        "the Pod is allowed to start."
    ),
    "DeploymentSpec.replicas": (
        "Number of desired pods. This is a pointer to distinguish between explicit zero and "
        "not specified. Defaults to 1."
    ),
    "ReplicaSetSpec.replicas": (
        "Replicas is the number of desired pods. This is a pointer to distinguish between "
        "explicit zero and unspecified. Defaults to 1."
    ),
    "ResourceClaimStatus.allocation": (
        "Allocation is set once the claim has been allocated successfully."
    ),
    "ResourceClaimStatus.reservedFor": (
        "ReservedFor indicates which entities are currently allowed to use the claim. A Pod "
        "which references a ResourceClaim which is not reserved for that Pod will not be "
        "started."
    ),
}


def schema_name(cls: type, renamed: dict[str, str] | None = None) -> str:
    """The upstream name of a type's schema, e.g. `io.k8s.api.resource.v1.DeviceClass`;
    `renamed` puts a package's types in another (v1's in v1beta2 where v1beta2 has them)."""
    package = _PACKAGES[cls.__module__]
    return f"{(renamed or {}).get(package, package)}.{cls.__name__}"


def _ref(name: str) -> dict[str, Any]:
    return {"$ref": f"#/components/schemas/{name}"}


class _Components:
    """The schemas one document needs, each added the first time a field refers to it.

    A document of a version served besides the stored one (resource.k8s.io/v1beta2) names
    the stored version's types, which describe its objects where its own do not, after
    itself, as upstream's document of that version has its own copies of them."""

    def __init__(self, renamed: dict[str, str] | None = None) -> None:
        self.schemas: dict[str, dict[str, Any]] = {}
        self.renamed = renamed

    def add_kind(self, info: registry.ResourceInfo, version: str) -> str:
        custom = customresources.by_plural(info.plural)
        if custom is not None and custom.info is info:
            return self._custom_kind(custom)
        served = info.served(version)
        shape = mi.type_info(served.type if served else info.type)
        assert isinstance(shape, mi.StructType)
        name = self._struct(shape)
        gvk = {"group": info.group, "kind": info.kind, "version": version}
        self.schemas[name]["x-kubernetes-group-version-kind"] = [gvk]
        return name

    def _custom_kind(self, served: customresources.CustomResource) -> str:
        """A custom resource's schema, its CRD's as written (upstream's builder adds the
        same type meta and ObjectMeta)."""
        info = served.info
        name, schema = customresources.openapi_schema(served)
        meta = self._struct(mi.type_info(meta_v1.ObjectMeta))  # type: ignore[arg-type]
        schema["properties"]["metadata"] = _ref(meta)
        gvk = {"group": info.group, "kind": info.kind, "version": info.version}
        self.schemas[name] = {**schema, "x-kubernetes-group-version-kind": [gvk]}
        return name

    def _struct(self, shape: mi.StructType) -> str:
        name = schema_name(shape.cls, self.renamed)
        if name in self.schemas:
            return name
        schema: dict[str, Any] = {"type": "object"}
        self.schemas[name] = schema  # before the fields, so a cycle refers to it
        description = DESCRIPTIONS.get(shape.cls.__name__) or shape.cls.__doc__
        if description:
            schema["description"] = description.strip()
        schema["properties"] = {
            field.encode_name: self._field(shape.cls.__name__, field) for field in shape.fields
        }
        return name

    def _field(self, owner: str, field: mi.Field) -> dict[str, Any]:
        schema = self._schema(field.type)
        if _is_list(field.type):
            schema.update(_list_extensions(owner, field.encode_name))
        description = DESCRIPTIONS.get(f"{owner}.{field.encode_name}")
        if description is None and owner in _KIND_NAMES:
            description = DESCRIPTIONS.get(field.encode_name)
        if description:
            if "$ref" in schema:
                schema = {"allOf": [schema]}
            schema["description"] = description
        return schema

    def _schema(self, shape: mi.Type) -> dict[str, Any]:
        if isinstance(shape, mi.StrType):
            return {"type": "string"}
        if isinstance(shape, mi.BoolType):
            return {"type": "boolean"}
        if isinstance(shape, mi.BytesType):
            return {"type": "string", "format": "byte"}
        if isinstance(shape, mi.IntType):
            return {"type": "integer", "format": "int64"}
        if isinstance(shape, mi.FloatType):
            return {"type": "number", "format": "double"}
        if isinstance(shape, mi.LiteralType):
            return {"type": "string", "enum": list(shape.values)}
        if isinstance(shape, mi.ListType):
            return {"type": "array", "items": self._schema(shape.item_type)}
        if isinstance(shape, mi.DictType):
            if isinstance(shape.value_type, mi.AnyType):
                return {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
            return {"type": "object", "additionalProperties": self._schema(shape.value_type)}
        if isinstance(shape, mi.StructType):
            return _ref(self._struct(shape))
        if isinstance(shape, mi.CustomType) and shape.cls is Quantity:
            self.schemas[QUANTITY] = {
                "type": "string",
                "description": "Quantity is a fixed-point representation of a number, "
                "written as 1, 500m, 2Gi or 1e3.",
            }
            return _ref(QUANTITY)
        if isinstance(shape, mi.UnionType):
            members = [t for t in shape.types if not isinstance(t, mi.NoneType)]
            if {type(t) for t in members} == {mi.IntType, mi.StrType}:
                self.schemas[INT_OR_STRING] = {
                    "type": "string",
                    "format": "int-or-string",
                    "x-kubernetes-int-or-string": True,
                    "description": 'A number or a string, e.g. 1 or "25%".',
                }
                return _ref(INT_OR_STRING)
            if len(members) == 1:
                return self._schema(members[0])
        # Any, or a shape with no OpenAPI counterpart: whatever JSON the field holds.
        return {"x-kubernetes-preserve-unknown-fields": True}


_KIND_NAMES = frozenset(r.type.__name__ for r in registry.RESOURCES)  # as served types


def _is_list(shape: mi.Type) -> bool:
    members = shape.types if isinstance(shape, mi.UnionType) else (shape,)
    return any(isinstance(t, mi.ListType) for t in members)


def _list_extensions(owner: str, field: str) -> dict[str, Any]:
    """How the list merges: by key, as a set, or whole (atomic)."""
    keys = patches.OWNER_MERGE_KEYS.get((owner, field))
    if keys is not None:
        return {
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": list(keys),
            "x-kubernetes-patch-merge-key": keys[0],
            "x-kubernetes-patch-strategy": "merge",
        }
    key = patches.MERGE_KEYS.get(field) if owner != "EndpointSlice" else None
    if key is not None:
        return {
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": [key],
            "x-kubernetes-patch-merge-key": key,
            "x-kubernetes-patch-strategy": "merge",
        }
    if field in patches.MERGE_SETS:
        return {"x-kubernetes-list-type": "set", "x-kubernetes-patch-strategy": "merge"}
    return {"x-kubernetes-list-type": "atomic"}


# -- paths ------------------------------------------------------------------------------


def _query(*names: str) -> list[dict[str, Any]]:
    return [{"name": n, "in": "query", "schema": _PARAMETER_TYPES[n]} for n in names]


_PARAMETER_TYPES: dict[str, dict[str, Any]] = {
    **{n: {"type": "string"} for n in ("labelSelector", "fieldSelector", "continue",
       "resourceVersion", "dryRun", "fieldManager", "fieldValidation", "propagationPolicy")},
    **{n: {"type": "integer"} for n in ("limit", "timeoutSeconds", "gracePeriodSeconds")},
    **{n: {"type": "boolean"} for n in ("watch", "allowWatchBookmarks", "force",
       "orphanDependents")},
}  # fmt: skip
_LIST = _query(
    "labelSelector", "fieldSelector", "limit", "continue", "resourceVersion", "watch",
    "allowWatchBookmarks", "timeoutSeconds",
)  # fmt: skip
_WRITE = _query("dryRun", "fieldManager", "fieldValidation")
_DELETE = _query("dryRun", "gracePeriodSeconds", "propagationPolicy", "orphanDependents")
_PATH_PARAMETERS = {
    name: {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
    for name in ("namespace", "name")
}


def _operation(
    action: str, gvk: dict[str, str], parameters: list[dict[str, Any]], response: str | None
) -> dict[str, Any]:
    ok: dict[str, Any] = {"description": "OK"}
    if response is not None:
        ok["content"] = {negotiation.JSON: {"schema": _ref(response)}}
    return {
        "operationId": f"{action}{gvk['kind']}",
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": gvk,
        "parameters": parameters,
        "responses": {"200": ok},
    }


def _paths(
    info: registry.ResourceInfo, version: str, kind_schema: str
) -> dict[str, dict[str, Any]]:
    prefix = f"/apis/{info.group}/{version}" if info.group else f"/api/{version}"
    gvk = {"group": info.group, "kind": info.kind, "version": version}
    scope = "/namespaces/{namespace}" if info.namespaced else ""
    collection = f"{prefix}{scope}/{info.plural}"
    in_scope = [_PATH_PARAMETERS["namespace"]] if info.namespaced else []
    paths = {
        collection: {
            "parameters": in_scope,
            "get": _operation("list", gvk, _LIST, None),
            "post": _operation("post", gvk, _WRITE, kind_schema),
            **(
                {"delete": _operation("deletecollection", gvk, _DELETE + _LIST, None)}
                if "deletecollection" in discovery.verbs(info)
                else {}
            ),
        },
        f"{collection}/{{name}}": {
            "parameters": [*in_scope, _PATH_PARAMETERS["name"]],
            "get": _operation("get", gvk, [], kind_schema),
            "put": _operation("put", gvk, _WRITE, kind_schema),
            "patch": _operation("patch", gvk, [*_WRITE, *_query("force")], kind_schema),
            "delete": _operation("delete", gvk, _DELETE, kind_schema),
        },
    }
    if info.namespaced:
        paths[f"{prefix}/{info.plural}"] = {"get": _operation("list", gvk, _LIST, None)}
    for sub in info.subresources:
        if sub not in options.SUBRESOURCES:
            continue
        sub_group, sub_version, sub_kind = discovery.subresource_kind(info, sub, version)
        sub_gvk = {"group": sub_group, "kind": sub_kind, "version": sub_version}
        own = sub_kind == info.kind
        item: dict[str, Any] = {"parameters": [*in_scope, _PATH_PARAMETERS["name"]]}
        verbs = discovery.SUBRESOURCE_VERBS[sub]
        if "create" in verbs:
            item["post"] = _operation("post", sub_gvk, _WRITE, None)
        elif verbs == ["get"]:  # pods/log: text
            item["get"] = _operation("get", sub_gvk, [], None)
        else:
            item["get"] = _operation("get", sub_gvk, [], kind_schema if own else None)
            item["put"] = _operation("put", sub_gvk, _WRITE, kind_schema if own else None)
            item["patch"] = _operation(
                "patch", sub_gvk, [*_WRITE, *_query("force")], kind_schema if own else None
            )
        paths[f"{collection}/{{name}}/{sub}"] = item
    return paths


# -- documents --------------------------------------------------------------------------


def _document_path(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


@functools.cache
def documents(config: RuntimeConfig) -> dict[str, bytes]:
    """One document per served group-version, by its path under `/openapi/v3/`."""
    out = {}
    for group, version in discovery.group_versions(config):
        components = _Components(_renamed(group, version))
        paths: dict[str, Any] = {}
        for served in discovery.served(config):
            if (served.group, served.version) == (group, version):
                info = served.info
                paths.update(_paths(info, version, components.add_kind(info, version)))
        out[_document_path(group, version)] = msgspec.json.encode(
            {
                "openapi": "3.0.0",
                "info": {"title": "Kubernetes", "version": GIT_VERSION},
                "paths": paths,
                "components": {"schemas": dict(sorted(components.schemas.items()))},
            }
        )
    return out


def _renamed(group: str, version: str) -> dict[str, str]:
    """The packages whose types a served version's document names after itself: its
    group's stored version's, and its own (`io.k8s.api.resource.v1` in v1beta2)."""
    stored = {info.version for info in registry.RESOURCES if info.group == group}
    base = f"io.k8s.api.{group.split('.')[0]}"
    return {f"{base}.{v}": f"{base}.{version}" for v in stored if v != version}


@functools.cache
def index(config: RuntimeConfig) -> bytes:
    """`/openapi/v3`: where each group-version's document is, with a hash of its content
    so that clients may cache it for good."""
    paths = {
        path: {
            "serverRelativeURL": f"/openapi/v3/{path}?hash="
            + hashlib.sha256(body).hexdigest().upper()
        }
        for path, body in documents(config).items()
    }
    return msgspec.json.encode({"paths": paths})


async def serve_index(request: web.Request) -> web.Response:
    return web.Response(body=index(request.app[keys.RUNTIME_CONFIG]), content_type=negotiation.JSON)


async def serve_document(request: web.Request) -> web.Response:
    config = request.app[keys.RUNTIME_CONFIG]
    body = documents(config).get(request.match_info["path"].strip("/"))
    if body is None:
        raise options.not_found()
    return web.Response(body=body, content_type=negotiation.JSON)


def _forget() -> None:
    """Custom resources came or went: the documents are stale."""
    documents.cache_clear()
    index.cache_clear()


registry.on_change(_forget)
