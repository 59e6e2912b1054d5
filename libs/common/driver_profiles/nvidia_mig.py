"""MIG devices as the NVIDIA DRA driver publishes them, statically created or dynamic.

Two ways the driver's kubelet plugin offers MIG (cmd/gpu-kubelet-plugin/nvlib.go):

- Static MIG (the default): an administrator created MIG devices beforehand with
  nvidia-mig-parted; the plugin publishes each existing one (type `mig`, its own `uuid`,
  capacity with one `memorySlice<i>` per memory slice it holds) and no full GPU for a GPU
  in MIG mode. A pool gives the mig-parted config it applied as its `migConfig`, in
  mig-parted's own schema (`devices`, `mig-enabled`, `mig-devices`).
- DynamicMIG (feature gate): the plugin publishes every possible placement of every
  profile as a partitionable device (KEP-4815), consuming counters of its GPU's counter set
  `gpu-<minor>-counter-set`, and creates the MIG device when a claim is prepared.

Device names follow `MigSpecTuple.ToCanonicalName` (mig.go):
`gpu-<minor>-mig-<profile without dots>-<GI profile ID>-<placement start>`.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import msgspec

from drasim.common.api import resource_v1
from drasim.common.driver_profiles.nvidia_hardware import GpuModel, MigProfile
from drasim.common.quantity import Format, Quantity

__all__ = [
    "MigConfigEntry",
    "MigDevice",
    "canonical_name",
    "capacities",
    "counter_set_name",
    "layout",
    "max_capacities",
    "memory_slice_count",
]

_MIB = 1024 * 1024


class MigConfigEntry(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """One entry of a mig-parted `mig-configs` list: which GPUs, MIG mode, which devices."""

    devices: str | list[int] = "all"
    mig_enabled: bool = msgspec.field(default=False, name="mig-enabled")
    mig_devices: dict[str, int] = msgspec.field(default_factory=dict, name="mig-devices")


@dataclass(frozen=True)
class MigDevice:
    """A MIG device: `profile` on GPU `parent_minor` from memory slice `start`."""

    parent_minor: int
    profile: MigProfile
    start: int
    size: int

    @property
    def name(self) -> str:
        return canonical_name(self.parent_minor, self.profile, self.start)

    def uuid(self, node: str) -> str:
        """Deterministic per node, in NVML's `MIG-<uuid>` form."""
        return "MIG-" + str(uuid.uuid5(uuid.NAMESPACE_URL, f"drasim:{node}/{self.name}"))


def canonical_name(minor: int, profile: MigProfile, start: int) -> str:
    """`gpu-0-mig-1g5gb-19-0`: the profile name loses its dots and anything not RFC 1123."""
    pname = re.sub(r"[^a-z0-9-.]", "-", profile.name.replace(".", "").lower()).strip("-")
    return f"gpu-{minor}-mig-{pname}-{profile.profile_id}-{start}"


def counter_set_name(minor: int) -> str:
    return f"gpu-{minor}-counter-set"


def _quantity(value: int) -> resource_v1.DeviceCapacity:
    return resource_v1.DeviceCapacity(value=Quantity(value, Format.BINARY_SI))


def capacities(profile: MigProfile) -> dict[str, resource_v1.DeviceCapacity]:
    """`CommonCapacitiesMig`: the GI profile's engines and memory (in bytes)."""
    return {
        "multiprocessors": _quantity(profile.multiprocessors),
        "copyEngines": _quantity(profile.copy_engines),
        "decoders": _quantity(profile.decoders),
        "encoders": _quantity(profile.encoders),
        "jpegEngines": _quantity(profile.jpeg_engines),
        "ofaEngines": _quantity(profile.ofa_engines),
        "memory": _quantity(profile.memory_mib * _MIB),
    }


def max_capacities(gpu: GpuModel) -> dict[str, resource_v1.DeviceCapacity]:
    """The largest value of each capacity over all profiles (`inspectMigProfilesAndPlacements`):
    the full GPU's capacity and its counter set under DynamicMIG."""
    found: dict[str, resource_v1.DeviceCapacity] = {}
    for profile in gpu.mig_profiles:
        for name, cap in capacities(profile).items():
            if name not in found or cap.value > found[name].value:
                found[name] = cap
    return found


