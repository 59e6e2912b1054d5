"""The ResourceQuota controller against a real apistore: status.hard and status.used kept
current as objects come and go, recomputed from scratch when it starts."""

from __future__ import annotations

import pytest

from drasim.common import codec, errors
from drasim.common.api import coordination_v1, core_v1, resource_v1
from drasim.common.client import ApiClient
from drasim.common.quantity import parse_quantity
from drasim.controllers import ControllerManager
from drasim.controllers.resourcequota import pod_stops_counting
from tests.builders import make_claim, make_pod
from tests.controllers.conftest import Changes, run_pod, running_controllers

GPU = "example.com/gpu"


def quota(name: str, hard: dict[str, str], **spec: object) -> core_v1.ResourceQuota:
    return codec.convert(
        {"metadata": {"name": name, "namespace": "default"}, "spec": {"hard": hard, **spec}},
        core_v1.ResourceQuota,
    )


def used_of(manager: ControllerManager, name: str = "q") -> dict[str, str] | None:
    rq = manager.resource_quotas.get(name, "default")
    if rq is None or not rq.status.hard:
        return None
    return {n: str(v) for n, v in rq.status.used.items()}


def hard_of(manager: ControllerManager, name: str = "q") -> dict[str, str]:
    rq = manager.resource_quotas.get(name, "default")
    return {} if rq is None else {n: str(v) for n, v in rq.status.hard.items()}


async def until_used(changes: Changes, manager: ControllerManager, want: dict[str, str]) -> None:
    await changes.until(lambda: used_of(manager) == want)


async def test_a_new_quota_gets_its_status(api, manager, changes):
    await api.create(make_pod("a").container("c", requests={"cpu": "1"}).obj())
    await api.create(quota("q", {"pods": "3", "requests.cpu": "2", "limits.cpu": "4"}))
    await until_used(changes, manager, {"pods": "1", "requests.cpu": "1", "limits.cpu": "0"})
    rq = manager.resource_quotas.get("q", "default")
    assert {n: str(v) for n, v in rq.status.hard.items()} == {
        "pods": "3",
        "requests.cpu": "2",
        "limits.cpu": "4",
    }


async def test_usage_follows_creates_deletes_and_finished_pods(api, manager, changes):
    await api.create(quota("q", {"pods": "5", "count/pods": "5"}))
    await until_used(changes, manager, {"pods": "0", "count/pods": "0"})
    a = await api.create(make_pod("a").obj())
    await api.create(make_pod("b").obj())
    await until_used(changes, manager, {"pods": "2", "count/pods": "2"})  # charged by admission
    await run_pod(api, a, phase="Succeeded")
    # A finished pod keeps its object count only.
    await until_used(changes, manager, {"pods": "1", "count/pods": "2"})
    await api.delete(core_v1.Pod, "b", namespace="default")
    await until_used(changes, manager, {"pods": "0", "count/pods": "1"})


async def test_a_raised_limit_is_taken_into_the_status(api, manager, changes):
    await api.create(quota("q", {"pods": "1"}))
    await until_used(changes, manager, {"pods": "0"})
    await api.create(make_pod("a").obj())
    with pytest.raises(errors.Forbidden, match="exceeded quota: q, requested: pods=1"):
        await api.create(make_pod("b").obj())
    rq = await api.get(core_v1.ResourceQuota, "q", namespace="default")
    rq.spec.hard = {"pods": parse_quantity("2")}
    await api.update(rq)
    await changes.until(lambda: hard_of(manager) == {"pods": "2"})
    await api.create(make_pod("b").obj())


async def test_kinds_without_a_shared_informer_are_counted_too(api, manager, changes):
    """`count/leases.coordination.k8s.io`: the controller starts watching leases when a
    quota first counts them, and gives a deleted one back."""
    lease = codec.convert(
        {"metadata": {"name": "l", "namespace": "default"}}, coordination_v1.Lease
    )
    await api.create(lease)
    await api.create(quota("q", {"count/leases.coordination.k8s.io": "2"}))
    await until_used(changes, manager, {"count/leases.coordination.k8s.io": "1"})
    await api.delete(coordination_v1.Lease, "l", namespace="default")
    await until_used(changes, manager, {"count/leases.coordination.k8s.io": "0"})


