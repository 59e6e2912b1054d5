"""core/v1 ("v1"): Namespace, Node, Pod, Binding, Event, ResourceQuota and their parts.

Only the fields drasim reads or writes are typed; the others real manifests carry (volumes,
probes, lifecycle hooks, security contexts, DNS settings, ...) are kept as raw JSON so they
survive a round trip and `kubectl apply` finds them stored.
"""

from __future__ import annotations

from typing import Any, ClassVar

import msgspec

from drasim.common.api.meta_v1 import KubeObject, KubeStruct, ObjectMeta
from drasim.common.quantity import Quantity

__all__ = [
    "Affinity",
    "Binding",
    "Container",
    "ContainerExtendedResourceRequest",
    "ContainerPort",
    "ContainerResourceClaim",
    "ContainerState",
    "ContainerStateRunning",
    "ContainerStateTerminated",
    "ContainerStateWaiting",
    "ContainerStatus",
    "EnvVar",
    "EphemeralContainer",
    "Event",
    "EventSource",
    "HostIP",
    "Namespace",
    "NamespaceSpec",
    "NamespaceStatus",
    "Node",
    "NodeAddress",
    "NodeAffinity",
    "NodeCondition",
    "NodeSelector",
    "NodeSelectorRequirement",
    "NodeSelectorTerm",
    "NodeSpec",
    "NodeStatus",
    "NodeSystemInfo",
    "ObjectReference",
    "Pod",
    "PodCondition",
    "PodExtendedResourceClaimStatus",
    "PodIP",
    "PodResourceClaim",
    "PodResourceClaimStatus",
    "PodSchedulingGate",
    "PodSpec",
    "PodStatus",
    "PodTemplateSpec",
    "PreferredSchedulingTerm",
    "ResourceHealth",
    "ResourceQuota",
    "ResourceQuotaSpec",
    "ResourceQuotaStatus",
    "ScopeSelector",
    "ScopedResourceSelectorRequirement",
    "ResourceList",
    "ResourceRequirements",
    "ResourceStatus",
    "Taint",
    "Toleration",
    "POD_PHASES",
]

# `v1.PodPhase`'s values.
POD_PHASES = ["Pending", "Running", "Succeeded", "Failed", "Unknown"]

ResourceList = dict[str, Quantity]
"""Resource name → quantity (`v1.ResourceList`), e.g. `{"cpu": 500m, "example.com/gpu": 1}`."""


class ObjectReference(KubeStruct):
    kind: str = ""
    namespace: str = ""
    name: str = ""
    uid: str = ""
    api_version: str = ""
    resource_version: str = ""
    field_path: str = ""


# --- Namespace ---------------------------------------------------------------------------


class NamespaceSpec(KubeStruct):
    finalizers: list[str] = []


class NamespaceStatus(KubeStruct):
    phase: str = ""  # Active, Terminating
    conditions: list[dict[str, Any]] = []


class Namespace(KubeObject):
    API_VERSION: ClassVar[str] = "v1"
    KIND: ClassVar[str] = "Namespace"

    spec: NamespaceSpec = msgspec.field(default_factory=NamespaceSpec)
    status: NamespaceStatus = msgspec.field(default_factory=NamespaceStatus)


# --- Node selection (shared by Node, Pod and resource.k8s.io) ------------------------------


class NodeSelectorRequirement(KubeStruct):
    key: str = ""
    operator: str = ""  # In, NotIn, Exists, DoesNotExist, Gt, Lt
    values: list[str] = []


class NodeSelectorTerm(KubeStruct):
    """Requirements ANDed; `matchFields` may only use `metadata.name`."""

    match_expressions: list[NodeSelectorRequirement] = []
    match_fields: list[NodeSelectorRequirement] = []


class NodeSelector(KubeStruct):
    """Terms ORed."""

    node_selector_terms: list[NodeSelectorTerm] = []


class PreferredSchedulingTerm(KubeStruct):
    weight: int = 0
    preference: NodeSelectorTerm = msgspec.field(default_factory=NodeSelectorTerm)


class NodeAffinity(KubeStruct):
    required_during_scheduling_ignored_during_execution: NodeSelector | None = None
    preferred_during_scheduling_ignored_during_execution: list[PreferredSchedulingTerm] = []


class Affinity(KubeStruct):
    node_affinity: NodeAffinity | None = None
    pod_affinity: dict[str, Any] | None = None
    pod_anti_affinity: dict[str, Any] | None = None


