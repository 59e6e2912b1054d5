"""Cluster files and node profiles: what `drasim up --cluster FILE` builds.

A cluster file lists node pools and, optionally, DeviceClasses to create:

    apiVersion: drasim.io/v1alpha1
    kind: Cluster
    runtimeConfig: {resource.k8s.io/v1beta1: "true"}   # optional: --runtime-config's keys
    apistore: {compactionInterval: 5m}      # optional: --compaction-interval (up's wins)
    deviceClasses: [<resource.k8s.io/v1 DeviceClass>, ...]
    profiles: [<NodeProfile>, ...]          # optional, inline
    pools:
      - name: dra-gpu                       # nodes dra-gpu-0, dra-gpu-1, ...
        namePrefix: dra-gpu-                # the default: "<name>-"
        count: 2
        profile: gpu-8                      # inline, built-in, or a path (.yaml)
        labels: {zone: a}
        taints: [{key: gpu, effect: NoSchedule}]
        devices:                            # per device group of the profile
          gpu: {exposure: dra}              # or device-plugin (+ extendedResourceName)
    podDefaults:                            # optional: how long containers run, first match
      - namespace: batch                    # "" or absent: every namespace
        selector: {matchLabels: {app: x}}   # a LabelSelector; absent: every pod
        runFor: 30s                         # Go duration; absent: run until deleted
        exitCode: 0

A node profile describes the hardware a node's probe finds:

    apiVersion: drasim.io/v1alpha1
    kind: NodeProfile
    name: gpu-8
    cpu: "96"
    memory: 768Gi
    pods: 110
    devices:
      - name: gpu                           # the device group (kind) pools refer to
        driver: gpu.example.com             # the DRA driver publishing them
        count: 8                            # devices gpu-0 .. gpu-7
        attributes: {type: gpu, model: X, driverVersion: {version: 1.0.0}}
        capacity: {memory: 80Gi}

`podDefaults` stand in for the pod annotations `drasim.io/run-for` and `drasim.io/exit-code`
on pods that do not carry them, the first entry whose namespace and selector match the pod
deciding (as KWOK's Stages select the pods they act on).

Devices not tied to one node and what drivers do beyond the node (attachment for binding
conditions, device status) are cluster-wide:

    resourceSlices: [<ResourceSlice with allNodes, nodeSelector or perDeviceNodeSelection>]
    drivers:
      - name: fabric.example.com
        attachment: {afterSeconds: 2, outcome: Attached}   # or Failed
        deviceStatus: {networkData: true, data: {vendor: example}}

A device group may carry `bindingConditions`, `bindingFailureConditions` and `bindsToNode`.

A node exposes each device group through exactly one of a DRA driver (ResourceSlices) and a
device plugin (node capacity under `extendedResourceName`), as KEP-5004 requires of one node.
A group a pool does not mention is exposed through DRA. A bad file is refused as a whole with
the file and the field named: `cluster.yaml: field pools[0].count: Expected `int`, got `str``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

import msgspec
import yaml

from drasim.common import codec, driver_profiles, labels, profiles, runtime_config
from drasim.common.api import core_v1, meta_v1, resource_v1, resources, validation
from drasim.common.api.validation import meta, names
from drasim.common.duration import parse_go_duration
from drasim.common.quantity import Quantity, parse_quantity

__all__ = [
    "API_VERSION",
    "ApistoreSettings",
    "Attachment",
    "Cluster",
    "ClusterFileError",
    "ClusterSpec",
    "DeviceExposure",
    "DeviceGroup",
    "DeviceStatusReport",
    "DriverBehaviour",
    "Exposure",
    "Partition",
    "NodeConfig",
    "NodePool",
    "NodeProfile",
    "PodDefault",
    "load",
    "load_profile",
    "parse_shard",
]

API_VERSION = "drasim.io/v1alpha1"

T = TypeVar("T")

Exposure = Literal["dra", "device-plugin"]
DRA: Exposure = "dra"
DEVICE_PLUGIN: Exposure = "device-plugin"


class ClusterFileError(ValueError):
    """A cluster file or profile that cannot be used; the message names file and field."""


class _Struct(msgspec.Struct, kw_only=True, rename="camel", forbid_unknown_fields=True):
    """Strict: a misspelt field is an error, not a silently ignored line."""


AttributeValue = str | int | bool | resource_v1.DeviceAttribute
"""A plain scalar, or the typed form (`{version: 1.0.0}`) for what a scalar cannot say."""


class Partition(_Struct, kw_only=True):
    """`count` partitions of each device (MIG-like, KEP-4815), published beside it as
    devices `<device>-<name>-<i>` consuming `counters` of the device's counter set."""

    name: str
    count: int = 1
    counters: dict[str, Quantity] = {}
    attributes: dict[str, AttributeValue] = {}
    capacity: dict[str, Quantity] = {}


