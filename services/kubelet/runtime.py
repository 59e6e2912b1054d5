"""The emulated container runtime: which devices and environment each container gets (when
its containers run and end: `containers`).

Devices per container (upstream `GetResources`, `pkg/kubelet/cm/dra/manager.go`): a device
plugin's Allocate answer for the container;
for the special claim, for every non-zero DRA-capable request of the container and every
`extendedResourceClaimStatus.requestMappings` entry naming that container and resource,
the CDI ids of the prepared devices serving the mapping's request (the mapping is the only
source of truth; DeviceClasses are not consulted); for `resources.claims`, the devices of
the named claim (or of its one request). The environment is what the CDI specs of those
devices and the plugins' answers set.

What each container got is recorded twice on the pod:
- `status.{initContainerStatuses,containerStatuses}[].allocatedResourcesStatus` (KEP-4680,
  upstream `UpdateAllocatedResourcesStatus`): per resource its device ids and health; a
  claim's resource is named
  `claim:<claim>/<request>`, its devices `<driver>/<pool>/<device>`;
- the annotation `drasim.io/container-devices` (`drasim.common.container_devices`): per
  container the CDI device ids and environment the runtime gave it, e.g.
  `{"con0": {"cdiDevices": ["gpu.example.com/gpu=<claim uid>-gpu-0"],
  "env": {"container_0_request_0": "true"}}}`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from drasim.common.api import core_v1, resources
from drasim.common.container_devices import ContainerDevices
from drasim.drivers import cdi, dra_api
from drasim.drivers.device_plugin import AllocateResponse
from drasim.drivers.errors import TemporaryError
from drasim.kubelet.dra_manager import ClaimInfo

__all__ = [
    "Assignment",
    "assign_devices",
]

HEALTHY = "Healthy"
UNHEALTHY = "Unhealthy"


@dataclass
class Assignment:
    """One container's devices: for the runtime and for the pod status."""

    devices: ContainerDevices = field(default_factory=ContainerDevices)
    resource_status: list[core_v1.ResourceStatus] = field(default_factory=list)


def assign_devices(
    pod: core_v1.Pod,
    *,
    claims: Mapping[str, ClaimInfo],
    plugin_allocations: Mapping[str, Mapping[str, AllocateResponse]],
    health: Mapping[tuple[str, str], bool],
    cdi_registry: cdi.Registry,
) -> dict[str, Assignment]:
    """Container name → its devices, for init and regular containers (never ephemeral).

    `claims` are the pod's prepared claims by name, `plugin_allocations` the device
    plugins' answers by container and resource, `health` maps (driver or resource name,
    device) to whether the device is healthy now.
    """
    assigned: dict[str, Assignment] = {}
    for container in pod.spec.all_containers():
        assignment = Assignment()
        for resource, response in sorted(plugin_allocations.get(container.name, {}).items()):
            assignment.devices.cdi_devices += response.cdi_device_ids
            assignment.devices.env.update(response.envs)
            assignment.resource_status.append(
                _status(
                    resource, [(d, health.get((resource, d), False)) for d in response.device_ids]
                )
            )
        dra_ids: list[str] = []
        for status_name, driver_devices in _claim_devices(pod, container, claims):
            for _, device in driver_devices:
                dra_ids += device.cdi_device_ids
            assignment.resource_status.append(
                _status(
                    status_name,
                    [
                        (
                            f"{driver}/{device.pool_name}/{device.device_name}",
                            health.get((driver, device.device_name), False),
                        )
                        for driver, device in driver_devices
                    ],
                )
            )
        assignment.devices.cdi_devices += dra_ids
        assignment.devices.env.update(cdi_registry.env(dra_ids))
        assigned[container.name] = assignment
    return assigned


def _claim_devices(
    pod: core_v1.Pod, container: core_v1.Container, claims: Mapping[str, ClaimInfo]
) -> list[tuple[str, list[tuple[str, dra_api.PreparedDevice]]]]:
    """(status name, [(driver, prepared device)]) for every claim request the container
    uses: special-claim mappings first, then `resources.claims` (upstream `GetResources`
    gathers both)."""
    found: list[tuple[str, list[tuple[str, dra_api.PreparedDevice]]]] = []
    namespace = pod.metadata.namespace
    extended = pod.status.extended_resource_claim_status
    if extended is not None:
        for resource, quantity in sorted(resources.container_requests(container).items()):
            if quantity.is_zero() or not resources.is_dra_capable_name(resource):
                continue
            for mapping in extended.request_mappings:
                if mapping.container_name != container.name or mapping.resource_name != resource:
                    continue
                info = claims.get(extended.resource_claim_name)
                if info is None:
                    raise TemporaryError(
                        f"unable to get claim info for claim {extended.resource_claim_name} "
                        f"in namespace {namespace}"
                    )
                found.append(
                    (
                        f"claim:{info.name}/{mapping.request_name}",
                        _devices_of(info, mapping.request_name),
                    )
                )
    pod_claims = _pod_claim_names(pod)
    for use in container.resources.claims:
        name = pod_claims.get(use.name)
        info = claims.get(name) if name else None
        if info is None:
            raise TemporaryError(
                f"unable to get claim info for claim {name or use.name} in namespace {namespace}"
            )
        status_name = f"claim:{info.name}/{use.request}" if use.request else f"claim:{info.name}"
        found.append((status_name, _devices_of(info, use.request)))
    return found


def _devices_of(info: ClaimInfo, request: str) -> list[tuple[str, dra_api.PreparedDevice]]:
    """Prepared devices serving `request` (a subrequest `r/s` serves `r`); all if ''."""
    return [
        (driver, device)
        for driver, devices in sorted(info.prepared.items())
        for device in devices
        if not request or request in {r.split("/", 1)[0] for r in device.request_names}
    ]


def _pod_claim_names(pod: core_v1.Pod) -> dict[str, str]:
    """Pod claim name → ResourceClaim name, where known."""
    found = {s.name: s.resource_claim_name for s in pod.status.resource_claim_statuses}
    for pod_claim in pod.spec.resource_claims:
        if pod_claim.resource_claim_name:
            found[pod_claim.name] = pod_claim.resource_claim_name
    return {k: v for k, v in found.items() if v}


def _status(name: str, devices: list[tuple[str, bool]]) -> core_v1.ResourceStatus:
    return core_v1.ResourceStatus(
        name=name,
        resources=[
            core_v1.ResourceHealth(resource_id=device, health=HEALTHY if ok else UNHEALTHY)
            for device, ok in devices
        ],
    )