class Taint(KubeStruct):
    key: str = ""
    value: str = ""
    effect: str = ""  # NoSchedule, PreferNoSchedule, NoExecute
    time_added: str | None = None


class Toleration(KubeStruct):
    key: str = ""
    operator: str = ""  # Exists, Equal (the default)
    value: str = ""
    effect: str = ""
    toleration_seconds: int | None = None


# --- Node --------------------------------------------------------------------------------


class NodeSpec(KubeStruct):
    pod_cidr: str = msgspec.field(default="", name="podCIDR")
    pod_cidrs: list[str] = msgspec.field(default_factory=list, name="podCIDRs")
    provider_id: str = msgspec.field(default="", name="providerID")
    unschedulable: bool = False
    taints: list[Taint] = []


class NodeCondition(KubeStruct):
    type: str = ""  # Ready, MemoryPressure, DiskPressure, PIDPressure, NetworkUnavailable
    status: str = ""  # True, False, Unknown
    last_heartbeat_time: str | None = None
    last_transition_time: str | None = None
    reason: str = ""
    message: str = ""


class NodeAddress(KubeStruct):
    type: str = ""  # Hostname, InternalIP, ExternalIP, ...
    address: str = ""


class NodeSystemInfo(KubeStruct):
    machine_id: str = msgspec.field(default="", name="machineID")
    system_uuid: str = msgspec.field(default="", name="systemUUID")
    boot_id: str = msgspec.field(default="", name="bootID")
    kernel_version: str = ""
    os_image: str = ""
    container_runtime_version: str = ""
    kubelet_version: str = ""
    kube_proxy_version: str = ""
    operating_system: str = ""
    architecture: str = ""


class NodeStatus(KubeStruct):
    capacity: ResourceList = {}
    allocatable: ResourceList = {}
    phase: str = ""
    conditions: list[NodeCondition] = []
    addresses: list[NodeAddress] = []
    node_info: NodeSystemInfo = msgspec.field(default_factory=NodeSystemInfo)


class Node(KubeObject):
    API_VERSION: ClassVar[str] = "v1"
    KIND: ClassVar[str] = "Node"

    spec: NodeSpec = msgspec.field(default_factory=NodeSpec)
    status: NodeStatus = msgspec.field(default_factory=NodeStatus)


# --- Pod spec ----------------------------------------------------------------------------


class ContainerResourceClaim(KubeStruct):
    """core/v1 `ResourceClaim`: a container's use of a pod-level claim (`resources.claims`).

    Named apart from resource.k8s.io's ResourceClaim, which is a different kind.
    """

    name: str = ""
    request: str = ""


class ResourceRequirements(KubeStruct):
    limits: ResourceList = {}
    requests: ResourceList = {}
    claims: list[ContainerResourceClaim] = []


class ContainerPort(KubeStruct):
    name: str = ""
    host_port: int = 0
    container_port: int = 0
    protocol: str = ""
    host_ip: str = msgspec.field(default="", name="hostIP")


class EnvVar(KubeStruct):
    name: str = ""
    value: str = ""
    value_from: dict[str, Any] | None = None


class Container(KubeStruct):
    name: str = ""
    image: str = ""
    command: list[str] = []
    args: list[str] = []
    working_dir: str = ""
    ports: list[ContainerPort] = []
    env_from: list[dict[str, Any]] = []
    env: list[EnvVar] = []
    resources: ResourceRequirements = msgspec.field(default_factory=ResourceRequirements)
    # Only for init containers: "Always" makes it a sidecar (restartable init container).
    restart_policy: str | None = None
    volume_mounts: list[dict[str, Any]] = []
    liveness_probe: dict[str, Any] | None = None
    readiness_probe: dict[str, Any] | None = None
    startup_probe: dict[str, Any] | None = None
    termination_message_path: str = ""
    termination_message_policy: str = ""
    image_pull_policy: str = ""
    security_context: dict[str, Any] | None = None
    lifecycle: dict[str, Any] | None = None
    volume_devices: list[dict[str, Any]] = []
    resize_policy: list[dict[str, Any]] = []
    stdin: bool = False
    stdin_once: bool = False
    tty: bool = False


class EphemeralContainer(Container):
    """A debugging container added to a running pod; never gets devices (upstream
    `validateEphemeralContainers` forbids its resources)."""

    target_container_name: str = ""


class PodResourceClaim(KubeStruct):
    """A pod-level claim: an existing ResourceClaim or one made from a template."""

    name: str = ""
    resource_claim_name: str | None = None
    resource_claim_template_name: str | None = None