class DeviceGroup(_Struct, kw_only=True):
    """`count` identical devices of one kind, published by `driver` when exposed via DRA.

    With `counters`, each device has a counter set `<device>-counters` holding them, which
    the whole device consumes entirely and its `partitions` in part. With
    `allowMultipleAllocations` each device is shared by many claims (KEP-5075), each
    consuming of its `capacity` what its request asks, rounded by `requestPolicy`."""

    name: str
    driver: str
    count: int
    device_name_prefix: str = ""  # default "<name>-": devices gpu-0, gpu-1, ...
    attributes: dict[str, AttributeValue] = {}
    capacity: dict[str, Quantity] = {}
    # KEP-5007: the devices are usable once these conditions are True in the claim's
    # status (set by the driver's attachment, see `DriverBehaviour`), and `bindsToNode`
    # ties an allocation to the node it was made for.
    binding_conditions: list[str] = []
    binding_failure_conditions: list[str] = []
    binds_to_node: bool = False
    counters: dict[str, Quantity] = {}
    partitions: list[Partition] = []
    allow_multiple_allocations: bool = False
    request_policy: dict[str, resource_v1.CapacityRequestPolicy] = {}

    def device_names(self) -> list[str]:
        prefix = self.device_name_prefix or f"{self.name}-"
        return [f"{prefix}{i}" for i in range(self.count)]


class NodeProfile(_Struct, kw_only=True):
    """A node's hardware: what its probe reports and its Node advertises."""

    api_version: str = API_VERSION
    kind: str = "NodeProfile"
    name: str = ""
    cpu: Quantity
    memory: Quantity
    pods: int = 110
    ephemeral_storage: Quantity | None = None
    devices: list[DeviceGroup] = []

    def group(self, name: str) -> DeviceGroup | None:
        return next((g for g in self.devices if g.name == name), None)


class DeviceExposure(_Struct, kw_only=True):
    """How a pool's nodes expose one device group (KEP-5004: DRA or a device plugin)."""

    exposure: Exposure = DRA
    # Required for device-plugin; for dra it documents the name the DeviceClass maps, which
    # `drasim node migrate --to device-plugin` then advertises.
    extended_resource_name: str = ""


class NodePool(_Struct, kw_only=True):
    name: str
    count: int = 1
    profile: str
    name_prefix: str = ""  # default "<name>-"
    labels: dict[str, str] = {}
    taints: list[core_v1.Taint] = []
    devices: dict[str, DeviceExposure] = {}

    def node_names(self) -> list[str]:
        prefix = self.name_prefix or f"{self.name}-"
        return [f"{prefix}{i}" for i in range(self.count)]


class PodDefault(_Struct, kw_only=True):
    """How long the containers of the pods it selects run, and how they exit, where the
    pods' own annotations do not say (`drasim.io/run-for`, `drasim.io/exit-code`)."""

    namespace: str = ""
    selector: meta_v1.LabelSelector | None = None
    run_for: str = ""
    exit_code: int | None = None

    def matches(self, pod: core_v1.Pod) -> bool:
        if self.namespace and pod.metadata.namespace != self.namespace:
            return False
        if self.selector is None:
            return True
        return labels.from_label_selector(self.selector).matches(pod.metadata.labels)

    def run_for_seconds(self) -> float | None:
        return parse_go_duration(self.run_for) if self.run_for else None


class Attachment(_Struct, kw_only=True):
    """How the driver attaches a device with binding conditions once it is allocated: after
    `afterSeconds` it sets the device's binding conditions True in the claim's status
    (`outcome: Attached`), or its binding failure conditions (`outcome: Failed`)."""

    after_seconds: float = 1.0
    outcome: Literal["Attached", "Failed"] = "Attached"
    # The conditions' reason and message; by default `Attached`/`AttachFailed` and
    # "device attached by <driver>" (a driver profile sets its driver's own).
    reason: str = ""
    message: str = ""


