"""ResourceQuota and KEP-5004 end to end: a pod asking `example.com/gpu: 1` on a DRA node
is charged once, through the pod, although its special claim stands for the same device;
a claim that only looks like a pod's special claim is charged in full; and when quota
refuses the special claim, the pod waits, as upstream's scheduler leaves it (PreBind
fails, the pod backs off and is tried again).

The apistore, scheduler and controller manager (its quota controller keeping the status)
run in the test's event loop; no kubelet runs, so the pods stay Pending once bound.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from drasim.common import codec, errors
from drasim.common.api import core_v1
from drasim.common.client import ApiClient
from drasim.controllers import ControllerManager
from tests.controllers.conftest import Changes, running_controllers
from tests.scheduler.e2e.conftest import ClusterWatch, StartScheduler
from tests.scheduler.e2e.test_extended_resources import (
    ANNOTATION,
    DRIVER,
    GPU,
    create_kep_cluster,
    leftover_claim,
    special_claim,
)
from tests.scheduler.wrappers import make_pod

DEVICES = f"{DRIVER}.deviceclass.resource.k8s.io/devices"
IMPLICIT = f"requests.deviceclass.resource.kubernetes.io/{DRIVER}"
EXPLICIT = f"requests.{GPU}"


@pytest.fixture
async def controllers(server, fresh) -> AsyncIterator[ControllerManager]:
    async with running_controllers(fresh) as manager:
        yield manager


async def quota_with_status(
    api: ApiClient, controllers: ControllerManager, hard: dict[str, str]
) -> core_v1.ResourceQuota:
    """A quota `gpus`, once its controller has given it a status."""
    changes = Changes(controllers.resource_quotas)
    rq = codec.convert(
        {"metadata": {"name": "gpus", "namespace": "default"}, "spec": {"hard": hard}},
        core_v1.ResourceQuota,
    )
    await api.create(rq)
    return await changes.until(
        lambda: (q := controllers.resource_quotas.get("gpus", "default")) and q.status.hard and q
    )


def used(rq: core_v1.ResourceQuota) -> dict[str, str]:
    return {name: str(q) for name, q in rq.status.used.items()}


async def settled_usage(api: ApiClient, controllers: ControllerManager) -> dict[str, str]:
    """The quota's usage once the controller has recomputed it from scratch."""
    controllers.resource_quota.queue.add(("default", "gpus"))
    await controllers.resource_quota.queue.join()
    return used(await api.get(core_v1.ResourceQuota, "gpus", namespace="default"))


async def test_the_special_claim_is_not_charged_twice(
    api: ApiClient, watch: ClusterWatch, start_scheduler: StartScheduler, controllers
) -> None:
    await create_kep_cluster(api, dp_gpus=0)
    await quota_with_status(api, controllers, {EXPLICIT: "1", DEVICES: "1", IMPLICIT: "1"})
    await start_scheduler()
    await api.create(make_pod("p").limits({GPU: "1"}).obj())
    claim = await special_claim(watch, "p")
    assert claim.metadata.annotations == {ANNOTATION: "true"}
    want = {EXPLICIT: "1", DEVICES: "1", IMPLICIT: "1"}
    rq = await api.get(core_v1.ResourceQuota, "gpus", namespace="default")
    assert used(rq) == want  # as admission charged the pod, then its claim
    assert await settled_usage(api, controllers) == want  # as the controller counts


async def test_a_look_alike_claim_is_charged_in_full(
    api: ApiClient, watch: ClusterWatch, start_scheduler: StartScheduler, controllers
) -> None:
    """A claim with the annotation and a pod owner that is not that pod's (the uid does not
    match) is no special claim: it is charged `requests.example.com/gpu` as well, and over
    quota refused (kubernetes#135404), though its devices fit."""
    await create_kep_cluster(api, dp_gpus=0)
    await quota_with_status(api, controllers, {EXPLICIT: "1", DEVICES: "2"})
    await start_scheduler()
    await api.create(make_pod("p").limits({GPU: "1"}).obj())
    await special_claim(watch, "p")

    pod = watch.pod("p")
    impostor = codec.clone(pod)
    impostor.metadata.uid = "not-the-pods-uid"
    with pytest.raises(errors.Forbidden) as refused:
        await api.create(leftover_claim(impostor, "sneaky"))
    assert str(refused.value) == (
        'resourceclaims.resource.k8s.io "sneaky" is forbidden: exceeded quota: gpus, '
        f"requested: {EXPLICIT}=1, used: {EXPLICIT}=1, limited: {EXPLICIT}=1"
    )
    # Owned by the pod for real but not named by its status: not its special claim either.
    with pytest.raises(errors.Forbidden, match=f"exceeded quota: gpus, requested: {EXPLICIT}=1"):
        await api.create(leftover_claim(pod, "second"))
    assert await settled_usage(api, controllers) == {EXPLICIT: "1", DEVICES: "1"}


async def test_a_special_claim_over_quota_leaves_the_pod_waiting(
    api: ApiClient, watch: ClusterWatch, start_scheduler: StartScheduler, controllers
) -> None:
    """The pod fits `requests.example.com/gpu`, but its claim's devices do not fit
    `<class>.deviceclass.resource.k8s.io/devices`: PreBind's create is refused, the pod is
    not bound and no claim is left; once the quota allows it, the retry binds it."""
    await create_kep_cluster(api, dp_gpus=0)
    rq = await quota_with_status(api, controllers, {EXPLICIT: "4", DEVICES: "0"})
    await start_scheduler()
    await api.create(make_pod("p").limits({GPU: "1"}).obj())

    def refused() -> list[core_v1.Event]:
        return [
            e
            for e in watch.events_of("p", "FailedScheduling")
            if f"exceeded quota: gpus, requested: {DEVICES}=1, used: {DEVICES}=0, "
            f"limited: {DEVICES}=0" in e.message
        ]

    [event] = await watch.wait_for(refused)
    assert "create claim for extended resources" in event.message
    assert 'resourceclaims.resource.k8s.io "p-extended-resources-' in event.message
    assert not watch.pod("p").spec.node_name
    assert watch.special_claims(watch.pod("p")) == []
    rq = await api.get(core_v1.ResourceQuota, "gpus", namespace="default")
    rq.spec.hard[DEVICES] = rq.spec.hard[EXPLICIT]
    await api.update(rq)
    # The retry comes after the pod's backoff (1 s, doubling with each failure).
    node = await watch.wait_for(lambda: watch.pod("p").spec.node_name, timeout=30.0)
    assert node == "dra-node"
