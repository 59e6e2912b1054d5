"""Binding conditions (KEP-5007) through kubectl, with a scheduler running: a pod whose
claim got a fabric-attached device stays unbound, with upstream's BindingConditionsPending
event, until the device's binding conditions are True in the claim's `status.devices`; a
failure condition or the binding timeout fails PreBind with upstream's message, and the
next attempt deallocates the claim and allocates it again. The special claim of
`example.com/gpu: 1` waits the same way. The test plays the driver that attaches
devices, writing the conditions with `kubectl patch --subresource=status`."""

from __future__ import annotations

import json
import random
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from drasim.common.api import resource_v1
from drasim.common.client import ApiClient
from drasim.controllers.server import ControllerManager
from drasim.scheduler.plugins import names
from drasim.scheduler.plugins.dynamic_resources.plugin import DynamicResourcesArgs
from drasim.scheduler.server import Scheduler
from tests.builders import make_node
from tests.http.conftest import Cluster
from tests.scheduler.e2e.conftest import ClusterWatch

ATTACHED = "fabric.example.com/attached"
FAILED = "fabric.example.com/attach-failed"

FABRIC = """\
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata:
  name: fabric.example.com
spec:
  selectors:
  - cel:
      expression: device.driver == "fabric.example.com"
  extendedResourceName: example.com/gpu
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata:
  name: fabric
spec:
  driver: fabric.example.com
  allNodes: true
  pool: {name: fabric, generation: 1, resourceSliceCount: 1}
  devices:
  - name: gpu-0
    bindsToNode: true
    bindingConditions: [fabric.example.com/attached]
    bindingFailureConditions: [fabric.example.com/attach-failed]
"""

CLAIM_AND_POD = """\
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata:
  name: fabric-gpu
spec:
  devices:
    requests:
    - name: gpu
      exactly: {deviceClassName: fabric.example.com}
---
apiVersion: v1
kind: Pod
metadata:
  name: trainer
spec:
  resourceClaims:
  - {name: gpu, resourceClaimName: fabric-gpu}
  containers:
  - name: app
    image: registry.k8s.io/pause:3.10
    resources:
      claims: [{name: gpu}]
"""

EXTENDED_POD = """\
apiVersion: v1
kind: Pod
metadata:
  name: trainer
spec:
  containers:
  - name: app
    image: registry.k8s.io/pause:3.10
    resources:
      limits: {example.com/gpu: "1"}
"""

StartScheduler = Callable[[float], Awaitable[Scheduler]]


@pytest.fixture
async def start_scheduler(cluster: Cluster) -> AsyncIterator[StartScheduler]:
    """Two nodes, and a scheduler whose DynamicResources waits `binding_timeout` seconds."""
    for name in ("worker-a", "worker-b"):
        await cluster.api.create(make_node(name, cpu="4", memory="8Gi", pods="110"))
    started: list[Scheduler] = []

    async def start(binding_timeout: float) -> Scheduler:
        sched = Scheduler(
            ApiClient(cluster.api.bus, actor="system:kube-scheduler"),
            rng=random.Random(0),
            plugin_args={names.DYNAMIC_RESOURCES: DynamicResourcesArgs(binding_timeout)},
        )
        started.append(sched)
        await sched.start(timeout=10)
        return sched

    yield start
    for sched in started:
        await sched.stop()


def _pending_claim(watch: ClusterWatch) -> resource_v1.ResourceClaim | None:
    """The claim once PreBind has written its allocation and reservation."""
    for claim in watch.claims.list():
        if claim.status.allocation is not None and claim.status.reserved_for:
            return claim
    return None


def _event_count(watch: ClusterWatch, reason: str, fragment: str = "") -> int:
    return sum(e.count or 1 for e in watch.events_of("trainer", reason) if fragment in e.message)


def _device_status(condition: str, status: str, reason: str, message: str = "") -> dict[str, Any]:
    return {
        "status": {
            "devices": [
                {
                    "driver": "fabric.example.com",
                    "pool": "fabric",
                    "device": "gpu-0",
                    "conditions": [
                        {
                            "type": condition,
                            "status": status,
                            "reason": reason,
                            "message": message,
                            "lastTransitionTime": "2026-01-01T00:00:00Z",
                        }
                    ],
                }
            ]
        }
    }


async def _set_device_status(kubectl, claim: str, patch: dict[str, Any]) -> None:  # noqa: ANN001
    await kubectl(
        "patch", "resourceclaim", claim, "--subresource=status", "--type=merge",
        "-p", json.dumps(patch),
    )  # fmt: skip


async def _wait_pending(kubectl, watch: ClusterWatch, times: int = 1) -> resource_v1.ResourceClaim:  # noqa: ANN001
    """Wait for the `times`-th BindingConditionsPending; the pod is still unbound then."""
    await watch.wait_for(lambda: _event_count(watch, "BindingConditionsPending") >= times)
    claim = await watch.wait_for(lambda: _pending_claim(watch))
    node = await kubectl("get", "pod", "trainer", "-o", "jsonpath={.spec.nodeName}")
    assert node.stdout == ""
    return claim


async def _start(  # noqa: ANN001
    kubectl,
    start_scheduler: StartScheduler,
    watch: ClusterWatch,
    binding_timeout: float = 600,
    pod: str = CLAIM_AND_POD,
) -> resource_v1.ResourceClaim:
    """Scheduler, fabric devices and the pod; the claim once PreBind waits for it."""
    await start_scheduler(binding_timeout)
    await kubectl("apply", "-f", "-", input=FABRIC)
    await kubectl("apply", "-f", "-", input=pod)
    return await _wait_pending(kubectl, watch)


