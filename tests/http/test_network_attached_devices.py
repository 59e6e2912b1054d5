"""Slices not tied to one node (network-attached devices) through kubectl, with a scheduler
running: `allNodes`, `nodeSelector` and `perDeviceNodeSelection` slices are accepted as
upstream stores them, their devices are allocated to pods on any node they reach, and the
allocation's node selector narrows where the claim may be used, so a second pod sharing
the claim lands where the first could."""

from __future__ import annotations

import json
import random
from collections.abc import AsyncIterator

import pytest

from drasim.common.client import ApiClient
from drasim.controllers.server import ControllerManager
from drasim.scheduler.server import Scheduler
from tests.builders import make_node
from tests.http.conftest import Cluster
from tests.scheduler.e2e.conftest import ClusterWatch

NODES = {"rack-a-0": "a", "rack-a-1": "a", "rack-b-0": "b"}

CLASS = """\
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata:
  name: nic.example.com
spec:
  selectors:
  - cel:
      expression: device.driver == "nic.example.com"
"""


def _slice(name: str, placement: str, devices: str) -> str:
    return f"""\
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata:
  name: {name}
spec:
  driver: nic.example.com
  pool: {{name: {name}, generation: 1, resourceSliceCount: 1}}
{placement}
  devices:
{devices}
"""


RACK_A = _slice(
    "rack-a",
    """  nodeSelector:
    nodeSelectorTerms:
    - matchExpressions:
      - {key: rack, operator: In, values: [a]}""",
    "  - name: nic-0",
)
EVERYWHERE = _slice("fabric", "  allNodes: true", "  - name: nic-0")
PER_DEVICE = _slice(
    "mixed",
    "  perDeviceNodeSelection: true",
    """  - name: local-b
    nodeName: rack-b-0
  - name: rack-a-only
    nodeSelector:
      nodeSelectorTerms:
      - matchExpressions:
        - {key: rack, operator: In, values: [a]}""",
)


def _claim_and_pods(*pods: str, node_selector: str = "") -> str:
    docs = [
        """\
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata:
  name: nic
spec:
  devices:
    requests:
    - name: nic
      exactly: {deviceClassName: nic.example.com}
"""
    ]
    for pod in pods:
        docs.append(
            f"""\
apiVersion: v1
kind: Pod
metadata:
  name: {pod}
spec:
  {node_selector or "nodeSelector: {}"}
  resourceClaims:
  - {{name: nic, resourceClaimName: nic}}
  containers:
  - name: app
    image: registry.k8s.io/pause:3.10
    resources:
      claims: [{{name: nic}}]
"""
        )
    return "---\n".join(docs)


@pytest.fixture
async def scheduler(cluster: Cluster) -> AsyncIterator[Scheduler]:
    for name, rack in NODES.items():
        node = make_node(name, cpu="4", memory="8Gi", pods="110")
        node.metadata.labels["rack"] = rack
        await cluster.api.create(node)
    sched = Scheduler(
        ApiClient(cluster.api.bus, actor="system:kube-scheduler"), rng=random.Random(0)
    )
    await sched.start(timeout=10)
    yield sched
    await sched.stop()


async def _allocation(kubectl) -> dict:  # noqa: ANN001
    shown = await kubectl("get", "resourceclaim", "nic", "-o", "jsonpath={.status.allocation}")
    return json.loads(shown.stdout)


async def test_node_selector_slice_narrows_the_claim_to_its_nodes(
    kubectl, scheduler: Scheduler, watch: ClusterWatch
) -> None:
    await kubectl("apply", "-f", "-", input=CLASS + "---\n" + RACK_A)
    shown = json.loads((await kubectl("get", "resourceslice", "rack-a", "-o", "json")).stdout)
    assert "nodeName" not in shown["spec"]
    await kubectl("apply", "-f", "-", input=_claim_and_pods("first", "second"))
    first, second = await watch.bound("first"), await watch.bound("second")
    assert {first, second} <= {"rack-a-0", "rack-a-1"}
    allocation = await _allocation(kubectl)
    assert allocation["devices"]["results"][0]["pool"] == "rack-a"
    assert allocation["nodeSelector"] == {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": "rack", "operator": "In", "values": ["a"]}]}
        ]
    }
    table = (await kubectl("get", "resourceslices")).stdout.splitlines()
    assert table[1].split()[:2] == ["rack-a", "<none>"]


