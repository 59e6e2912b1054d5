"""Workloads on a whole cluster (HTTP apistore, scheduler, controllers, kubelet emulators),
driven with kubectl: `kubectl rollout status` on a DaemonSet and a StatefulSet, and a
DaemonSet following nodes as they are added and removed."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from drasim.common.api import core_v1
from tests.controllers.test_daemonset import DAEMON_SET as GPU_DAEMON_SET
from tests.http.test_workload_kinds import STATEFUL_SET
from tests.http.whole_cluster import WholeCluster, open_whole_cluster

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
async def whole_cluster(cluster: Any, fresh: Any, tmp_path: Path) -> AsyncIterator[WholeCluster]:
    """The HTTP cluster with a scheduler, the controllers, and a kubelet per node (so a
    node can be stopped alone), none started yet."""
    async with open_whole_cluster(cluster, fresh, tmp_path, CLUSTER) as whole:
        yield whole


def daemon_pods(whole: WholeCluster) -> dict[str, core_v1.Pod]:
    return {p.spec.node_name: p for p in whole.pods("default", app="driver").values()}


async def test_a_daemon_set_follows_nodes_added_and_removed(kubectl, whole_cluster) -> None:
    whole = whole_cluster
    await whole.start("node-0", "node-1")
    await kubectl("apply", "-f", "-", input=DAEMON_SET)
    rolled = await kubectl("rollout", "status", "daemonset/driver", "--timeout=30s")
    assert rolled.stdout.strip().endswith('daemon set "driver" successfully rolled out')
    assert set(daemon_pods(whole)) == {"node-0", "node-1"}

    await whole.start("node-2")  # a node added
    await whole.changes.until(lambda: set(daemon_pods(whole)) == {"node-0", "node-1", "node-2"})
    await kubectl("rollout", "status", "daemonset/driver", "--timeout=30s")
    running: Callable[[], bool] = lambda: all(  # noqa: E731
        p.status.phase == "Running" for p in daemon_pods(whole).values()
    )
    await whole.changes.until(running)

    await whole.stop("node-1")  # a node removed: its kubelet gone, then its Node
    await kubectl("delete", "node", "node-1")
    await whole.changes.until(lambda: set(daemon_pods(whole)) == {"node-0", "node-2"})
    table = await kubectl("get", "ds", "driver")
    assert table.stdout.splitlines()[1].split()[:6] == ["driver", "2", "2", "2", "2", "2"]


async def test_rollout_status_of_a_stateful_set_and_its_update(kubectl, whole_cluster) -> None:
    await whole_cluster.start("node-0", "node-1")
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


async def test_rollout_status_history_and_undo_of_a_deployment(kubectl, whole_cluster) -> None:
    await whole_cluster.start("node-0", "node-1")
    await kubectl("create", "deployment", "web", "--image=registry.k8s.io/pause:3.10",
                  "--replicas=3")  # fmt: skip
    rolled = await kubectl("rollout", "status", "deployment/web", "--timeout=18s")
    assert rolled.stdout.strip().endswith('deployment "web" successfully rolled out')
    await kubectl("set", "image", "deployment/web", "pause=registry.k8s.io/pause:3.9")
    await kubectl("rollout", "status", "deployment/web", "--timeout=18s")
    images = await kubectl(
        "get", "pods", "-l", "app=web", "-o", "jsonpath={.items[*].spec.containers[0].image}"
    )
    assert images.stdout.split() == ["registry.k8s.io/pause:3.9"] * 3
    history = await kubectl("rollout", "history", "deployment/web")
    assert [line.split()[0] for line in history.stdout.splitlines()[2:] if line.strip()] == [
        "1",
        "2",
    ]
    await kubectl("rollout", "undo", "deployment/web")
    await kubectl("rollout", "status", "deployment/web", "--timeout=18s")
    images = await kubectl(
        "get", "deploy", "web", "-o", "jsonpath={.spec.template.spec.containers[0].image}"
    )
    assert images.stdout == "registry.k8s.io/pause:3.10"


async def test_rollout_status_of_a_daemon_set_update(kubectl, whole_cluster) -> None:
    await whole_cluster.start("node-0", "node-1")
    await kubectl("apply", "-f", "-", input=DAEMON_SET)
    await kubectl("rollout", "status", "daemonset/driver", "--timeout=18s")
    await kubectl("set", "image", "daemonset/driver", "plugin=registry.k8s.io/pause:3.9")
    rolled = await kubectl("rollout", "status", "daemonset/driver", "--timeout=18s")
    assert rolled.stdout.strip().endswith('daemon set "driver" successfully rolled out')
    await whole_cluster.changes.until(
        lambda: (
            sorted(
                (node, p.spec.containers[0].image) for node, p in daemon_pods(whole_cluster).items()
            )
            == [("node-0", "registry.k8s.io/pause:3.9"), ("node-1", "registry.k8s.io/pause:3.9")]
        )
    )
