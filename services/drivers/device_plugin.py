"""The device-plugin shim: one extended resource on one node (upstream's device plugin API,
`staging/src/k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1/api.proto`).

What upstream's device plugin API gives the kubelet, in-process: ListAndWatch (every device
and its health: capacity counts all, allocatable only the healthy ones) and Allocate (device
ids, environment and CDI device ids for one container). The shim also keeps which device
ids each pod's containers hold, checkpointed like the kubelet's
`kubelet_internal_checkpoint`, and never hands out an unhealthy or taken device.

The environment follows NVIDIA's plugin (`NVIDIA_VISIBLE_DEVICES`): `example.com/gpu`
sets `EXAMPLE_COM_GPU_VISIBLE_DEVICES=gpu-0,gpu-1`. A driver profile with a device plugin
of its own (`DriverProfile.device_plugin`) says instead which devices a resource has, the
ids they are handed out by and the variable, as NVIDIA's k8s-device-plugin does
(`NVIDIA_VISIBLE_DEVICES=GPU-<uuid>,...`, no CDI ids with its default `envvar` strategy).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection
from pathlib import Path

import msgspec

from drasim.drivers import cdi, errors
from drasim.drivers.checkpoint import Checkpoint
from drasim.drivers.probe import Probe, ProbedDevice

__all__ = ["AllocateResponse", "DevicePlugin", "DevicePluginCheckpoint"]


class AllocateResponse(msgspec.Struct, kw_only=True, rename="camel"):
    """What one container gets (upstream `ContainerAllocateResponse`)."""

    device_ids: list[str]
    envs: dict[str, str] = {}
    cdi_device_ids: list[str] = msgspec.field(default_factory=list, name="cdiDeviceIDs")


class DevicePluginCheckpoint(msgspec.Struct, kw_only=True):
    # pod UID → container name → what it was given
    allocations: dict[str, dict[str, AllocateResponse]] = {}


class DevicePlugin:
    """Serves the devices of `group` on one node as the extended resource `resource_name`."""

    def __init__(
        self,
        *,
        resource_name: str,
        group: str,
        probe: Probe,
        on_health_change: Callable[[], None],
        checkpoint_path: Path | None = None,
        ids: dict[str, str] | None = None,
        env_name: str = "",
    ) -> None:
        self.resource_name = resource_name
        self.group = group
        self._probe = probe
        self._ids = ids  # device name → the id it is allocated by; None: all, by name
        self._on_health_change = on_health_change
        self._checkpoint = Checkpoint(
            checkpoint_path, DevicePluginCheckpoint, DevicePluginCheckpoint
        )
        self._state = self._checkpoint.load()
        self._unsaved = False  # allocations changed since the last `save`
        self._env_name = (
            env_name or re.sub(r"[^A-Za-z0-9]", "_", resource_name).upper() + "_VISIBLE_DEVICES"
        )
        self._serving = True
        probe.watch(self._on_device_health)

    def close(self) -> None:
        """Stop serving (the group moved to DRA); health changes no longer concern it."""
        self._serving = False

    # -- ListAndWatch ------------------------------------------------------------------
    def devices(self) -> list[ProbedDevice]:
        """The group's whole devices (a device plugin knows no partitions), or those the
        vendor's plugin lists under this resource."""
        mine = [d for d in self._probe.devices() if d.group.name == self.group]
        if self._ids is not None:
            return [d for d in mine if d.name in self._ids]
        return [d for d in mine if d.parent is None]

    def _id(self, device: ProbedDevice) -> str:
        return self._ids[device.name] if self._ids is not None else device.name

    @property
    def capacity(self) -> int:
        return len(self.devices())

    @property
    def allocatable(self) -> int:
        """Healthy devices: an unhealthy one lowers the node's allocatable (upstream
        `GetCapacity`, `pkg/kubelet/cm/devicemanager/manager.go`)."""
        return sum(1 for d in self.devices() if d.healthy)

    def _on_device_health(self, device: ProbedDevice) -> None:
        if self._serving and device.group.name == self.group:
            self._on_health_change()

    # -- Allocate ----------------------------------------------------------------------
    def in_use(self) -> dict[str, str]:
        """Device id → UID of the pod holding it."""
        return {
            device: pod_uid
            for pod_uid, containers in self._state.allocations.items()
            for response in containers.values()
            for device in response.device_ids
        }

    def allocated(self, pod_uid: str) -> dict[str, AllocateResponse]:
        """Container name → what it got, for one pod."""
        return self._state.allocations.get(pod_uid, {})

    def allocate(
        self, pod_uid: str, container: str, count: int, *, reusable: Collection[str] = ()
    ) -> AllocateResponse:
        """Give `container` `count` devices, taking `reusable` ones (its pod's finished init
        containers') first. Asking again for the same container answers the same devices."""
        given = self._state.allocations.get(pod_uid, {}).get(container)
        if given is not None:
            return given
        in_use = self.in_use()
        healthy = [self._id(d) for d in self.devices() if d.healthy]
        reuse = [d for d in healthy if d in reusable][:count]
        free = [d for d in healthy if d not in in_use and d not in reuse]
        if len(reuse) + len(free) < count:
            raise errors.PermanentError(
                f"Allocate failed due to requested number of devices unavailable for "
                f"{self.resource_name}. Requested: {count}, Available: "
                f"{len(reuse) + len(free)}, which is unexpected"
            )
        device_ids = reuse + free[: count - len(reuse)]
        response = AllocateResponse(
            device_ids=device_ids,
            envs={self._env_name: ",".join(device_ids)},
            cdi_device_ids=[cdi.device_id(*self.resource_name.split("/", 1), d) for d in device_ids]
            if self._ids is None
            else [],
        )
        self._state.allocations.setdefault(pod_uid, {})[container] = response
        self._unsaved = True
        return response

    def release(self, pod_uid: str) -> None:
        if self._state.allocations.pop(pod_uid, None) is not None:
            self._unsaved = True

    async def save(self) -> None:
        """Write the allocations to the checkpoint if they changed since the last save.

        Allocate runs in the kubelet's admission, which is synchronous (pods are admitted in
        the order the watch shows them), so it only records; the kubelet saves before the
        pod's containers start, and after a release. An allocation a crash loses before
        that was seen by no container: the restarted kubelet admits the pod again.
        """
        if not self._unsaved:
            return
        self._unsaved = False
        try:
            await self._checkpoint.save(self._state)
        except BaseException:
            self._unsaved = True
            raise
