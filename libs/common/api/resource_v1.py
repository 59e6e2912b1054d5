"""resource.k8s.io/v1: DeviceClass, ResourceSlice, ResourceClaim, ResourceClaimTemplate."""

from __future__ import annotations

from typing import Any, ClassVar

import msgspec

from drasim.common.api.core_v1 import NodeSelector
from drasim.common.api.meta_v1 import Condition, KubeObject, KubeStruct, ObjectMeta, OwnerReference
from drasim.common.quantity import Quantity

__all__ = [
    "ALLOCATION_MODE_ALL",
    "ALLOCATION_MODE_EXACT_COUNT",
    "ALLOCATION_MODES",
    "ALLOCATION_RESULTS_MAX_SIZE",
    "ATTRIBUTES_AND_CAPACITIES_MAX_PER_DEVICE",
    "AllocatedDeviceStatus",
    "AllocationResult",
    "CELDeviceSelector",
    "CAPACITY_REQUEST_POLICY_DISCRETE_MAX_OPTIONS",
    "CapacityRequestPolicy",
    "CapacityRequestPolicyRange",
    "CapacityRequirements",
    "DELETE_PROTECTION_FINALIZER",
    "DEVICE_ATTRIBUTE_MAX_VALUE_LENGTH",
    "DEVICE_CONFIG_MAX_SIZE",
    "DEVICE_MAX_DOMAIN_LENGTH",
    "DEVICE_MAX_ID_LENGTH",
    "DEVICE_REQUESTS_MAX_SIZE",
    "DEVICE_TAINT_EFFECTS",
    "DEVICE_TAINT_EFFECT_NONE",
    "DEVICE_TAINT_EFFECT_NO_EXECUTE",
    "DEVICE_TAINT_EFFECT_NO_SCHEDULE",
    "DEVICE_TAINTS_MAX_LENGTH",
    "DEVICE_TAINT_RULE_STATUS_MAX_CONDITIONS",
    "DRA_ADMIN_NAMESPACE_LABEL_KEY",
    "DRIVER_NAME_MAX_LENGTH",
    "Counter",
    "CounterSet",
    "Device",
    "DeviceAllocationConfiguration",
    "DeviceAllocationResult",
    "DeviceAttribute",
    "DeviceCapacity",
    "DeviceClaim",
    "DeviceClaimConfiguration",
    "DeviceClass",
    "DeviceClassConfiguration",
    "DeviceClassSpec",
    "DeviceConstraint",
    "DeviceCounterConsumption",
    "DeviceRequest",
    "DeviceRequestAllocationResult",
    "DeviceSelector",
    "DeviceSubRequest",
    "DeviceTaint",
    "DeviceTaintRule",
    "DeviceTaintRuleSpec",
    "DeviceTaintRuleStatus",
    "DeviceTaintSelector",
    "DeviceToleration",
    "EXTENDED_RESOURCE_CLAIM_ANNOTATION",
    "EXTENDED_RESOURCE_CLAIM_ANNOTATION_VALUE",
    "ExactDeviceRequest",
    "FIRST_AVAILABLE_MAX_SIZE",
    "OpaqueDeviceConfiguration",
    "POD_CLAIM_NAME_ANNOTATION",
    "POOL_NAME_MAX_LENGTH",
    "RESERVED_FOR_MAX_SIZE",
    "RESOURCE_SLICE_MAX_COUNTERS_PER_COUNTER_SET",
    "RESOURCE_SLICE_MAX_COUNTERS_PER_DEVICE_COUNTER_CONSUMPTION",
    "RESOURCE_SLICE_MAX_COUNTER_SETS",
    "RESOURCE_SLICE_MAX_DEVICES",
    "RESOURCE_SLICE_MAX_DEVICES_WITH_ADVANCED_FEATURES",
    "RESOURCE_SLICE_MAX_DEVICE_COUNTER_CONSUMPTIONS_PER_DEVICE",
    "NetworkDeviceData",
    "ResourceClaim",
    "ResourceClaimConsumerReference",
    "ResourceClaimSpec",
    "ResourceClaimStatus",
    "ResourceClaimTemplate",
    "ResourceClaimTemplateSpec",
    "ResourcePool",
    "ResourceSlice",
    "ResourceSliceSpec",
    "SELECTORS_MAX_SIZE",
    "pod_controller_ref",
]

