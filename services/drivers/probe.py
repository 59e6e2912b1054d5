"""Hardware probes: what a node has (machine resources, devices) and whether each device is
healthy.

Drivers and the kubelet only see the `Probe` protocol, so a probe of real hardware (NVML,
sysfs) could replace `EmulatedProbe`, which reads a node profile and lets `drasim node
fault` flip device health (issue item 5).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from drasim.common.api import resource_v1
from drasim.common.cluster_file import (
    AttributeValue,
    DeviceGroup,
    NodeConfig,
    NodeProfile,
    Partition,
)
from drasim.common.driver_profiles import NodeDevices
from drasim.common.quantity import Quantity

__all__ = ["EmulatedProbe", "HealthListener", "Probe", "ProbedDevice"]


@dataclass(slots=True)
class ProbedDevice:
    """One device as found on the node; its group's attributes are shared, not copied.

    A partition (KEP-4815) is a device of its own with a `parent`: it is usable while the
    parent is healthy, and it shares the parent's counters with the parent's other
    partitions and the parent itself."""

    name: str
    group: DeviceGroup
    index: int  # position within its group, published as the `index` attribute
    healthy: bool = True
    parent: ProbedDevice | None = None
    partition: Partition | None = None
    # A driver profile's device: published as it is, with the counter set it consumes.
    published: resource_v1.Device | None = None
    shared_counters: resource_v1.CounterSet | None = None
    slice: int | None = None  # the slice the driver puts it in, if it splits its pool itself

    @property
    def driver(self) -> str:
        return self.group.driver

    @property
    def usable(self) -> bool:
        return self.healthy and (self.parent is None or self.parent.healthy)

    @property
    def attributes(self) -> dict[str, AttributeValue]:
        if self.partition is None:
            return self.group.attributes
        return {**self.group.attributes, **self.partition.attributes}

    @property
    def capacity(self) -> dict[str, Quantity]:
        return self.group.capacity if self.partition is None else self.partition.capacity

    @property
    def counter_set(self) -> str | None:
        """The counter set the device consumes from: its own or its parent's."""
        if self.published is not None:
            consumed = self.published.consumes_counters
            return consumed[0].counter_set if consumed else None
        if not self.group.counters:
            return None
        return f"{(self.parent or self).name}-counters"


HealthListener = Callable[[ProbedDevice], None]
"""Called after a device's health changed (it carries the new health)."""


@runtime_checkable
class Probe(Protocol):
    def machine(self) -> dict[str, Quantity]:
        """Node capacity apart from devices: cpu, memory, pods, ephemeral-storage."""
        ...

    def devices(self) -> list[ProbedDevice]: ...

    def watch(self, listener: HealthListener) -> None:
        """Call `listener` on every health change from now on."""
        ...


@dataclass
class EmulatedProbe:
    """The hardware of a node profile; every device starts healthy. With `hardware` (a
    driver profile's devices on this node), its group's devices are those."""

    profile: NodeProfile
    hardware: NodeDevices | None = None
    _devices: list[ProbedDevice] = field(init=False)
    _listeners: list[HealthListener] = field(init=False, default_factory=list)

    @classmethod
    def of(cls, config: NodeConfig) -> EmulatedProbe:
        """The probe of one node of a cluster file."""
        driver = config.driver_profile
        hardware = driver.node_devices(config.name) if driver is not None else None
        return cls(config.profile, hardware)

    def __post_init__(self) -> None:
        self._devices = []
        for group in self.profile.devices:
            if self.hardware is not None:
                self._devices += _driver_devices(group, self.hardware)
                continue
            for i, name in enumerate(group.device_names()):
                device = ProbedDevice(name=name, group=group, index=i)
                self._devices.append(device)
                for partition in group.partitions:
                    self._devices += [
                        ProbedDevice(
                            name=f"{name}-{partition.name}-{j}",
                            group=group,
                            index=i,
                            parent=device,
                            partition=partition,
                        )
                        for j in range(partition.count)
                    ]

    def machine(self) -> dict[str, Quantity]:
        found: dict[str, Quantity] = {
            "cpu": self.profile.cpu,
            "memory": self.profile.memory,
            "pods": Quantity(self.profile.pods),
        }
        if self.profile.ephemeral_storage is not None:
            found["ephemeral-storage"] = self.profile.ephemeral_storage
        return found

    def devices(self) -> list[ProbedDevice]:
        return self._devices

    def watch(self, listener: HealthListener) -> None:
        self._listeners.append(listener)

    def find(self, name: str) -> ProbedDevice:
        """A device by `name`, or by `driver/name` where several drivers use the name."""
        driver, _, device = name.rpartition("/")
        found = [d for d in self._devices if d.name == device and driver in ("", d.driver)]
        if len(found) != 1:
            known = ", ".join(f"{d.driver}/{d.name}" for d in self._devices) or "none"
            problem = "is ambiguous" if found else "does not exist"
            raise KeyError(f"device {name} {problem} (devices: {known})")
        return found[0]

    def set_health(self, name: str, *, healthy: bool) -> ProbedDevice:
        """Emulate a device failing or recovering; listeners hear of a change only."""
        device = self.find(name)
        if device.healthy != healthy:
            device.healthy = healthy
            for listener in self._listeners:
                listener(device)
        return device


def _driver_devices(group: DeviceGroup, hardware: NodeDevices) -> list[ProbedDevice]:
    """A driver profile's devices, in its order, each with the counter set it consumes."""
    found = {
        d.name: ProbedDevice(
            name=d.name,
            group=group,
            index=_index(d),
            published=d,
            slice=hardware.slices.get(d.name),
        )
        for d in hardware.devices
    }
    counter_sets = {s.name: s for s in hardware.counter_sets}
    for name, parent in hardware.parents.items():
        found[name].parent = found[parent]
    for device in found.values():
        if device.counter_set is not None:
            device.shared_counters = counter_sets.get(device.counter_set)
    return list(found.values())


def _index(device: resource_v1.Device) -> int:
    index = device.attributes.get("index")
    return index.int_value if index is not None and index.int_value is not None else 0
