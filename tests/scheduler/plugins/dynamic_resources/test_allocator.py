"""The structured-parameters allocator and the node capacity used for scoring (upstream
`calculateDRAResourceTotals`; `TestCalculateResourceAllocatableRequest`, ids C8-C14)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import pytest

from drasim.common import codec
from drasim.common.api import core_v1, meta_v1, resource_v1
from drasim.scheduler.plugins.dynamic_resources import allocator, cel_env
from drasim.scheduler.plugins.dynamic_resources.allocator import (
    Allocator,
    AllocatorError,
    DeviceID,
    Snapshot,
    node_device_capacity,
)

DRIVER = "gpu.example.com"
OTHER_DRIVER = "other.example.com"
WORKER = "worker"
BY_DRIVER = f'device.driver == "{DRIVER}"'
NVIDIA = 'device.driver == "nvidia.com"'


# --- Builders ------------------------------------------------------------------------------


def make_node(name: str = WORKER, **labels: str) -> core_v1.Node:
    return core_v1.Node(metadata=meta_v1.ObjectMeta(name=name, labels=labels))


def dev(name: str, *, model: str | None = None, memory: str | None = None, **extra: Any) -> dict:
    """A device; `extra` holds raw wire fields (taints, nodeName, attributes, ...)."""
    device: dict[str, Any] = {"name": name, **extra}
    if model is not None:
        device.setdefault("attributes", {})["model"] = {"string": model}
    if memory is not None:
        device["capacity"] = {"memory": {"value": memory}}
    return device


def make_slice(
    name: str,
    *devices: dict,
    node: str | None = WORKER,
    pool: str | None = None,
    driver: str = DRIVER,
    generation: int = 1,
    count: int = 1,
    **placement: Any,
) -> resource_v1.ResourceSlice:
    """A slice of pool `pool` (default: the node name); `placement` replaces `nodeName`."""
    spec: dict[str, Any] = {
        "driver": driver,
        "pool": {
            "name": pool or node or name,
            "generation": generation,
            "resourceSliceCount": count,
        },
        "devices": list(devices),
    }
    if placement:
        spec.update(placement)
    else:
        spec["nodeName"] = node
    return codec.convert({"metadata": {"name": name}, "spec": spec}, resource_v1.ResourceSlice)


def make_class(name: str, *expressions: str) -> resource_v1.DeviceClass:
    return codec.convert(
        {
            "metadata": {"name": name},
            "spec": {"selectors": [{"cel": {"expression": e}} for e in expressions]},
        },
        resource_v1.DeviceClass,
    )


def exact(
    name: str, cls: str = "gpu", count: int | None = None, *selectors: str, **more: Any
) -> dict:
    body: dict[str, Any] = {"deviceClassName": cls, **more}
    if count is not None:
        body["count"] = count
    if selectors:
        body["selectors"] = [{"cel": {"expression": e}} for e in selectors]
    return {"name": name, "exactly": body}


def all_devices(name: str, cls: str = "gpu") -> dict:
    return {"name": name, "exactly": {"deviceClassName": cls, "allocationMode": "All"}}


def first_available(name: str, *subrequests: dict) -> dict:
    return {"name": name, "firstAvailable": list(subrequests)}


def sub(name: str, cls: str = "gpu", count: int = 1, *selectors: str) -> dict:
    body: dict[str, Any] = {"name": name, "deviceClassName": cls, "count": count}
    if selectors:
        body["selectors"] = [{"cel": {"expression": e}} for e in selectors]
    return body


def make_claim(name: str, *requests: dict) -> resource_v1.ResourceClaim:
    return codec.convert(
        {
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"devices": {"requests": list(requests)}},
        },
        resource_v1.ResourceClaim,
    )


def ids(*names: str, pool: str = WORKER) -> set[DeviceID]:
    return {(DRIVER, pool, n) for n in names}


CLASSES = {
    "gpu": make_class("gpu", BY_DRIVER),
    "any": make_class("any"),
    "h100": make_class("h100", BY_DRIVER, f'device.attributes["{DRIVER}"].model == "h100"'),
    "big": make_class(
        "big", f'device.capacity["{DRIVER}"].memory.compareTo(quantity("50Gi")) >= 0'
    ),
}
ONE_GPU = make_slice("worker-gpus", dev("gpu-0"))
THREE_GPUS = make_slice("worker-gpus", dev("gpu-0"), dev("gpu-1"), dev("gpu-2"))
MODELS = make_slice("worker-gpus", dev("gpu-0", model="a100"), dev("gpu-1", model="h100"))
H100_FIRST = make_slice("worker-gpus", dev("gpu-0", model="h100"), dev("gpu-1", model="a100"))
NO_SCHEDULE = {"key": "broken", "value": "yes", "effect": "NoSchedule"}
ZONE_A = {
    "nodeSelectorTerms": [
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
    ]
}


# --- allocate(): table ---------------------------------------------------------------------

Picks = list[list[tuple[str, str, str]]]  # per claim: (request, pool, device)


@dataclass
class Case:
    id: str
    slices: list[resource_v1.ResourceSlice]
    claims: list[resource_v1.ResourceClaim]
    want: Picks | None = None
    want_error: str = ""
    allocated: set[DeviceID] = field(default_factory=set)
    node: core_v1.Node = field(default_factory=make_node)


CASES = [
    Case(
        "class-selector-by-driver",
        [
            make_slice("a-other", dev("o-0"), driver=OTHER_DRIVER),
            ONE_GPU,
        ],
        [make_claim("c", exact("req"))],
        [[("req", WORKER, "gpu-0")]],
    ),
    Case(
        "class-selector-by-attribute",
        [MODELS],
        [make_claim("c", exact("req", "h100"))],
        [[("req", WORKER, "gpu-1")]],
    ),
    Case(
        "request-selector",
        [MODELS],
        [make_claim("c", exact("req", "gpu", 1, f'device.attributes["{DRIVER}"].model == "h100"'))],
        [[("req", WORKER, "gpu-1")]],
    ),
    Case(
        "unqualified-attribute-in-driver-domain-qualified-in-its-own",
        [
            make_slice(
                "worker-gpus",
                dev("gpu-0", attributes={"x.org/rank": {"int": 1}, "fast": {"bool": True}}),
                dev("gpu-1", attributes={"x.org/rank": {"int": 2}, "fast": {"bool": False}}),
            )
        ],
        [
            make_claim(
                "c",
                exact("req", "gpu", 1, 'device.attributes["x.org"].rank > 1'),
                exact("fast", "any", 1, f'device.attributes["{DRIVER}"].fast'),
            )
        ],
        [[("req", WORKER, "gpu-1"), ("fast", WORKER, "gpu-0")]],
    ),
    Case(
        "missing-domain-is-an-empty-map",
        [MODELS],
        [make_claim("c", exact("req", "gpu", 1, '"model" in device.attributes["nvidia.com"]'))],
        None,
    ),
    Case(
        "exact-count-two",
        [THREE_GPUS],
        [make_claim("c", exact("req", "gpu", 2))],
        [[("req", WORKER, "gpu-0"), ("req", WORKER, "gpu-1")]],
    ),
    Case(
        "exact-count-more-than-available",
        [THREE_GPUS],
        [make_claim("c", exact("req", "gpu", 4))],
        None,
    ),
    Case(
        "all-mode",
        [THREE_GPUS],
        [make_claim("c", all_devices("req"))],
        [[("req", WORKER, "gpu-0"), ("req", WORKER, "gpu-1"), ("req", WORKER, "gpu-2")]],
    ),
    Case(
        "all-mode-nothing-matches",
        [make_slice("w", dev("o-0"), driver=OTHER_DRIVER)],
        [make_claim("c", all_devices("req"))],
        None,
    ),
    Case(
        "all-mode-one-allocated-elsewhere",
        [THREE_GPUS],
        [make_claim("c", all_devices("req"))],
        None,
        allocated=ids("gpu-1"),
    ),
    Case(
        "all-mode-one-tainted",
        [make_slice("w", dev("gpu-0"), dev("gpu-1", taints=[NO_SCHEDULE]))],
        [make_claim("c", all_devices("req"))],
        None,
    ),
    Case(
        "allocated-elsewhere-skipped",
        [THREE_GPUS],
        [make_claim("c", exact("req", "gpu", 2))],
        [[("req", WORKER, "gpu-1"), ("req", WORKER, "gpu-2")]],
        allocated=ids("gpu-0"),
    ),
    Case(
        "two-claims-never-share",
        [make_slice("w", dev("gpu-0"), dev("gpu-1"))],
        [make_claim("c1", exact("req")), make_claim("c2", exact("req"))],
        [[("req", WORKER, "gpu-0")], [("req", WORKER, "gpu-1")]],
    ),
    Case(
        "two-claims-one-device",
        [ONE_GPU],
        [make_claim("c1", exact("req")), make_claim("c2", exact("req"))],
        None,
    ),
    Case(
        # The first claim takes gpu-0 (an h100) first, which leaves nothing for the second;
        # the search goes back and gives the first claim the a100 instead.
        "backtracks-when-first-pick-starves-later-claim",
        [H100_FIRST],
        [make_claim("c1", exact("req")), make_claim("c2", exact("req", "h100"))],
        [[("req", WORKER, "gpu-1")], [("req", WORKER, "gpu-0")]],
    ),
    Case(
        "taint-not-tolerated-skipped",
        [make_slice("w", dev("gpu-0", taints=[NO_SCHEDULE]), dev("gpu-1"))],
        [make_claim("c", exact("req"))],
        [[("req", WORKER, "gpu-1")]],
    ),
    Case(
        "taint-tolerated-with-exists",
        [make_slice("w", dev("gpu-0", taints=[NO_SCHEDULE]))],
        [make_claim("c", exact("req", tolerations=[{"key": "broken", "operator": "Exists"}]))],
        [[("req", WORKER, "gpu-0")]],
    ),
    Case(
        "taint-equal-value-mismatch",
        [make_slice("w", dev("gpu-0", taints=[NO_SCHEDULE]))],
        [make_claim("c", exact("req", tolerations=[{"key": "broken", "value": "no"}]))],
        None,
    ),
    Case(
        "taint-no-execute-blocks",
        [make_slice("w", dev("gpu-0", taints=[{"key": "k", "effect": "NoExecute"}]))],
        [make_claim("c", exact("req"))],
        None,
    ),
    Case(
        "taint-other-effect-ignored",
        [make_slice("w", dev("gpu-0", taints=[{"key": "k", "effect": "None"}]))],
        [make_claim("c", exact("req"))],
        [[("req", WORKER, "gpu-0")]],
    ),
    Case(
        "node-selector-slice-matches",
        [make_slice("net", dev("gpu-0"), node=None, pool="net", nodeSelector=ZONE_A)],
        [make_claim("c", exact("req"))],
        [[("req", "net", "gpu-0")]],
        node=make_node(WORKER, zone="a"),
    ),
    Case(
        "node-selector-slice-other-zone",
        [make_slice("net", dev("gpu-0"), node=None, pool="net", nodeSelector=ZONE_A)],
        [make_claim("c", exact("req"))],
        None,
        node=make_node(WORKER, zone="b"),
    ),
    Case(
        "all-nodes-slice",
        [make_slice("everywhere", dev("gpu-0"), node=None, pool="shared", allNodes=True)],
        [make_claim("c", exact("req"))],
        [[("req", "shared", "gpu-0")]],
    ),
    Case(
        "other-nodes-slice-invisible",
        [make_slice("w2", dev("gpu-0"), node="worker-2")],
        [make_claim("c", exact("req"))],
        None,
    ),
    Case(
        "per-device-node-selection",
        [
            make_slice(
                "pd",
                dev("d-1", nodeName=WORKER),
                dev("d-2", nodeName="worker-2"),
                dev("d-3", allNodes=True),
                dev("d-4", nodeSelector=ZONE_A),
                node=None,
                pool="pd",
                perDeviceNodeSelection=True,
            )
        ],
        [make_claim("c", exact("req", "gpu", 3))],
        [[("req", "pd", "d-1"), ("req", "pd", "d-3"), ("req", "pd", "d-4")]],
        node=make_node(WORKER, zone="a"),
    ),
    Case(
        "per-device-node-selection-too-few",
        [
            make_slice(
                "pd",
                dev("d-1", nodeName=WORKER),
                dev("d-2", nodeName="worker-2"),
                node=None,
                pool="pd",
                perDeviceNodeSelection=True,
            )
        ],
        [make_claim("c", exact("req", "gpu", 2))],
        None,
    ),
    Case(
        "only-newest-pool-generation-counts",
        [
            make_slice("old", dev("old-0"), dev("old-1"), generation=1),
            make_slice("new", dev("new-0"), generation=2),
        ],
        [make_claim("c", all_devices("req"))],
        [[("req", WORKER, "new-0")]],
    ),
    Case(
        "newest-generation-elsewhere-hides-old-slices",
        [
            make_slice("old", dev("old-0"), pool="p", generation=1),
            make_slice("new", dev("new-0"), node="worker-2", pool="p", generation=2),
        ],
        [make_claim("c", exact("req"))],
        None,
    ),
    Case(
        "incomplete-pool-skipped",
        [make_slice("half", dev("gpu-0"), count=2), make_slice("z", dev("z-0"), pool="other")],
        [make_claim("c", exact("req"))],
        [[("req", "other", "z-0")]],
    ),
    Case(
        "incomplete-pool-fails-all-mode",
        [make_slice("half", dev("gpu-0"), count=2)],
        [make_claim("c", all_devices("req"))],
        want_error="claim default/c, request req: asks for all devices, but resource pool "
        "gpu.example.com/worker is currently being updated",
    ),
    Case(
        "invalid-pool-skipped",
        [make_slice("a", dev("gpu-0"), count=2), make_slice("b", dev("gpu-0"), count=2)],
        [make_claim("c", exact("req"))],
        None,
    ),
    Case(
        "complete-multi-slice-pool-in-slice-name-order",
        [make_slice("b", dev("b-0"), count=2), make_slice("a", dev("a-0"), count=2)],
        [make_claim("c", exact("req"))],
        [[("req", WORKER, "a-0")]],
    ),
    Case(
        "pools-in-driver-then-pool-order",
        [make_slice("s1", dev("z-0"), pool="z"), make_slice("s2", dev("a-0"), pool="a")],
        [make_claim("c", exact("req"))],
        [[("req", "a", "a-0")]],
    ),
    Case(
        "more-than-32-devices",
        [THREE_GPUS],
        [make_claim("c", exact("req", "gpu", 33))],
        want_error="claim default/c: number of requested devices 33 exceeds the claim limit of 32",
    ),
    Case(
        "more-than-32-devices-over-requests",
        [THREE_GPUS],
        [make_claim("c", exact("a", "gpu", 20), exact("b", "gpu", 13))],
        want_error="number of requested devices 33 exceeds the claim limit of 32",
    ),
    Case(
        "more-than-32-devices-in-all-mode",
        [make_slice("big", *(dev(f"gpu-{i}") for i in range(33)))],
        [make_claim("c", all_devices("req"))],
        want_error="number of requested devices 33 exceeds the claim limit of 32",
    ),
    Case(
        "32-devices-per-claim-in-two-claims",
        [make_slice("big", *(dev(f"gpu-{i}") for i in range(40)))],
        [make_claim("c1", exact("req", "gpu", 32)), make_claim("c2", exact("req", "gpu", 8))],
        [
            [("req", WORKER, f"gpu-{i}") for i in range(32)],
            [("req", WORKER, f"gpu-{i}") for i in range(32, 40)],
        ],
    ),
    Case(
        "missing-class",
        [ONE_GPU],
        [make_claim("c", exact("req", "nope"))],
        want_error="claim default/c, request req: could not retrieve device class nope: "
        'deviceclass.resource.k8s.io "nope" not found',
    ),
    Case(
        "cel-compile-error",
        [ONE_GPU],
        [make_claim("c", exact("req", "gpu", 1, "device.driver =="))],
        want_error="claim default/c: selector #0: CEL compile error: compilation failed",
    ),
    Case(
        "cel-runtime-error",
        [ONE_GPU],
        [make_claim("c", exact("req", "gpu", 1, f'device.attributes["{DRIVER}"].model == "x"'))],
        want_error="claim default/c: selector #0 on device gpu.example.com/worker/gpu-0: "
        "CEL runtime error: no such key: model. consider using CEL optional chaining (.? "
        "followed by orValue()) or guarding the check with has() for optional fields",
    ),
    Case(
        "cel-result-not-bool",
        [ONE_GPU],
        [make_claim("c", exact("req", "gpu", 1, f'device.attributes["{DRIVER}"]'))],
        want_error="CEL runtime error: CEL result of type dict is not a bool",
    ),
    Case(
        "cel-result-not-bool-at-compile-time",
        [ONE_GPU],
        [make_claim("c", exact("req", "gpu", 1, "device.driver"))],
        want_error="CEL compile error: must evaluate to bool or the unknown type, not string",
    ),
    Case(
        "capacity-comparison",
        [make_slice("w", dev("gpu-0", memory="40Gi"), dev("gpu-1", memory="80Gi"))],
        [make_claim("c", exact("req", "big"))],
        [[("req", WORKER, "gpu-1")]],
    ),
    Case(
        "capacity-equality-across-formats",
        [make_slice("w", dev("gpu-0", memory="40Gi"), dev("gpu-1", memory="80Gi"))],
        [
            make_claim(
                "c",
                exact(
                    "req",
                    "any",
                    1,
                    f'device.capacity["{DRIVER}"].memory == quantity("81920Mi")',
                ),
            )
        ],
        [[("req", WORKER, "gpu-1")]],
    ),
    Case(
        "first-available-falls-back",
        [MODELS],
        [make_claim("c", first_available("req", sub("two-h100", "h100", 2), sub("any-one")))],
        [[("req/any-one", WORKER, "gpu-0")]],
    ),
    Case(
        "first-available-takes-first-that-fits",
        [MODELS],
        [make_claim("c", first_available("req", sub("h100", "h100"), sub("any-one")))],
        [[("req/h100", WORKER, "gpu-1")]],
    ),
    Case(
        "first-available-considers-later-claims",
        [MODELS],
        [
            make_claim("c1", first_available("req", sub("h100", "h100"), sub("any-one"))),
            make_claim("c2", exact("req", "h100")),
        ],
        [[("req/any-one", WORKER, "gpu-0")], [("req", WORKER, "gpu-1")]],
    ),
    Case(
        "first-available-none-fits",
        [ONE_GPU],
        [
            make_claim(
                "c", first_available("req", sub("two", "gpu", 2), sub("nvidia", "gpu", 1, NVIDIA))
            )
        ],
        None,
    ),
    Case(
        "claim-without-requests",
        [],
        [make_claim("c")],
        [[]],
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_allocate(case: Case) -> None:
    alloc = Allocator(case.slices, CLASSES, case.allocated)
    if case.want_error:
        with pytest.raises(AllocatorError, match=re.escape(case.want_error)):
            alloc.allocate(case.node, case.claims)
        return
    results = alloc.allocate(case.node, case.claims)
    got = (
        None
        if results is None
        else [[(r.request, r.pool, r.device) for r in result.devices.results] for result in results]
    )
    assert got == case.want


# --- allocate(): results -------------------------------------------------------------------


def test_result_of_node_local_device() -> None:
    """Request, driver, pool, device and `matchFields metadata.name In [worker]` (upstream
    `TestPlugin`, id B7)."""
    (result,) = Allocator([ONE_GPU], CLASSES, set()).allocate(
        make_node(), [make_claim("c", exact("container-0-request-0"))]
    )
    assert result == resource_v1.AllocationResult(
        devices=resource_v1.DeviceAllocationResult(
            results=[
                resource_v1.DeviceRequestAllocationResult(
                    request="container-0-request-0", driver=DRIVER, pool=WORKER, device="gpu-0"
                )
            ]
        ),
        node_selector=core_v1.NodeSelector(
            node_selector_terms=[
                core_v1.NodeSelectorTerm(
                    match_fields=[
                        core_v1.NodeSelectorRequirement(
                            key="metadata.name", operator="In", values=[WORKER]
                        )
                    ]
                )
            ]
        ),
    )


def test_result_node_selector_of_network_attached_device() -> None:
    """The slice's selector; a device available everywhere adds nothing to it."""
    slices = [
        make_slice("net", dev("n-0"), node=None, pool="net", nodeSelector=ZONE_A),
        make_slice("all", dev("a-0"), node=None, pool="all", allNodes=True),
    ]
    (result,) = Allocator(slices, CLASSES, set()).allocate(
        make_node(zone="a"), [make_claim("c", exact("req", "gpu", 2))]
    )
    assert [r.device for r in result.devices.results] == ["a-0", "n-0"]
    assert result.node_selector == codec.convert(ZONE_A, core_v1.NodeSelector)


