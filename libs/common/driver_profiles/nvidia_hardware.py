"""The GPU servers the NVIDIA driver profiles emulate: what NVML reports for each GPU.

The NVIDIA DRA driver (kubernetes-sigs/dra-driver-nvidia-gpu) publishes what NVML tells it
(`getGpuInfo` in cmd/gpu-kubelet-plugin/nvlib.go), so a faithful profile starts from what
NVML reports on the real server. The servers, product names, memory, PCI layout and
driver versions are those of the nvml-mock profiles of NVIDIA/k8s-test-infra
(deployments/nvml-mock/helm/nvml-mock/profiles/); servers it has no profile for (A100 80GB,
H200, GH200) take NVIDIA's published names. MIG GPU instance profiles (multiprocessors,
engines, memory) are those of go-nvml's mock GPUs (pkg/nvml/mock/gpus/), with the profile
IDs and placements NVML reports on the hardware (`nvidia-smi mig -lgip` / `-lgipp`): eight
memory slices, a 3g instance taking four of them, as the driver's own partitions.go notes
for B200. GH200's table is H100's with its 96 GB.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["GpuModel", "MigProfile", "Server", "SERVERS"]

MIB = 1024 * 1024
GIB = 1024 * MIB


@dataclass(frozen=True)
class MigProfile:
    """One GPU instance profile (`nvml.GpuInstanceProfileInfo`) and where it may be placed."""

    name: str  # as go-nvlib prints it: 1g.10gb, 1g.10gb+me
    profile_id: int  # the GI profile ID NVML reports (19 for 1g.10gb)
    memory_mib: int
    multiprocessors: int
    copy_engines: int
    decoders: int
    encoders: int
    jpeg_engines: int
    ofa_engines: int
    placements: tuple[tuple[int, int], ...]  # (start, size) in memory slices

    @property
    def slices(self) -> int:
        """Compute slices (the `g` of `1g.10gb`): what mig-parted and the plugin count."""
        return int(self.name.split("g.", 1)[0])


@dataclass(frozen=True)
class GpuModel:
    product_name: str
    architecture: str  # go-nvlib's GetArchitectureAsString
    cuda_compute_capability: str
    memory_bytes: int
    mig_profiles: tuple[MigProfile, ...] = ()
    brand: str = "Nvidia"  # go-nvlib's GetBrandAsString of BRAND_NVIDIA
    addressing_mode: str | None = None  # coherent (Grace) systems only

    @property
    def mig_capable(self) -> bool:
        return bool(self.mig_profiles)

    def mig_profile(self, name: str) -> MigProfile | None:
        return next((p for p in self.mig_profiles if p.name == name), None)


@dataclass(frozen=True)
class PciRoot:
    name: str  # the PCIe root complex, as the standard pcieRoot attribute names it
    numa_node: int
    bus_ids: tuple[str, ...]


@dataclass(frozen=True)
class Server:
    """A node profile: its GPUs (minor i has `bus_ids()[i]`) and the rest of the machine."""

    name: str
    gpu: GpuModel
    roots: tuple[PciRoot, ...]
    gpu_order: tuple[str, ...]  # PCI bus IDs by minor number
    driver_version: str
    cuda_driver_version: str
    cpu: str
    memory: str

    @property
    def gpu_count(self) -> int:
        return len(self.gpu_order)

    def root_of(self, bus_id: str) -> PciRoot:
        return next(r for r in self.roots if bus_id in r.bus_ids)


# Placements NVML reports for each kind of GPU instance (start, size in memory slices).
_ONE = tuple((i, 1) for i in range(7))
_ONE_DOUBLE = ((0, 2), (2, 2), (4, 2), (6, 2))
_TWO = ((0, 2), (2, 2), (4, 2))
_THREE = ((0, 4), (4, 4))
_FOUR = ((0, 4),)
_SEVEN = ((0, 8),)

# The GI profile IDs NVML reports, and the placements, per kind of instance.
_KINDS = {
    "1g": (19, _ONE),
    "1g+me": (20, _ONE),
    "1g-double": (15, _ONE_DOUBLE),
    "2g": (14, _TWO),
    "3g": (9, _THREE),
    "4g": (5, _FOUR),
    "7g": (0, _SEVEN),
}


def _table(*rows: tuple[str, str, int, int, int, int, int, int, int]) -> tuple[MigProfile, ...]:
    """Rows of (kind, name, memory MiB, multiprocessors, copy engines, decoders, encoders,
    jpeg engines, ofa engines)."""
    profiles = []
    for kind, name, memory, sms, copy, dec, enc, jpeg, ofa in rows:
        profile_id, placements = _KINDS[kind]
        profiles.append(
            MigProfile(name, profile_id, memory, sms, copy, dec, enc, jpeg, ofa, placements)
        )
    return tuple(profiles)


# fmt: off
A100_40GB = GpuModel("NVIDIA A100-SXM4-40GB", "Ampere", "8.0", 40 * GIB, _table(
    ("1g", "1g.5gb", 4864, 14, 1, 0, 0, 0, 0),
    ("1g+me", "1g.5gb+me", 4864, 14, 1, 1, 0, 1, 1),
    ("1g-double", "1g.10gb", 9856, 14, 1, 1, 0, 0, 0),
    ("2g", "2g.10gb", 9856, 28, 2, 1, 0, 0, 0),
    ("3g", "3g.20gb", 19968, 42, 3, 2, 0, 0, 0),
    ("4g", "4g.20gb", 19968, 56, 4, 2, 0, 0, 0),
    ("7g", "7g.40gb", 40192, 98, 7, 5, 0, 1, 1),
))
A100_80GB = GpuModel("NVIDIA A100-SXM4-80GB", "Ampere", "8.0", 80 * GIB, _table(
    ("1g", "1g.10gb", 9856, 14, 1, 1, 0, 0, 0),
    ("1g+me", "1g.10gb+me", 9856, 14, 1, 1, 0, 1, 1),
    ("1g-double", "1g.20gb", 19968, 14, 1, 1, 0, 0, 0),
    ("2g", "2g.20gb", 19968, 28, 2, 1, 0, 0, 0),
    ("3g", "3g.40gb", 40192, 42, 3, 2, 0, 0, 0),
    ("4g", "4g.40gb", 40192, 56, 4, 2, 0, 0, 0),
    ("7g", "7g.80gb", 80384, 98, 7, 5, 0, 1, 1),
))
H100_80GB = GpuModel("NVIDIA H100 80GB HBM3", "Hopper", "9.0", 80 * GIB, _table(
    ("1g", "1g.10gb", 10240, 16, 1, 1, 0, 0, 0),
    ("1g+me", "1g.10gb+me", 10240, 16, 1, 1, 0, 1, 1),
    ("1g-double", "1g.20gb", 20480, 16, 1, 1, 0, 0, 0),
    ("2g", "2g.20gb", 20480, 32, 2, 1, 0, 0, 0),
    ("3g", "3g.40gb", 40960, 48, 3, 2, 0, 0, 0),
    ("4g", "4g.40gb", 40960, 64, 4, 2, 0, 0, 0),
    ("7g", "7g.80gb", 81920, 112, 7, 5, 0, 0, 0),
))
H200 = GpuModel("NVIDIA H200", "Hopper", "9.0", 144384 * MIB, _table(
    ("1g", "1g.18gb", 18432, 16, 1, 1, 0, 0, 0),
    ("1g+me", "1g.18gb+me", 18432, 16, 1, 1, 0, 1, 1),
    ("1g-double", "1g.35gb", 35840, 16, 1, 1, 0, 0, 0),
    ("2g", "2g.35gb", 35840, 32, 2, 1, 0, 0, 0),
    ("3g", "3g.71gb", 72704, 48, 3, 2, 0, 0, 0),
    ("4g", "4g.71gb", 72704, 64, 4, 2, 0, 0, 0),
    ("7g", "7g.141gb", 144384, 112, 7, 5, 0, 0, 0),
))
GH200 = GpuModel("NVIDIA GH200 96GB HBM3", "Hopper", "9.0", 96 * GIB, _table(
    ("1g", "1g.12gb", 12288, 16, 1, 1, 0, 0, 0),
    ("1g+me", "1g.12gb+me", 12288, 16, 1, 1, 0, 1, 1),
    ("1g-double", "1g.24gb", 24576, 16, 1, 1, 0, 0, 0),
    ("2g", "2g.24gb", 24576, 32, 2, 1, 0, 0, 0),
    ("3g", "3g.48gb", 49152, 48, 3, 2, 0, 0, 0),
    ("4g", "4g.48gb", 49152, 64, 4, 2, 0, 0, 0),
    ("7g", "7g.96gb", 98304, 112, 7, 5, 0, 0, 0),
), addressing_mode="ATS")
B200 = GpuModel("NVIDIA B200", "Blackwell", "10.0", 192 * GIB, _table(
    ("1g", "1g.23gb", 23552, 18, 1, 1, 0, 0, 0),
    ("1g+me", "1g.23gb+me", 23552, 18, 1, 1, 1, 1, 1),
    ("1g-double", "1g.45gb", 46080, 18, 1, 1, 0, 0, 0),
    ("2g", "2g.45gb", 46080, 36, 2, 2, 1, 1, 1),
    ("3g", "3g.90gb", 92160, 54, 3, 3, 2, 2, 2),
    ("4g", "4g.90gb", 92160, 72, 4, 4, 2, 2, 2),
    ("7g", "7g.180gb", 184320, 126, 7, 7, 4, 4, 4),
))
L40S = GpuModel("NVIDIA L40S", "Ada Lovelace", "8.9", 48 * GIB)
T4 = GpuModel("NVIDIA T4", "Turing", "7.5", 16 * GIB)
# fmt: on

# PCI layouts of the nvml-mock profiles: (root complex, NUMA node, bus IDs of its GPUs).
_DGX_A100 = (
    PciRoot("pci0000:00", 0, ("0000:07:00.0", "0000:0f:00.0", "0000:47:00.0", "0000:4e:00.0")),
    PciRoot("pci0000:80", 1, ("0000:87:00.0", "0000:90:00.0", "0000:b7:00.0", "0000:bd:00.0")),
)
_HGX = (
    PciRoot("pci0000:00", 0, ("0000:1a:00.0", "0000:1b:00.0", "0000:4a:00.0", "0000:4b:00.0")),
    PciRoot("pci0000:80", 1, ("0000:8a:00.0", "0000:8b:00.0", "0000:ca:00.0", "0000:cb:00.0")),
)
_L40S_SERVER = (
    PciRoot("pci0000:00", 0, ("0000:17:00.0", "0000:18:00.0", "0000:31:00.0", "0000:32:00.0")),
    PciRoot("pci0000:80", 1, ("0000:b1:00.0", "0000:b2:00.0", "0000:ca:00.0", "0000:cb:00.0")),
)
_L40S_ORDER = (
    "0000:17:00.0", "0000:31:00.0", "0000:b1:00.0", "0000:ca:00.0",
    "0000:18:00.0", "0000:32:00.0", "0000:b2:00.0", "0000:cb:00.0",
)  # fmt: skip
_T4_SERVER = (
    PciRoot("pci0000:00", 0, ("0000:3b:00.0", "0000:86:00.0", "0000:af:00.0", "0000:d8:00.0")),
)
_GH200_NVL2 = (
    PciRoot("pci0009:00", 0, ("0009:01:00.0",)),
    PciRoot("pci0019:00", 1, ("0019:01:00.0",)),
)


def _in_order(roots: tuple[PciRoot, ...]) -> tuple[str, ...]:
    return tuple(bus_id for root in roots for bus_id in root.bus_ids)


_R550 = ("550.163.01", "12.4")
SERVERS: dict[str, Server] = {
    s.name: s
    for s in (
        Server("nvidia-dgx-a100-40gb", A100_40GB, _DGX_A100, _in_order(_DGX_A100), *_R550,
               cpu="256", memory="1Ti"),
        Server("nvidia-dgx-a100-80gb", A100_80GB, _DGX_A100, _in_order(_DGX_A100), *_R550,
               cpu="256", memory="2Ti"),
        Server("nvidia-dgx-h100", H100_80GB, _HGX, _in_order(_HGX), *_R550,
               cpu="224", memory="2Ti"),
        Server("nvidia-h200-8", H200, _HGX, _in_order(_HGX), *_R550, cpu="224", memory="2Ti"),
        Server("nvidia-b200-8", B200, _HGX, _in_order(_HGX), "560.35.03", "12.6",
               cpu="224", memory="4Ti"),
        Server("nvidia-gh200-2", GH200, _GH200_NVL2, _in_order(_GH200_NVL2), *_R550,
               cpu="144", memory="960Gi"),
        Server("nvidia-l40s", L40S, _L40S_SERVER, _L40S_ORDER, *_R550, cpu="128", memory="1Ti"),
        Server("nvidia-t4", T4, _T4_SERVER, _in_order(_T4_SERVER), *_R550,
               cpu="64", memory="384Gi"),
    )
}  # fmt: skip
