"""The NVIDIA GPU DRA driver (kubernetes-sigs/dra-driver-nvidia-gpu), one profile a server.

A pool names a server (`profile: nvidia-dgx-h100`, see `nvidia_hardware.SERVERS`) and sets
the chart's values under its `gpu` device group:

    devices:
      gpu:
        exposure: dra
        featureGates: {DynamicMIG: false, TimeSlicingSettings: true, MPSSupport: true}
        resources: {gpus: {enabled: true}, computeDomains: {enabled: true}}
        migConfig:                       # what nvidia-mig-parted applied on the node
          - {devices: [0, 1], mig-enabled: true, mig-devices: {"1g.10gb": 7}}
        migStrategy: none                # NVIDIA's device plugin's, with device-plugin

What the kubelet plugin publishes (cmd/gpu-kubelet-plugin/deviceinfo.go, mig.go,
partitions.go, driver.go): a device `gpu-<minor>` per GPU not in MIG mode, with NVML's
attributes and its memory as capacity; the MIG devices mig-parted created (static MIG); or,
with the DynamicMIG gate, every possible MIG placement as a partitionable device sharing its
GPU's counters. What containers get (cdi.go): the CDI device
`k8s.gpu.nvidia.com/claim=<claim UID>-<device>` per device, whose spec's common edits set
`NVIDIA_VISIBLE_DEVICES=void` (the devices arrive as device nodes, not through that
variable), and MPS's pipe directory when a config asks for MPS sharing.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import ClassVar, Literal

import msgspec

from drasim.common.api import meta_v1, resource_v1
from drasim.common.driver_profiles import (
    DevicePluginView,
    DriverOptions,
    DriverProfile,
    Machine,
    NodeDevices,
    Prepared,
    PreparedDevice,
    PrepareError,
    PrepareRequest,
    opaque_configs,
)
from drasim.common.driver_profiles import nvidia_config as config_api
from drasim.common.driver_profiles import nvidia_mig as mig
from drasim.common.driver_profiles.nvidia_hardware import SERVERS, Server
from drasim.common.quantity import Format, Quantity

__all__ = ["DRIVER", "FEATURE_GATES", "NvidiaGpuOptions", "NvidiaGpuProfile", "PROFILES"]

DRIVER = "gpu.nvidia.com"
_FAILED = "prepare devices failed: "
_Refused = config_api.ConfigError
CDI_KIND = f"k8s.{DRIVER}/claim"  # cdiVendor "k8s.gpu.nvidia.com", class "claim"

# The driver's gates (pkg/featuregates/featuregates.go) and their defaults.
FEATURE_GATES = {
    "TimeSlicingSettings": False,
    "MPSSupport": False,
    "IMEXDaemonsWithDNSNames": True,
    "PassthroughSupport": False,
    "NVMLDeviceHealthCheck": False,
    "DynamicMIG": False,
    "ComputeDomainCliques": True,
    "CrashOnNVLinkFabricErrors": True,
    "DeviceMetadata": False,
    "FabricManagerPartitioning": False,
    "HostManagedIMEXDaemon": False,
    "DRAListTypeAttributes": False,
    "ConsumableShares": False,
}


class Enabled(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    enabled: bool = True


class Resources(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, rename="camel"):
    """The chart's `resources`: which DeviceClasses (and plugins) it installs."""

    gpus: Enabled = msgspec.field(default_factory=Enabled)
    compute_domains: Enabled = msgspec.field(default_factory=Enabled)


