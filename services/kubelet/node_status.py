"""The Node object a kubelet registers and keeps current: labels, spec at registration,
and a status whose capacity and allocatable include the device plugins' resources but
never the devices a DRA driver publishes (those are in ResourceSlices; KEP-5004's
"Non-Goals").
"""

from __future__ import annotations

from collections.abc import Mapping

from drasim.common import tables, version
from drasim.common.api import core_v1, meta_v1
from drasim.common.cluster_file import DeviceExposure, NodeConfig
from drasim.common.quantity import Quantity
from drasim.drivers.device_plugin import DevicePlugin

__all__ = [
    "EXPOSURE_LABEL_PREFIX",
    "KUBELET_VERSION",
    "POOL_LABEL",
    "allocatable",
    "internal_ip",
    "labels",
    "new_node",
    "pod_cidr",
    "status",
]

POOL_LABEL = "drasim.io/pool"
EXPOSURE_LABEL_PREFIX = "exposure.drasim.io/"  # + device group: "dra" or "device-plugin"
# As upstream's kubelet, its binary's version (never the emulated release).
KUBELET_VERSION = version.GIT_VERSION

# (type, status, reason, message) of a healthy node, as the kubelet reports them.
_CONDITIONS = (
    ("MemoryPressure", "False", "KubeletHasSufficientMemory",
     "kubelet has sufficient memory available"),
    ("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
    ("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
    ("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
)  # fmt: skip


def internal_ip(index: int) -> str:
    """The InternalIP of the cluster's `index`-th node: 172.16.0.1 onwards."""
    i = index + 1
    return f"172.{16 + i // 65536 % 16}.{i // 256 % 256}.{i % 256}"


def pod_cidr(index: int) -> str:
    """The `index`-th node's pod CIDR (one /24 each), as the node IPAM controller gives."""
    return f"10.{index // 256 % 256}.{index % 256}.0/24"


def labels(config: NodeConfig, exposures: Mapping[str, DeviceExposure]) -> dict[str, str]:
    """The pool's labels, the well-known node labels, the pool and each group's exposure."""
    return {
        **config.pool.labels,
        "kubernetes.io/hostname": config.name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "node.kubernetes.io/instance-type": config.profile.name,
        POOL_LABEL: config.pool.name,
        **{EXPOSURE_LABEL_PREFIX + g: e.exposure for g, e in exposures.items()},
    }


def allocatable(
    machine: Mapping[str, Quantity], plugins: Mapping[str, DevicePlugin]
) -> dict[str, Quantity]:
    """Machine resources and each device plugin's healthy devices."""
    return {**machine, **{name: Quantity(p.allocatable) for name, p in plugins.items()}}


def status(
    config: NodeConfig,
    *,
    machine: Mapping[str, Quantity],
    plugins: Mapping[str, DevicePlugin],
    internal_ip: str,
    previous: core_v1.NodeStatus | None,
) -> core_v1.NodeStatus:
    """The node's status now; condition times carry over from `previous`."""
    now = tables.format_time()
    before = {c.type: c for c in previous.conditions} if previous is not None else {}
    return core_v1.NodeStatus(
        capacity={**machine, **{name: Quantity(p.capacity) for name, p in plugins.items()}},
        allocatable=allocatable(machine, plugins),
        conditions=[
            core_v1.NodeCondition(
                type=kind,
                status=state,
                reason=reason,
                message=message,
                last_heartbeat_time=before[kind].last_heartbeat_time if kind in before else now,
                last_transition_time=before[kind].last_transition_time if kind in before else now,
            )
            for kind, state, reason, message in _CONDITIONS
        ],
        addresses=[
            core_v1.NodeAddress(type="InternalIP", address=internal_ip),
            core_v1.NodeAddress(type="Hostname", address=config.name),
        ],
        node_info=core_v1.NodeSystemInfo(
            machine_id=config.name,
            kernel_version="6.8.0-drasim",
            os_image="drasim emulated node",
            container_runtime_version="drasim://0.1.0",
            kubelet_version=KUBELET_VERSION,
            operating_system="linux",
            architecture="amd64",
        ),
    )


def new_node(
    config: NodeConfig,
    *,
    node_labels: dict[str, str],
    node_status: core_v1.NodeStatus,
    pod_cidr: str,
) -> core_v1.Node:
    """The Node to register; taints are set here only, as `--register-with-taints` does."""
    return core_v1.Node(
        metadata=meta_v1.ObjectMeta(name=config.name, labels=node_labels),
        spec=core_v1.NodeSpec(
            pod_cidr=pod_cidr,
            pod_cidrs=[pod_cidr],
            provider_id=f"drasim://{config.name}",
            taints=list(config.pool.taints),
        ),
        status=node_status,
    )
