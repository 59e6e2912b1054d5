"""The Node authorizer's part for reads: a kubelet acting as `system:node:<name>` reads
its own Node and Lease, the pods bound to it, its own ResourceSlices and the claims its
pods name, and nothing else (`drasim.apistore.node_authorizer`), over NATS and HTTP alike."""

from __future__ import annotations

import pytest

from drasim.common import codec, errors
from drasim.common.api import core_v1, resource_v1
from drasim.common.bus import messages
from drasim.common.bus.client import Bus
from drasim.common.client import ApiClient
from tests.apistore.test_node_restriction import _forbidden, _slice
from tests.builders import make_node, make_pod


def _claim(name: str, pod: core_v1.Pod | None) -> resource_v1.ResourceClaim:
    reserved = []
    if pod is not None:
        reserved = [{"resource": "pods", "name": pod.metadata.name, "uid": pod.metadata.uid}]
    return codec.convert(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {
                "devices": {
                    "requests": [{"name": "r", "exactly": {"deviceClassName": "gpu.example.com"}}]
                }
            },
            "status": {
                "allocation": {
                    "devices": {
                        "results": [
                            {
                                "request": "r",
                                "driver": "gpu.example.com",
                                "pool": "p",
                                "device": "gpu-0",
                            }
                        ]
                    }
                },
                "reservedFor": reserved,
            }
            if pod is not None
            else {},
        },
        resource_v1.ResourceClaim,
    )


@pytest.fixture
async def cluster(api: ApiClient, bus: Bus) -> ApiClient:
    """Nodes a and b, each with a pod, a slice and a claim its pod names; a client acting
    as node a."""
    for name in ("a", "b"):
        await api.create(make_node(name, cpu="4", pods="10"))
        pod = make_pod(f"pod-{name}").container("c").obj()
        pod.spec.resource_claims = [
            core_v1.PodResourceClaim(name="gpu", resource_claim_name=f"claim-{name}")
        ]
        pod = await api.create(pod)
        await api.bind(pod, name)
        await api.create(_slice(f"slice-{name}", name))
        claim = await api.create(_claim(f"claim-{name}", None))
        claim.status = _claim("", pod).status
        await api.update_status(claim)
    return ApiClient(bus, actor="system:node:a")


async def test_a_node_reads_its_own_objects(cluster: ApiClient) -> None:
    a = cluster
    assert (await a.get(core_v1.Node, "a")).metadata.name == "a"
    assert (await a.get(core_v1.Pod, "pod-a", namespace="default")).spec.node_name == "a"
    assert (await a.get(resource_v1.ResourceSlice, "slice-a")).spec.node_name == "a"
    claim = await a.get(resource_v1.ResourceClaim, "claim-a", namespace="default")
    assert claim.status.reserved_for[0].name == "pod-a"
    pods, _ = await a.list(core_v1.Pod, field_selector="spec.nodeName=a")
    assert [p.metadata.name for p in pods] == ["pod-a"]
    slices, _ = await a.list(
        resource_v1.ResourceSlice, field_selector="spec.nodeName=a,spec.driver=gpu.example.com"
    )
    assert [s.metadata.name for s in slices] == ["slice-a"]
    nodes, _ = await a.list(core_v1.Node, field_selector="metadata.name=a")
    assert [n.metadata.name for n in nodes] == ["a"]


async def test_a_node_reads_nothing_of_another_node(cluster: ApiClient) -> None:
    a = cluster
    no_relationship = "no relationship found between node 'a' and this object"
    assert await _forbidden(a.get(core_v1.Node, "b")) == (
        'nodes "b" is forbidden: User "system:node:a" cannot get resource "nodes" in API '
        "group \"\" at the cluster scope: node 'a' cannot read 'b', only its own Node object"
    )
    assert await _forbidden(a.get(core_v1.Pod, "pod-b", namespace="default")) == (
        'pods "pod-b" is forbidden: User "system:node:a" cannot get resource "pods" in API '
        f'group "" in the namespace "default": {no_relationship}'
    )
    # A missing object has no relationship either: 403, not 404.
    assert no_relationship in await _forbidden(a.get(core_v1.Pod, "gone", namespace="default"))
    assert no_relationship in await _forbidden(a.get(resource_v1.ResourceSlice, "slice-b"))
    assert no_relationship in await _forbidden(
        a.get(resource_v1.ResourceClaim, "claim-b", namespace="default")
    )
    assert await _forbidden(a.list(core_v1.Pod)) == (
        'pods is forbidden: User "system:node:a" cannot list resource "pods" in API group "" '
        "at the cluster scope: can only list/watch pods with spec.nodeName field selector"
    )
    assert "with spec.nodeName field selector" in await _forbidden(
        a.list(core_v1.Pod, field_selector="spec.nodeName=b")
    )
    assert "only its own Node object" in await _forbidden(a.list(core_v1.Node))
    assert "with nodeName field selector" in await _forbidden(a.list(resource_v1.ResourceSlice))
    # Kinds no rule gives a node, and the event log.
    assert 'cannot list resource "namespaces"' in await _forbidden(a.list(core_v1.Namespace))
    assert 'cannot get resource "deviceclasses"' in await _forbidden(
        a.get(resource_v1.DeviceClass, "gpu.example.com")
    )
    with pytest.raises(errors.Forbidden, match="cannot read the event log"):
        await a.request(messages.EventLog())
