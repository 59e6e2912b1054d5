"""Driver profiles: the contract of a real DRA driver, so its own manifests apply unchanged.

A node pool names a driver profile instead of a node profile, and sets the driver's
options under its device group with the names of the driver's Helm values:

    pools:
      - name: gpu
        profile: dra-example-driver          # a DriverProfile's `name`
        devices:
          gpu: {exposure: dra, numDevices: 8, gpuPartitions: 0}   # its `group`, its options

Adding a driver is one module in this package defining a `DriverProfile` subclass and one
line in `_PROFILES` below. What each part is for:

- `Options` (a subclass of `DriverOptions`): the Helm values, decoded strictly from the
  pool's `devices: {<group>: {...}}` entry; a misspelt or mistyped value is refused by
  `drasim up` naming the file and field, and `check()` adds the chart's own checks. The
  profile object is built once per pool from them (`profile.options`).
- `node_devices(node)`: the devices and counter sets the driver's kubelet plugin publishes
  on `node`, in its order; deterministic per node name (a restart publishes the same).
  `parents` says which device's health a device follows (a partition goes with its GPU).
  The DRA driver shim publishes them as its pool (named after the node), leaving out the
  devices `drasim node fault` made unhealthy.
- `device_classes()`: the DeviceClasses the driver's chart installs; `drasim up` creates
  them with the cluster file's own (a class the file defines itself wins).
- `drivers()`: what the chart's controller does cluster-side (binding conditions, device
  status), as the cluster file's `drivers:` entries the controllers run.
- `prepare(request)`: NodePrepareResources for one claim: per allocated device the CDI
  device ids the container gets, and per CDI id the environment its CDI spec sets; or a
  `PrepareError` whose message the kubelet reports on the pod
  (`FailedPrepareDynamicResources`), as the real driver's error reaches the pod. The shim
  has already checked that each device is the driver's and healthy; the profile decides
  the rest, opaque configuration (claim and class, upstream's precedence) included.
- `machine`: cpu, memory and pods of the node the pool's nodes get.
- `device_plugin(node)`: for a pool exposing the group through the vendor's device plugin
  (`exposure: device-plugin`, until `drasim node migrate` moves it to DRA), the extended
  resources that plugin advertises, the id it hands out for each device and the variable
  listing them; None (the default): each device without a parent, by name, under
  `extendedResourceName`.
"""

from __future__ import annotations

import abc
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import msgspec

from drasim.common.api import resource_v1

__all__ = [
    "DevicePluginView",
    "DriverOptions",
    "DriverProfile",
    "Machine",
    "NodeDevices",
    "PrepareError",
    "PrepareRequest",
    "Prepared",
    "PreparedDevice",
    "get",
    "names",
    "opaque_configs",
]


class DriverOptions(msgspec.Struct, kw_only=True, rename="camel", forbid_unknown_fields=True):
    """A pool's options for one driver profile. The two fields every device group takes
    (`exposure`, `extendedResourceName`) are here; a profile adds its Helm values."""

    exposure: Literal["dra", "device-plugin"] = "dra"
    extended_resource_name: str = ""

    def check(self) -> Iterator[tuple[str, str]]:
        """(field, message) for each value the driver's chart would refuse."""
        return iter(())


@dataclass(frozen=True)
class Machine:
    cpu: str = "32"
    memory: str = "128Gi"
    pods: int = 110


@dataclass(frozen=True)
class NodeDevices:
    """What the driver publishes on one node: devices, the counter sets they consume,
    device → the device whose health it follows, and device → the slice it goes in where
    the driver splits its pool itself (else slices fill up to the API's limit)."""

    devices: list[resource_v1.Device]
    counter_sets: list[resource_v1.CounterSet] = field(default_factory=list)
    parents: dict[str, str] = field(default_factory=dict)
    slices: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class PrepareRequest:
    """One claim to prepare on `node`: `results` are the driver's devices of its
    allocation, in the allocation's order."""

    node: str
    claim: resource_v1.ResourceClaim
    results: list[resource_v1.DeviceRequestAllocationResult]

    @property
    def configs(self) -> list[resource_v1.DeviceAllocationConfiguration]:
        allocation = self.claim.status.allocation
        return allocation.devices.config if allocation is not None else []


