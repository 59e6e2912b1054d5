"""Scheduling gates through kubectl, with a scheduler running: a gated pod stays Pending
with upstream's SchedulingGated condition and STATUS column; removing its last gate
schedules it; adding a gate is refused with upstream's 422."""

from __future__ import annotations

import json
import random
from collections.abc import AsyncIterator

import pytest

from drasim.common.client import ApiClient
from drasim.scheduler.server import Scheduler
from tests.builders import make_node
from tests.http.conftest import Cluster
from tests.metrics.scraping import Changes
from tests.scheduler.e2e.conftest import ClusterWatch

GATED_POD = """\
apiVersion: v1
kind: Pod
metadata:
  name: gated
spec:
  schedulingGates:
  - name: example.com/quota
  - name: example.com/review
  containers:
  - name: app
    image: registry.k8s.io/pause:3.10
"""


@pytest.fixture
async def scheduler(cluster: Cluster) -> AsyncIterator[Scheduler]:
    await cluster.api.create(make_node("worker", cpu="4", memory="8Gi", pods="110"))
    sched = Scheduler(
        ApiClient(cluster.api.bus, actor="system:kube-scheduler"), rng=random.Random(0)
    )
    await sched.start(timeout=10)
    yield sched
    await sched.stop()


async def test_gated_pod_waits_until_its_last_gate_is_removed(
    kubectl, scheduler: Scheduler, watch: ClusterWatch
) -> None:
    queued = Changes(scheduler.pod_informer)
    created = await kubectl("apply", "-f", "-", input=GATED_POD)
    assert created.stdout.strip() == "pod/gated created"
    await queued.until(lambda: scheduler.queue.pending_pods_by_queue()["gated"] == 1)

    conditions = await kubectl("get", "pod", "gated", "-o", "jsonpath={.status.conditions}")
    [condition] = json.loads(conditions.stdout)
    created = await kubectl("get", "pod", "gated", "-o", "jsonpath={.metadata.creationTimestamp}")
    assert condition == {
        "type": "PodScheduled",
        "status": "False",
        "reason": "SchedulingGated",
        "message": "Scheduling is blocked due to non-empty scheduling gates",
        "lastTransitionTime": created.stdout,
    }
    table = (await kubectl("get", "pod", "gated")).stdout.splitlines()
    assert table[1].split()[:3] == ["gated", "0/1", "SchedulingGated"]

    # One gate of two goes: still gated, never tried.
    await kubectl(
        "patch", "pod", "gated", "--type=json",
        "-p", '[{"op": "remove", "path": "/spec/schedulingGates/0"}]',
    )  # fmt: skip
    gates = await kubectl("get", "pod", "gated", "-o", "jsonpath={.spec.schedulingGates}")
    assert json.loads(gates.stdout) == [{"name": "example.com/review"}]
    assert scheduler.queue.pending_pods_by_queue()["gated"] == 1
    assert watch.events_of("gated", "FailedScheduling") == []
    assert not watch.pod("gated").spec.node_name

    await kubectl(
        "patch", "pod", "gated", "--type=json",
        "-p", '[{"op": "remove", "path": "/spec/schedulingGates"}]',
    )  # fmt: skip
    assert await watch.bound("gated") == "worker"
    assert scheduler.queue.pending_pods_by_queue()["gated"] == 0


async def test_adding_a_gate_is_refused(kubectl, scheduler: Scheduler) -> None:
    await kubectl("apply", "-f", "-", input=GATED_POD)
    added = await kubectl(
        "patch", "pod", "gated", "--type=json",
        "-p", '[{"op": "add", "path": "/spec/schedulingGates/-", "value": {"name": "late"}}]',
        check=False,
    )  # fmt: skip
    assert added.returncode == 1
    assert added.stderr.strip() == (
        'The Pod "gated" is invalid: spec.schedulingGates[2].name: Forbidden: only deletion '
        "is allowed, but found new scheduling gate 'late'"
    )


async def test_gated_pod_cannot_be_created_bound(kubectl, http) -> None:
    bound = GATED_POD.replace("spec:\n", "spec:\n  nodeName: worker\n", 1)
    refused = await kubectl("apply", "-f", "-", input=bound, check=False)
    assert refused.returncode == 1
    assert refused.stderr.strip() == (
        'The Pod "gated" is invalid: spec.nodeName: Forbidden: cannot be set until all '
        "schedulingGates have been cleared"
    )
    async with http.get("/api/v1/namespaces/default/pods/gated") as response:
        assert response.status == 404