class PodSchedulingGate(KubeStruct):
    """A gate that keeps the pod from being scheduled until it is removed."""

    name: str = ""


class PodSpec(KubeStruct):
    volumes: list[dict[str, Any]] = []
    init_containers: list[Container] = []
    containers: list[Container] = []
    ephemeral_containers: list[EphemeralContainer] = []
    restart_policy: str = ""  # Always, OnFailure, Never
    termination_grace_period_seconds: int | None = None
    active_deadline_seconds: int | None = None
    dns_policy: str = ""
    node_selector: dict[str, str] = {}
    service_account_name: str = ""
    service_account: str = ""  # deprecated alias of serviceAccountName, kept equal to it
    automount_service_account_token: bool | None = None
    node_name: str = ""
    host_network: bool = False
    host_pid: bool = msgspec.field(default=False, name="hostPID")
    host_ipc: bool = msgspec.field(default=False, name="hostIPC")
    share_process_namespace: bool | None = None
    host_users: bool | None = None
    security_context: dict[str, Any] | None = None
    image_pull_secrets: list[dict[str, Any]] = []
    hostname: str = ""
    subdomain: str = ""
    set_hostname_as_fqdn: bool | None = msgspec.field(default=None, name="setHostnameAsFQDN")
    host_aliases: list[dict[str, Any]] = []
    dns_config: dict[str, Any] | None = None
    readiness_gates: list[dict[str, Any]] = []
    runtime_class_name: str | None = None
    enable_service_links: bool | None = None
    topology_spread_constraints: list[dict[str, Any]] = []
    os: dict[str, Any] | None = None
    affinity: Affinity | None = None
    scheduler_name: str = ""
    tolerations: list[Toleration] = []
    priority_class_name: str = ""
    priority: int | None = None
    preemption_policy: str | None = None  # set by the Priority admission, from the class
    overhead: ResourceList = {}
    scheduling_gates: list[PodSchedulingGate] = []
    resource_claims: list[PodResourceClaim] = []

    def all_containers(self) -> list[Container]:
        """Init containers then regular ones: the combined list whose positions name the
        special claim's requests (upstream `createRequestsAndMappings`)."""
        return [*self.init_containers, *self.containers]


class PodTemplateSpec(KubeStruct):
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: PodSpec = msgspec.field(default_factory=PodSpec)


# --- Pod status --------------------------------------------------------------------------


class PodCondition(KubeStruct):
    type: str = ""  # PodScheduled, Initialized, ContainersReady, Ready, ...
    status: str = ""
    observed_generation: int = 0
    last_probe_time: str | None = None
    last_transition_time: str | None = None
    reason: str = ""
    message: str = ""


class ContainerStateWaiting(KubeStruct):
    reason: str = ""
    message: str = ""


class ContainerStateRunning(KubeStruct):
    started_at: str | None = None


class _Unwritten(int):
    """The default of a field upstream always writes (no `omitempty`): `exitCode`,
    `restartCount`, `ready`. msgspec leaves out a value that *is* its field's default, so
    such a field is written whenever someone set it, 0 and false included, and left out only
    where nobody did (as in a status written by a client that did not say)."""

    def __repr__(self) -> str:
        return "0"


UNWRITTEN = _Unwritten(0)


class ContainerStateTerminated(KubeStruct):
    exit_code: int = UNWRITTEN
    signal: int = 0
    reason: str = ""
    message: str = ""
    started_at: str | None = None
    finished_at: str | None = None
    container_id: str = msgspec.field(default="", name="containerID")


class ContainerState(KubeStruct):
    """At most one of the three is set."""

    waiting: ContainerStateWaiting | None = None
    running: ContainerStateRunning | None = None
    terminated: ContainerStateTerminated | None = None


class ResourceHealth(KubeStruct):
    resource_id: str = msgspec.field(default="", name="resourceID")
    health: str = ""  # Healthy, Unhealthy, Unknown


class ResourceStatus(KubeStruct):
    """Health of one resource's devices; DRA-backed names are `claim:<claim>/<request>`."""

    name: str = ""
    resources: list[ResourceHealth] = []


class ContainerStatus(KubeStruct):
    name: str = ""
    state: ContainerState = msgspec.field(default_factory=ContainerState)
    last_state: ContainerState = msgspec.field(default_factory=ContainerState)
    ready: bool = UNWRITTEN  # type: ignore[assignment]  # false-like, see _Unwritten
    restart_count: int = UNWRITTEN
    image: str = ""
    image_id: str = msgspec.field(default="", name="imageID")
    container_id: str = msgspec.field(default="", name="containerID")
    started: bool | None = None
    allocated_resources: ResourceList = {}
    allocated_resources_status: list[ResourceStatus] = []


