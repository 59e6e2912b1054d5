"""Strategies of the core kinds applications ship (upstream `pkg/registry/core/<kind>/`):
Services take a cluster IP on create and keep it (`service/strategy.go` and the REST's
allocation in `service/storage/alloc.go`); PersistentVolumeClaims are bound at once to a
volume of their own, standing in for a provisioner; EndpointSlices count generations.
ConfigMaps, Secrets, ServiceAccounts and Endpoints have no rule beyond validation.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from drasim.apistore import ipallocator
from drasim.apistore.strategies.base import Strategy
from drasim.common.api import core_v1_app, discovery_v1, networking_v1

__all__ = ["STRATEGIES"]


class ServiceStrategy(Strategy):
    status_subresource = True

    def allocation_candidates(self, body: bytes) -> list[tuple[str, str, str]]:
        return [ipallocator.key(ip) for ip in ipallocator.candidates(body)]

    def allocate(
        self,
        obj: core_v1_app.Service,
        taken: Callable[[tuple[str, str, str]], bool],
        candidates: list[tuple[str, str, str]],
    ) -> list[networking_v1.IPAddress]:
        held = ipallocator.allocate(
            obj, lambda ip: taken(ipallocator.key(ip)), [key[2] for key in candidates]
        )
        return [held] if held is not None else []

    def released_keys(self, obj: core_v1_app.Service) -> list[tuple[str, str, str]]:
        ip = obj.spec.cluster_ip
        if not ip or ip == core_v1_app.CLUSTER_IP_NONE:
            return []
        return [ipallocator.key(ip)]

    def prepare_for_update(self, new: core_v1_app.Service, old: core_v1_app.Service) -> None:
        """What was allocated stays when an update leaves it out (upstream
        `PatchAllocatedValues`), so a replaced manifest keeps its address."""
        super().prepare_for_update(new, old)
        spec, was = new.spec, old.spec
        _normalize_cluster_ips(spec, was)
        if spec.type != "ExternalName" and was.type != "ExternalName":
            spec.cluster_ip = spec.cluster_ip or was.cluster_ip
            spec.cluster_ips = spec.cluster_ips or list(was.cluster_ips)
            spec.ip_families = spec.ip_families or list(was.ip_families)
            spec.ip_family_policy = spec.ip_family_policy or was.ip_family_policy
        if spec.type in ("NodePort", "LoadBalancer"):
            old_ports = {(p.protocol, p.port): p.node_port for p in was.ports}
            for port in spec.ports:
                port.node_port = port.node_port or old_ports.get((port.protocol, port.port), 0)


def _normalize_cluster_ips(spec: core_v1_app.ServiceSpec, was: core_v1_app.ServiceSpec) -> None:
    """Upstream `NormalizeClusterIPs`: an update naming only `clusterIP` (an older client)
    moves `clusterIPs` with it, so validation judges the address the client meant."""
    if was.cluster_ips and not spec.cluster_ips and spec.cluster_ip == was.cluster_ip:
        spec.cluster_ips = list(was.cluster_ips)
    if spec.cluster_ip != was.cluster_ip and spec.cluster_ips == was.cluster_ips:
        spec.cluster_ips = [spec.cluster_ip] if spec.cluster_ip else []


class PersistentVolumeClaimStrategy(Strategy):
    """Bound on create to a volume named after the claim's uid, of the size it asks for."""

    status_subresource = True

    def prepare_for_create(self, obj: core_v1_app.PersistentVolumeClaim) -> None:
        super().prepare_for_create(obj)
        obj.spec.volume_name = obj.spec.volume_name or f"pvc-{obj.metadata.uid}"
        storage = obj.spec.resources.requests.get("storage")
        obj.status = core_v1_app.PersistentVolumeClaimStatus(
            phase="Bound",
            access_modes=list(obj.spec.access_modes),
            capacity={"storage": storage} if storage is not None else {},
        )
        annotations = obj.metadata.annotations = dict(obj.metadata.annotations)
        annotations.setdefault("pv.kubernetes.io/bind-completed", "yes")
        annotations.setdefault("pv.kubernetes.io/bound-by-controller", "yes")

    def prepare_for_update(self, new: Any, old: Any) -> None:
        super().prepare_for_update(new, old)
        new.spec.volume_name = new.spec.volume_name or old.spec.volume_name


class EndpointSliceStrategy(Strategy):
    generation = True

    def prepare_for_update(self, new: discovery_v1.EndpointSlice, old: Any) -> None:
        Strategy.prepare_for_update(self, new, old)
        if (new.endpoints, new.ports, new.address_type) != (
            old.endpoints,
            old.ports,
            old.address_type,
        ):
            new.metadata.generation = (old.metadata.generation or 0) + 1


STRATEGIES: dict[str, Strategy] = {
    "configmaps": Strategy(),
    "secrets": Strategy(),
    "serviceaccounts": Strategy(),
    "services": ServiceStrategy(),
    "endpoints": Strategy(),
    "persistentvolumeclaims": PersistentVolumeClaimStrategy(),
    "endpointslices": EndpointSliceStrategy(),
    "ipaddresses": Strategy(),
}
