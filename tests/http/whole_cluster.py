"""A whole cluster behind the test's HTTP apistore: a scheduler, the controllers and one
kubelet emulator per node of a cluster file, so kubectl sees workloads make pods that
run, and a node can join or leave alone."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from drasim.common import cluster_file
from drasim.common.api import core_v1
from drasim.common.bus.client import Bus
from drasim.common.client import ApiClient
from drasim.controllers import ControllerManager, dradriver
from drasim.kubelet.run import KubeletProcess
from drasim.scheduler.server import Scheduler
from tests.controllers.conftest import Changes, running_controllers

# A cluster file's start: KEP-5004's DeviceClass, mapping `example.com/gpu` to the GPUs of
# the driver `gpu.example.com`. Its `pools:` follow.
WITH_GPU_CLASS = """\
apiVersion: drasim.io/v1alpha1
kind: Cluster
deviceClasses:
  - apiVersion: resource.k8s.io/v1
    kind: DeviceClass
    metadata: {name: gpu.example.com}
    spec:
      selectors: [{cel: {expression: "device.driver == 'gpu.example.com'"}}]
      extendedResourceName: example.com/gpu
"""


def ready(pod: core_v1.Pod) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions)


@dataclass
class WholeCluster:
    """The cluster file's nodes, none started yet; `changes` wakes on every event the
    controllers' informers see (pods, nodes, workloads)."""

    nodes: dict[str, cluster_file.Node]
    manager: ControllerManager
    changes: Changes
    api: ApiClient
    state_dir: Path
    kubelets: dict[str, KubeletProcess] = field(default_factory=dict)

    async def start(self, *names: str) -> None:
        """Start the kubelets of `names` (every node without names)."""
        for name in names or list(self.nodes):
            kubelet = KubeletProcess(
                api=self.api, nodes=[self.nodes[name]], state_dir=self.state_dir / name
            )
            self.kubelets[name] = kubelet
            await kubelet.start()

    async def stop(self, name: str) -> None:
        await self.kubelets.pop(name).stop()

    def pods(self, namespace: str, **labels: str) -> dict[str, core_v1.Pod]:
        """The live (not deleting) pods in `namespace` with `labels`, by name."""
        return {
            p.metadata.name: p
            for p in self.manager.pods.cache.values()
            if p.metadata.namespace == namespace
            and p.metadata.deletion_timestamp is None
            and labels.items() <= p.metadata.labels.items()
        }


@contextlib.asynccontextmanager
async def open_whole_cluster(
    cluster: Any, fresh: Any, tmp_path: Path, text: str
) -> AsyncIterator[WholeCluster]:
    """`cluster` (tests/http/conftest.py) running the cluster file `text` as `drasim up`
    does: its DeviceClasses, ResourceSlices and the drivers' RBAC first, then a scheduler
    and the controllers; the kubelets start when the test says so. All stop at the end."""
    path = tmp_path / "cluster.yaml"
    path.write_text(text)
    loaded = cluster_file.load(path)
    for obj in [*loaded.spec.device_classes, *loaded.spec.resource_slices, *dradriver.rbac()]:
        await cluster.api.create(obj)
    bus = await Bus.connect(fresh.nats_url, prefix=fresh.prefix, name="scheduler")
    scheduler = Scheduler(ApiClient(bus, actor="system:kube-scheduler"))
    whole: WholeCluster | None = None
    await scheduler.start()
    try:
        async with running_controllers(fresh, drivers=loaded.spec.drivers) as manager:
            whole = WholeCluster(
                nodes={n.name: n for n in loaded.nodes},
                manager=manager,
                changes=Changes(*manager.informers),
                api=cluster.api,
                state_dir=tmp_path / "nodes",
            )
            try:
                yield whole
            finally:
                for kubelet in whole.kubelets.values():
                    with contextlib.suppress(Exception):
                        await kubelet.stop()
    finally:
        await scheduler.stop()
        for informer in scheduler.informers:
            await informer.stop()
        await bus.close()
