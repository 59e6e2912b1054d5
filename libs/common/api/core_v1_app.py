"""core/v1 kinds an application ships beside its pods: ConfigMap, Secret, ServiceAccount,
Service, Endpoints and PersistentVolumeClaim (upstream `staging/src/k8s.io/api/core/v1/
types.go`).

Apart from `core_v1` (the kinds drasim's scheduling and nodes work on) because charts and
kustomizations carry these and drasim stores them, allocating what upstream's registry
allocates (cluster IPs, node ports) and binding claims to a volume at once. Every field of
the Go types is here, so a strict `kubectl apply` of a real manifest finds none unknown;
parts drasim does not read stay raw JSON.
"""

from __future__ import annotations

from typing import Any, ClassVar

import msgspec

from drasim.common.api.core_v1 import ObjectReference, ResourceList
from drasim.common.api.meta_v1 import Condition, KubeObject, KubeStruct, LabelSelector

__all__ = [
    "ConfigMap",
    "EndpointAddress",
    "EndpointPort",
    "EndpointSubset",
    "Endpoints",
    "LoadBalancerStatus",
    "LocalObjectReference",
    "PersistentVolumeClaim",
    "PersistentVolumeClaimSpec",
    "PersistentVolumeClaimStatus",
    "Secret",
    "SECRET_TYPES",
    "Service",
    "ServiceAccount",
    "ServicePort",
    "ServiceSpec",
    "ServiceStatus",
    "VolumeResourceRequirements",
]


class ConfigMap(KubeObject):
    """ConfigMap holds configuration data for pods to consume."""

    API_VERSION: ClassVar[str] = "v1"
    KIND: ClassVar[str] = "ConfigMap"

    immutable: bool | None = None
    data: dict[str, str] = {}
    binary_data: dict[str, bytes] = {}  # base64 in JSON, as Go's []byte


# Upstream's `SecretType` values and the keys each requires in `data`.
SECRET_TYPES: dict[str, tuple[str, ...]] = {
    "Opaque": (),
    "kubernetes.io/service-account-token": (),
    "kubernetes.io/dockercfg": (".dockercfg",),
    "kubernetes.io/dockerconfigjson": (".dockerconfigjson",),
    "kubernetes.io/basic-auth": (),
    "kubernetes.io/ssh-auth": ("ssh-privatekey",),
    "kubernetes.io/tls": ("tls.crt", "tls.key"),
    "bootstrap.kubernetes.io/token": (),
}


class Secret(KubeObject):
    """Secret holds secret data of a certain type. The total bytes of the values in the Data
    field must be less than MaxSecretSize bytes."""

    API_VERSION: ClassVar[str] = "v1"
    KIND: ClassVar[str] = "Secret"

    immutable: bool | None = None
    data: dict[str, bytes] = {}
    # Write-only: merged into `data` when a body is decoded, never stored.
    string_data: dict[str, str] = {}
    type: str = ""


class LocalObjectReference(KubeStruct):
    name: str = ""


class ServiceAccount(KubeObject):
    """ServiceAccount binds together: * a name, understood by users, and perhaps by
    peripheral systems, for an identity * a principal that can be authenticated and
    authorized * a set of secrets"""

    API_VERSION: ClassVar[str] = "v1"
    KIND: ClassVar[str] = "ServiceAccount"

    secrets: list[ObjectReference] = []
    image_pull_secrets: list[LocalObjectReference] = []
    automount_service_account_token: bool | None = None


# --- Service -----------------------------------------------------------------------------

SERVICE_TYPES = ["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"]
# `clusterIP: None`: a headless service, given no address.
CLUSTER_IP_NONE = "None"


class ServicePort(KubeStruct):
    name: str = ""
    protocol: str = ""  # defaulted to TCP
    app_protocol: str | None = None
    port: int = 0
    target_port: int | str | None = None  # IntOrString, defaulted to `port`
    node_port: int = 0


