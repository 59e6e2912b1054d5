"""Defaults of the core kinds applications ship (upstream `pkg/apis/core/v1/defaults.go`:
`SetDefaults_Secret`, `SetDefaults_Service`, `SetDefaults_PersistentVolumeClaimSpec`,
`SetDefaults_Endpoints`; discovery's `SetDefaults_EndpointPort`), and the one conversion
upstream makes when it decodes a Secret: `stringData` merged into `data`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from drasim.common.api import core_v1_app, discovery_v1

__all__ = ["DEFAULTERS"]

# How long a ClientIP session sticks when the service does not say
# (`DefaultClientIPServiceAffinitySeconds`).
CLIENT_IP_AFFINITY_SECONDS = 10800


def _default_secret(secret: core_v1_app.Secret) -> None:
    """`stringData` wins over `data` key by key and is not stored (upstream's
    `Convert_v1_Secret_To_core_Secret`)."""
    if secret.string_data:
        secret.data = {**secret.data, **{k: v.encode() for k, v in secret.string_data.items()}}
        secret.string_data = {}
    if not secret.type:
        secret.type = "Opaque"


def _default_service(svc: core_v1_app.Service) -> None:
    spec = svc.spec
    spec.session_affinity = spec.session_affinity or "None"
    spec.type = spec.type or "ClusterIP"
    for port in spec.ports:
        port.protocol = port.protocol or "TCP"
        if port.target_port in (None, 0, ""):
            port.target_port = port.port
    if spec.type in ("NodePort", "LoadBalancer") and not spec.external_traffic_policy:
        spec.external_traffic_policy = "Cluster"
    if spec.internal_traffic_policy is None and spec.type != "ExternalName":
        spec.internal_traffic_policy = "Cluster"
    if spec.type == "LoadBalancer" and spec.allocate_load_balancer_node_ports is None:
        spec.allocate_load_balancer_node_ports = True
    if spec.session_affinity == "ClientIP":
        config = spec.session_affinity_config = dict(spec.session_affinity_config or {})
        client_ip = config["clientIP"] = dict(config.get("clientIP") or {})
        client_ip.setdefault("timeoutSeconds", CLIENT_IP_AFFINITY_SECONDS)


def _default_pvc(pvc: core_v1_app.PersistentVolumeClaim) -> None:
    pvc.spec.volume_mode = pvc.spec.volume_mode or "Filesystem"


def _default_endpoints(ep: core_v1_app.Endpoints) -> None:
    for subset in ep.subsets:
        for port in subset.ports:
            port.protocol = port.protocol or "TCP"


def _default_endpoint_slice(slice_: discovery_v1.EndpointSlice) -> None:
    for port in slice_.ports:
        if port.name is None:
            port.name = ""
        if port.protocol is None:
            port.protocol = "TCP"


DEFAULTERS: dict[type, Callable[[Any], None]] = {
    core_v1_app.Secret: _default_secret,
    core_v1_app.Service: _default_service,
    core_v1_app.PersistentVolumeClaim: _default_pvc,
    core_v1_app.Endpoints: _default_endpoints,
    discovery_v1.EndpointSlice: _default_endpoint_slice,
}
