"""Binding conditions (KEP-5007) and node selection from slices not tied to one node: what
the allocator records in a result, and the state machine PreBind and Filter follow
(upstream `TestIsClaimReadyForBinding`-style cases of `dynamicresources_test.go`, and
`createNodeSelector` of the structured allocator)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from drasim.common import codec, tables
from drasim.common.api import core_v1, resource_v1
from drasim.scheduler.dra_manager import DraManager
from drasim.scheduler.plugins.dynamic_resources import binding_conditions as bc
from drasim.scheduler.plugins.dynamic_resources.allocator import Allocator
from tests.scheduler.plugins.dynamic_resources.test_allocator import (
    CLASSES,
    WORKER,
    ZONE_A,
    dev,
    exact,
    make_claim,
    make_node,
    make_slice,
)

ATTACHED = "dra.example.com/is-attached"
FAILED = "dra.example.com/attach-failed"
FABRIC = {"bindingConditions": [ATTACHED], "bindingFailureConditions": [FAILED]}
TIMEOUT = 600.0


def _selector_names(selector: core_v1.NodeSelector | None) -> list[str] | None:
    if selector is None:
        return None
    (term,) = selector.node_selector_terms
    (field,) = term.match_fields
    assert (field.key, field.operator) == ("metadata.name", "In")
    return field.values


# --- the allocator -------------------------------------------------------------------------


def test_result_copies_binding_conditions() -> None:
    slices = [make_slice("w", dev("gpu-0", **FABRIC))]
    (result,) = Allocator(slices, CLASSES, set()).allocate(
        make_node(), [make_claim("c", exact("req"))]
    )
    (device,) = result.devices.results
    assert device.binding_conditions == [ATTACHED]
    assert device.binding_failure_conditions == [FAILED]


def test_binds_to_node_narrows_a_network_attached_device_to_the_node() -> None:
    """An `allNodes` device is usable anywhere, unless it binds to the node it is
    attached to: then the allocation names that node."""
    free = [make_slice("all", dev("nic-0"), node=None, pool="fabric", allNodes=True)]
    binding = [
        make_slice(
            "all", dev("nic-0", bindsToNode=True, **FABRIC), node=None, pool="fabric", allNodes=True
        )
    ]
    claim = make_claim("c", exact("req"))
    (anywhere,) = Allocator(free, CLASSES, set()).allocate(make_node("n-7"), [claim])
    (bound,) = Allocator(binding, CLASSES, set()).allocate(make_node("n-7"), [claim])
    assert anywhere.node_selector is None
    assert _selector_names(bound.node_selector) == ["n-7"]


def test_node_selector_slice_gives_its_selector_and_a_node_local_device_the_node() -> None:
    slices = [
        make_slice("net", dev("n-0"), node=None, pool="net", nodeSelector=ZONE_A),
        make_slice("w", dev("gpu-0")),
    ]
    node = make_node(WORKER, zone="a")
    (by_zone,) = Allocator(slices, CLASSES, set()).allocate(
        node, [make_claim("c", exact("req", "gpu", 1, 'device.attributes["x"].y == 1 || true'))]
    )
    # The first device in pool order is the selector slice's ("net" < "worker").
    assert by_zone.node_selector == codec.convert(ZONE_A, core_v1.NodeSelector)
    (both,) = Allocator(slices, CLASSES, set()).allocate(
        node, [make_claim("c", exact("req", "gpu", 2))]
    )
    assert _selector_names(both.node_selector) == [WORKER]
    # Another node outside the zone reaches no device of "net".
    assert (
        Allocator(slices, CLASSES, set()).allocate(
            make_node("elsewhere", zone="b"), [make_claim("c", exact("req"))]
        )
        is None
    )


def test_per_device_node_selection_result_follows_the_device() -> None:
    slices = [
        make_slice(
            "pd",
            dev("d-zone", nodeSelector=ZONE_A),
            dev("d-local", nodeName="worker-2"),
            node=None,
            pool="pd",
            perDeviceNodeSelection=True,
        )
    ]
    (on_worker,) = Allocator(slices, CLASSES, set()).allocate(
        make_node(WORKER, zone="a"), [make_claim("c", exact("req"))]
    )
    assert [r.device for r in on_worker.devices.results] == ["d-zone"]
    assert on_worker.node_selector == codec.convert(ZONE_A, core_v1.NodeSelector)
    (on_two,) = Allocator(slices, CLASSES, set()).allocate(
        make_node("worker-2", zone="b"), [make_claim("c", exact("req"))]
    )
    assert [r.device for r in on_two.devices.results] == ["d-local"]
    assert _selector_names(on_two.node_selector) == ["worker-2"]


def test_pools_with_binding_conditions_come_last() -> None:
    """As upstream's `GatherPools`: a device that needs no binding conditions is preferred,
    even from a pool that sorts later by name."""
    slices = [
        make_slice("a", dev("slow-0", **FABRIC), node=None, pool="a-fabric", allNodes=True),
        make_slice("w", dev("gpu-0")),
    ]
    allocator = Allocator(slices, CLASSES, set())
    (one,) = allocator.allocate(make_node(), [make_claim("c", exact("req"))])
    assert [r.device for r in one.devices.results] == ["gpu-0"]
    (two,) = Allocator(slices, CLASSES, set()).allocate(
        make_node(), [make_claim("c", exact("req", "gpu", 2))]
    )
    assert [r.device for r in two.devices.results] == ["gpu-0", "slow-0"]


# --- the state machine ---------------------------------------------------------------------


def _claim(
    conditions: dict[str, tuple[str, str, str]] | None,
    *,
    allocated_ago: float = 0.0,
    binding: bool = True,
) -> resource_v1.ResourceClaim:
    """An allocated claim of one device `gpu-0`; `conditions` type -> (status, reason,
    message) in its `status.devices` (None: no device status at all)."""
    result: dict[str, Any] = {
        "request": "req",
        "driver": "gpu.example.com",
        "pool": WORKER,
        "device": "gpu-0",
    }
    if binding:
        result |= FABRIC
    when = datetime.now(UTC) - timedelta(seconds=allocated_ago)
    status: dict[str, Any] = {
        "allocation": {
            "devices": {"results": [result]},
            "allocationTimestamp": tables.format_time(when),
        }
    }
    if conditions is not None:
        status["devices"] = [
            {
                "driver": "gpu.example.com",
                "pool": WORKER,
                "device": "gpu-0",
                "conditions": [
                    {"type": t, "status": s, "reason": r, "message": m}
                    for t, (s, r, m) in conditions.items()
                ],
            }
        ]
    return codec.convert(
        {
            "metadata": {"name": "c", "namespace": "default", "uid": "u", "resourceVersion": "1"},
            "spec": {"devices": {"requests": [exact("req")]}},
            "status": status,
        },
        resource_v1.ResourceClaim,
    )


TRUE = ("True", "Attached", "")
FALSE = ("False", "Attaching", "")


@pytest.mark.parametrize(
    ("conditions", "binding", "ready"),
    [
        (None, False, True),  # no binding conditions: ready at once
        (None, True, False),  # no device status yet
        ({}, True, False),
        ({ATTACHED: FALSE}, True, False),
        ({ATTACHED: TRUE}, True, True),
        ({ATTACHED: TRUE, FAILED: ("False", "OK", "")}, True, True),
    ],
    ids=["none", "no-status", "no-conditions", "false", "true", "true-failure-false"],
)
def test_is_claim_ready_for_binding(
    conditions: dict[str, tuple[str, str, str]] | None, binding: bool, ready: bool
) -> None:
    assert bc.is_claim_ready_for_binding(_claim(conditions, binding=binding)) is ready


def test_failure_condition_fails_with_upstreams_message() -> None:
    claim = _claim({ATTACHED: TRUE, FAILED: ("True", "FabricDown", 'port "3" lost')})
    with pytest.raises(bc.BindingFailed) as failed:
        bc.is_claim_ready_for_binding(claim)
    assert str(failed.value) == (
        'device binding failed: claim=c, reason=FabricDown, message="port \\"3\\" lost"'
    )
    assert bc.claim_unusable(claim, TIMEOUT, datetime.now(UTC))


def test_timeout_counts_from_the_allocation() -> None:
    now = datetime.now(UTC)
    fresh = _claim({ATTACHED: FALSE}, allocated_ago=10)
    old = _claim({ATTACHED: FALSE}, allocated_ago=TIMEOUT + 5)
    old_but_ready = _claim({ATTACHED: TRUE}, allocated_ago=TIMEOUT + 5)
    old_without_conditions = _claim(None, allocated_ago=TIMEOUT + 5, binding=False)
    assert not bc.is_claim_timeout(fresh, TIMEOUT, now)
    assert bc.is_claim_timeout(old, TIMEOUT, now)
    assert not bc.is_claim_timeout(old_without_conditions, TIMEOUT, now)
    assert [bc.claim_unusable(c, TIMEOUT, now) for c in (fresh, old, old_but_ready)] == [
        False,
        True,
        False,
    ]
    assert bc.has_binding_conditions([fresh]) and not bc.has_binding_conditions(
        [old_without_conditions]
    )


async def test_wait_returns_once_the_cache_shows_the_conditions_true() -> None:
    manager = DraManager()
    pending = _claim({ATTACHED: FALSE})
    manager.on_claim_add(pending)
    waiter = asyncio.create_task(bc.wait_for_binding_conditions(manager, [pending], TIMEOUT))
    await asyncio.sleep(0)
    assert not waiter.done()
    attached = codec.clone(_claim({ATTACHED: TRUE}))
    attached.metadata.resource_version = "2"
    manager.on_claim_update(pending, attached)
    (seen,) = await asyncio.wait_for(waiter, 5)
    assert seen.metadata.resource_version == "2"


async def test_wait_fails_on_a_failure_condition_and_times_out() -> None:
    manager = DraManager()
    pending = _claim({ATTACHED: FALSE})
    manager.on_claim_add(pending)
    waiter = asyncio.create_task(bc.wait_for_binding_conditions(manager, [pending], TIMEOUT))
    await asyncio.sleep(0)
    failed = _claim({FAILED: ("True", "FabricDown", "")})
    failed.metadata.resource_version = "2"
    manager.on_claim_update(pending, failed)
    with pytest.raises(bc.BindingFailed, match="claim=c, reason=FabricDown"):
        await asyncio.wait_for(waiter, 5)

    retried = _claim({ATTACHED: FALSE})
    retried.metadata.resource_version = "3"
    manager.on_claim_update(failed, retried)
    with pytest.raises(
        bc.BindingTimeout, match="^device binding timeout: (context deadline exceeded|claim=c)$"
    ):
        await bc.wait_for_binding_conditions(manager, [retried], 0.05)
    waiter = asyncio.create_task(bc.wait_for_binding_conditions(manager, [retried], TIMEOUT))
    await asyncio.sleep(0)
    manager.on_claim_delete(retried)
    with pytest.raises(LookupError, match="not found"):
        await asyncio.wait_for(waiter, 5)
