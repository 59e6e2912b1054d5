"""dra-example-driver (kubernetes-sigs/dra-example-driver) with its `gpu` device profile.

What the driver publishes follows `internal/profiles/gpu/gpu.go`: devices `gpu-<i>`, or
with `gpuPartitions` the partitions `gpu-<i>-partition-<j>` and a whole `gpu-<i>-full`, all
consuming the counter set `gpu-<i>-counters` (memory 80Gi, compute 100); attributes
`index`, `uuid`, `model`, `driverVersion` (and `partition`, `partitionable`, `full`);
capacities `memory` and `compute`, with request policies when
`gpuAllowMultipleAllocations` lets claims share a device; binding conditions with
`bindingConditions`. Its chart's DeviceClass is `deployments/helm/dra-example-driver/
templates/deviceclass.yaml`; its controller's BindingConditions plugin sets the conditions
True with reason `Ready` (`cmd/dra-example-controller/plugins/bindingconditions.go`).

What a container gets follows `cmd/dra-example-kubeletplugin/` (`state.go`, `cdi.go`) and
the GpuConfig API (`api/example.com/resource/gpu/v1alpha1`): CDI ids
`k8s.gpu.example.com/gpu=common` and `k8s.gpu.example.com/gpu=<claim uid>-<device>`, the
common one setting `KUBERNETES_NODE_NAME` and `DRA_RESOURCE_DRIVER_NAME`, each device's
setting `GPU_DEVICE_<id>=<device>` with its sharing settings, consumed capacity,
`GPU_DEVICE_<KEY>_RESOURCE_CLAIM` and `DRA_ADMIN_ACCESS`. Errors carry the driver's
messages and wrapping, so the pod's FailedPrepareDynamicResources event reads as on a
real cluster.

The uuid of a GPU is derived from the node name and index (the driver seeds Go's
math/rand with the node name); it is as stable, though not the same string.
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from collections.abc import Iterator
from typing import Any, ClassVar

import msgspec

from drasim.common.api import meta_v1, resource_v1
from drasim.common.driver_profiles import (
    DriverOptions,
    DriverProfile,
    NodeDevices,
    Prepared,
    PreparedDevice,
    PrepareError,
    PrepareRequest,
    opaque_configs,
)
from drasim.common.quantity import Format, Quantity

__all__ = ["BINDING_CONDITIONS", "BINDING_FAILURE_CONDITIONS", "ExampleGpuProfile", "GpuOptions"]

DEFAULT_DRIVER = "gpu.example.com"
BINDING_CONDITIONS = "BindingConditions"
BINDING_FAILURE_CONDITIONS = "BindingFailureConditions"
CONFIG_API_VERSION = "gpu.resource.example.com/v1alpha1"
CONFIG_KIND = "GpuConfig"
MEMORY = Quantity(80 * 2**30, Format.BINARY_SI)
COMPUTE = Quantity(100)
_CDI_CLASS = "gpu"  # the driver's profile name, its CDI class
_STRATEGIES = ("TimeSlicing", "SpacePartitioning")
_INTERVALS = ("Default", "Short", "Medium", "Long")
_NON_WORD = re.compile(r"[^a-zA-Z0-9]+")


class DeviceClassValues(msgspec.Struct, kw_only=True, rename="camel", forbid_unknown_fields=True):
    extended_resource_name: str = ""


class GpuOptions(DriverOptions, kw_only=True):
    """The chart's values, by the names `helm --set` takes (`kubeletPlugin.numDevices` is
    `numDevices` here): one to one."""

    num_devices: int = 8
    gpu_partitions: int = 0
    gpu_allow_multiple_allocations: bool = False
    binding_conditions: bool = False
    gpu_device_status: bool = False
    driver_name: str = ""
    device_class: DeviceClassValues = msgspec.field(default_factory=DeviceClassValues)

    def check(self) -> Iterator[tuple[str, str]]:
        if self.num_devices < 0:
            yield "numDevices", "must be greater than or equal to 0"
        if self.gpu_partitions < 0:
            yield "gpuPartitions", "must be greater than or equal to 0"
        elif self.gpu_partitions > COMPUTE.int_value():
            # Each partition must keep at least 1 compute and 1Gi of memory.
            yield "gpuPartitions", f"must be at most {COMPUTE.int_value()}"


class ExampleGpuProfile(DriverProfile):
    name: ClassVar[str] = "dra-example-driver"
    group: ClassVar[str] = "gpu"
    Options: ClassVar[type[DriverOptions]] = GpuOptions

    options: GpuOptions

    @property
    def driver(self) -> str:
        return self.options.driver_name or DEFAULT_DRIVER

    def extended_resource_name(self) -> str:
        """The chart's `deviceClass.extendedResourceName`, or the pool's own."""
        return (
            self.options.device_class.extended_resource_name or self.options.extended_resource_name
        )

    # -- what the kubelet plugin publishes -------------------------------------------------
    def node_devices(self, node: str) -> NodeDevices:
        opts = self.options
        devices: list[resource_v1.Device] = []
        counter_sets: list[resource_v1.CounterSet] = []
        parents: dict[str, str] = {}
        parts = opts.gpu_partitions
        part_memory = Quantity(MEMORY.int_value() // parts, Format.BINARY_SI) if parts else MEMORY
        part_compute = Quantity(COMPUTE.int_value() // parts) if parts else COMPUTE
        for i, gpu_uuid in enumerate(gpu_uuids(node, opts.num_devices)):
            attributes = {
                "index": resource_v1.DeviceAttribute(int_value=i),
                "uuid": resource_v1.DeviceAttribute(string_value=gpu_uuid),
                "model": resource_v1.DeviceAttribute(string_value="LATEST-GPU-MODEL"),
                "driverVersion": resource_v1.DeviceAttribute(version_value="1.0.0"),
            }
            if not parts:
                devices.append(self._device(f"gpu-{i}", attributes, MEMORY, COMPUTE))
                continue
            counter_set = f"gpu-{i}-counters"
            counter_sets.append(
                resource_v1.CounterSet(name=counter_set, counters=_counters(MEMORY, COMPUTE))
            )
            full = f"gpu-{i}-full"
            partitionable = {"partitionable": resource_v1.DeviceAttribute(bool_value=True)}
            for j in range(parts):
                name = f"gpu-{i}-partition-{j}"
                partition = {"partition": resource_v1.DeviceAttribute(int_value=j)}
                devices.append(
                    self._device(
                        name,
                        {**attributes, **partition, **partitionable},
                        part_memory,
                        part_compute,
                        counter_set,
                    )
                )
                parents[name] = full
            whole = {
                **attributes,
                **partitionable,
                "full": resource_v1.DeviceAttribute(bool_value=True),
            }
            devices.append(self._device(full, whole, MEMORY, COMPUTE, counter_set))
        if opts.binding_conditions:
            for device in devices:
                device.binding_conditions = [BINDING_CONDITIONS]
                device.binding_failure_conditions = [BINDING_FAILURE_CONDITIONS]
        return NodeDevices(devices=devices, counter_sets=counter_sets, parents=parents)

    def _device(
        self,
        name: str,
        attributes: dict[str, resource_v1.DeviceAttribute],
        memory: Quantity,
        compute: Quantity,
        counter_set: str = "",
    ) -> resource_v1.Device:
        """A device; with `counter_set`, one consuming its memory and compute from it."""
        shared = self.options.gpu_allow_multiple_allocations
        return resource_v1.Device(
            name=name,
            attributes=attributes,
            allow_multiple_allocations=shared,
            capacity={
                "memory": _capacity(memory, Quantity(2**30, Format.BINARY_SI), shared),
                "compute": _capacity(compute, Quantity(1), shared),
            },
            consumes_counters=[_consumes(counter_set, memory, compute)] if counter_set else [],
        )

    # -- what the chart installs -----------------------------------------------------------
    def device_classes(self) -> list[resource_v1.DeviceClass]:
        return [
            resource_v1.DeviceClass(
                metadata=meta_v1.ObjectMeta(name=self.driver),
                spec=resource_v1.DeviceClassSpec(
                    selectors=[
                        resource_v1.DeviceSelector(
                            cel=resource_v1.CELDeviceSelector(
                                expression=f"device.driver == '{self.driver}'"
                            )
                        )
                    ],
                    extended_resource_name=self.extended_resource_name() or None,
                ),
            )
        ]

    def drivers(self) -> list[dict[str, Any]]:
        """`controller.plugins: [BindingConditions]`, which `bindingConditions` implies: the
        plugin sets each binding condition True at once; and `gpuDeviceStatus`: the
        prepared device's uuid, model and driverVersion as its status data
        (`BuildDeviceStatus` in gpu.go)."""
        behaviour: dict[str, Any] = {"name": self.driver}
        if self.options.binding_conditions:
            behaviour["attachment"] = {
                "afterSeconds": 0,
                "reason": "Ready",
                "message": "Device is ready",
            }
        if self.options.gpu_device_status:
            behaviour["deviceStatus"] = {
                "attributes": ["uuid", "model", "driverVersion"],
                "readyCondition": False,
            }
        return [behaviour] if len(behaviour) > 1 else []

    # -- NodePrepareResources ----------------------------------------------------------------
    def prepare(self, request: PrepareRequest) -> Prepared:
        claim_uid = request.claim.metadata.uid
        try:
            return self._prepare(request)
        except PrepareError as exc:
            raise PrepareError(
                f"error preparing devices for claim {claim_uid}: prepare failed: {exc}"
            ) from None

    def _prepare(self, request: PrepareRequest) -> Prepared:
        claim_uid = request.claim.metadata.uid
        admin_access = any(r.admin_access for r in request.results)
        try:
            configs = [
                (list(c.requests), _decode_gpu_config(c.opaque.parameters if c.opaque else None))
                for c in opaque_configs(self.driver, request.configs)
            ]
        except PrepareError as exc:
            raise PrepareError(f"error getting opaque device configs: {exc}") from None
        # The default config has the lowest precedence and applies to every request.
        configs.insert(0, ([], None))
        allocatable = {d.name for d in self.node_devices(request.node).devices}
        vendor = f"k8s.{self.driver}"
        common = f"{vendor}/{_CDI_CLASS}=common"
        edits: dict[str, dict[str, str]] = {
            common: {"KUBERNETES_NODE_NAME": request.node, "DRA_RESOURCE_DRIVER_NAME": self.driver}
        }
        devices = []
        for result in request.results:
            if result.device not in allocatable:
                raise PrepareError(f"requested device is not allocatable: {result.device}")
            config = next(
                c for requests, c in reversed(configs) if not requests or result.request in requests
            )
            try:
                env = _gpu_env(config, result)
            except PrepareError as exc:
                raise PrepareError(f"error applying config: {exc}") from None
            device_id = result.device + (f"-{result.share_id}" if result.share_id else "")
            key = _NON_WORD.sub("_", result.device).upper()
            cdi_id = f"{vendor}/{_CDI_CLASS}={claim_uid}-{device_id}"
            edits[cdi_id] = {
                f"{_CDI_CLASS.upper()}_DEVICE_{key}_RESOURCE_CLAIM": claim_uid,
                "DRA_ADMIN_ACCESS": "true" if admin_access else "false",
                **env,
            }
            devices.append(PreparedDevice(result=result, cdi_device_ids=[common, cdi_id]))
        return Prepared(devices=devices, cdi_edits=edits)


def gpu_uuids(node: str, count: int) -> list[str]:
    """`gpu-<uuid>` per GPU: random-looking, the same for the same node every time."""
    found = []
    for i in range(count):
        digest = hashlib.sha256(f"{node}/{i}".encode()).digest()
        found.append(f"gpu-{uuid.UUID(bytes=digest[:16])}")
    return found


def _capacity(value: Quantity, step: Quantity, shared: bool) -> resource_v1.DeviceCapacity:
    """With multiple allocations a claim may take any `step`-aligned amount up to the
    whole device, the whole by default (gpu.go `memoryCapacity`, `computeCapacity`)."""
    if not shared:
        return resource_v1.DeviceCapacity(value=value)
    return resource_v1.DeviceCapacity(
        value=value,
        request_policy=resource_v1.CapacityRequestPolicy(
            default=value,
            valid_range=resource_v1.CapacityRequestPolicyRange(min=step, step=step, max=value),
        ),
    )


def _counters(memory: Quantity, compute: Quantity) -> dict[str, resource_v1.Counter]:
    return {
        "memory": resource_v1.Counter(value=memory),
        "compute": resource_v1.Counter(value=compute),
    }


def _consumes(
    counter_set: str, memory: Quantity, compute: Quantity
) -> resource_v1.DeviceCounterConsumption:
    return resource_v1.DeviceCounterConsumption(
        counter_set=counter_set, counters=_counters(memory, compute)
    )


# -- GpuConfig -------------------------------------------------------------------------------


class _Config(msgspec.Struct, kw_only=True):
    """A decoded GpuConfig: `strategy` "" when `sharing` is absent."""

    sharing: bool = False
    strategy: str = ""
    interval: str | None = None  # timeSlicingConfig.interval (None: no timeSlicingConfig)
    partition_count: int | None = None  # spacePartitioningConfig (None: absent)


def _decode_gpu_config(parameters: Any) -> _Config:
    """The opaque parameters as the driver's scheme decodes them: apiVersion and kind must
    name GpuConfig; unknown fields are dropped; a value of the wrong type is an error."""
    raw = json.dumps(parameters, separators=(",", ":"))
    if not isinstance(parameters, dict):
        raise PrepareError(
            "error decoding config parameters: couldn't get version/kind; json parse error: "
            "json: cannot unmarshal "
            f"{_json_type(parameters)} into Go value of type struct {{ APIVersion string "
            '"json:\\"apiVersion,omitempty\\""; Kind string "json:\\"kind,omitempty\\"" }'
        )
    kind, version = parameters.get("kind"), parameters.get("apiVersion")
    if not kind:
        raise PrepareError(f"error decoding config parameters: Object 'Kind' is missing in '{raw}'")
    if version != CONFIG_API_VERSION or kind != CONFIG_KIND:
        raise PrepareError(
            f'error decoding config parameters: no kind "{kind}" is registered for version '
            f'"{version or ""}"'
        )
    sharing = _field(parameters, "sharing", dict, "GpuConfig.sharing", "v1alpha1.GpuSharing")
    if sharing is None:
        return _Config()
    where = "GpuConfig.sharing"
    strategy = _field(sharing, "strategy", str, f"{where}.strategy", "v1alpha1.GpuSharingStrategy")
    config = _Config(sharing=True, strategy=strategy or "")
    ts = _field(
        sharing,
        "timeSlicingConfig",
        dict,
        f"{where}.timeSlicingConfig",
        "v1alpha1.TimeSlicingConfig",
    )
    if ts is not None:
        config.interval = (
            _field(
                ts,
                "interval",
                str,
                f"{where}.timeSlicingConfig.interval",
                "v1alpha1.TimeSliceInterval",
            )
            or ""
        )
    sp = _field(
        sharing,
        "spacePartitioningConfig",
        dict,
        f"{where}.spacePartitioningConfig",
        "v1alpha1.SpacePartitioningConfig",
    )
    if sp is not None:
        count = _field(
            sp, "partitionCount", int, f"{where}.spacePartitioningConfig.partitionCount", "int"
        )
        config.partition_count = count or 0
    return config


def _field(obj: dict[str, Any], name: str, type_: type, where: str, go_type: str) -> Any:
    """`obj[name]` if present and not null; a mistyped value fails as Go's json does."""
    value = obj.get(name)
    if value is None:
        return None
    ok = isinstance(value, type_) and not (type_ is int and isinstance(value, bool))
    if not ok:
        struct, _, path = where.partition(".")
        raise PrepareError(
            f"error decoding config parameters: json: cannot unmarshal {_json_type(value)} "
            f"into Go struct field {struct}.{path} of type {go_type}"
        )
    return value


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object" if isinstance(value, dict) else "null"


