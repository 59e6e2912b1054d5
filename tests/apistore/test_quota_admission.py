"""The ResourceQuota admission in the write path: usage charged with the object, refusals
with upstream's words, and no double spending of the last unit under concurrent writes.

The quota's status is written here as its controller would (these tests run no
controller), so that what admission sees is known exactly.
"""

from __future__ import annotations

import asyncio

import msgspec
import pytest

from drasim.apistore.core import ApiCore
from drasim.apistore.request import Context
from drasim.common import codec, errors, features
from drasim.common.api import core_v1, resource_v1
from drasim.common.api.meta_v1 import ObjectMeta
from drasim.common.bus import messages
from drasim.common.client import ApiClient
from tests.builders import make_claim, make_pod


async def _quota(
    api: ApiClient, name: str, hard: dict[str, str], used: dict[str, str] | None = None
):
    """A quota whose status says `used` (0 of everything by default)."""
    rq = codec.convert(
        {"metadata": {"name": name, "namespace": "default"}, "spec": {"hard": hard}},
        core_v1.ResourceQuota,
    )
    rq = await api.create(rq)
    rq.status = codec.convert(
        {"hard": hard, "used": used or dict.fromkeys(hard, "0")}, core_v1.ResourceQuotaStatus
    )
    return await api.update_status(rq)


def _used(rq: core_v1.ResourceQuota) -> dict[str, str]:
    return {name: str(q) for name, q in rq.status.used.items()}


async def test_a_create_is_charged_with_the_object(server, api):
    await _quota(
        api, "compute", {"pods": "2", "requests.cpu": "1", "requests.example.com/gpu": "4"}
    )
    pod = make_pod("a").container("c", requests={"cpu": "250m"}, limits={"example.com/gpu": "1"})
    await api.create(pod.obj())
    rq = await api.get(core_v1.ResourceQuota, "compute", namespace="default")
    assert _used(rq) == {"pods": "1", "requests.cpu": "250m", "requests.example.com/gpu": "1"}


async def test_over_quota_is_refused_with_upstreams_message(server, api):
    await _quota(api, "gpus", {"requests.example.com/gpu": "2"}, {"requests.example.com/gpu": "1"})
    with pytest.raises(errors.Forbidden) as refused:
        await api.create(make_pod("big").limits({"example.com/gpu": "2"}).obj())
    assert str(refused.value) == (
        'pods "big" is forbidden: exceeded quota: gpus, requested: requests.example.com/gpu=2, '
        "used: requests.example.com/gpu=1, limited: requests.example.com/gpu=2"
    )
    assert refused.value.code == 403
    with pytest.raises(errors.NotFound):
        await api.get(core_v1.Pod, "big", namespace="default")
    rq = await api.get(core_v1.ResourceQuota, "gpus", namespace="default")
    assert _used(rq) == {"requests.example.com/gpu": "1"}  # a refusal charges nothing


async def test_a_quota_without_status_refuses_what_it_limits(server, api):
    rq = core_v1.ResourceQuota(
        metadata=ObjectMeta(name="fresh", namespace="default"),
        spec=core_v1.ResourceQuotaSpec(hard=codec.convert({"pods": "1"}, core_v1.ResourceList)),
    )
    await api.create(rq)
    # Nothing is limited yet: status.hard is the controller's to fill.
    await api.create(make_pod("a").obj())
    rq = await api.get(core_v1.ResourceQuota, "fresh", namespace="default")
    rq.status.hard = dict(rq.spec.hard)
    await api.update_status(rq)
    with pytest.raises(
        errors.Forbidden,
        match=r'pods "b" is forbidden: status unknown for quota: fresh, resources: pods',
    ):
        await api.create(make_pod("b").obj())


async def test_cpu_quota_wants_every_container_to_say(server, api):
    await _quota(api, "cpu", {"requests.cpu": "4", "limits.cpu": "4"})
    pod = make_pod("p").container("a", requests={"cpu": "1"}).container("b").obj()
    with pytest.raises(errors.Forbidden) as refused:
        await api.create(pod)
    assert str(refused.value) == (
        'pods "p" is forbidden: failed quota: cpu: must specify limits.cpu for: a,b; '
        "requests.cpu for: b"
    )


async def test_object_counts(server, api):
    await _quota(
        api, "counts", {"count/resourceclaims.resource.k8s.io": "1", "resourcequotas": "1"}
    )
    await api.create(make_claim("one"))
    with pytest.raises(errors.Forbidden, match=(
        r'resourceclaims.resource.k8s.io "two" is forbidden: exceeded quota: counts, '
        r"requested: count/resourceclaims.resource.k8s.io=1, "
        r"used: count/resourceclaims.resource.k8s.io=1, "
        r"limited: count/resourceclaims.resource.k8s.io=1"
    )):  # fmt: skip
        await api.create(make_claim("two"))
    # The quota that counts quotas counts the next one (itself was made before it limited).
    await _quota(api, "second", {"pods": "5"})
    with pytest.raises(
        errors.Forbidden, match="exceeded quota: counts, requested: resourcequotas=1"
    ):
        await _quota(api, "third", {"pods": "5"})