def test_result_node_selector_all_nodes_only() -> None:
    slices = [make_slice("all", dev("a-0"), node=None, pool="all", allNodes=True)]
    (result,) = Allocator(slices, CLASSES, set()).allocate(
        make_node(), [make_claim("c", exact("r"))]
    )
    assert result.node_selector is None


def test_result_records_tolerations() -> None:
    toleration = {"key": "broken", "operator": "Exists"}
    slices = [make_slice("w", dev("gpu-0", taints=[NO_SCHEDULE]))]
    (result,) = Allocator(slices, CLASSES, set()).allocate(
        make_node(), [make_claim("c", exact("req", tolerations=[toleration]))]
    )
    assert result.devices.results[0].tolerations == [
        codec.convert(toleration, resource_v1.DeviceToleration)
    ]


# --- Snapshot ------------------------------------------------------------------------------


def test_allocation_on_one_node_evaluates_only_its_devices() -> None:
    """A device on another node whose attributes would break the selector is never looked at."""
    slices = [
        make_slice("w1", dev("gpu-0", model="h100")),
        make_slice("w2", dev("gpu-9"), node="worker-2"),  # no model: a CEL runtime error
    ]
    claims = [make_claim("c", exact("req", "h100"))]
    assert Allocator(slices, CLASSES, set()).allocate(make_node(), claims) is not None
    with pytest.raises(AllocatorError, match="CEL runtime error"):
        Allocator(slices, CLASSES, set()).allocate(make_node("worker-2"), claims)


