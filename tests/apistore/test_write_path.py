"""The apistore's write path through the NATS API: Kubernetes semantics, one event each."""

from __future__ import annotations

import asyncio

import msgspec
import pytest

from drasim.common import client, codec, errors
from drasim.common.api import core_v1, meta_v1, resource_v1
from drasim.common.bus import messages
from tests.builders import make_claim, make_node, make_pod


async def test_create_get_list_with_selectors(api):
    await api.create(make_pod("a").labels(app="x").obj())
    await api.create(make_pod("b").labels(app="y").node("n1").obj())
    pod = await api.get(core_v1.Pod, "a", namespace="default")
    assert pod.metadata.uid and pod.metadata.creation_timestamp
    assert pod.status.phase == "Pending"
    by_label, rv = await api.list(core_v1.Pod, label_selector="app=x")
    assert [p.metadata.name for p in by_label] == ["a"]
    assert rv >= int(pod.metadata.resource_version)
    by_node, _ = await api.list(core_v1.Pod, field_selector="spec.nodeName=n1")
    assert [p.metadata.name for p in by_node] == ["b"]
    unbound, _ = await api.list(core_v1.Pod, field_selector="spec.nodeName=")
    assert [p.metadata.name for p in unbound] == ["a"]
    by_name, _ = await api.list(core_v1.Pod, field_selector="metadata.name=b")
    assert [p.metadata.name for p in by_name] == ["b"]
    with pytest.raises(errors.BadRequest, match="not a known field selector"):
        await api.list(core_v1.Pod, field_selector="spec.hostname=x")


async def test_resource_version_is_the_event_sequence(api):
    first = await api.create(make_node("n1"))
    second = await api.create(make_node("n2"))
    assert int(second.metadata.resource_version) == int(first.metadata.resource_version) + 1


async def test_generate_name(api):
    pod = make_pod("").obj()
    pod.metadata.generate_name = "web-"
    created = await api.create(pod)
    assert created.metadata.name.startswith("web-")
    assert len(created.metadata.name) == len("web-") + 5


async def test_stale_resource_version_conflicts_and_changes_nothing(api):
    created = await api.create(make_pod("p").obj())
    fresh = await api.get(core_v1.Pod, "p", namespace="default")
    fresh.metadata.labels = {"v": "1"}
    await api.update(fresh)
    created.metadata.labels = {"v": "stale"}
    with pytest.raises(errors.Conflict) as err:
        await api.update(created)
    assert err.value.code == 409
    assert "the object has been modified" in err.value.message
    now = await api.get(core_v1.Pod, "p", namespace="default")
    assert now.metadata.labels == {"v": "1"}


async def test_update_without_resource_version_is_unconditional(api):
    await api.create(make_pod("p").obj())
    pod = await api.get(core_v1.Pod, "p", namespace="default")
    pod.metadata.resource_version = ""
    pod.metadata.labels = {"a": "b"}
    assert (await api.update(pod)).metadata.labels == {"a": "b"}


async def test_main_update_keeps_status_and_status_update_keeps_spec(api):
    await api.create(make_pod("p").obj())
    pod = await api.get(core_v1.Pod, "p", namespace="default")
    pod.status.phase = "Running"
    pod.spec.node_name = "ignored-by-status"
    after = await api.update_status(pod)
    assert after.status.phase == "Running" and after.spec.node_name == ""
    after.status.phase = "Failed"
    after.metadata.labels = {"x": "y"}
    again = await api.update(after)
    assert again.status.phase == "Running" and again.metadata.labels == {"x": "y"}


async def test_merge_patch(api):
    await api.create(make_pod("p").labels(a="1", b="2").obj())
    patched = await api.patch(
        core_v1.Pod, "p", {"metadata": {"labels": {"a": None, "c": "3"}}}, namespace="default"
    )
    assert patched.metadata.labels == {"b": "2", "c": "3"}


async def test_noop_update_writes_no_event(api):
    created = await api.create(make_pod("p").obj())
    same = await api.update(created)
    assert same.metadata.resource_version == created.metadata.resource_version


async def test_finalizers_hold_deletion_until_removed(api):
    await api.create(make_claim("c", finalizers=["example.com/hold"]))
    terminating = await api.delete(resource_v1.ResourceClaim, "c", namespace="default")
    assert terminating.metadata.deletion_timestamp
    still = await api.get(resource_v1.ResourceClaim, "c", namespace="default")
    assert still.metadata.deletion_timestamp and still.metadata.finalizers == ["example.com/hold"]
    with pytest.raises(errors.Invalid, match="no new finalizers"):
        still.metadata.finalizers = ["example.com/hold", "example.com/more"]
        await api.update(still)
    still.metadata.finalizers = []
    await api.update(still)
    with pytest.raises(errors.NotFound):
        await api.get(resource_v1.ResourceClaim, "c", namespace="default")


async def test_owned_claims_are_collected_when_their_pod_goes(api):
    pod = await api.create(make_pod("owner").obj())
    await api.create(make_claim("plain", owner=pod))
    await api.create(
        make_claim("held", owner=pod, finalizers=["resource.kubernetes.io/delete-protection"])
    )
    await api.create(make_claim("unowned"))
    await api.delete(core_v1.Pod, "owner", namespace="default")
    with pytest.raises(errors.NotFound):
        await api.get(resource_v1.ResourceClaim, "plain", namespace="default")
    held = await api.get(resource_v1.ResourceClaim, "held", namespace="default")
    assert held.metadata.deletion_timestamp
    held.metadata.finalizers = []
    await api.update(held)
    remaining, _ = await api.list(resource_v1.ResourceClaim)
    assert [c.metadata.name for c in remaining] == ["unowned"]


