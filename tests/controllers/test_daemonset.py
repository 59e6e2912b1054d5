"""The DaemonSet controller against a real apistore: one pod per matching node, following
nodes added, relabelled, tainted and removed, and a rolling update of the template. The
pods' node is their node affinity (the scheduler, absent here, would bind them there)."""

from __future__ import annotations

import pytest

from drasim.common import codec
from drasim.common.api import apps_v1, core_v1
from drasim.common.client import ApiClient
from drasim.controllers import ControllerManager, daemonsetutil
from tests.builders import make_node
from tests.controllers.conftest import Changes, FakeKubelet

DAEMON_SET = """\
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: driver
spec:
  selector:
    matchLabels: {app: driver}
  template:
    metadata:
      labels: {app: driver}
    spec:
      nodeSelector: {gpu: "true"}
      containers:
      - name: plugin
        image: registry.k8s.io/pause:3.10
"""


def make_daemon_set() -> apps_v1.DaemonSet:
    [document] = codec.load_yaml_documents(DAEMON_SET)
    return codec.convert(document, apps_v1.DaemonSet)


def node(
    name: str, *, gpu: bool = True, taints: list[dict[str, str]] | None = None
) -> core_v1.Node:
    made = make_node(name)
    if gpu:
        made.metadata.labels["gpu"] = "true"
    made.spec.taints = [codec.convert(t, core_v1.Taint) for t in taints or []]
    return made


def placement(manager: ControllerManager) -> dict[str, str]:
    """Live daemon pods by their node, with their revision hash."""
    return {
        daemonsetutil.target_node(p): p.metadata.labels[apps_v1.CONTROLLER_REVISION_HASH_LABEL]
        for p in manager.pods.cache.values()
        if p.metadata.labels.get("app") == "driver" and p.metadata.deletion_timestamp is None
    }


def ds_status(manager: ControllerManager) -> apps_v1.DaemonSetStatus:
    ds = manager.daemon_sets.get("driver", "default")
    return ds.status if ds is not None else apps_v1.DaemonSetStatus()


async def test_one_pod_per_matching_node_following_the_nodes(
    api: ApiClient, manager: ControllerManager, changes: Changes, kubelet: FakeKubelet
) -> None:
    for made in (node("gpu-0"), node("gpu-1"), node("cpu-0", gpu=False)):
        await api.create(made)
    await api.create(make_daemon_set())
    await changes.until(lambda: set(placement(manager)) == {"gpu-0", "gpu-1"})
    status = await changes.until(
        lambda: ds_status(manager).number_ready == 2 and ds_status(manager)
    )
    assert (status.desired_number_scheduled, status.current_number_scheduled) == (2, 2)
    assert (status.updated_number_scheduled, status.number_available) == (2, 2)
    pod = next(p for p in manager.pods.cache.values() if p.metadata.labels.get("app") == "driver")
    keys = {(t.key, t.effect) for t in pod.spec.tolerations}
    assert ("node.kubernetes.io/unschedulable", "NoSchedule") in keys
    assert ("node.kubernetes.io/not-ready", "NoExecute") in keys
    assert pod.metadata.labels[daemonsetutil.TEMPLATE_GENERATION_LABEL] == "1"

    # A node added gets a pod; a node relabelled or removed loses it.
    await api.create(node("gpu-2"))
    await changes.until(lambda: set(placement(manager)) == {"gpu-0", "gpu-1", "gpu-2"})
    await api.patch(core_v1.Node, "gpu-1", {"metadata": {"labels": {"gpu": None}}})
    await api.delete(core_v1.Node, "gpu-0")
    await changes.until(lambda: set(placement(manager)) == {"gpu-2"})
    await changes.until(lambda: ds_status(manager).desired_number_scheduled == 1)


@pytest.mark.parametrize(("effect", "runs"), [("NoSchedule", False), ("PreferNoSchedule", True)])
async def test_taints_keep_new_pods_off_unless_tolerated(
    api: ApiClient, manager: ControllerManager, changes: Changes, effect: str, runs: bool
) -> None:
    await api.create(node("plain"))
    await api.create(node("tainted", taints=[{"key": "dedicated", "value": "x", "effect": effect}]))
    # A cordoned node keeps daemon pods: they tolerate `unschedulable`.
    await api.create(
        node(
            "cordoned", taints=[{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]
        )
    )
    await api.create(make_daemon_set())
    expected = {"plain", "cordoned", *(["tainted"] if runs else [])}
    await changes.until(lambda: set(placement(manager)) == expected)


async def test_a_template_change_rolls_out_node_by_node(
    api: ApiClient, manager: ControllerManager, changes: Changes, kubelet: FakeKubelet
) -> None:
    for name in ("gpu-0", "gpu-1", "gpu-2"):
        await api.create(node(name))
    await api.create(make_daemon_set())
    first = await changes.until(
        lambda: ds_status(manager).number_available == 3 and set(placement(manager).values())
    )
    await api.patch(
        apps_v1.DaemonSet,
        "driver",
        {"spec": {"template": {"metadata": {"labels": {"app": "driver", "v": "2"}}}}},
        namespace="default",
    )
    most_replaced_at_once = 0

    def rolled() -> bool:
        nonlocal most_replaced_at_once
        live = placement(manager)
        most_replaced_at_once = max(most_replaced_at_once, 3 - len(live))
        status = ds_status(manager)
        return (
            len(live) == 3
            and not set(live.values()) & first
            and status.updated_number_scheduled == 3
            and status.number_available == 3
            and status.observed_generation == 2
        )

    await changes.until(rolled)
    assert most_replaced_at_once <= 1  # maxUnavailable 1
