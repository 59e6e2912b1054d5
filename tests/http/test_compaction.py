"""What a kubectl user sees of compaction: a watch from a compacted resourceVersion ends
with 410 Expired, as kube-apiserver's watch cache answers one older than it holds."""

from __future__ import annotations

import json

from drasim.apistore.compaction import Compactor
from drasim.common.api import core_v1
from tests.apistore.test_compaction import _on_stream
from tests.builders import make_pod


async def test_kubectl_watch_from_a_compacted_resource_version_gets_410(cluster, kubectl):
    api = cluster.api
    first = await api.create(make_pod("a").obj())
    await api.delete(core_v1.Pod, "a", namespace="default", grace_period_seconds=0)
    await api.create(make_pod("b").obj())
    last = await api.patch(
        core_v1.Pod, "b", {"metadata": {"labels": {"x": "1"}}}, namespace="default"
    )
    end = int(last.metadata.resource_version)
    await _on_stream(api, end)
    cut = await Compactor(cluster.server.store, cluster.server.bus, 60).compact(end)
    assert cut == end - 1
    old = first.metadata.resource_version
    watch = "/api/v1/namespaces/default/pods?watch=1&resourceVersion="
    done = await kubectl("get", "--raw", watch + old)
    event = json.loads(done.stdout)
    assert event["type"] == "ERROR"
    assert event["object"] == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": f"too old resource version: {old} ({cut})",
        "reason": "Expired",
        "code": 410,
    }
    # From the cut on the history is there: the one event after it.
    done = await kubectl("get", "--raw", f"{watch}{cut}&timeoutSeconds=1")
    events = [json.loads(line) for line in done.stdout.splitlines()]
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("MODIFIED", "b")]