class NvidiaGpuOptions(DriverOptions, kw_only=True):
    """The chart's values a pool sets, the node's mig-parted config, and, for a pool still
    on NVIDIA's device plugin, that plugin's `migStrategy`."""

    server: ClassVar[Server]

    feature_gates: dict[str, bool] = {}
    resources: Resources = msgspec.field(default_factory=Resources)
    mig_config: list[mig.MigConfigEntry] = []
    mig_strategy: Literal["none", "single", "mixed"] = "none"

    def gates(self) -> dict[str, bool]:
        return {**FEATURE_GATES, **self.feature_gates}

    def check(self) -> Iterator[tuple[str, str]]:
        for name in self.feature_gates:
            if name not in FEATURE_GATES:
                yield f"featureGates[{name}]", f"unrecognized feature gate: {name}"
        server = self.server
        _, errs = mig.layout(server.gpu, server.gpu_count, self.mig_config)
        yield from errs
        if self.mig_strategy == "single":
            layout = self.mig_layout()
            profiles = {d.profile.name for devices in layout.values() for d in devices}
            if len(profiles) > 1 or len(layout) not in (0, server.gpu_count):
                found = ", ".join(sorted(profiles)) or "none"
                yield (
                    "migStrategy",
                    (
                        "single needs every GPU in MIG mode with devices of one profile "
                        f"(found {found})"
                    ),
                )

    def mig_layout(self) -> dict[int, list[mig.MigDevice]]:
        return mig.layout(self.server.gpu, self.server.gpu_count, self.mig_config)[0]