def _gpu_env(
    config: _Config | None, result: resource_v1.DeviceRequestAllocationResult
) -> dict[str, str]:
    """`applyGpuConfig` for one device: normalize (defaults), validate, then the env."""
    if config is None:  # DefaultGpuConfig
        config = _Config(sharing=True, strategy="TimeSlicing", interval="Default")
    config = msgspec.structs.replace(config)
    if not config.sharing:
        config.sharing, config.strategy = True, "TimeSlicing"
    if config.strategy == "TimeSlicing" and config.interval is None:
        config.interval = "Default"
    if config.strategy == "SpacePartitioning" and config.partition_count is None:
        config.partition_count = 1
    _validate(config)
    # Device names start with "gpu-" (envVarSafeID in gpu.go).
    env_id = result.device[4:].replace("-", "_").upper()
    prefix = f"GPU_DEVICE_{env_id}"
    env = {prefix: result.device, f"{prefix}_SHARING_STRATEGY": config.strategy}
    if config.strategy == "TimeSlicing":
        if config.partition_count is not None:
            raise PrepareError(
                f"unable to get time slicing config for device {result.device}: "
                "cannot use SpacePartitioningConfig with the 'TimeSlicing' strategy"
            )
        env[f"{prefix}_TIMESLICE_INTERVAL"] = config.interval or ""
    else:
        if config.interval is not None:
            raise PrepareError(
                f"unable to get space partitioning config for device {result.device}: "
                "cannot use TimeSlicingConfig with the 'SpacePartitioning' strategy"
            )
        env[f"{prefix}_PARTITION_COUNT"] = str(config.partition_count)
    for name in ("memory", "compute"):
        consumed = result.consumed_capacity.get(name)
        if consumed is not None:
            env[f"{prefix}_{name.upper()}"] = str(consumed)
    return env


def _validate(config: _Config) -> None:
    """GpuConfig.Validate, wrapped as applyGpuConfig wraps it."""
    problem = ""
    if config.strategy not in _STRATEGIES:
        problem = f"unknown GPU sharing strategy: {config.strategy}"
    elif config.strategy == "TimeSlicing" and config.interval not in _INTERVALS:
        problem = f"unknown time-slice interval: {config.interval}"
    elif config.strategy == "SpacePartitioning" and (config.partition_count or 0) < 0:
        problem = f"invalid partition count: {config.partition_count}"
    if problem:
        raise PrepareError(f"error validating GPU config: {problem}")