@dataclass(frozen=True)
class PreparedDevice:
    """One allocated device (or share) as prepared: the CDI devices the container gets."""

    result: resource_v1.DeviceRequestAllocationResult
    cdi_device_ids: list[str]


@dataclass(frozen=True)
class Prepared:
    devices: list[PreparedDevice]
    cdi_edits: dict[str, dict[str, str]]  # CDI device id → the environment it sets


@dataclass(frozen=True)
class DevicePluginView:
    """What a vendor's device plugin advertises on one node."""

    resources: dict[str, dict[str, str]]  # extended resource name → device name → its id
    env: str  # the variable an Allocate sets to the allocated ids, comma-separated


class PrepareError(Exception):
    """The claim cannot be prepared; the message is the driver's own."""


class DriverProfile(abc.ABC):
    """One real driver (see the module docstring for what each member is for)."""

    name: ClassVar[str]  # what a pool's `profile:` says
    group: ClassVar[str]  # the key of its options under the pool's `devices:`
    Options: ClassVar[type[DriverOptions]]
    machine: ClassVar[Machine] = Machine()

    def __init__(self, options: DriverOptions) -> None:
        self.options = options

    @property
    @abc.abstractmethod
    def driver(self) -> str:
        """The DRA driver name its slices, classes and CDI ids carry."""

    def extended_resource_name(self) -> str:
        """The extended resource name the pool's devices serve (KEP-5004): its DeviceClass
        maps it, and `drasim node migrate --to device-plugin` advertises it."""
        return self.options.extended_resource_name

    @abc.abstractmethod
    def node_devices(self, node: str) -> NodeDevices: ...

    @abc.abstractmethod
    def device_classes(self) -> list[resource_v1.DeviceClass]: ...

    def drivers(self) -> list[dict[str, Any]]:
        """Cluster-file `drivers:` entries (as YAML would give them) for the chart's
        controller; none by default."""
        return []

    @abc.abstractmethod
    def prepare(self, request: PrepareRequest) -> Prepared: ...

    def device_plugin(self, node: str) -> DevicePluginView | None:
        return None


def opaque_configs(
    driver: str, configs: list[resource_v1.DeviceAllocationConfiguration]
) -> list[resource_v1.DeviceAllocationConfiguration]:
    """The allocation's opaque configs for `driver`, lowest precedence first: the class's,
    then the claim's, each in its own order (as kubelet plugins order them). Raises
    PrepareError for a config that is not opaque, as the drivers do."""
    by_source: dict[str, list[resource_v1.DeviceAllocationConfiguration]] = {
        "FromClass": [],
        "FromClaim": [],
    }
    for config in configs:
        if config.source not in by_source:
            raise PrepareError(f"invalid config source: {config.source}")
        by_source[config.source].append(config)
    found = []
    for config in [*by_source["FromClass"], *by_source["FromClaim"]]:
        if config.opaque is None:
            raise PrepareError("only opaque parameters are supported by this driver")
        if config.opaque.driver == driver:
            found.append(config)
    return found


def _profiles() -> dict[str, type[DriverProfile]]:
    from drasim.common.driver_profiles import dra_example_driver, nvidia_gpu

    return {p.name: p for p in (dra_example_driver.ExampleGpuProfile, *nvidia_gpu.PROFILES)}


def names() -> list[str]:
    return sorted(_profiles())


def get(name: str) -> type[DriverProfile] | None:
    """The profile class a pool's `profile:` names, or None if it names none."""
    return _profiles().get(name)
