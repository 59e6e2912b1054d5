"""The official Kubernetes Python client against the HTTP API: its calls (which block) run
in threads, so the apistore keeps serving in the test's event loop."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client, config, watch

from tests.http.conftest import Cluster

DEVICE_CLASS = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "DeviceClass",
    "metadata": {"name": "gpu.example.com"},
    "spec": {
        "selectors": [{"cel": {"expression": 'device.driver == "gpu.example.com"'}}],
        "extendedResourceName": "example.com/gpu",
    },
}


def pod(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "web"}},
        "spec": {
            "containers": [
                {"name": "app", "image": "registry.k8s.io/pause:3.10"},
                {"name": "sidecar", "image": "registry.k8s.io/pause:3.10"},
            ]
        },
    }


@pytest.fixture
def api_client(cluster: Cluster) -> Iterator[client.ApiClient]:
    with config.new_client_from_config(config_file=str(cluster.kubeconfig)) as api:
        yield api


async def test_list_create_patch(api_client):
    core = client.CoreV1Api(api_client)
    resource = client.ResourceV1Api(api_client)
    created = await asyncio.to_thread(resource.create_device_class, DEVICE_CLASS)
    assert created.spec.extended_resource_name == "example.com/gpu"
    classes = await asyncio.to_thread(resource.list_device_class)
    assert [c.metadata.name for c in classes.items] == ["gpu.example.com"]

    await asyncio.to_thread(core.create_namespaced_pod, "default", pod("web-1"))
    # A strategic merge patch (the client's default for an object body) merges containers
    # by name: `sidecar` keeps its image, `app` gets a new one.
    patch = {"spec": {"containers": [{"name": "app", "image": "registry.k8s.io/pause:3.9"}]}}
    patched = await asyncio.to_thread(core.patch_namespaced_pod, "web-1", "default", patch)
    assert [(c.name, c.image) for c in patched.spec.containers] == [
        ("app", "registry.k8s.io/pause:3.9"),
        ("sidecar", "registry.k8s.io/pause:3.10"),
    ]
    pods = await asyncio.to_thread(core.list_namespaced_pod, "default", label_selector="app=web")
    assert [p.metadata.name for p in pods.items] == ["web-1"]
    with pytest.raises(client.ApiException) as missing:
        await asyncio.to_thread(core.read_namespaced_pod, "web-2", "default")
    assert missing.value.status == 404


async def test_watch_sees_every_change_in_order(api_client):
    core = client.CoreV1Api(api_client)
    start = (await asyncio.to_thread(core.list_namespaced_pod, "default")).metadata
    changes = 5  # create, two patches, delete, create

    def collect() -> list[tuple[str, str, str]]:
        events = []
        stream = watch.Watch()
        for event in stream.stream(
            core.list_namespaced_pod, "default", resource_version=start.resource_version
        ):
            meta = event["object"].metadata
            events.append((event["type"], meta.name, meta.resource_version))
            if len(events) == changes:
                stream.stop()
        return events

    watching = asyncio.create_task(asyncio.to_thread(collect))
    await asyncio.to_thread(core.create_namespaced_pod, "default", pod("a"))
    for n in range(2):
        labels = {"metadata": {"labels": {"step": str(n)}}}
        await asyncio.to_thread(core.patch_namespaced_pod, "a", "default", labels)
    await asyncio.to_thread(core.delete_namespaced_pod, "a", "default")
    await asyncio.to_thread(core.create_namespaced_pod, "default", pod("b"))
    events = await asyncio.wait_for(watching, 20)
    assert [(kind, name) for kind, name, _ in events] == [
        ("ADDED", "a"),
        ("MODIFIED", "a"),
        ("MODIFIED", "a"),
        ("DELETED", "a"),
        ("ADDED", "b"),
    ]
    versions = [int(rv) for _, _, rv in events]
    assert versions == sorted(versions) and len(set(versions)) == changes
    assert versions[0] > int(start.resource_version)