async def test_all_nodes_slice_is_usable_from_any_node(
    kubectl, scheduler: Scheduler, watch: ClusterWatch
) -> None:
    await kubectl("apply", "-f", "-", input=CLASS + "---\n" + EVERYWHERE)
    pods = _claim_and_pods("on-b", node_selector="nodeSelector: {rack: b}")
    await kubectl("apply", "-f", "-", input=pods)
    assert await watch.bound("on-b") == "rack-b-0"
    allocation = await _allocation(kubectl)
    assert allocation["devices"]["results"][0]["device"] == "nic-0"
    assert "nodeSelector" not in allocation  # usable anywhere
    # A second pod of the claim may go to any node.
    other = _claim_and_pods("on-a", node_selector="nodeSelector: {rack: a}").split("---\n")[1]
    await kubectl("apply", "-f", "-", input=other)
    assert (await watch.bound("on-a")).startswith("rack-a-")


async def test_per_device_node_selection(
    kubectl, scheduler: Scheduler, watch: ClusterWatch
) -> None:
    await kubectl("apply", "-f", "-", input=CLASS + "---\n" + PER_DEVICE)
    pods = _claim_and_pods("on-b", node_selector="nodeSelector: {rack: b}")
    await kubectl("apply", "-f", "-", input=pods)
    assert await watch.bound("on-b") == "rack-b-0"
    allocation = await _allocation(kubectl)
    assert allocation["devices"]["results"][0]["device"] == "local-b"
    assert allocation["nodeSelector"] == {
        "nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["rack-b-0"]}]}
        ]
    }
    # Sharing the claim, another pod can only follow it to rack-b-0: it cannot go to rack a.
    other = _claim_and_pods("on-a", node_selector="nodeSelector: {rack: a}").split("---\n")[1]
    await kubectl("apply", "-f", "-", input=other)
    condition = await watch.unschedulable("on-a")
    assert "resourceclaim not available on the node" in condition.message


MAPPED_CLASS = CLASS + "  extendedResourceName: example.com/nic\n"
TEMPLATED_AND_EXTENDED = """\
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: one-nic}
spec:
  spec:
    devices:
      requests:
      - {name: nic, exactly: {deviceClassName: nic.example.com}}
---
apiVersion: v1
kind: Pod
metadata: {name: templated}
spec:
  resourceClaims: [{name: nic, resourceClaimTemplateName: one-nic}]
  containers:
  - name: app
    image: registry.k8s.io/pause:3.10
    resources: {claims: [{name: nic}]}
"""
EXTENDED = """\
apiVersion: v1
kind: Pod
metadata: {name: extended}
spec:
  containers:
  - name: app
    image: registry.k8s.io/pause:3.10
    resources: {limits: {example.com/nic: "1"}}
"""


async def test_template_and_special_claims_share_the_rack_device_in_turn(
    kubectl, scheduler: Scheduler, controllers: ControllerManager, watch: ClusterWatch
) -> None:
    """Rack a's one NIC goes to a template's claim, narrowed to rack a's nodes; a pod
    asking `example.com/nic: 1` waits for it, and gets it (its special claim narrowed the
    same way) once the templated pod is gone and the controller deleted its claim."""
    await kubectl("apply", "-f", "-", input=MAPPED_CLASS + "---\n" + RACK_A)
    await kubectl("apply", "-f", "-", input=TEMPLATED_AND_EXTENDED)
    assert await watch.bound("templated") in ("rack-a-0", "rack-a-1")
    (claim,) = watch.pod("templated").status.resource_claim_statuses
    name = claim.resource_claim_name
    allocated = watch.claims.get(name, "default")
    assert allocated is not None and allocated.status.allocation is not None
    rack_a = allocated.status.allocation.node_selector
    assert rack_a is not None and rack_a.node_selector_terms[0].match_expressions[0].key == "rack"

    await kubectl("apply", "-f", "-", input=EXTENDED)
    condition = await watch.unschedulable("extended")
    assert "cannot allocate all claims" in condition.message
    await kubectl("delete", "pod", "templated", "--grace-period=0", "--force")
    await watch.wait_for(lambda: watch.claims.get(name, "default") is None)
    assert await watch.bound("extended") in ("rack-a-0", "rack-a-1")
    (special,) = watch.special_claims(watch.pod("extended"))
    assert special.status.allocation is not None
    assert special.status.allocation.node_selector == rack_a
    assert [r.device for r in special.status.allocation.devices.results] == ["nic-0"]
