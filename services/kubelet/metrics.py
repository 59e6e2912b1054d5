"""A kubelet process's metrics (upstream `pkg/kubelet/metrics`), for all the nodes it hosts.

- `dra_operations_duration_seconds{operation_name,is_error}`: how long the DRA manager took
  to prepare (`PrepareResources`) or unprepare (`UnprepareResources`) all the claims of one
  pod, including the calls to the drivers; a failed attempt counts with `is_error="true"`;
- `dra_grpc_operations_duration_seconds{driver_name,method_name,grpc_status_code}`: one
  call to a DRA driver (`NodePrepareResources`, `NodeUnprepareResources`), named by its
  gRPC method as upstream's plugin client names it, with upstream's buckets;
- `kubelet_device_plugin_alloc_duration_seconds{resource_name}`: one device plugin Allocate
  call (per container and extended resource);
- `kubelet_node_name{node}` (1 per hosted node, as each upstream kubelet exposes its own)
  and `drasim_kubelet_nodes`, the number of nodes this process hosts.
"""

from __future__ import annotations

from collections.abc import Callable, Collection

from drasim.common import metrics

__all__ = [
    "DRA_DURATION_BUCKETS",
    "DRA_PLUGIN_SERVICE",
    "PREPARE_RESOURCES",
    "UNPREPARE_RESOURCES",
    "KubeletMetrics",
]

PREPARE_RESOURCES = "PrepareResources"
UNPREPARE_RESOURCES = "UnprepareResources"
# The gRPC service of the DRA kubelet plugin API v1: methods are named `/<service>/<method>`.
DRA_PLUGIN_SERVICE = "k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin"
# Upstream's `DRADurationBuckets`: component-base's ExponentialBucketsRange(0.1, 40, 15).
DRA_DURATION_BUCKETS = metrics.exponential_buckets(0.1, (40 / 0.1) ** (1 / 14), 15)


class KubeletMetrics:
    """The process's registry; `nodes` returns the names of the nodes it hosts."""

    def __init__(self, *, nodes: Callable[[], Collection[str]]) -> None:
        self.registry = metrics.new_registry()
        self._nodes = nodes
        self.dra_operations_duration = metrics.HistogramVec(
            "dra_operations_duration_seconds",
            "Latency histogram in seconds for the duration of handling all ResourceClaims "
            "referenced by a pod when the pod starts or stops. Identified by the name of the "
            "operation (PrepareResources or UnprepareResources) and separated by the success "
            "of the operation. The number of failed operations is provided through the "
            "histogram's overall count.",
            ("operation_name", "is_error"),
            buckets=metrics.DEFAULT_BUCKETS,
        )
        self.dra_grpc_operations_duration = metrics.HistogramVec(
            "dra_grpc_operations_duration_seconds",
            "Duration in seconds of the DRA gRPC operations",
            ("driver_name", "method_name", "grpc_status_code"),
            buckets=DRA_DURATION_BUCKETS,
        )
        self.device_plugin_alloc_duration = metrics.HistogramVec(
            "kubelet_device_plugin_alloc_duration_seconds",
            "Duration in seconds to serve a device plugin Allocation request. Broken down by "
            "resource name.",
            ("resource_name",),
            buckets=metrics.DEFAULT_BUCKETS,
        )
        for collector in (
            self.dra_operations_duration,
            self.dra_grpc_operations_duration,
            self.device_plugin_alloc_duration,
            metrics.Callback(self._collect_nodes, self._node_families(())),
        ):
            self.registry.register(collector)

    def observe_dra_operation(self, operation: str, is_error: bool, seconds: float) -> None:
        self.dra_operations_duration.observe((operation, "true" if is_error else "false"), seconds)

    def observe_dra_grpc_operation(
        self, driver: str, method: str, status_code: str, seconds: float
    ) -> None:
        """One driver call: `method` is the bare gRPC method (`NodePrepareResources`)."""
        self.dra_grpc_operations_duration.observe(
            (driver, f"/{DRA_PLUGIN_SERVICE}/{method}", status_code), seconds
        )

    def observe_device_plugin_allocation(self, resource_name: str, seconds: float) -> None:
        self.device_plugin_alloc_duration.observe((resource_name,), seconds)

    def _collect_nodes(self) -> list[metrics.Metric]:
        return self._node_families(self._nodes(), described=False)

    @staticmethod
    def _node_families(nodes: Collection[str], *, described: bool = True) -> list[metrics.Metric]:
        return [
            metrics.gauge(
                "kubelet_node_name",
                "The node's name. The count is always 1.",
                ("node",),
                [((name,), 1) for name in sorted(nodes)],
            ),
            metrics.gauge(
                "drasim_kubelet_nodes",
                "Nodes this kubelet process hosts.",
                samples=[] if described else [len(nodes)],
            ),
        ]