class NvidiaGpuProfile(DriverProfile):
    """One server's GPUs as the NVIDIA driver publishes and prepares them."""

    group: ClassVar[str] = "gpu"
    server: ClassVar[Server]
    options: NvidiaGpuOptions

    @property
    def driver(self) -> str:
        return DRIVER

    def extended_resource_name(self) -> str:
        """The chart's gpu.nvidia.com class maps `nvidia.com/gpu`, as does the device plugin."""
        return self.options.extended_resource_name or "nvidia.com/gpu"

    # --- what the kubelet plugin publishes ----------------------------------------------

    def node_devices(self, node: str) -> NodeDevices:
        server, gates = self.server, self.options.gates()
        static = self.options.mig_layout()
        devices: list[resource_v1.Device] = []
        counter_sets: list[resource_v1.CounterSet] = []
        parents: dict[str, str] = {}
        slices: dict[str, int] = {}
        # The plugin walks GPUs by PCI bus ID and each GPU's devices by name.
        for bus_id in sorted(server.gpu_order):
            minor = server.gpu_order.index(bus_id)
            mig_mode = minor in static
            full = self._gpu_device(node, minor)
            if gates["DynamicMIG"] and self._dynamic_mig_capable(mig_mode):
                possible = mig.possible_devices(minor, server.gpu)
                own = [mig_device(node, self, d, dynamic=True) for d in possible]
                # Hopper and later toggle MIG mode without a reset: the full GPU stays.
                if not mig_mode or server.gpu.architecture != "Ampere":
                    own.append(self._partitionable(full, minor))
                    parents.update({d.name: full.name for d in own if d.name != full.name})
                counter_sets.append(self._counter_set(minor))
                # generateSplitResourceSlices: one slice per GPU (the counters' of their own).
                slices.update({d.name: minor for d in own})
            elif mig_mode:
                own = [mig_device(node, self, d, dynamic=False) for d in static[minor]]
            else:
                own = [full]
            devices += sorted(own, key=lambda d: d.name)
        return NodeDevices(
            devices=devices, counter_sets=counter_sets, parents=parents, slices=slices
        )

    def _dynamic_mig_capable(self, mig_mode: bool) -> bool:
        """`isDynamicMIGCapable`: MIG hardware, and Hopper or later, or an Ampere GPU already
        in MIG mode (switching it needs a reset)."""
        gpu = self.server.gpu
        return gpu.mig_capable and (gpu.architecture != "Ampere" or mig_mode)

    def gpu_uuid(self, node: str, minor: int) -> str:
        """Deterministic per node, in NVML's `GPU-<uuid>` form."""
        return "GPU-" + str(uuid.uuid5(uuid.NAMESPACE_URL, f"drasim:{node}/gpu-{minor}"))

    def gpu_attributes(self, node: str, minor: int) -> dict[str, resource_v1.DeviceAttribute]:
        """`GpuInfo.Attributes` without `type` and `uuid`: what MIG devices inherit."""
        server, gpu = self.server, self.server.gpu
        bus_id = server.gpu_order[minor]
        root = server.root_of(bus_id)
        attrs = {
            "productName": _string(gpu.product_name),
            "brand": _string(gpu.brand),
            "architecture": _string(gpu.architecture),
            "cudaComputeCapability": _version(gpu.cuda_compute_capability),
            "driverVersion": _version(server.driver_version),
            "cudaDriverVersion": _version(server.cuda_driver_version),
            "resource.kubernetes.io/pciBusID": _string(bus_id),
            "resource.kubernetes.io/pcieRoot": _string(root.name),
            "resource.kubernetes.io/numaNode": _int(root.numa_node),
        }
        if gpu.addressing_mode is not None:
            attrs["addressingMode"] = _string(gpu.addressing_mode)
        return attrs

    def _gpu_device(self, node: str, minor: int) -> resource_v1.Device:
        attrs = {
            "type": _string("gpu"),
            "uuid": _string(self.gpu_uuid(node, minor)),
            **self.gpu_attributes(node, minor),
        }
        memory = Quantity(self.server.gpu.memory_bytes, Format.BINARY_SI)
        return resource_v1.Device(
            name=f"gpu-{minor}",
            attributes=attrs,
            capacity={"memory": resource_v1.DeviceCapacity(value=memory)},
        )

    def _partitionable(self, full: resource_v1.Device, minor: int) -> resource_v1.Device:
        """`GpuInfo.PartGetDevice`: the largest profile's capacities, consuming everything."""
        caps = mig.max_capacities(self.server.gpu)
        consumed = mig.counters(caps, 0, mig.memory_slice_count(self.server.gpu))
        return msgspec.structs.replace(
            full,
            capacity=caps,
            consumes_counters=[
                resource_v1.DeviceCounterConsumption(
                    counter_set=mig.counter_set_name(minor), counters=consumed
                )
            ],
        )

    def _counter_set(self, minor: int) -> resource_v1.CounterSet:
        gpu = self.server.gpu
        counters = mig.counters(mig.max_capacities(gpu), 0, mig.memory_slice_count(gpu))
        return resource_v1.CounterSet(name=mig.counter_set_name(minor), counters=counters)

    # --- the NVIDIA device plugin, on pools not yet moved to DRA -------------------------

    def device_plugin(self, node: str) -> DevicePluginView:
        """What NVIDIA's k8s-device-plugin advertises, each device by its UUID (its default
        `deviceIDStrategy`), listed in NVIDIA_VISIBLE_DEVICES (its default `envvar`
        `deviceListStrategy`).

        `migStrategy` none lists every GPU as `nvidia.com/gpu`; single lists the MIG
        devices as `nvidia.com/gpu`; mixed lists them per profile as
        `nvidia.com/mig-<profile>` (`+` becomes `.`) beside the GPUs not in MIG mode."""
        static, strategy = self.options.mig_layout(), self.options.mig_strategy
        found: dict[str, dict[str, str]] = {}
        for minor in range(self.server.gpu_count):
            migs = static.get(minor)
            if migs is None or strategy == "none":
                found.setdefault("nvidia.com/gpu", {})[f"gpu-{minor}"] = self.gpu_uuid(node, minor)
                continue
            for device in migs:
                name = "nvidia.com/gpu"
                if strategy == "mixed":
                    name = "nvidia.com/mig-" + device.profile.name.replace("+", ".")
                found.setdefault(name, {})[device.name] = device.uuid(node)
        return DevicePluginView(resources=found, env="NVIDIA_VISIBLE_DEVICES")

    # --- what the chart installs --------------------------------------------------------

    def device_classes(self) -> list[resource_v1.DeviceClass]:
        """deviceclass-*.yaml, in the order helm renders them, on resource.k8s.io/v1."""
        resources = self.options.resources
        found = []
        if resources.compute_domains.enabled:
            found += [
                _device_class(
                    "compute-domain-daemon.nvidia.com",
                    "device.driver == 'compute-domain.nvidia.com' && "
                    "device.attributes['compute-domain.nvidia.com'].type == 'daemon'",
                ),
                _device_class(
                    "compute-domain-default-channel.nvidia.com",
                    "device.driver == 'compute-domain.nvidia.com' && "
                    "device.attributes['compute-domain.nvidia.com'].type == 'channel' && "
                    "device.attributes['compute-domain.nvidia.com'].id == 0",
                ),
            ]
        if resources.gpus.enabled:
            found += [
                _device_class(DRIVER, _type_selector("gpu"), "nvidia.com/gpu"),
                _device_class("mig.nvidia.com", _type_selector("mig")),
                _device_class("vfio.gpu.nvidia.com", _type_selector("vfio")),
            ]
        return found

    # --- NodePrepareResources -----------------------------------------------------------

    def prepare(self, request: PrepareRequest) -> Prepared:
        claim = request.claim
        uid = claim.metadata.uid
        where = f"{claim.metadata.namespace}/{claim.metadata.name}:{uid}"
        try:
            groups = self._config_groups(request)
            env = self._apply(groups, request, uid)
        except config_api.ConfigError as exc:
            raise PrepareError(f"error preparing devices for claim {where}: {exc}") from exc
        devices = [
            PreparedDevice(result=r, cdi_device_ids=[f"{CDI_KIND}={uid}-{r.device}"])
            for r in request.results
        ]
        # The claim's CDI spec: its common edits hide NVIDIA_VISIBLE_DEVICES from the
        # legacy runtime hook; MPS adds its pipe directory.
        edits = {
            cdi_id: {**env.get(d.result.request, {}), "NVIDIA_VISIBLE_DEVICES": "void"}
            for d in devices
            for cdi_id in d.cdi_device_ids
        }
        return Prepared(devices=devices, cdi_edits=edits)

    def _config_groups(
        self, request: PrepareRequest
    ) -> list[tuple[config_api.Config, list[resource_v1.DeviceRequestAllocationResult]]]:
        """`getConfigResultsMap`: each result with the config of highest precedence that
        names its request, or else the last one for all requests that fits its type."""
        prefix = f"{_FAILED}error getting opaque device configs: "
        try:
            raw = opaque_configs(DRIVER, request.configs)
        except PrepareError as exc:
            raise _Refused(prefix + str(exc)) from exc
        configs: list[tuple[list[str], config_api.Config]] = [
            ([], config_api.GpuConfig()),
            ([], config_api.MigDeviceConfig()),
        ]
        for entry in raw:
            assert entry.opaque is not None
            try:
                configs.append((entry.requests, config_api.decode(entry.opaque.parameters)))
            except config_api.ConfigError as exc:
                raise _Refused(f"{prefix}error decoding config parameters: {exc}") from exc
        groups: dict[int, tuple[config_api.Config, list]] = {}
        for result in request.results:
            kind = self._device_type(result.device)
            for requests, config in reversed(configs):
                if result.request in requests:
                    if _config_type(config) != _family(kind):
                        raise _Refused(
                            f"{_FAILED}cannot apply {config.kind} to device "
                            f'"{result.device}" of type "{kind}" (request: {result.request})'
                        )
                elif requests or _config_type(config) != _family(kind):
                    continue
                groups.setdefault(id(config), (config, []))[1].append(result)
                break
        return list(groups.values())

    def _device_type(self, device: str) -> str:
        if device.startswith("gpu-") and "-mig-" in device:
            return "migdyn" if self.options.gates()["DynamicMIG"] else "mig"
        return "gpu"

    def _apply(self, groups: list, request: PrepareRequest, uid: str) -> dict[str, dict]:
        """Normalize, validate and apply each config; the environment per request."""
        gates = self.options.gates()
        env: dict[str, dict[str, str]] = {}
        for config, results in groups:
            try:
                config = config_api.validate(config, gates)
            except config_api.ConfigError as exc:
                raise _Refused(f"{_FAILED}error validating GPU config: {exc}") from exc
            sharing = getattr(config, "sharing", None)
            if sharing is None:
                continue
            requests = "[" + " ".join(r.request for r in results) + "]"
            applying = f"{_FAILED}error applying config: "
            conflict = config_api.sharing_conflict(config)
            time_slicing = sharing.strategy == config_api.TIME_SLICING
            if time_slicing and gates["TimeSlicingSettings"] and conflict:
                raise _Refused(
                    f"{applying}error getting timeslice config for requests '{requests}' "
                    f"in claim '{uid}': {conflict}"
                )
            if sharing.strategy != config_api.MPS or not gates["MPSSupport"]:
                continue
            if gates["DynamicMIG"]:
                raise _Refused(
                    f"{applying}MPS is not yet supported when using featureGates.DynamicMIG=true"
                )
            if conflict:
                raise _Refused(f"{applying}error getting MPS configuration: {conflict}")
            minors = [int(r.device.split("-")[1]) for r in results]
            uuids = sorted(self.gpu_uuid(request.node, minor) for minor in minors)
            try:
                config_api.mps_pinned_limits(sharing.mps_config, uuids)
            except config_api.ConfigError as exc:
                raise _Refused(f"{applying}error starting MPS control daemon: {exc}") from exc
            for result in results:
                env[result.request] = config_api.mps_env()
        return env