class PodResourceClaimStatus(KubeStruct):
    name: str = ""
    resource_claim_name: str | None = None


class ContainerExtendedResourceRequest(KubeStruct):
    """Which device request of the special claim serves a container's extended resource."""

    container_name: str = ""
    resource_name: str = ""
    request_name: str = ""


class PodExtendedResourceClaimStatus(KubeStruct):
    """`status.extendedResourceClaimStatus`, written by the scheduler (upstream
    `PodExtendedResourceClaimStatus`, `staging/src/k8s.io/api/core/v1/types.go`)."""

    request_mappings: list[ContainerExtendedResourceRequest] = []
    resource_claim_name: str = ""


class HostIP(KubeStruct):
    ip: str = ""


class PodIP(KubeStruct):
    ip: str = ""


class PodStatus(KubeStruct):
    phase: str = ""  # Pending, Running, Succeeded, Failed, Unknown
    conditions: list[PodCondition] = []
    message: str = ""
    reason: str = ""
    nominated_node_name: str = ""
    host_ip: str = msgspec.field(default="", name="hostIP")
    host_ips: list[HostIP] = msgspec.field(default_factory=list, name="hostIPs")
    pod_ip: str = msgspec.field(default="", name="podIP")
    pod_ips: list[PodIP] = msgspec.field(default_factory=list, name="podIPs")
    start_time: str | None = None
    init_container_statuses: list[ContainerStatus] = []
    container_statuses: list[ContainerStatus] = []
    ephemeral_container_statuses: list[ContainerStatus] = []
    qos_class: str = ""
    resource_claim_statuses: list[PodResourceClaimStatus] = []
    extended_resource_claim_status: PodExtendedResourceClaimStatus | None = None


class Pod(KubeObject):
    API_VERSION: ClassVar[str] = "v1"
    KIND: ClassVar[str] = "Pod"

    spec: PodSpec = msgspec.field(default_factory=PodSpec)
    status: PodStatus = msgspec.field(default_factory=PodStatus)


class Binding(KubeObject):
    """The body of `pods/binding`: binds the pod named in metadata to `target` (a Node)."""

    API_VERSION: ClassVar[str] = "v1"
    KIND: ClassVar[str] = "Binding"

    target: ObjectReference = msgspec.field(default_factory=ObjectReference)


# --- Event -------------------------------------------------------------------------------


class EventSource(KubeStruct):
    component: str = ""
    host: str = ""


class EventSeries(KubeStruct):
    """A repeated occurrence as events.k8s.io records it (instead of `count`)."""

    count: int = 0
    last_observed_time: str | None = None


class Event(KubeObject):
    API_VERSION: ClassVar[str] = "v1"
    KIND: ClassVar[str] = "Event"

    involved_object: ObjectReference = msgspec.field(default_factory=ObjectReference)
    reason: str = ""
    message: str = ""
    source: EventSource = msgspec.field(default_factory=EventSource)
    first_timestamp: str | None = None
    last_timestamp: str | None = None
    count: int = 0
    type: str = ""  # Normal, Warning
    event_time: str | None = None
    series: EventSeries | None = None
    action: str = ""
    related: ObjectReference | None = None
    reporting_component: str = ""
    reporting_instance: str = ""


# --- ResourceQuota -----------------------------------------------------------------------


class ScopedResourceSelectorRequirement(KubeStruct):
    """One term of a quota's scope selector: a scope (`PriorityClass`, `BestEffort`, ...),
    an operator (`In`, `NotIn`, `Exists`, `DoesNotExist`) and, for In/NotIn, values."""

    scope_name: str = ""
    operator: str = ""
    values: list[str] = []


class ScopeSelector(KubeStruct):
    match_expressions: list[ScopedResourceSelectorRequirement] = []


class ResourceQuotaSpec(KubeStruct):
    hard: ResourceList = {}
    scopes: list[str] = []
    scope_selector: ScopeSelector | None = None


class ResourceQuotaStatus(KubeStruct):
    hard: ResourceList = {}
    used: ResourceList = {}


class ResourceQuota(KubeObject):
    API_VERSION: ClassVar[str] = "v1"
    KIND: ClassVar[str] = "ResourceQuota"

    spec: ResourceQuotaSpec = msgspec.field(default_factory=ResourceQuotaSpec)
    status: ResourceQuotaStatus = msgspec.field(default_factory=ResourceQuotaStatus)
