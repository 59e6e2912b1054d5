"""NodeRestriction: a kubelet acting as `system:node:<name>` writes only its own node's
objects (`drasim.apistore.node_restriction`), with upstream's 403 messages."""

from __future__ import annotations

import pytest

from drasim.common import codec, errors
from drasim.common.api import coordination_v1, core_v1, resource_v1
from drasim.common.bus.client import Bus
from drasim.common.client import ApiClient
from tests.builders import make_node, make_pod


def _slice(name: str, node: str) -> resource_v1.ResourceSlice:
    return codec.convert(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": name},
            "spec": {
                "driver": "gpu.example.com",
                "nodeName": node,
                "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                "devices": [{"name": "gpu-0"}],
            },
        },
        resource_v1.ResourceSlice,
    )


def _lease(name: str, namespace: str = "kube-node-lease") -> coordination_v1.Lease:
    return codec.convert(
        {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"holderIdentity": name},
        },
        coordination_v1.Lease,
    )


@pytest.fixture
async def cluster(api: ApiClient, bus: Bus) -> dict[str, ApiClient]:
    """Nodes a and b with a pod bound to each; clients acting as each node."""
    for name in ("a", "b"):
        await api.create(make_node(name, cpu="4", pods="10"))
        pod = await api.create(make_pod(f"pod-{name}").container("c").obj())
        await api.bind(pod, name)
    return {
        "a": ApiClient(bus, actor="system:node:a"),
        "b": ApiClient(bus, actor="system:node:b"),
    }


async def _forbidden(call) -> str:  # noqa: ANN001 - an awaitable
    with pytest.raises(errors.Forbidden) as caught:
        await call
    return str(caught.value)


async def test_a_node_writes_its_own_node_and_not_another(
    cluster: dict[str, ApiClient], api: ApiClient
) -> None:
    a = cluster["a"]
    node = await a.get(core_v1.Node, "a")
    node.metadata.labels["drasim.io/probe"] = "ok"
    await a.update(node)
    other = await api.get(core_v1.Node, "b")  # not a's to read (`node_authorizer`)
    other.metadata.labels["x"] = "y"
    assert await _forbidden(a.update(other)) == (
        'nodes "b" is forbidden: node "a" is not allowed to modify node "b"'
    )
    assert await _forbidden(a.update_status(other)) == (
        'nodes "b" is forbidden: node "a" is not allowed to modify node "b"'
    )
    assert await _forbidden(a.delete(core_v1.Node, "b")) == (
        'nodes "b" is forbidden: node "a" is not allowed to modify node "b"'
    )
    node = await a.get(core_v1.Node, "a")
    node.spec.taints = [core_v1.Taint(key="k", effect="NoSchedule")]
    assert await _forbidden(a.update(node)) == (
        'nodes "a" is forbidden: node "a" is not allowed to modify taints'
    )


async def test_a_node_writes_only_the_status_of_its_own_pods(
    cluster: dict[str, ApiClient],
) -> None:
    a = cluster["a"]
    await a.patch(
        core_v1.Pod, "pod-a", {"status": {"phase": "Running"}}, namespace="default",
        subresource="status",
    )  # fmt: skip
    assert await _forbidden(
        a.patch(
            core_v1.Pod,
            "pod-b",
            {"status": {"phase": "Running"}},
            namespace="default",
            subresource="status",
        )
    ) == (  # fmt: skip
        'pods "pod-b" is forbidden: node "a" can only update pod status for pods with '
        "spec.nodeName set to itself"
    )
    # The emulator's record of container devices, on its own pods only.
    record = {"metadata": {"annotations": {"drasim.io/container-devices": "{}"}}}
    await a.patch(core_v1.Pod, "pod-a", record, namespace="default")
    assert await _forbidden(a.patch(core_v1.Pod, "pod-b", record, namespace="default")) == (
        'pods "pod-b" is forbidden: unexpected operation "UPDATE", node "a" can only create '
        "and delete mirror pods"
    )
    relabel = {"metadata": {"labels": {"app": "mine"}}}
    assert "can only create and delete mirror pods" in await _forbidden(
        a.patch(core_v1.Pod, "pod-a", relabel, namespace="default")
    )
    assert await _forbidden(a.delete(core_v1.Pod, "pod-b", namespace="default")) == (
        'pods "pod-b" is forbidden: node "a" can only delete pods with spec.nodeName set to itself'
    )
    assert await _forbidden(a.create(make_pod("new").container("c").node("a").obj())) == (
        'pods "new" is forbidden: pod does not have "kubernetes.io/config.mirror" annotation, '
        'node "a" can only create mirror pods'
    )
    await a.delete(core_v1.Pod, "pod-a", namespace="default")


async def test_a_node_publishes_only_its_own_resource_slices(
    cluster: dict[str, ApiClient], api: ApiClient
) -> None:
    a, b = cluster["a"], cluster["b"]
    assert await _forbidden(a.create(_slice("a-gpu", "b"))) == (
        'resourceslices.resource.k8s.io "a-gpu" is forbidden: can only create ResourceSlice '
        "with the same NodeName as the requesting node"
    )
    mine = await a.create(_slice("a-gpu", "a"))
    await b.create(_slice("b-gpu", "b"))
    assert "no relationship found between node 'b' and this object" in await _forbidden(
        b.update(mine)
    )
    assert await _forbidden(b.delete(resource_v1.ResourceSlice, "a-gpu")) == (
        'resourceslices.resource.k8s.io "a-gpu" is forbidden: can only delete ResourceSlice '
        "with the same NodeName as the requesting node"
    )
    await a.delete(resource_v1.ResourceSlice, "a-gpu")
    slices, _ = await api.list(resource_v1.ResourceSlice)
    assert [s.metadata.name for s in slices] == ["b-gpu"]


async def test_a_node_renews_only_its_own_lease(cluster: dict[str, ApiClient]) -> None:
    a = cluster["a"]
    await a.create(_lease("a"))
    assert await _forbidden(a.create(_lease("b"))) == (
        'leases.coordination.k8s.io "b" is forbidden: can only access node lease with the same '
        "name as the requesting node"
    )
    assert await _forbidden(a.create(_lease("a", namespace="default"))) == (
        'leases.coordination.k8s.io "a" is forbidden: can only access leases in the '
        '"kube-node-lease" system namespace'
    )


async def test_a_node_may_not_write_other_kinds_nor_bind(
    cluster: dict[str, ApiClient], api: ApiClient
) -> None:
    a = cluster["a"]
    device_class = codec.convert(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": "gpu"},
            "spec": {},
        },
        resource_v1.DeviceClass,
    )
    assert await _forbidden(a.create(device_class)) == (
        'deviceclasses.resource.k8s.io "gpu" is forbidden: User "system:node:a" cannot create '
        'resource "deviceclasses" in API group "resource.k8s.io" at the cluster scope: no '
        "relationship found between node 'a' and this object"
    )
    pod = await api.create(make_pod("unbound").container("c").obj())
    assert "only 'status' and 'eviction' are allowed" in await _forbidden(a.bind(pod, "a"))