class DeviceStatusReport(_Struct, kw_only=True):
    """What the driver writes to `status.devices` for each of its devices a running pod
    uses (KEP-4817): a `Ready` condition, `data` as given, and, with `networkData`, the
    interface `net<i>` with the address `10.<i>.0.2/24` for the claim's i-th device."""

    data: dict[str, Any] | None = None
    network_data: bool = False
    # Data taken from the device's published attributes (`{uuid: {string: ...}}`), as
    # dra-example-driver's `gpuDeviceStatus` reports them; merged over `data`.
    attributes: list[str] = []
    ready_condition: bool = True  # also the `Ready` condition


class DriverBehaviour(_Struct, kw_only=True):
    """The cluster-side part of a DRA driver (its controller): attachment of devices with
    binding conditions, device status reports."""

    name: str
    attachment: Attachment | None = None
    device_status: DeviceStatusReport | None = None


class ApistoreSettings(_Struct, kw_only=True):
    """The apistore's flags `drasim up` passes on (its own flags win)."""

    # `--compaction-interval` (kube-apiserver's `--etcd-compaction-interval`): a Go
    # duration, "0s" never compacts; "" the apistore's default (5m, or
    # DRASIM_COMPACTION_INTERVAL).
    compaction_interval: str = ""

    def compaction_interval_seconds(self) -> float | None:
        return parse_go_duration(self.compaction_interval) if self.compaction_interval else None


class ClusterSpec(_Struct, kw_only=True):
    api_version: str = API_VERSION
    kind: str = "Cluster"
    # The API versions served besides the stored ones: `--runtime-config`'s keys and values
    # as a map (kind's cluster config has the same field), under the flag's own.
    runtime_config: dict[str, str | bool] = {}
    apistore: ApistoreSettings | None = None
    device_classes: list[resource_v1.DeviceClass] = []
    # Devices not tied to one node (allNodes, nodeSelector, perDeviceNodeSelection slices),
    # created with the classes before the nodes register.
    resource_slices: list[resource_v1.ResourceSlice] = []
    drivers: list[DriverBehaviour] = []
    profiles: list[NodeProfile] = []
    pools: list[NodePool]
    pod_defaults: list[PodDefault] = []


@dataclass(frozen=True)
class NodeConfig:
    """One node of the cluster, as its kubelet builds it."""

    name: str
    index: int  # position in the whole cluster's node list; addresses derive from it
    pool: NodePool
    profile: NodeProfile
    # Drivers of the cluster's network-attached slices: every node prepares their devices.
    network_drivers: frozenset[str] = frozenset()
    # The real driver whose contract the pool's devices follow (`profile: <driver profile>`).
    driver_profile: driver_profiles.DriverProfile | None = None

    def exposure(self, group: str) -> DeviceExposure:
        return self.pool.devices.get(group) or DeviceExposure()


@dataclass(frozen=True)
class Cluster:
    source: Path
    spec: ClusterSpec
    nodes: list[NodeConfig] = field(default_factory=list)
    # The driver profile of each pool that names one, by pool name.
    driver_profiles: dict[str, driver_profiles.DriverProfile] = field(default_factory=dict)

    def device_classes(self) -> list[resource_v1.DeviceClass]:
        """The file's DeviceClasses, then those its driver profiles' charts install (a class
        the file defines itself wins)."""
        found = {c.metadata.name: c for c in self.spec.device_classes}
        for profile in self.driver_profiles.values():
            for device_class in profile.device_classes():
                found.setdefault(device_class.metadata.name, device_class)
        return list(found.values())

    def drivers(self) -> list[DriverBehaviour]:
        """The file's `drivers:`, then what its driver profiles' controllers do (an entry
        the file makes for a driver wins)."""
        found = {d.name: d for d in self.spec.drivers}
        for profile in self.driver_profiles.values():
            for raw in profile.drivers():
                found.setdefault(raw["name"], codec.convert(raw, DriverBehaviour))
        return list(found.values())

    def runtime_config_flag(self) -> str:
        """`runtimeConfig` as `--runtime-config` writes it (`key=value,...`)."""
        return ",".join(
            f"{key}={str(value).lower() if isinstance(value, bool) else value}"
            for key, value in self.spec.runtime_config.items()
        )

    def shard(self, index: int, count: int) -> list[NodeConfig]:
        """The nodes kubelet process `index` of `count` hosts: every count-th node."""
        return self.nodes[index::count]

    def pool(self, name: str) -> NodePool | None:
        return next((p for p in self.spec.pools if p.name == name), None)


