"""A gated pod that asks for a DRA-backed extended resource is not tried while gated; when
its last gate goes, a special claim left for it (by an earlier scheduler, or made by hand)
is deleted and replaced, as for any pod (upstream `filterExtendedResources` rejects it,
PostFilter deletes it)."""

from __future__ import annotations

from drasim.common.api import core_v1
from drasim.common.client import ApiClient
from tests.metrics.scraping import Changes
from tests.scheduler.e2e.conftest import ClusterWatch, StartScheduler
from tests.scheduler.e2e.test_extended_resources import (
    GPU,
    create_kep_cluster,
    leftover_claim,
    special_claim,
)
from tests.scheduler.wrappers import make_pod


async def test_ungated_pod_replaces_its_leftover_special_claim(
    api: ApiClient, watch: ClusterWatch, start_scheduler: StartScheduler
) -> None:
    await create_kep_cluster(api, dp_gpus=0)
    pod = await api.create(
        make_pod("p").scheduling_gates("example.com/wait").limits({GPU: "1"}).obj()
    )
    await api.create(leftover_claim(pod, "p-extended-resources-old"))
    scheduler = await start_scheduler()
    await Changes(scheduler.pod_informer).until(
        lambda: scheduler.queue.pending_pods_by_queue()["gated"] == 1
    )
    # Gated: never tried, so the leftover claim stands and nothing was written.
    assert watch.events_of("p", "FailedScheduling") == []
    assert watch.claims.get("p-extended-resources-old", "default") is not None

    current = await api.get(core_v1.Pod, "p", namespace="default")
    current.spec.scheduling_gates = []
    await api.update(current)

    claim = await special_claim(watch, "p")
    assert claim.metadata.name != "p-extended-resources-old"
    assert watch.claims.get("p-extended-resources-old", "default") is None
    [event] = await watch.wait_for(lambda: watch.events_of("p", "FailedScheduling"))
    assert "deletion of ResourceClaim completed" in event.message