async def test_claims_per_device_class(api, manager, changes):
    gpu = codec.convert(
        {
            "metadata": {"name": "gpu.example.com"},
            "spec": {"extendedResourceName": "example.com/gpu"},
        },
        resource_v1.DeviceClass,
    )
    await api.create(gpu)
    hard = {
        "count/resourceclaims.resource.k8s.io": "4",
        "gpu.example.com.deviceclass.resource.k8s.io/devices": "4",
        f"requests.{GPU}": "4",
    }
    await api.create(make_claim("one"))
    await api.create(quota("q", hard))
    await until_used(changes, manager, dict.fromkeys(hard, "1"))
    await api.delete(resource_v1.ResourceClaim, "one", namespace="default")
    await until_used(changes, manager, dict.fromkeys(hard, "0"))


async def test_restart_recomputes_from_scratch(server, fresh, api):
    """What changed while no controller ran (a status someone overwrote, a pod deleted) is
    set right when one starts."""
    await api.create(make_pod("a").obj())
    await api.create(make_pod("b").obj())
    rq = await api.create(quota("q", {"pods": "5"}))
    await _overwrite_used(api, rq, "4")
    await api.delete(core_v1.Pod, "b", namespace="default")
    async with running_controllers(fresh) as manager:
        await until_used(Changes(*manager.informers), manager, {"pods": "1"})


async def test_a_resync_recomputes_what_nothing_else_would(server, fresh, api):
    """A status someone else overwrote is no change the controller reacts to (it ignores
    status updates, as upstream's); the periodic full resync sets it right."""
    async with running_controllers(fresh, resource_quota_sync_period=0.5) as manager:
        changes = Changes(*manager.informers)
        rq = await api.create(quota("q", {"pods": "5"}))
        await until_used(changes, manager, {"pods": "0"})
        rq = await api.get(core_v1.ResourceQuota, "q", namespace="default")
        overwritten = int((await _overwrite_used(api, rq, "3")).metadata.resource_version)

        def set_right_after_the_overwrite() -> bool:
            rq = manager.resource_quotas.get("q", "default")
            return int(rq.metadata.resource_version) > overwritten and used_of(manager) == {
                "pods": "0"
            }

        await changes.until(set_right_after_the_overwrite)


async def _overwrite_used(
    api: ApiClient, rq: core_v1.ResourceQuota, pods: str
) -> core_v1.ResourceQuota:
    status = {"hard": {"pods": "5"}, "used": {"pods": pods}}
    rq.status = codec.convert(status, core_v1.ResourceQuotaStatus)
    return await api.update_status(rq)


async def test_the_controller_acts_as_its_service_account(server, api, manager, changes):
    await api.create(quota("q", {"pods": "1"}))
    await until_used(changes, manager, {"pods": "0"})
    actors = {e.actor for e in (await _events(api, "q")) if e.type == "MODIFIED"}
    assert actors == {"system:serviceaccount:kube-system:resourcequota-controller"}


async def _events(api: ApiClient, name: str):
    from drasim.common.bus import messages

    data = await api.request(messages.EventLog(resource="resourcequotas", name=name))
    return messages.event_log_decoder.decode(data).events


def test_pod_updates_that_give_quota_back() -> None:
    from datetime import UTC, datetime

    now = datetime.now(UTC)
    running = make_pod("p").obj()
    done = make_pod("p").obj()
    done.status.phase = "Failed"
    assert pod_stops_counting(running, done, now)
    assert not pod_stops_counting(done, done, now)
    deadline = make_pod("p").obj()
    deadline.spec.active_deadline_seconds = 5
    assert pod_stops_counting(running, deadline, now)


def test_the_sync_period_is_a_flag_of_the_controllers_service() -> None:
    from drasim.common import service
    from drasim.controllers import __main__ as controllers_main

    argv = ["--nats-url", "nats://x", "--resource-quota-sync-period", "60"]
    _, args = service.parse_args("controllers", argv, add=controllers_main._add_arguments)
    assert args.resource_quota_sync_period == 60.0
    _, args = service.parse_args("controllers", argv[:2], add=controllers_main._add_arguments)
    assert args.resource_quota_sync_period == 300.0