def mig_device(
    node: str, profile: NvidiaGpuProfile, device: mig.MigDevice, *, dynamic: bool
) -> resource_v1.Device:
    """A MIG device: `CommonAttributesMig` (+ its uuid once it exists) and its profile's
    capacities; a created one also lists its memory slices, an abstract one consumes them."""
    attrs = {
        "type": _string("mig"),
        "parentUUID": _string(profile.gpu_uuid(node, device.parent_minor)),
        "profile": _string(device.profile.name),
        **profile.gpu_attributes(node, device.parent_minor),
    }
    caps = mig.capacities(device.profile)
    if dynamic:
        counters = mig.counters(caps, device.start, device.size)
        return resource_v1.Device(
            name=device.name,
            attributes=attrs,
            capacity=caps,
            consumes_counters=[
                resource_v1.DeviceCounterConsumption(
                    counter_set=mig.counter_set_name(device.parent_minor), counters=counters
                )
            ],
        )
    attrs["uuid"] = _string(device.uuid(node))
    for i in range(device.start, device.start + device.size):
        caps[f"memorySlice{i}"] = resource_v1.DeviceCapacity(value=Quantity(1, Format.BINARY_SI))
    return resource_v1.Device(name=device.name, attributes=attrs, capacity=caps)


def _string(value: str) -> resource_v1.DeviceAttribute:
    return resource_v1.DeviceAttribute(string_value=value)


