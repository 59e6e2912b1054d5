"""Workloads on a whole cluster (HTTP apistore, scheduler, controllers, kubelet emulators),
driven with kubectl: `kubectl rollout status` on a DaemonSet and a StatefulSet, and a
DaemonSet following nodes as they are added and removed."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from drasim.common import cluster_file
from drasim.common.api import core_v1
from drasim.common.bus.client import Bus
from drasim.common.client import ApiClient
from drasim.kubelet.run import KubeletProcess
from drasim.scheduler.server import Scheduler
from tests.controllers.conftest import Changes, running_controllers
from tests.controllers.test_daemonset import DAEMON_SET as GPU_DAEMON_SET
from tests.http.test_workload_kinds import STATEFUL_SET

# The driver DaemonSet, on every node.
DAEMON_SET = GPU_DAEMON_SET.replace('      nodeSelector: {gpu: "true"}\n', "")

CLUSTER = """\
apiVersion: drasim.io/v1alpha1
kind: Cluster
pools:
  - name: node
    count: 3
    profile: cpu-only
"""


@pytest.fixture
async def whole_cluster(cluster: Any, fresh: Any, tmp_path: Path) -> AsyncIterator[Any]:
    """The HTTP cluster with a scheduler, the controllers, and a kubelet per node (so a
    node can be stopped alone); yields a starter of the nodes' kubelets and the changes."""
    path = tmp_path / "cluster.yaml"
    path.write_text(CLUSTER)
    nodes = {n.name: n for n in cluster_file.load(path).nodes}
    bus = await Bus.connect(fresh.nats_url, prefix=fresh.prefix, name="scheduler")
    scheduler = Scheduler(ApiClient(bus, actor="system:kube-scheduler"))
    kubelets: dict[str, KubeletProcess] = {}

    async def start(name: str) -> None:
        kubelet = KubeletProcess(api=cluster.api, nodes=[nodes[name]], state_dir=tmp_path / name)
        kubelets[name] = kubelet
        await kubelet.start()

    async def stop(name: str) -> None:
        await kubelets.pop(name).stop()

    await scheduler.start()
    try:
        async with running_controllers(fresh) as manager:
            yield start, stop, Changes(*manager.informers), manager
    finally:
        for kubelet in kubelets.values():
            with contextlib.suppress(Exception):
                await kubelet.stop()
        await scheduler.stop()
        for informer in scheduler.informers:
            await informer.stop()
        await bus.close()


def daemon_pods(manager: Any) -> dict[str, core_v1.Pod]:
    return {
        p.spec.node_name: p
        for p in manager.pods.cache.values()
        if p.metadata.labels.get("app") == "driver" and p.metadata.deletion_timestamp is None
    }


async def test_a_daemon_set_follows_nodes_added_and_removed(kubectl, whole_cluster) -> None:
    start, stop, changes, manager = whole_cluster
    await start("node-0")
    await start("node-1")
    await kubectl("apply", "-f", "-", input=DAEMON_SET)
    rolled = await kubectl("rollout", "status", "daemonset/driver", "--timeout=30s")
    assert rolled.stdout.strip().endswith('daemon set "driver" successfully rolled out')
    assert set(daemon_pods(manager)) == {"node-0", "node-1"}

    await start("node-2")  # a node added
    await changes.until(lambda: set(daemon_pods(manager)) == {"node-0", "node-1", "node-2"})
    await kubectl("rollout", "status", "daemonset/driver", "--timeout=30s")
    running: Callable[[], bool] = lambda: all(  # noqa: E731
        p.status.phase == "Running" for p in daemon_pods(manager).values()
    )
    await changes.until(running)

    await stop("node-1")  # a node removed: its kubelet gone, then its Node
    await kubectl("delete", "node", "node-1")
    await changes.until(lambda: set(daemon_pods(manager)) == {"node-0", "node-2"})
    table = await kubectl("get", "ds", "driver")
    assert table.stdout.splitlines()[1].split()[:6] == ["driver", "2", "2", "2", "2", "2"]


async def test_rollout_status_of_a_stateful_set_and_its_update(kubectl, whole_cluster) -> None:
    start, _stop, changes, manager = whole_cluster
    await start("node-0")
    await start("node-1")
    await kubectl("apply", "-f", "-", input=STATEFUL_SET)
    rolled = await kubectl("rollout", "status", "statefulset/db", "--timeout=30s")
    assert rolled.stdout.strip().endswith(
        "partitioned roll out complete: 2 new pods have been updated..."
    )
    pods = await kubectl("get", "pods", "-l", "app=db", "-o", "name")
    assert pods.stdout.split() == ["pod/db-0", "pod/db-1"]
    await kubectl("set", "image", "statefulset/db", "db=registry.k8s.io/pause:3.9")
    await kubectl("rollout", "status", "statefulset/db", "--timeout=30s")
    images = await kubectl(
        "get", "pods", "-l", "app=db", "-o", "jsonpath={.items[*].spec.containers[0].image}"
    )
    assert images.stdout.split() == ["registry.k8s.io/pause:3.9"] * 2