def test_snapshot_caches_cel_results_per_expression_and_device(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    evaluations: list[str] = []
    matches = cel_env.DeviceVariables.matches

    def counting(self: cel_env.DeviceVariables, selector: cel_env.Selector) -> bool:
        evaluations.append(selector.expression)
        return matches(self, selector)

    monkeypatch.setattr(cel_env.DeviceVariables, "matches", counting)
    snapshot = Snapshot([THREE_GPUS])
    claims = [make_claim("c", exact("req"))]
    for allocated in (set(), ids("gpu-0"), ids("gpu-0", "gpu-1")):
        assert Allocator(snapshot, CLASSES, allocated).allocate(make_node(), claims) is not None
    assert evaluations == [BY_DRIVER] * 3


def test_snapshot_keeps_no_cel_context_per_device(monkeypatch: pytest.MonkeyPatch) -> None:
    """A `cel.Context` holds ~11 KB of native memory once evaluated: one per device, kept by
    the snapshot, made the scheduler grow by 88 KB per 8-GPU node its pods visited."""
    made: list[object] = []
    real = cel_env.cel.Context

    def counting(*args: Any, **kwargs: Any) -> object:
        context = real(*args, **kwargs)
        made.append(context)
        return context

    monkeypatch.setattr(cel_env.cel, "Context", counting)
    gpus = make_slice("worker-gpus", *(dev(f"gpu-{i}") for i in range(8)))
    snapshot = Snapshot([gpus])
    claims = [make_claim("c", exact("req", count=8))]
    assert Allocator(snapshot, CLASSES, set()).allocate(make_node(), claims) is not None
    assert len(made) <= 1  # at most the thread's evaluation context, whatever the devices


def test_cel_evaluations_see_only_their_own_device() -> None:
    """Devices share one evaluation context: each evaluation sees its own device, and a
    domain one device has does not leak into the next one's."""
    with_model = codec.convert(dev("a", model="a100"), resource_v1.Device)
    without = codec.convert(dev("b"), resource_v1.Device)
    has_model = cel_env.compile_selector(f'"model" in device.attributes["{DRIVER}"]')
    assert cel_env.DeviceVariables(DRIVER, with_model).matches(has_model) is True
    assert cel_env.DeviceVariables(DRIVER, without).matches(has_model) is False
    assert cel_env.DeviceVariables(DRIVER, with_model).matches(has_model) is True


def test_snapshot_follows_node_label_changes() -> None:
    snapshot = Snapshot([make_slice("net", dev("n-0"), node=None, pool="net", nodeSelector=ZONE_A)])
    claims = [make_claim("c", exact("req"))]
    alloc = Allocator(snapshot, CLASSES, set())
    assert alloc.allocate(make_node(zone="a"), claims) is not None
    assert alloc.allocate(make_node(zone="b"), claims) is None


# --- node_device_capacity: C8-C14 ------------------------------------------------------------
# Upstream's expected pairs are (allocatable, allocated + the pod's request of 1); these
# are the raw
# (capacity, allocated) before NodeResourcesFit adds the pod.


@dataclass
class CapacityCase:
    id: str
    slices: list[resource_v1.ResourceSlice]
    cls: resource_v1.DeviceClass
    allocated: set[DeviceID]
    want: tuple[int, int]


EXPLICIT_CLASS = codec.convert(
    {"metadata": {"name": "gpu"}, "spec": {"extendedResourceName": "example.com/gpu"}},
    resource_v1.DeviceClass,
)
IMPLICIT_CLASS = make_class("gpu")  # requested as deviceclass.resource.kubernetes.io/gpu
TWO_GPUS = make_slice("w", dev("gpu-0"), dev("gpu-1"))

CAPACITY_CASES = [
    CapacityCase("C8-explicit-one-device", [ONE_GPU], EXPLICIT_CLASS, set(), (1, 0)),
    CapacityCase("C9-implicit-one-device", [ONE_GPU], IMPLICIT_CLASS, set(), (1, 0)),
    CapacityCase("C10-no-slices", [], EXPLICIT_CLASS, set(), (0, 0)),
    CapacityCase("C11-one-of-two-allocated", [TWO_GPUS], EXPLICIT_CLASS, ids("gpu-0"), (2, 1)),
    # A shared (shareID) allocation is in the allocated set like any other.
    CapacityCase("C12-shared-allocation-counts", [TWO_GPUS], EXPLICIT_CLASS, ids("gpu-1"), (2, 1)),
    CapacityCase(
        "C13-full-and-shared-allocated",
        [make_slice("w", dev("gpu-0"), dev("gpu-1"), dev("gpu-2", allowMultipleAllocations=True))],
        EXPLICIT_CLASS,
        ids("gpu-0", "gpu-2"),
        (3, 2),
    ),
    CapacityCase(
        "C14-per-device-node-selection-and-class-selector",
        [
            make_slice(
                "pd",
                dev("device-1", nodeName=WORKER),
                dev("device-2", nodeName="worker-2"),
                dev("device-3", nodeSelector=ZONE_A),
                node=None,
                pool="pd",
                perDeviceNodeSelection=True,
            ),
            make_slice("other", dev("o-1"), driver=OTHER_DRIVER),
        ],
        make_class("gpu", BY_DRIVER),
        ids("device-1", pool="pd"),
        (2, 1),
    ),
    CapacityCase(
        "other-node-devices-not-counted",
        [make_slice("w2", dev("gpu-0"), node="worker-2")],
        EXPLICIT_CLASS,
        set(),
        (0, 0),
    ),
]


@pytest.mark.parametrize("case", CAPACITY_CASES, ids=[c.id for c in CAPACITY_CASES])
def test_node_device_capacity(case: CapacityCase) -> None:
    node = make_node(WORKER, zone="a")
    assert node_device_capacity(node, case.slices, case.cls, case.allocated) == case.want
    assert node_device_capacity(node, Snapshot(case.slices), case.cls, case.allocated) == case.want


def test_node_device_capacity_cel_error() -> None:
    with pytest.raises(AllocatorError, match="class broken: selector #0: CEL compile error"):
        node_device_capacity(make_node(), [ONE_GPU], make_class("broken", "(("), set())


def test_max_size_constant() -> None:
    assert allocator.ALLOCATION_RESULTS_MAX_SIZE == 32


# --- CEL selectors (cel_env) -----------------------------------------------------------------

CEL_DEVICE = codec.convert(
    dev(
        "gpu-0",
        attributes={
            "model": {"string": "h100"},
            "cores": {"int": 132},
            "ok": {"bool": True},
            "driverVersion": {"version": "1.2.3-rc.1+build.5"},
            "pci.example.org/slot": {"int": 4},
        },
        capacity={"memory": {"value": "80Gi"}, "power.example.org/watts": {"value": "700"}},
    ),
    resource_v1.Device,
)
D = f'device.attributes["{DRIVER}"]'
M = f'device.capacity["{DRIVER}"].memory'

CEL_CASES = [
    ('device.driver == "gpu.example.com"', True),
    (f'{D}.model == "h100" && {D}.cores > 100 && {D}.ok', True),
    ('device.attributes["pci.example.org"].slot == 4', True),
    ('device.capacity["power.example.org"].watts.isLessThan(quantity("1k"))', True),
    ('"model" in device.attributes["other.org"]', False),
    ("device.allowMultipleAllocations", False),
    (f'{M}.compareTo(quantity("80Gi")) == 0', True),
    (f'{M}.compareTo(quantity("81920Mi")) == 0 && {M} == quantity("81920Mi")', True),
    (f'{M}.isGreaterThan(quantity("40Gi"))', True),
    (f'{M}.add(quantity("1Gi")).sub(1073741824) == quantity("80Gi")', True),
    (f"{M}.isInteger() && {M}.asInteger() == 85899345920 && {M}.sign() == 1", True),
    ('quantity("1.5").isInteger() || quantity("1.5").asApproximateFloat() != 1.5', False),
    ('isQuantity("1Gi") && !isQuantity("1 Gi")', True),
    (f'{D}.driverVersion.isLessThan(semver("1.2.3"))', True),
    (f'{D}.driverVersion.isGreaterThan(semver("1.2.3-rc.0"))', True),
    (f'{D}.driverVersion.compareTo(semver("1.2.3-rc.1")) == 0', True),
    (f"{D}.driverVersion.major() == 1 && {D}.driverVersion.minor() == 2", True),
    ('semver("1.0.0-alpha.2").isLessThan(semver("1.0.0-alpha.10"))', True),
    ('semver("1.0.0-alpha.beta").isGreaterThan(semver("1.0.0-alpha.1"))', True),
    ('isSemver("1.2.3") && !isSemver("1.2")', True),
]


@pytest.mark.parametrize(("expression", "want"), CEL_CASES, ids=[e for e, _ in CEL_CASES])
def test_cel_selector(expression: str, want: bool) -> None:
    variables = cel_env.DeviceVariables(DRIVER, CEL_DEVICE)
    assert variables.matches(cel_env.compile_selector(expression)) is want


CEL_ERRORS = [
    ("device.driver ==", "compilation failed"),
    ("device.driver", "must evaluate to bool or the unknown type, not string"),
    (D, "CEL result of type dict is not a bool"),
    (f"{D}.missing", "no such key: missing"),
    (f'{M} < quantity("1")', "TypeError"),
    (f'{M}.compareTo(semver("1.0.0")) == 0', "RuntimeError"),
    ('quantity("1.5").asInteger() == 1', "cannot convert value to integer"),
    ('quantity("lots") == quantity("1")', "invalid quantity"),
]


@pytest.mark.parametrize(("expression", "error"), CEL_ERRORS, ids=[e for e, _ in CEL_ERRORS])
def test_cel_selector_error(expression: str, error: str) -> None:
    variables = cel_env.DeviceVariables(DRIVER, CEL_DEVICE)
    with pytest.raises(cel_env.CELError, match=re.escape(error)):
        variables.matches(cel_env.compile_selector(expression))


def test_cel_compiles_each_expression_once() -> None:
    expression = 'device.driver == "compiled.once"'
    assert cel_env.compile_selector(expression) is cel_env.compile_selector(expression)


# --- The per-node answer kept while the node's pools stand still ---------------------------


def test_first_free_answer_follows_the_dra_managers_allocations() -> None:
    """The allocator reuses a node's last answer only while no device of its pools was
    taken or freed (DraManager.pool_versions): every change shows at once."""
    from drasim.scheduler.dra_manager import DraManager

    manager = DraManager()
    manager.on_class_add(make_class("gpu", BY_DRIVER))
    manager.on_slice_add(make_slice("s", dev("gpu-0"), dev("gpu-1")))
    node = make_node()
    claim = make_claim("c", exact("r"))

    def first_device(alloc: Allocator) -> str | None:
        found = alloc.allocate(node, [claim])
        return None if found is None else found[0].devices.results[0].device

    alloc = manager.allocator()
    assert first_device(alloc) == "gpu-0"
    assert first_device(alloc) == "gpu-0"  # answered again from the kept answer

    taken = make_claim("taken", exact("r"))
    taken.metadata.uid = "uid-taken"
    taken.status.allocation = alloc.allocate(node, [taken])[0]  # gpu-0
    manager.signal_claim_pending_allocation("uid-taken", taken)  # in flight
    assert first_device(manager.allocator()) == "gpu-1"
    assert first_device(alloc) == "gpu-1"  # the same allocator sees it too

    other = make_claim("other", exact("r"))
    other.metadata.uid = "uid-other"
    other.status.allocation = alloc.allocate(node, [other])[0]  # gpu-1
    manager.on_claim_add(other)  # allocated, as the informer reports it
    assert first_device(alloc) is None  # full
    assert first_device(alloc) is None

    manager.remove_claim_pending_allocation("uid-taken")  # gpu-0 free again
    assert first_device(alloc) == "gpu-0"
    manager.on_claim_delete(other)
    assert first_device(alloc) == "gpu-0"
    manager.signal_claim_pending_allocation("uid-taken", taken)
    assert first_device(alloc) == "gpu-1"


def test_a_held_in_flight_allocation_stays_until_the_claim_shows_allocated_or_deleted() -> None:
    """Writing the special claim's allocation timed out (it may have been applied): its
    devices stay taken through Unreserve until the claim cache knows the outcome."""
    from drasim.scheduler.dra_manager import DraManager

    manager = DraManager()
    manager.on_class_add(make_class("gpu", BY_DRIVER))
    manager.on_slice_add(make_slice("s", dev("gpu-0")))
    node = make_node()
    claim = make_claim("special", exact("r"))
    claim.metadata.uid = "uid-special"
    manager.on_claim_add(claim)  # created, not yet allocated
    pending = make_claim("special", exact("r"))
    pending.metadata.uid = "uid-temporary"
    pending.status.allocation = manager.allocator().allocate(node, [pending])[0]
    manager.signal_claim_pending_allocation("uid-temporary", pending)

    manager.hold_pending_allocation("uid-temporary", "default", "special")
    assert not manager.remove_claim_pending_allocation("uid-temporary")  # PreBind's finally
    assert manager.allocator().allocate(node, [make_claim("other", exact("r"))]) is None

    allocated = make_claim("special", exact("r"))
    allocated.metadata.uid = "uid-special"
    allocated.metadata.resource_version = "2"
    allocated.status.allocation = pending.status.allocation
    manager.on_claim_update(claim, allocated)  # the write had happened
    assert not manager.claim_is_pending_allocation("uid-temporary")
    assert manager.allocator().allocate(node, [make_claim("other", exact("r"))]) is None
    manager.on_claim_delete(allocated)  # Unreserve deleted it
    assert manager.allocator().allocate(node, [make_claim("other", exact("r"))]) is not None

    # Held, and the claim is deleted without ever showing the allocation.
    manager.on_claim_add(claim)
    manager.signal_claim_pending_allocation("uid-temporary", pending)
    manager.hold_pending_allocation("uid-temporary", "default", "special")
    manager.remove_claim_pending_allocation("uid-temporary")
    assert manager.allocator().allocate(node, [make_claim("other", exact("r"))]) is None
    manager.on_claim_delete(claim)
    assert manager.allocator().allocate(node, [make_claim("other", exact("r"))]) is not None


NIC = "nic.example.com"


class ChangeLog:
    """A `framework.NodeChangeSink` that records what it is told."""

    def __init__(self) -> None:
        self.changes: list[str] = []

    def node_changed(self, node_name: str) -> None:
        self.changes.append(node_name)

    def all_changed(self) -> None:
        self.changes.append("*")

    def take(self) -> list[str]:
        taken, self.changes = self.changes, []
        return taken


def test_the_manager_reports_changes_of_the_nodes_pools_classes_and_slices() -> None:
    """What DynamicResources reports for reusing Filter verdicts (framework.VerdictCache)."""
    from drasim.scheduler.dra_manager import DraManager

    manager = DraManager()
    sink = ChangeLog()
    manager.watch(sink)
    manager.on_class_add(make_class("gpu", BY_DRIVER))
    manager.on_slice_add(make_slice("s", dev("gpu-0"), dev("gpu-1")))
    manager.on_slice_add(make_slice("t", dev("gpu-0"), node="other"))
    manager.on_slice_add(
        make_slice("u", dev("nic-0"), node=None, pool="shared", driver=NIC, allNodes=True)
    )
    assert sink.take() == ["*", "*", "*", "*"]
    node = make_node()

    pending = make_claim("c", exact("r"))
    pending.status.allocation = manager.allocator().allocate(node, [pending])[0]
    manager.signal_claim_pending_allocation("uid", pending)
    assert sink.take() == [WORKER]  # a device of its pool was taken: that node only
    manager.remove_claim_pending_allocation("uid")
    assert sink.take() == [WORKER]  # and freed

    # Reserve, PreBind's write, the informer's copy: taken once, then nothing changes.
    manager.signal_claim_pending_allocation("uid", pending)
    written = codec.clone(pending)
    written.metadata.uid, written.metadata.resource_version = "uid", "5"
    manager.assume_claim_after_api_call(written)
    manager.remove_claim_pending_allocation("uid")
    informed = codec.clone(written)
    informed.metadata.resource_version = "6"
    manager.on_claim_update(written, informed)
    assert sink.take() == [WORKER]
    manager.on_claim_delete(informed)
    assert sink.take() == [WORKER]

    shared = make_claim("n", exact("r"))
    shared.status.allocation = resource_v1.AllocationResult(
        devices=resource_v1.DeviceAllocationResult(
            results=[
                resource_v1.DeviceRequestAllocationResult(
                    request="r", driver=NIC, pool="shared", device="nic-0"
                )
            ]
        )
    )
    manager.on_claim_add(shared)
    assert sink.take() == ["*"]  # a pool every node reaches
    manager.on_class_add(make_class("other-class", BY_DRIVER))
    assert sink.take() == ["*"]