def _version(text: str) -> resource_v1.DeviceAttribute:
    """`semver.MustParse(...).String()` with coercion: 8.0 → 8.0.0, 550.163.01 → 550.163.1."""
    parts = [str(int(p)) for p in text.split(".")] + ["0", "0"]
    return resource_v1.DeviceAttribute(version_value=".".join(parts[:3]))


def _type_selector(device_type: str) -> str:
    return f"device.driver == '{DRIVER}' && device.attributes['{DRIVER}'].type == '{device_type}'"


def _int(value: int) -> resource_v1.DeviceAttribute:
    return resource_v1.DeviceAttribute(int_value=value)


def _device_class(
    name: str, cel: str, extended_resource_name: str | None = None
) -> resource_v1.DeviceClass:
    selector = resource_v1.DeviceSelector(cel=resource_v1.CELDeviceSelector(expression=cel))
    return resource_v1.DeviceClass(
        metadata=meta_v1.ObjectMeta(name=name),
        spec=resource_v1.DeviceClassSpec(
            selectors=[selector], extended_resource_name=extended_resource_name
        ),
    )


def _config_type(config: config_api.Config) -> str:
    return {"GpuConfig": "gpu", "MigDeviceConfig": "mig"}.get(config.kind, "vfio")


def _family(device_type: str) -> str:
    return "mig" if device_type in ("mig", "migdyn") else device_type


def _profile_class(server: Server) -> type[NvidiaGpuProfile]:
    options = type(f"{server.name}-options", (NvidiaGpuOptions,), {"server": server})
    machine = Machine(cpu=server.cpu, memory=server.memory)
    attrs = {"name": server.name, "server": server, "Options": options, "machine": machine}
    return type(server.name, (NvidiaGpuProfile,), attrs)


PROFILES: list[type[NvidiaGpuProfile]] = [_profile_class(s) for s in SERVERS.values()]