def parse_shard(text: str) -> tuple[int, int]:
    """`i/n` → (i, n) with 0 <= i < n."""
    index, sep, count = text.partition("/")
    try:
        i, n = int(index), int(count)
    except ValueError:
        i = n = -1
    if not sep or n < 1 or not 0 <= i < n:
        raise ValueError(f"shard {text!r} is not i/n with 0 <= i < n")
    return i, n


def load(path: Path | str | None = None) -> Cluster:
    """Read, decode and check a cluster file (the KEP example when `path` is None)."""
    source = Path(path) if path is not None else profiles.DEFAULT_CLUSTER
    document = _read(source)
    options = _take_driver_options(document)
    spec = _convert(source, document, ClusterSpec)
    _check_kind(source, spec.api_version, spec.kind, "Cluster")
    errs = _check_device_classes(spec)
    cluster = Cluster(source=source, spec=spec)
    try:
        runtime_config.parse(cluster.runtime_config_flag())
    except runtime_config.RuntimeConfigError as exc:
        errs.append(("runtimeConfig", str(exc)))
    if spec.apistore is not None:
        errs += [(f"apistore.{path}", msg) for path, msg in _check_apistore(spec.apistore)]
    for i, default in enumerate(spec.pod_defaults):
        errs += [(f"podDefaults[{i}].{path}", msg) for path, msg in _check_pod_default(default)]
    inline = {p.name: p for p in spec.profiles}
    for i, profile in enumerate(spec.profiles):
        errs += [(f"profiles[{i}].{path}", msg) for path, msg in _check_profile(profile)]
    nodes: list[NodeConfig] = []
    seen: dict[str, str] = {}
    network = frozenset(s.spec.driver for s in spec.resource_slices)
    by_pool: dict[str, driver_profiles.DriverProfile] = {}
    for i, pool in enumerate(spec.pools):
        where = f"pools[{i}]"
        driver = None
        if i in options:
            driver, found = _driver_profile(pool.profile, options[i])
            at = f"{where}.devices[{driver.group}]"
            errs += [(f"{at}.{path}" if path else at, msg) for path, msg in found]
            by_pool[pool.name] = driver
            pool.devices[driver.group] = DeviceExposure(
                exposure=driver.options.exposure,
                extended_resource_name=driver.extended_resource_name(),
            )
            profile = _driver_node_profile(driver)
        else:
            profile = _resolve_profile(source, pool.profile, inline, f"{where}.profile")
        errs += [(f"{where}.{path}", msg) for path, msg in _check_pool(pool, profile)]
        for name in pool.node_names():
            if name in seen:
                errs.append((f"{where}.namePrefix", f"node {name} is also in pool {seen[name]}"))
            seen[name] = pool.name
            nodes.append(
                NodeConfig(
                    name=name,
                    index=len(nodes),
                    pool=pool,
                    profile=profile,
                    network_drivers=network,
                    driver_profile=driver,
                )
            )
    _raise(source, errs)
    return Cluster(source=source, spec=spec, nodes=nodes, driver_profiles=by_pool)


# --- decoding --------------------------------------------------------------------------


def _decode(source: Path, type_: type[T]) -> T:
    return _convert(source, _read(source), type_)


def _read(source: Path) -> dict[str, Any]:
    try:
        text = source.read_text()
    except OSError as exc:
        raise ClusterFileError(f"{source}: {exc.strerror}") from exc
    try:
        documents = codec.load_yaml_documents(text)
    except yaml.YAMLError as exc:
        raise ClusterFileError(f"{source}: not valid YAML: {exc}") from exc
    if len(documents) != 1 or not isinstance(documents[0], dict):
        raise ClusterFileError(f"{source}: expected one YAML mapping")
    document: dict[str, Any] = documents[0]
    return document


def _convert(source: Path, document: dict[str, Any], type_: type[T]) -> T:
    try:
        return codec.convert(document, type_)
    except msgspec.ValidationError as exc:
        _raise(source, [(e.field, e.message) for e in codec.decode_errors(exc)])
        raise  # unreachable: _raise always raises for a non-empty list


# The fields of a device group's entry every exposure has; a driver profile's entry adds its
# driver's options beside them.
_EXPOSURE_FIELDS = ("exposure", "extendedResourceName")