async def test_user_claim_waits_for_binding_conditions(
    kubectl, start_scheduler: StartScheduler, watch: ClusterWatch
) -> None:
    claim = await _start(kubectl, start_scheduler, watch)
    (pending,) = watch.events_of("trainer", "BindingConditionsPending")
    assert pending.type == "Normal"
    node = claim.status.allocation.node_selector.node_selector_terms[0].match_fields[0].values[0]
    assert pending.message == f"waiting for binding conditions for device on node {node}"

    # Not yet: a condition other than the binding condition changes nothing.
    await _set_device_status(kubectl, "fabric-gpu", _device_status(ATTACHED, "False", "Attaching"))
    await _set_device_status(kubectl, "fabric-gpu", _device_status(ATTACHED, "True", "Attached"))
    assert await watch.bound("trainer") == node
    shown = json.loads((await kubectl("get", "resourceclaim", "fabric-gpu", "-o", "json")).stdout)
    (result,) = shown["status"]["allocation"]["devices"]["results"]
    assert result["bindingConditions"] == [ATTACHED]
    assert result["bindingFailureConditions"] == [FAILED]
    # bindsToNode: the network-attached device is usable from the node it was attached to.
    assert shown["status"]["allocation"]["nodeSelector"] == {
        "nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
        ]
    }
    assert shown["status"]["reservedFor"][0]["name"] == "trainer"


async def test_failure_condition_deallocates_and_retries(
    kubectl, start_scheduler: StartScheduler, watch: ClusterWatch
) -> None:
    first = await _start(kubectl, start_scheduler, watch)
    await _set_device_status(
        kubectl, "fabric-gpu", _device_status(FAILED, "True", "FabricDown", "port 3 lost")
    )
    failed = (
        'running PreBind plugin "DynamicResources": device binding failed: claim=fabric-gpu, '
        'reason=FabricDown, message="port 3 lost"'
    )
    await watch.wait_for(lambda: _event_count(watch, "FailedScheduling", failed))
    # The next attempt finds the claim unusable, deallocates it and allocates it anew.
    await watch.wait_for(
        lambda: _event_count(watch, "FailedScheduling", "deallocation of ResourceClaim completed")
    )
    second = await _wait_pending(kubectl, watch, times=2)
    assert second.metadata.uid == first.metadata.uid
    assert int(second.metadata.resource_version) > int(first.metadata.resource_version)
    assert second.status.devices == []  # the failed device's status went with the allocation
    await _set_device_status(kubectl, "fabric-gpu", _device_status(ATTACHED, "True", "Attached"))
    await watch.bound("trainer")


async def test_timeout_deallocates_and_retries(
    kubectl, start_scheduler: StartScheduler, watch: ClusterWatch
) -> None:
    await _start(kubectl, start_scheduler, watch, binding_timeout=1.0)
    await watch.wait_for(
        lambda: _event_count(
            watch, "FailedScheduling", 'running PreBind plugin "DynamicResources": '
            "device binding timeout: "
        ),
    )  # fmt: skip
    await _wait_pending(kubectl, watch, times=2)
    await _set_device_status(kubectl, "fabric-gpu", _device_status(ATTACHED, "True", "Attached"))
    # It may time out again before the patch lands; it binds in the end all the same.
    await watch.wait_for(
        lambda: (p := watch.pods.get("trainer", "default")) is not None and p.spec.node_name,
        timeout=20,
    )


async def test_special_claim_waits_for_binding_conditions(
    kubectl, start_scheduler: StartScheduler, watch: ClusterWatch
) -> None:
    claim = await _start(kubectl, start_scheduler, watch, pod=EXTENDED_POD)
    pod = watch.pod("trainer")
    assert watch.special_claims(pod) == [claim]
    # PreBind named the special claim in the pod's status before it began to wait.
    path = "jsonpath={.status.extendedResourceClaimStatus.resourceClaimName}"
    status = await kubectl("get", "pod", "trainer", "-o", path)
    assert status.stdout == claim.metadata.name
    await _set_device_status(
        kubectl, claim.metadata.name, _device_status(ATTACHED, "True", "Attached")
    )
    await watch.bound("trainer")


TEMPLATE = """\
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata:
  name: fabric-gpu
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly: {deviceClassName: fabric.example.com}
"""
# The same pod, its claim made from the template.
TEMPLATE_POD = (
    TEMPLATE
    + "---\n"
    + CLAIM_AND_POD.split("---\n")[1].replace("resourceClaimName:", "resourceClaimTemplateName:")
)


async def test_template_claim_waits_for_binding_conditions_and_goes_with_its_pod(
    kubectl, start_scheduler: StartScheduler, controllers: ControllerManager, watch: ClusterWatch
) -> None:
    """The claim the controller makes from a template waits in PreBind as a user's claim
    does; once the pod is gone, the controller deletes it, and the device is free for the
    next pod's claim."""
    claim = await _start(kubectl, start_scheduler, watch, pod=TEMPLATE_POD)
    assert claim.metadata.name.startswith("trainer-gpu-")
    await _set_device_status(
        kubectl, claim.metadata.name, _device_status(ATTACHED, "True", "Attached")
    )
    await watch.bound("trainer")
    await kubectl("delete", "pod", "trainer", "--grace-period=0", "--force")
    await watch.wait_for(lambda: watch.claims.get(claim.metadata.name, "default") is None)
    # The next pod of the template gets the device again, and waits for it anew.
    await kubectl("apply", "-f", "-", input=TEMPLATE_POD)
    again = await _wait_pending(kubectl, watch, times=2)
    assert again.metadata.uid != claim.metadata.uid
    assert [r.device for r in again.status.allocation.devices.results] == ["gpu-0"]
