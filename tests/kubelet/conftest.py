"""Kubelet processes in the test's event loop, over the in-process apistore."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from drasim.common import cluster_file
from drasim.common.client import ApiClient
from drasim.controllers import dradriver
from drasim.controllers.server import ControllerManager
from drasim.kubelet.run import KubeletProcess
from drasim.scheduler.server import Scheduler

# A DRA node with 8 GPUs, a device-plugin node with 2, and a node with both: GPUs through
# DRA and FPGAs through a device plugin (`example.com/fpga`).
CLUSTER = """
apiVersion: drasim.io/v1alpha1
kind: Cluster
profiles:
  - name: gpu-and-fpga
    cpu: "8"
    memory: 32Gi
    devices:
      - {name: gpu, driver: gpu.example.com, count: 4, attributes: {type: gpu}}
      - {name: fpga, driver: fpga.example.com, count: 2}
pools:
  - name: dra
    profile: gpu-8
    devices: {gpu: {exposure: dra, extendedResourceName: example.com/gpu}}
  - name: dp
    profile: gpu-2
    devices: {gpu: {exposure: device-plugin, extendedResourceName: example.com/gpu}}
  - name: mixed
    profile: gpu-and-fpga
    devices:
      fpga: {exposure: device-plugin, extendedResourceName: example.com/fpga}
"""

DRA_NODE, DP_NODE, MIXED_NODE = "dra-0", "dp-0", "mixed-0"

StartKubelet = Callable[..., Awaitable[KubeletProcess]]


@pytest.fixture
def cluster_path(tmp_path: Path) -> Path:
    path = tmp_path / "cluster.yaml"
    path.write_text(CLUSTER)
    return path


@pytest.fixture
def cluster(cluster_path: Path) -> cluster_file.Cluster:
    return cluster_file.load(cluster_path)


@pytest.fixture
async def start_kubelet(
    api: ApiClient,
    cluster: cluster_file.Cluster,
    tmp_path: Path,
) -> AsyncIterator[StartKubelet]:
    """Start a kubelet process hosting the test cluster's nodes (all, or those named)."""
    running: list[KubeletProcess] = []

    async def start(
        *names: str, state_dir: Path | None = tmp_path / "nodes", **options: Any
    ) -> KubeletProcess:
        nodes = [n for n in cluster.nodes if not names or n.name in names]
        kubelet = KubeletProcess(api=api, nodes=nodes, state_dir=state_dir, **options)
        running.append(kubelet)
        await kubelet.start()
        return kubelet

    yield start
    for kubelet in running:
        await kubelet.stop()


@pytest.fixture
async def kubelet(start_kubelet: StartKubelet) -> KubeletProcess:
    return await start_kubelet()


RunClusterFile = Callable[[str], Awaitable[cluster_file.Cluster]]


@pytest.fixture
async def run_cluster_file(api: ApiClient, tmp_path: Path) -> AsyncIterator[RunClusterFile]:
    """Run a cluster file's text as `drasim up` would, in-process: its classes, slices and
    drivers' RBAC created first, then a kubelet for all its nodes, a scheduler and the
    controllers (with its `drivers:`); all stopped at the end."""
    stops: list[Callable[[], Awaitable[None]]] = []

    async def run(text: str) -> cluster_file.Cluster:
        path = tmp_path / "cluster.yaml"
        path.write_text(text)
        cluster = cluster_file.load(path)
        spec = cluster.spec
        for obj in [*cluster.device_classes(), *spec.resource_slices, *dradriver.rbac()]:
            await api.create(obj)
        components = (
            KubeletProcess(api=api, nodes=cluster.nodes, state_dir=tmp_path / "nodes"),
            Scheduler(ApiClient(api.bus, actor="system:kube-scheduler")),
            ControllerManager(api.bus, drivers=cluster.drivers()),
        )
        for component in components:
            await component.start()
            stops.append(component.stop)
        return cluster

    yield run
    for stop in reversed(stops):
        await stop()