class ServiceSpec(KubeStruct):
    ports: list[ServicePort] = []
    selector: dict[str, str] = {}
    cluster_ip: str = msgspec.field(default="", name="clusterIP")
    cluster_ips: list[str] = msgspec.field(default_factory=list, name="clusterIPs")
    type: str = ""
    external_ips: list[str] = msgspec.field(default_factory=list, name="externalIPs")
    session_affinity: str = ""
    load_balancer_ip: str = msgspec.field(default="", name="loadBalancerIP")
    load_balancer_source_ranges: list[str] = []
    external_name: str = ""
    external_traffic_policy: str = ""
    health_check_node_port: int = 0
    publish_not_ready_addresses: bool = False
    session_affinity_config: dict[str, Any] | None = None
    ip_families: list[str] = msgspec.field(default_factory=list, name="ipFamilies")
    ip_family_policy: str | None = msgspec.field(default=None, name="ipFamilyPolicy")
    allocate_load_balancer_node_ports: bool | None = None
    load_balancer_class: str | None = None
    internal_traffic_policy: str | None = None
    traffic_distribution: str | None = None


class LoadBalancerStatus(KubeStruct):
    ingress: list[dict[str, Any]] = []


class ServiceStatus(KubeStruct):
    load_balancer: LoadBalancerStatus = msgspec.field(default_factory=LoadBalancerStatus)
    conditions: list[Condition] = []


class Service(KubeObject):
    """Service is a named abstraction of software service (for example, mysql) consisting
    of local port (for example 3306) that the proxy listens on, and the selector that
    determines which pods will answer requests sent through the proxy."""

    API_VERSION: ClassVar[str] = "v1"
    KIND: ClassVar[str] = "Service"

    spec: ServiceSpec = msgspec.field(default_factory=ServiceSpec)
    status: ServiceStatus = msgspec.field(default_factory=ServiceStatus)


# --- Endpoints ---------------------------------------------------------------------------


class EndpointAddress(KubeStruct):
    ip: str = ""
    hostname: str = ""
    node_name: str | None = None
    target_ref: ObjectReference | None = None


class EndpointPort(KubeStruct):
    name: str = ""
    port: int = 0
    protocol: str = ""
    app_protocol: str | None = None


class EndpointSubset(KubeStruct):
    addresses: list[EndpointAddress] = []
    not_ready_addresses: list[EndpointAddress] = []
    ports: list[EndpointPort] = []


class Endpoints(KubeObject):
    """Endpoints is a collection of endpoints that implement the actual service."""

    API_VERSION: ClassVar[str] = "v1"
    KIND: ClassVar[str] = "Endpoints"

    subsets: list[EndpointSubset] = []


# --- PersistentVolumeClaim ---------------------------------------------------------------


class VolumeResourceRequirements(KubeStruct):
    limits: ResourceList = {}
    requests: ResourceList = {}


class PersistentVolumeClaimSpec(KubeStruct):
    access_modes: list[str] = []
    selector: LabelSelector | None = None
    resources: VolumeResourceRequirements = msgspec.field(
        default_factory=VolumeResourceRequirements
    )
    volume_name: str = ""
    storage_class_name: str | None = None
    volume_mode: str | None = None  # defaulted to Filesystem
    data_source: dict[str, Any] | None = None
    data_source_ref: dict[str, Any] | None = None
    volume_attributes_class_name: str | None = None


class PersistentVolumeClaimStatus(KubeStruct):
    phase: str = ""
    access_modes: list[str] = []
    capacity: ResourceList = {}
    conditions: list[dict[str, Any]] = []
    allocated_resources: ResourceList = {}
    allocated_resource_statuses: dict[str, str] = {}
    current_volume_attributes_class_name: str | None = None
    modify_volume_status: dict[str, Any] | None = None


class PersistentVolumeClaim(KubeObject):
    """PersistentVolumeClaim is a user's request for and claim to a persistent volume"""

    API_VERSION: ClassVar[str] = "v1"
    KIND: ClassVar[str] = "PersistentVolumeClaim"

    spec: PersistentVolumeClaimSpec = msgspec.field(default_factory=PersistentVolumeClaimSpec)
    status: PersistentVolumeClaimStatus = msgspec.field(default_factory=PersistentVolumeClaimStatus)
