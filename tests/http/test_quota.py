"""ResourceQuota as a kubectl user meets it: `kubectl create quota`, its status filled by
the quota controller, `kubectl get quota` and `kubectl describe quota` as upstream prints
them, refusals with upstream's 403, and many concurrent creates over HTTP racing for the
last unit."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import pytest

from drasim.cli import describe
from drasim.common.api import core_v1, registry
from drasim.controllers import ControllerManager
from tests.controllers.conftest import Changes, running_controllers
from tests.http.conftest import Cluster

POD = """\
apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  containers:
  - name: c
    image: registry.k8s.io/pause:3.10
    resources: {{limits: {{example.com/gpu: "1", cpu: 100m}}}}
"""


@pytest.fixture
async def controllers(cluster: Cluster, fresh) -> AsyncIterator[ControllerManager]:
    async with running_controllers(fresh) as manager:
        yield manager


async def create_quota(kubectl, controllers: ControllerManager, hard: str) -> None:
    """`kubectl create quota gpus --hard=...`, once the controller has filled its status."""
    changes = Changes(controllers.resource_quotas)
    created = await kubectl("create", "quota", "gpus", f"--hard={hard}")
    assert created.stdout.strip() == "resourcequota/gpus created"
    await changes.until(
        lambda: (
            (q := controllers.resource_quotas.get("gpus", "default")) is not None
            and bool(q.status.used)
        )
    )


async def test_get_and_describe_quota(cluster: Cluster, kubectl, controllers):
    await create_quota(kubectl, controllers, "pods=4,requests.example.com/gpu=2,limits.cpu=1")
    await kubectl("apply", "-f", "-", input=POD.format(name="a"))
    got = await kubectl("get", "quota", "gpus")
    header, row = got.stdout.splitlines()
    assert header.split() == ["NAME", "REQUEST", "LIMIT", "AGE"]
    assert row.startswith("gpus   pods: 1/4, requests.example.com/gpu: 1/2   limits.cpu: 100m/1   ")
    described = await kubectl("describe", "quota", "gpus")
    assert described.stdout.splitlines() == [
        "Name:                     gpus",
        "Namespace:                default",
        "Resource                  Used  Hard",
        "--------                  ----  ----",
        "limits.cpu                100m  1",
        "pods                      1     4",
        "requests.example.com/gpu  1     2",
    ]
    info = registry.by_plural("resourcequotas")
    ours = await describe.describe(cluster.api, info, "gpus", "default")
    assert ours.splitlines() == described.stdout.splitlines()


async def test_kubectl_shows_the_refusal(cluster: Cluster, kubectl, controllers):
    await create_quota(kubectl, controllers, "requests.example.com/gpu=1")
    await kubectl("apply", "-f", "-", input=POD.format(name="a"))
    refused = await kubectl("apply", "-f", "-", input=POD.format(name="b"), check=False)
    assert refused.returncode == 1
    assert refused.stderr.strip() == (
        'Error from server (Forbidden): error when creating "STDIN": pods "b" is forbidden: '
        "exceeded quota: gpus, requested: requests.example.com/gpu=1, "
        "used: requests.example.com/gpu=1, limited: requests.example.com/gpu=1"
    )


async def test_concurrent_creates_over_http(cluster: Cluster, kubectl, controllers, http):
    """Several tasks each post pods at once; the quota admits exactly its 3 units."""
    await create_quota(kubectl, controllers, "requests.example.com/gpu=3")

    async def post(i: int) -> tuple[int, dict]:
        body = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"p{i}"},
            "spec": {"containers": [{"name": "c", "image": "pause",
                     "resources": {"limits": {"example.com/gpu": "1"}}}]},
        }  # fmt: skip
        async with http.post("/api/v1/namespaces/default/pods", json=body) as resp:
            return resp.status, await resp.json()

    async def writer(first: int) -> list[tuple[int, dict]]:
        return list(await asyncio.gather(*(post(first + i) for i in range(8))))

    answers = [
        a for batch in await asyncio.gather(*(writer(i * 8) for i in range(4))) for a in batch
    ]
    assert sorted(code for code, _ in answers) == [201] * 3 + [403] * 29
    refusal = next(status for code, status in answers if code == 403)
    assert refusal["reason"] == "Forbidden"
    assert refusal["details"]["kind"] == "pods"
    assert (
        "exceeded quota: gpus, requested: requests.example.com/gpu=1, used: " in refusal["message"]
    )
    rq = await cluster.api.get(core_v1.ResourceQuota, "gpus", namespace="default")
    assert {n: str(q) for n, q in rq.status.used.items()} == {"requests.example.com/gpu": "3"}
    listed = json.loads((await kubectl("get", "pods", "-o", "json")).stdout)
    assert len(listed["items"]) == 3