GROUP_VERSION = "resource.k8s.io/v1"
ALLOCATION_MODE_EXACT_COUNT = "ExactCount"
ALLOCATION_MODE_ALL = "All"
ALLOCATION_MODES = [ALLOCATION_MODE_ALL, ALLOCATION_MODE_EXACT_COUNT]
# A device taint's effects (`None`: informational only); consumers ignore any other.
DEVICE_TAINT_EFFECT_NONE = "None"
DEVICE_TAINT_EFFECT_NO_SCHEDULE = "NoSchedule"
DEVICE_TAINT_EFFECT_NO_EXECUTE = "NoExecute"
DEVICE_TAINT_EFFECTS = ["NoExecute", "NoSchedule", "None"]
DEVICE_TAINTS_MAX_LENGTH = 16  # per device
DEVICE_TAINT_RULE_STATUS_MAX_CONDITIONS = 8
# The namespace label that lets claims there ask for `adminAccess` (upstream
# `DRAAdminNamespaceLabelKey`).
DRA_ADMIN_NAMESPACE_LABEL_KEY = "resource.kubernetes.io/admin-access"

# The API's limits (upstream's `pkg/apis/resource/types.go`: `DriverNameMaxLength`,
# `PoolNameMaxLength`, `DeviceRequestsMaxSize`, ...), which validation enforces.
DRIVER_NAME_MAX_LENGTH = 63
POOL_NAME_MAX_LENGTH = 253
DEVICE_MAX_DOMAIN_LENGTH = 63  # the domain of an attribute or capacity name
DEVICE_MAX_ID_LENGTH = 32  # the identifier of an attribute or capacity name
DEVICE_REQUESTS_MAX_SIZE = 32  # also constraints and configs per claim
FIRST_AVAILABLE_MAX_SIZE = 8
SELECTORS_MAX_SIZE = 32
DEVICE_CONFIG_MAX_SIZE = 32
ALLOCATION_RESULTS_MAX_SIZE = 32
RESERVED_FOR_MAX_SIZE = 256
RESOURCE_SLICE_MAX_DEVICES = 128
# With taints, counters or other advanced features, fewer devices fit in one slice.
RESOURCE_SLICE_MAX_DEVICES_WITH_ADVANCED_FEATURES = 64
RESOURCE_SLICE_MAX_COUNTER_SETS = 8
RESOURCE_SLICE_MAX_COUNTERS_PER_COUNTER_SET = 32
RESOURCE_SLICE_MAX_DEVICE_COUNTER_CONSUMPTIONS_PER_DEVICE = 2
RESOURCE_SLICE_MAX_COUNTERS_PER_DEVICE_COUNTER_CONSUMPTION = 32
CAPACITY_REQUEST_POLICY_DISCRETE_MAX_OPTIONS = 10
ATTRIBUTES_AND_CAPACITIES_MAX_PER_DEVICE = 32
DEVICE_ATTRIBUTE_MAX_VALUE_LENGTH = 64

# Marks a claim as the scheduler's special claim for extended resources backed by DRA
# (upstream `ExtendedResourceClaimAnnotation`, `staging/src/k8s.io/api/resource/v1/types.go`;
# its value is "true", where KEP-5004's "Resource Claim API" section had the pod name).
EXTENDED_RESOURCE_CLAIM_ANNOTATION = "resource.kubernetes.io/extended-resource-claim"
EXTENDED_RESOURCE_CLAIM_ANNOTATION_VALUE = "true"
# On claims made from a template: the `pod.spec.resourceClaims[].name` it was made for.
POD_CLAIM_NAME_ANNOTATION = "resource.kubernetes.io/pod-claim-name"
# `resourceapi.Finalizer`: set by whoever allocates; the claim controller removes it once
# the claim is deallocated (upstream `syncClaim`, `pkg/controller/resourceclaim/controller.go`).
DELETE_PROTECTION_FINALIZER = "resource.kubernetes.io/delete-protection"


# --- Shared parts ------------------------------------------------------------------------


class CELDeviceSelector(KubeStruct):
    expression: str = ""


class DeviceSelector(KubeStruct):
    cel: CELDeviceSelector | None = None


class OpaqueDeviceConfiguration(KubeStruct):
    """Driver-specific parameters, passed through unchanged (a `runtime.RawExtension`)."""

    driver: str = ""
    parameters: Any = None


class DeviceToleration(KubeStruct):
    key: str = ""
    operator: str = ""  # Exists, Equal (the default)
    value: str = ""
    effect: str = ""  # NoSchedule, NoExecute
    toleration_seconds: int | None = None


# --- DeviceClass -------------------------------------------------------------------------


class DeviceClassConfiguration(KubeStruct):
    opaque: OpaqueDeviceConfiguration | None = None


class DeviceClassSpec(KubeStruct):
    selectors: list[DeviceSelector] = []
    config: list[DeviceClassConfiguration] = []
    # KEP-5004: pods may request devices of this class under this extended resource name.
    extended_resource_name: str | None = None


class DeviceClass(KubeObject):
    API_VERSION: ClassVar[str] = GROUP_VERSION
    KIND: ClassVar[str] = "DeviceClass"

    spec: DeviceClassSpec = msgspec.field(default_factory=DeviceClassSpec)


# --- ResourceSlice -----------------------------------------------------------------------