def memory_slice_count(gpu: GpuModel) -> int:
    """The largest placement seen: the plugin takes it for the GPU's memory slice count."""
    return max(size for p in gpu.mig_profiles for _, size in p.placements)


def counters(
    caps: dict[str, resource_v1.DeviceCapacity], start: int, size: int
) -> dict[str, resource_v1.Counter]:
    """`capacitiesToCounters` + `addCountersForMemSlices`: one counter per capacity, its
    name in DNS form (copyEngines → copy-engines), and `memory-slice-<i>` = 1 per slice."""
    found = {_dns_name(name): resource_v1.Counter(value=cap.value) for name, cap in caps.items()}
    for i in range(start, start + size):
        found[f"memory-slice-{i}"] = resource_v1.Counter(value=Quantity(1, Format.BINARY_SI))
    return found


def _dns_name(name: str) -> str:
    """`camelToDNSName`: copyEngines → copy-engines."""
    hyphenated = re.sub(r"([a-z0-9])([A-Z])", r"\1-\2", name)
    hyphenated = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1-\2", hyphenated)
    return hyphenated.lower().strip("-")


def possible_devices(minor: int, gpu: GpuModel) -> Iterator[MigDevice]:
    """Every placement of every profile: what DynamicMIG publishes for one GPU."""
    for profile in gpu.mig_profiles:
        for start, size in profile.placements:
            yield MigDevice(minor, profile, start, size)


def layout(
    gpu: GpuModel, gpu_count: int, config: list[MigConfigEntry]
) -> tuple[dict[int, list[MigDevice]], list[tuple[str, str]]]:
    """The MIG devices mig-parted creates per GPU minor for `config` (GPUs in MIG mode map
    to their devices, possibly none), and (field, message) for what it would refuse.

    mig-parted leaves placement to NVML; here each GPU's devices are placed largest first,
    each at the highest free placement, which is where NVML puts them."""
    found: dict[int, list[MigDevice]] = {}
    errs: list[tuple[str, str]] = []
    for i, entry in enumerate(config):
        where = f"migConfig[{i}]"
        minors = range(gpu_count) if entry.devices == "all" else entry.devices
        if isinstance(entry.devices, str) and entry.devices != "all":
            errs.append((f"{where}.devices", 'must be "all" or a list of GPU indices'))
            continue
        wanted: list[MigProfile] = []
        for name, count in entry.mig_devices.items():
            profile = gpu.mig_profile(name)
            if profile is None:
                known = ", ".join(p.name for p in gpu.mig_profiles) or "none"
                problem = f"{gpu.product_name} has no MIG profile {name} (profiles: {known})"
                errs.append((f"{where}.mig-devices[{name}]", problem))
                continue
            wanted += [profile] * count
        if not gpu.mig_capable and entry.mig_enabled:
            errs.append((f"{where}.mig-enabled", f"{gpu.product_name} is not MIG capable"))
            continue
        if entry.mig_devices and not entry.mig_enabled:
            errs.append((f"{where}.mig-devices", "requires mig-enabled: true"))
        unfit = []
        for minor in minors:
            if not 0 <= minor < gpu_count:
                errs.append((f"{where}.devices", f"no GPU {minor} (GPUs 0-{gpu_count - 1})"))
                continue
            if not entry.mig_enabled:
                found.pop(minor, None)
                continue
            too_many = sum(p.placements[0][1] for p in wanted) > memory_slice_count(gpu)
            placed = (
                None
                if too_many
                else _place(minor, sorted(wanted, key=lambda p: -p.memory_mib), set())
            )
            if placed is None:
                unfit.append(str(minor))
                continue
            found[minor] = sorted(placed, key=lambda d: d.start)
        if unfit:
            errs.append(
                (f"{where}.mig-devices", f"the MIG devices do not fit on GPU {', '.join(unfit)}")
            )
    return found, errs


def _place(minor: int, wanted: list[MigProfile], used: set[int]) -> list[MigDevice] | None:
    """The devices placed on free memory slices, trying each free placement in turn."""
    if not wanted:
        return []
    profile, rest = wanted[0], wanted[1:]
    for start, size in sorted(profile.placements, reverse=True):
        taken = set(range(start, start + size))
        if taken & used:
            continue
        placed = _place(minor, rest, used | taken)
        if placed is not None:
            return [MigDevice(minor, profile, start, size), *placed]
    return None
