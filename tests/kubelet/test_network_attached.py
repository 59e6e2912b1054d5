"""End to end: network-attached devices published from a cluster file (`resourceSlices`,
an `allNodes` slice of driver nic.example.com) are allocated to pods on any node, prepared
there by the driver's plugin on that node, and reported by the driver's controller with
network data in the claim's `status.devices`."""

from __future__ import annotations

from drasim.common import codec
from drasim.common.api import core_v1, resource_v1
from drasim.common.client import ApiClient
from tests.kubelet.conftest import RunClusterFile
from tests.kubelet.waiting import wait_for

CLUSTER = """
apiVersion: drasim.io/v1alpha1
kind: Cluster
deviceClasses:
  - apiVersion: resource.k8s.io/v1
    kind: DeviceClass
    metadata: {name: nic.example.com}
    spec:
      selectors: [{cel: {expression: "device.driver == 'nic.example.com'"}}]
resourceSlices:
  - apiVersion: resource.k8s.io/v1
    kind: ResourceSlice
    metadata: {name: fabric-nics}
    spec:
      driver: nic.example.com
      allNodes: true
      pool: {name: fabric, generation: 1, resourceSliceCount: 1}
      devices: [{name: nic-0}, {name: nic-1}]
pools:
  - name: cpu
    count: 2
    profile: cpu-only
drivers:
  - name: nic.example.com
    deviceStatus: {networkData: true}
"""

POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "web", "namespace": "default"},
    "spec": {
        "nodeName": "",
        "resourceClaims": [{"name": "nic", "resourceClaimName": "nic"}],
        "containers": [
            {
                "name": "app",
                "image": "registry.k8s.io/pause:3.10",
                "resources": {"claims": [{"name": "nic"}]},
            }
        ],
    },
}
CLAIM = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceClaim",
    "metadata": {"name": "nic", "namespace": "default"},
    "spec": {
        "devices": {
            "requests": [{"name": "nic", "exactly": {"deviceClassName": "nic.example.com"}}]
        }
    },
}


async def test_network_attached_device_reaches_the_pod(
    api: ApiClient, run_cluster_file: RunClusterFile
) -> None:
    cluster = await run_cluster_file(CLUSTER)
    assert {n.network_drivers for n in cluster.nodes} == {frozenset({"nic.example.com"})}
    await api.create(codec.convert(CLAIM, resource_v1.ResourceClaim))
    await api.create(codec.convert(POD, core_v1.Pod))
    pod = await wait_for(
        api,
        core_v1.Pod,
        "web",
        lambda p: p is not None and p.status.phase == "Running",
        namespace="default",
    )
    assert pod is not None and pod.spec.node_name in ("cpu-0", "cpu-1")
    (status,) = pod.status.container_statuses
    devices = [h.resource_id for r in status.allocated_resources_status for h in r.resources]
    assert devices == ["nic.example.com/fabric/nic-0"]

    claim = await wait_for(
        api,
        resource_v1.ResourceClaim,
        "nic",
        lambda c: c is not None and bool(c.status.devices),
        namespace="default",
    )
    assert claim is not None and claim.status.allocation is not None
    assert claim.status.allocation.node_selector is None  # usable from every node
    (device,) = claim.status.devices
    assert (device.pool, device.device) == ("fabric", "nic-0")
    assert device.network_data is not None and device.network_data.ips == ["10.1.0.2/24"]