class ResourcePool(KubeStruct):
    name: str = ""
    generation: int = 0
    resource_slice_count: int = 0


class DeviceAttribute(KubeStruct):
    """Exactly one of the four values is set."""

    int_value: int | None = msgspec.field(default=None, name="int")
    bool_value: bool | None = msgspec.field(default=None, name="bool")
    string_value: str | None = msgspec.field(default=None, name="string")
    version_value: str | None = msgspec.field(default=None, name="version")  # semver

    @property
    def value(self) -> int | bool | str | None:
        """Whichever value is set (a version is returned as its string)."""
        for v in (self.int_value, self.bool_value, self.string_value, self.version_value):
            if v is not None:
                return v
        return None


class CapacityRequestPolicyRange(KubeStruct):
    """Requests are rounded up to `min + k*step` (KEP-5075)."""

    min: Quantity | None = None
    max: Quantity | None = None
    step: Quantity | None = None


class CapacityRequestPolicy(KubeStruct):
    """How much of a multi-allocatable device's capacity one allocation consumes: `default`
    when the request names none, else the request rounded up to a valid value or range."""

    default: Quantity | None = None
    valid_values: list[Quantity] = []
    valid_range: CapacityRequestPolicyRange | None = None


class DeviceCapacity(KubeStruct):
    value: Quantity = msgspec.field(default_factory=Quantity)
    request_policy: CapacityRequestPolicy | None = None


class Counter(KubeStruct):
    value: Quantity = msgspec.field(default_factory=Quantity)


class CounterSet(KubeStruct):
    name: str = ""
    counters: dict[str, Counter] = {}


class DeviceCounterConsumption(KubeStruct):
    counter_set: str = ""
    counters: dict[str, Counter] = {}


class DeviceTaint(KubeStruct):
    key: str = ""
    value: str = ""
    effect: str = ""  # NoSchedule, NoExecute
    time_added: str | None = None


class Device(KubeStruct):
    """One device; node placement fields are only set with `perDeviceNodeSelection`."""

    name: str = ""
    attributes: dict[str, DeviceAttribute] = {}
    capacity: dict[str, DeviceCapacity] = {}
    consumes_counters: list[DeviceCounterConsumption] = []
    node_name: str | None = None
    node_selector: NodeSelector | None = None
    all_nodes: bool | None = None
    taints: list[DeviceTaint] = []
    binds_to_node: bool | None = None
    binding_conditions: list[str] = []
    binding_failure_conditions: list[str] = []
    allow_multiple_allocations: bool | None = None


class ResourceSliceSpec(KubeStruct):
    """Exactly one of nodeName, nodeSelector, allNodes, perDeviceNodeSelection is set."""

    driver: str = ""
    pool: ResourcePool = msgspec.field(default_factory=ResourcePool)
    node_name: str | None = None
    node_selector: NodeSelector | None = None
    all_nodes: bool | None = None
    devices: list[Device] = []
    per_device_node_selection: bool | None = None
    shared_counters: list[CounterSet] = []


class ResourceSlice(KubeObject):
    API_VERSION: ClassVar[str] = GROUP_VERSION
    KIND: ClassVar[str] = "ResourceSlice"

    spec: ResourceSliceSpec = msgspec.field(default_factory=ResourceSliceSpec)


# --- ResourceClaim -----------------------------------------------------------------------


class CapacityRequirements(KubeStruct):
    requests: dict[str, Quantity] = {}


class ExactDeviceRequest(KubeStruct):
    device_class_name: str = ""
    selectors: list[DeviceSelector] = []
    allocation_mode: str = ""  # ExactCount (the default) or All
    count: int = 0  # with ExactCount, 0 (absent) is defaulted to 1
    admin_access: bool | None = None
    tolerations: list[DeviceToleration] = []
    capacity: CapacityRequirements | None = None


class DeviceSubRequest(KubeStruct):
    """One alternative of `firstAvailable`; the first that can be allocated is used."""

    name: str = ""
    device_class_name: str = ""
    selectors: list[DeviceSelector] = []
    allocation_mode: str = ""
    count: int = 0
    tolerations: list[DeviceToleration] = []
    capacity: CapacityRequirements | None = None


class DeviceRequest(KubeStruct):
    """Exactly one of `exactly` and `firstAvailable` is set."""

    name: str = ""
    exactly: ExactDeviceRequest | None = None
    first_available: list[DeviceSubRequest] = []


class DeviceConstraint(KubeStruct):
    requests: list[str] = []
    match_attribute: str | None = None
    distinct_attribute: str | None = None


class DeviceClaimConfiguration(KubeStruct):
    requests: list[str] = []
    opaque: OpaqueDeviceConfiguration | None = None


class DeviceClaim(KubeStruct):
    requests: list[DeviceRequest] = []
    constraints: list[DeviceConstraint] = []
    config: list[DeviceClaimConfiguration] = []