async def test_a_dry_run_is_checked_but_not_charged(server, api):
    await _quota(api, "pods", {"pods": "1"})
    await api.create(make_pod("a").obj(), dry_run=True)
    rq = await api.get(core_v1.ResourceQuota, "pods", namespace="default")
    assert _used(rq) == {"pods": "0"}


async def test_concurrent_creates_never_share_the_last_units(server, api):
    """Many writers from several tasks race for 5 units: exactly 5 pods pass, the rest are
    refused, and the quota's usage says 5."""
    await _quota(api, "gpus", {"requests.example.com/gpu": "5", "pods": "100"})

    async def create(i: int) -> bool:
        try:
            await api.create(make_pod(f"p{i}").limits({"example.com/gpu": "1"}).obj())
        except errors.Forbidden:
            return False
        return True

    results = await asyncio.gather(*(create(i) for i in range(40)))
    assert sum(results) == 5
    rq = await api.get(core_v1.ResourceQuota, "gpus", namespace="default")
    assert _used(rq) == {"requests.example.com/gpu": "5", "pods": "5"}
    pods, _ = await api.list(core_v1.Pod, namespace="default")
    assert len(pods) == 5


async def test_an_update_is_charged_what_it_adds(server, api):
    """A pod that gains an active deadline moves into the Terminating scope: only the
    quota of that scope is charged, as upstream."""
    rq = codec.convert(
        {"metadata": {"name": "terminating", "namespace": "default"},
         "spec": {"hard": {"pods": "1"}, "scopes": ["Terminating"]}},
        core_v1.ResourceQuota,
    )  # fmt: skip
    rq = await api.create(rq)
    rq.status = codec.convert(
        {"hard": {"pods": "1"}, "used": {"pods": "1"}}, core_v1.ResourceQuotaStatus
    )
    await api.update_status(rq)
    pod = await api.create(make_pod("p").obj())  # not terminating: not this quota's
    pod.spec.active_deadline_seconds = 30
    with pytest.raises(errors.Forbidden, match="exceeded quota: terminating"):
        await api.update(pod)


async def test_claims_are_charged_per_device_class(server, api):
    await api.create(
        codec.convert(
            {
                "metadata": {"name": "gpu.example.com"},
                "spec": {"extendedResourceName": "example.com/gpu"},
            },
            resource_v1.DeviceClass,
        )
    )
    hard = {
        "gpu.example.com.deviceclass.resource.k8s.io/devices": "3",
        "requests.example.com/gpu": "3",
        "requests.deviceclass.resource.kubernetes.io/gpu.example.com": "3",
    }
    await _quota(api, "claims", hard)
    await api.create(make_claim("c"))
    rq = await api.get(core_v1.ResourceQuota, "claims", namespace="default")
    assert _used(rq) == dict.fromkeys(hard, "1")


async def test_two_apistores_never_share_the_last_units(server, api):
    """Two apistore replicas on one database take creates at once: their batches commit one
    after the other, each charging the quota as the other left it."""
    await _quota(api, "pods", {"pods": "6"})
    other = ApiCore(server.store)
    await other.start()
    try:
        cores = [server.core, other]

        async def create(i: int) -> bool:
            body = msgspec.Raw(codec.encode(make_pod(f"p{i}").dict()))
            request = messages.Create(resource="pods", namespace="default", object=body)
            try:
                await cores[i % 2].handle(request, Context(actor="test"))
            except errors.Forbidden:
                return False
            return True

        results = await asyncio.gather(*(create(i) for i in range(30)))
    finally:
        await other.stop()
    assert sum(results) == 6
    rq = await api.get(core_v1.ResourceQuota, "pods", namespace="default")
    assert _used(rq) == {"pods": "6"}


async def test_with_the_extended_resource_gate_off_claims_are_charged_devices_only(server, api):
    """A 1.35 cluster with DRAExtendedResource=false charges a claim its devices, never the
    extended resource names its class stands for (nor are those names matched)."""
    hard = {"gpu.example.com.deviceclass.resource.k8s.io/devices": "3",
            "requests.deviceclass.resource.kubernetes.io/gpu.example.com": "3"}  # fmt: skip
    await _quota(api, "claims", hard)
    gate_off = features.new_gate("DRAExtendedResource=false", emulated="1.35")
    old_release = ApiCore(server.store, features=gate_off)
    await old_release.start()
    try:
        body = msgspec.Raw(codec.encode(codec.to_builtins(make_claim("c"))))
        create = messages.Create(resource="resourceclaims", namespace="default", object=body)
        await old_release.handle(create, Context(actor="test"))
    finally:
        await old_release.stop()
    rq = await api.get(core_v1.ResourceQuota, "claims", namespace="default")
    assert _used(rq) == {
        "gpu.example.com.deviceclass.resource.k8s.io/devices": "1",
        "requests.deviceclass.resource.kubernetes.io/gpu.example.com": "0",
    }