def _take_driver_options(document: dict[str, Any]) -> dict[int, dict[str, Any]]:
    """Pool index → its driver profile's options (the entry under `devices:`), for pools
    naming a driver profile; their entries keep only the exposure fields, so the rest of the
    file decodes strictly as before."""
    found: dict[int, dict[str, Any]] = {}
    pools = document.get("pools")
    for i, pool in enumerate(pools if isinstance(pools, list) else []):
        if not isinstance(pool, dict) or not isinstance(pool.get("profile"), str):
            continue
        profile = driver_profiles.get(pool["profile"])
        if profile is None:
            continue
        devices = pool.get("devices")
        devices = devices if isinstance(devices, dict) else {}
        entry = devices.get(profile.group)
        found[i] = entry if isinstance(entry, dict) else {}
        if isinstance(entry, dict):
            devices[profile.group] = {k: v for k, v in entry.items() if k in _EXPOSURE_FIELDS}
    return found


def _driver_profile(
    name: str, raw: dict[str, Any]
) -> tuple[driver_profiles.DriverProfile, list[tuple[str, str]]]:
    """The pool's driver profile built from its options, and what is wrong with them."""
    profile = driver_profiles.get(name)
    assert profile is not None
    try:
        options = codec.convert(raw, profile.Options)
    except msgspec.ValidationError as exc:
        errs = [(e.field, e.message) for e in codec.decode_errors(exc)]
        return profile(profile.Options()), errs
    return profile(options), list(options.check())


def _driver_node_profile(driver: driver_profiles.DriverProfile) -> NodeProfile:
    """The node a driver profile's pool gets: the profile's machine, and one device group
    (the driver's) whose devices `driver.node_devices` describes per node."""
    machine = driver.machine
    return NodeProfile(
        name=driver.name,
        cpu=parse_quantity(machine.cpu),
        memory=parse_quantity(machine.memory),
        pods=machine.pods,
        devices=[DeviceGroup(name=driver.group, driver=driver.driver, count=0)],
    )


def _check_kind(source: Path, api_version: str, kind: str, want: str) -> None:
    if api_version != API_VERSION:
        _raise(source, [("apiVersion", f"must be {API_VERSION}")])
    if kind != want:
        _raise(source, [("kind", f"must be {want}")])


def _resolve_profile(
    source: Path, ref: str, inline: dict[str, NodeProfile], where: str
) -> NodeProfile:
    """An inline profile, a built-in one, or a file relative to the cluster file."""
    if ref in inline:
        return inline[ref]
    builtin = profiles.builtin_profile(ref)
    if builtin is not None:
        path = builtin
    elif ref.endswith((".yaml", ".yml")):
        path = source.parent / ref
    else:
        builtin = {*profiles.builtin_profile_names(), *driver_profiles.names()}
        known = ", ".join(sorted({*inline, *builtin}))
        _raise(source, [(where, f'unknown profile "{ref}" (known: {known}; or a .yaml path)')])
    return load_profile(path)


def load_profile(path: Path) -> NodeProfile:
    """Read, decode and check one profile file; unnamed, it takes the file's name."""
    profile = _decode(path, NodeProfile)
    _check_kind(path, profile.api_version, profile.kind, "NodeProfile")
    if not profile.name:
        profile.name = path.stem
    _raise(path, list(_check_profile(profile)))
    return profile


def _raise(source: Path, errs: list[tuple[str, str]]) -> None:
    if errs:
        problems = "; ".join(f"field {path}: {message}" for path, message in errs)
        raise ClusterFileError(f"{source}: {problems}")


# --- checks ------------------------------------------------------------------------------


def _check_profile(profile: NodeProfile) -> Iterator[tuple[str, str]]:
    for path, quantity in (("cpu", profile.cpu), ("memory", profile.memory)):
        if quantity <= Quantity():
            yield path, "must be greater than 0"
    if profile.pods < 1:
        yield "pods", "must be greater than 0"
    device_names: dict[tuple[str, str], str] = {}
    for i, group in enumerate(profile.devices):
        where = f"devices[{i}]"
        yield from _each(f"{where}.name", names.is_dns1123_label(group.name))
        yield from _each(f"{where}.driver", names.is_dns1123_subdomain(group.driver))
        if group.count < 0:
            yield f"{where}.count", "must be greater than or equal to 0"
        if profile.group(group.name) is not group:
            yield f"{where}.name", f"duplicate device group {group.name}"
        for name in group.device_names()[:1]:  # all share the prefix; the first tells
            yield from _each(f"{where}.deviceNamePrefix", names.is_dns1123_label(name))
        for name in group.device_names():
            other = device_names.setdefault((group.driver, name), group.name)
            if other != group.name:
                yield f"{where}.deviceNamePrefix", f"device {name} is also in group {other}"
                break
        for name in (*group.attributes, *group.capacity):
            yield from _each(f"{where}.attributes[{name}]", names.is_qualified_name(name))
        yield from _check_partitions(group, where)