class ResourceClaimSpec(KubeStruct):
    devices: DeviceClaim = msgspec.field(default_factory=DeviceClaim)


class DeviceRequestAllocationResult(KubeStruct):
    request: str = ""  # "<request>" or "<request>/<subrequest>"
    driver: str = ""
    pool: str = ""
    device: str = ""
    admin_access: bool | None = None
    tolerations: list[DeviceToleration] = []
    binding_conditions: list[str] = []
    binding_failure_conditions: list[str] = []
    share_id: str | None = msgspec.field(default=None, name="shareID")
    consumed_capacity: dict[str, Quantity] = {}


class DeviceAllocationConfiguration(KubeStruct):
    source: str = ""  # FromClass, FromClaim
    requests: list[str] = []
    opaque: OpaqueDeviceConfiguration | None = None


class DeviceAllocationResult(KubeStruct):
    results: list[DeviceRequestAllocationResult] = []
    config: list[DeviceAllocationConfiguration] = []


class AllocationResult(KubeStruct):
    devices: DeviceAllocationResult = msgspec.field(default_factory=DeviceAllocationResult)
    node_selector: NodeSelector | None = None  # nodes that can reach the devices
    allocation_timestamp: str | None = None


class ResourceClaimConsumerReference(KubeStruct):
    """A consumer in `status.reservedFor`, usually a Pod (`apiGroup` "" and `resource` pods)."""

    api_group: str = ""
    resource: str = ""
    name: str = ""
    uid: str = ""


class NetworkDeviceData(KubeStruct):
    """What a network-attached device got: its interface, addresses (CIDR) and MAC."""

    interface_name: str = ""
    ips: list[str] = msgspec.field(default_factory=list, name="ips")
    hardware_address: str = ""


class AllocatedDeviceStatus(KubeStruct):
    """What the driver reports about one allocated device (KEP-4817): conditions (binding
    conditions among them), opaque data and network data."""

    driver: str = ""
    pool: str = ""
    device: str = ""
    share_id: str | None = msgspec.field(default=None, name="shareID")
    conditions: list[Condition] = []
    data: Any = None
    network_data: NetworkDeviceData | None = None


class ResourceClaimStatus(KubeStruct):
    allocation: AllocationResult | None = None
    reserved_for: list[ResourceClaimConsumerReference] = []
    devices: list[AllocatedDeviceStatus] = []


class ResourceClaim(KubeObject):
    API_VERSION: ClassVar[str] = GROUP_VERSION
    KIND: ClassVar[str] = "ResourceClaim"

    spec: ResourceClaimSpec = msgspec.field(default_factory=ResourceClaimSpec)
    status: ResourceClaimStatus = msgspec.field(default_factory=ResourceClaimStatus)


def pod_controller_ref(pod: KubeObject) -> OwnerReference:
    """The owner reference of a claim made for a pod, its special claim or a template's:
    the pod is the controller, without blockOwnerDeletion, as upstream's scheduler and
    ResourceClaim controller write it (not `metav1.NewControllerRef`)."""
    return OwnerReference(
        api_version="v1",
        kind="Pod",
        name=pod.metadata.name,
        uid=pod.metadata.uid,
        controller=True,
    )


class ResourceClaimTemplateSpec(KubeStruct):
    """The claim to create: its metadata (labels, annotations) and spec."""

    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: ResourceClaimSpec = msgspec.field(default_factory=ResourceClaimSpec)


class ResourceClaimTemplate(KubeObject):
    API_VERSION: ClassVar[str] = GROUP_VERSION
    KIND: ClassVar[str] = "ResourceClaimTemplate"

    spec: ResourceClaimTemplateSpec = msgspec.field(default_factory=ResourceClaimTemplateSpec)


# --- DeviceTaintRule ---------------------------------------------------------------------


class DeviceTaintSelector(KubeStruct):
    """Which devices a rule taints: every criterion set must match; empty matches all."""

    driver: str | None = None
    pool: str | None = None
    device: str | None = None


class DeviceTaintRuleSpec(KubeStruct):
    device_selector: DeviceTaintSelector | None = None  # unset: no device
    taint: DeviceTaint = msgspec.field(default_factory=DeviceTaint)


class DeviceTaintRuleStatus(KubeStruct):
    conditions: list[Condition] = []


class DeviceTaintRule(KubeObject):
    """A taint applied to every device the selector picks, as if its slice had it."""

    API_VERSION: ClassVar[str] = GROUP_VERSION
    KIND: ClassVar[str] = "DeviceTaintRule"

    spec: DeviceTaintRuleSpec = msgspec.field(default_factory=DeviceTaintRuleSpec)
    status: DeviceTaintRuleStatus = msgspec.field(default_factory=DeviceTaintRuleStatus)