async def test_dependents_made_after_their_owner_went_are_collected(server, api):
    """A controller acting on a stale cache makes a claim for a pod deleted meanwhile (or
    deleted and made again under its name): as Kubernetes' garbage collector would, the
    apistore deletes a dependent none of whose owners exists."""
    pod = await api.create(make_pod("owner").obj())
    await api.delete(core_v1.Pod, "owner", namespace="default")
    before = await _log_length(server)
    created = await api.create(make_claim("late", owner=pod))
    assert created.metadata.uid and created.metadata.owner_references[0].uid == pod.metadata.uid
    with pytest.raises(errors.NotFound):
        await api.get(resource_v1.ResourceClaim, "late", namespace="default")
    log = await server.store.select_events_after(before)
    assert [(e.type, e.name, e.actor) for e in log] == [
        ("ADDED", "late", "test"),
        ("DELETED", "late", "garbage-collector"),
    ]

    again = await api.create(make_pod("owner").obj())  # the same name, another object
    await api.create(make_claim("stale-uid", owner=pod))
    await api.create(make_claim("held", owner=pod, finalizers=["example.com/hold"]))
    await api.create(make_claim("current", owner=again))
    remaining, _ = await api.list(resource_v1.ResourceClaim)
    assert {c.metadata.name: bool(c.metadata.deletion_timestamp) for c in remaining} == {
        "held": True,  # kept until its finalizer goes, as any deleted object
        "current": False,
    }


async def test_dependents_of_kinds_drasim_does_not_serve_stay(api):
    claim = make_claim("foreign")
    claim.metadata.owner_references = [
        meta_v1.OwnerReference(
            api_version="example.com/v1", kind="Widget", name="w", uid="w-uid", controller=True
        )
    ]
    await api.create(claim)
    assert await api.get(resource_v1.ResourceClaim, "foreign", namespace="default")


async def test_orphan_propagation_keeps_dependents(api):
    pod = await api.create(make_pod("owner").obj())
    await api.create(make_claim("claim", owner=pod))
    await api.delete(core_v1.Pod, "owner", namespace="default", propagation_policy="Orphan")
    claim = await api.get(resource_v1.ResourceClaim, "claim", namespace="default")
    assert claim.metadata.owner_references == []


async def test_bound_pod_terminates_gracefully(api):
    await api.create(make_pod("p").node("n1").obj())
    terminating = await api.delete(core_v1.Pod, "p", namespace="default")
    assert terminating.metadata.deletion_timestamp
    assert terminating.metadata.deletion_grace_period_seconds == 30
    await api.delete(core_v1.Pod, "p", namespace="default", grace_period_seconds=0)
    with pytest.raises(errors.NotFound):
        await api.get(core_v1.Pod, "p", namespace="default")


async def test_binding(api):
    pod = await api.create(make_pod("p").obj())
    bound = await api.bind(pod, "n1")
    assert bound.spec.node_name == "n1"
    assert [(c.type, c.status) for c in bound.status.conditions] == [("PodScheduled", "True")]
    with pytest.raises(errors.Conflict, match="already assigned"):
        await api.bind(pod, "n2")


async def test_namespace_must_exist(api):
    with pytest.raises(errors.NotFound, match='namespaces "nope" not found'):
        await api.create(make_pod("p", namespace="nope").obj())


async def test_already_exists(api):
    await api.create(make_pod("p").obj())
    with pytest.raises(errors.AlreadyExists):
        await api.create(make_pod("p").obj())


async def _log_length(server) -> int:
    return await server.store.max_seq()


async def test_malformed_object_is_rejected_with_field_path(server, api):
    before = await _log_length(server)
    body = codec.encode(make_pod("p").dict() | {"spec": {"containers": "not-a-list"}})
    with pytest.raises(errors.Invalid) as err:
        await api.request(messages.Create(resource="pods", object=msgspec.Raw(body)))
    assert err.value.code == 422
    assert [c.field for c in err.value.causes] == ["spec.containers"]
    with pytest.raises(errors.BadRequest):
        await api.request(messages.Create(resource="pods", object=msgspec.Raw(b"{not json")))
    assert await _log_length(server) == before
    assert (await api.list(core_v1.Pod))[0] == []


async def test_invalid_object_is_rejected_with_field_path(server, api):
    before = await _log_length(server)
    cls = codec.convert(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": "gpu.example.com"},
            "spec": {"extendedResourceName": "deviceclass.resource.kubernetes.io/gpu"},
        },
        resource_v1.DeviceClass,
    )
    with pytest.raises(errors.Invalid) as err:
        await api.create(cls)
    assert "spec.extendedResourceName" in [c.field for c in err.value.causes]
    assert 'must not have "kubernetes.io/" domain' in err.value.message
    assert await _log_length(server) == before
    assert (await api.list(resource_v1.DeviceClass))[0] == []


async def test_large_lists_come_in_pages_and_are_complete(api):
    count = client.LIST_PAGE * 2 + 7
    await asyncio.gather(*(api.create(make_pod(f"p{i:04d}").obj()) for i in range(count)))
    pods, rv = await api.list(core_v1.Pod)
    assert [p.metadata.name for p in pods] == [f"p{i:04d}" for i in range(count)]
    assert rv >= max(int(p.metadata.resource_version) for p in pods[: client.LIST_PAGE])


async def test_generate_name_retries_a_colliding_suffix(api, monkeypatch):
    from drasim.apistore import objectmeta

    await api.create(make_pod("web-aaaaa").obj())
    names = iter(["web-aaaaa", "web-bbbbb", "web-ccccc", "web-ddddd"])
    monkeypatch.setattr(objectmeta, "generate_name", lambda base: next(names))
    pod = make_pod("").obj()
    pod.metadata.generate_name = "web-"
    assert (await api.create(pod)).metadata.name == "web-bbbbb"