def _check_partitions(group: DeviceGroup, where: str) -> Iterator[tuple[str, str]]:
    for name in group.counters:
        yield from _each(f"{where}.counters[{name}]", names.is_dns1123_label(name))
    if group.partitions and not group.counters:
        yield f"{where}.partitions", "requires counters for the partitions to consume"
    for j, partition in enumerate(group.partitions):
        at = f"{where}.partitions[{j}]"
        yield from _each(f"{at}.name", names.is_dns1123_label(partition.name))
        for name in partition.counters:
            if name not in group.counters:
                yield f"{at}.counters[{name}]", f"not a counter of device group {group.name}"
    for name in group.request_policy:
        if name not in group.capacity:
            yield f"{where}.requestPolicy[{name}]", f"not a capacity of device group {group.name}"
    if group.request_policy and not group.allow_multiple_allocations:
        yield f"{where}.requestPolicy", "requires allowMultipleAllocations"


def _check_pool(pool: NodePool, profile: NodeProfile) -> Iterator[tuple[str, str]]:
    yield from _each("name", names.is_dns1123_label(pool.name))
    if pool.count < 0:
        yield "count", "must be greater than or equal to 0"
    for name in pool.node_names()[:1]:
        yield from _each("namePrefix", names.is_dns1123_subdomain(name))
    for key, value in pool.labels.items():
        yield from _each(f"labels[{key}]", names.is_qualified_name(key))
        yield from _each(f"labels[{key}]", names.is_valid_label_value(value))
    for i, taint in enumerate(pool.taints):
        yield from _each(f"taints[{i}].key", names.is_qualified_name(taint.key))
        if taint.effect not in ("NoSchedule", "PreferNoSchedule", "NoExecute"):
            yield f"taints[{i}].effect", "must be NoSchedule, PreferNoSchedule or NoExecute"
    for group, exposure in pool.devices.items():
        where = f"devices[{group}]"
        if profile.group(group) is None:
            yield where, f'profile {profile.name} has no device group "{group}"'
        name = exposure.extended_resource_name
        if name and not resources.is_extended_resource_name(name):
            yield f"{where}.extendedResourceName", "must be a valid extended resource name"
        elif not name and exposure.exposure == DEVICE_PLUGIN:
            yield f"{where}.extendedResourceName", "required for exposure device-plugin"


def _check_apistore(settings: ApistoreSettings) -> Iterator[tuple[str, str]]:
    if settings.compaction_interval:
        yield from _check_duration("compactionInterval", settings.compaction_interval)


def _check_duration(path: str, text: str) -> Iterator[tuple[str, str]]:
    """A Go duration of 0 or more, refused with Go's message as the flags refuse it."""
    try:
        seconds = parse_go_duration(text)
    except ValueError as exc:
        yield path, str(exc)
    else:
        if seconds < 0:
            yield path, "must be greater than or equal to 0"


def _check_pod_default(default: PodDefault) -> Iterator[tuple[str, str]]:
    if default.namespace:
        yield from _each("namespace", names.is_dns1123_label(default.namespace))
    if default.selector is not None:
        for err in meta.validate_label_selector(default.selector, "selector"):
            yield err.field, err.message
    if default.run_for:
        yield from _check_duration("runFor", default.run_for)
    if default.exit_code is not None and not 0 <= default.exit_code <= 255:
        yield "exitCode", "must be between 0 and 255, inclusive"


def _check_device_classes(spec: ClusterSpec) -> list[tuple[str, str]]:
    """The checks the apistore would make, so a bad class or slice stops `up` before
    anything runs."""
    errs = []
    for i, device_class in enumerate(spec.device_classes):
        for err in validation.validate(device_class):
            errs.append((f"deviceClasses[{i}].{err.field}", err.message))
    for i, resource_slice in enumerate(spec.resource_slices):
        for err in validation.validate(resource_slice):
            errs.append((f"resourceSlices[{i}].{err.field}", err.message))
        if resource_slice.spec.node_name:
            errs.append((f"resourceSlices[{i}].spec.nodeName", "node-local slices come from nodes"))
    return errs


def _each(path: str, messages: list[str]) -> Iterator[tuple[str, str]]:
    for message in messages:
        yield path, message
