"""DynamicResources' PreEnqueue: a pod whose template claim the ResourceClaim controller has
not made yet waits gated, without an attempt (no FailedScheduling event), and is scheduled
the moment its claim exists and its status names it (upstream `PreEnqueue`, the claim's
and the pod's queueing hints), with no failed attempt's backoff to serve."""

from __future__ import annotations

from drasim.common import codec
from drasim.common.api import core_v1
from drasim.common.client import ApiClient
from tests.builders import make_claim, make_pod
from tests.metrics.scraping import Changes
from tests.scheduler.e2e.conftest import ClusterWatch, StartScheduler
from tests.scheduler.e2e.test_extended_resources import create_kep_cluster


async def test_a_pod_waits_gated_for_its_template_claim_then_schedules_in_one_attempt(
    api: ApiClient, watch: ClusterWatch, start_scheduler: StartScheduler
) -> None:
    await create_kep_cluster(api, dp_gpus=0)
    pod = await api.create(make_pod("p").claim("gpu", template="gpu-template").obj())
    scheduler = await start_scheduler()
    await Changes(scheduler.pod_informer).until(
        lambda: scheduler.queue.pending_pods_by_queue()["gated"] == 1
    )
    assert watch.events_of("p", "FailedScheduling") == []

    # What the controller does: the claim, owned by the pod, then the pod's status naming it.
    claim = await api.create(make_claim("p-gpu-abcde", owner=pod))
    status = [core_v1.PodResourceClaimStatus(name="gpu", resource_claim_name=claim.metadata.name)]
    await api.patch(
        core_v1.Pod,
        "p",
        {"status": {"resourceClaimStatuses": codec.to_builtins(status)}},
        namespace="default",
        subresource="status",
    )

    assert await watch.bound("p") == "dra-node"
    await watch.wait_for(lambda: watch.events_of("p", "Scheduled"))
    # The one attempt is the one that bound it: none failed while the claim was missing.
    assert watch.events_of("p", "FailedScheduling") == []
