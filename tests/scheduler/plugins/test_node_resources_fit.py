"""NodeResourcesFit: filter, DRA delegation (upstream `TestEnoughRequests`, ids C1–C5),
queueing hints (`Test_isSchedulableAfterDeviceClassChange`, C6) and the LeastAllocated
score (`TestCalculateResourceAllocatableRequest`, C7–C11, with a stand-in for the DRA device
count)."""

from __future__ import annotations

import dataclasses

import pytest

from drasim.common.api import resource_v1
from drasim.scheduler import framework
from drasim.scheduler.framework import Code, QueueingHint, Status
from drasim.scheduler.plugins import node_resources_fit
from drasim.scheduler.plugins.node_resources_fit import (
    NodeResourcesFit,
    NodeResourcesFitArgs,
    ResourceSpec,
    ScoringStrategy,
)
from tests.scheduler.wrappers import make_device_class, make_node, make_pod

GPU = "example.com/gpu"
IMPLICIT_GPU = "deviceclass.resource.kubernetes.io/gpuclass"

# The class cache as DynamicResources keeps it: `class` serves `example.com/gpu`, and
# `gpuclass` its implicit name.
CLASSES = {GPU: make_device_class("class", GPU), IMPLICIT_GPU: make_device_class("gpuclass")}


def resolve(name: str) -> resource_v1.DeviceClass | None:
    return CLASSES.get(name)


def node_info(
    capacity: dict[str, str], existing: tuple[dict[str, str], ...] = ()
) -> framework.NodeInfo:
    """Node `worker` with these resources and one bound pod per entry of `existing`."""
    pods = [make_pod(f"p{i}").req(r).node("worker").obj() for i, r in enumerate(existing)]
    return framework.NodeInfo(make_node().capacity(capacity).obj(), pods)


# --- Filter ------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class FilterCase:
    name: str
    requests: dict[str, str]
    capacity: dict[str, str] = dataclasses.field(default_factory=dict)
    existing: tuple[dict[str, str], ...] = ()
    gate: bool = True
    want: Status | None = None


FILTER_CASES = [
    FilterCase(
        "C1 device plugin capacity fits",
        requests={"example.com/aaa": "1"},
        capacity={"example.com/aaa": "1"},
    ),
    FilterCase("C2 mapped, node without it: delegated to DRA", requests={GPU: "1"}),
    FilterCase(
        "C3 gate off, node without it",
        requests={GPU: "1"},
        gate=False,
        want=Status.unresolvable(f"Insufficient {GPU}"),
    ),
    FilterCase(
        "C4 not mapped, no capacity",
        requests={"example.com/bbb": "1"},
        want=Status.unresolvable("Insufficient example.com/bbb"),
    ),
    FilterCase("C5 allocatable 0, mapped: delegated", requests={GPU: "1"}, capacity={GPU: "0"}),
    FilterCase("implicit name delegated", requests={IMPLICIT_GPU: "2"}),
    FilterCase(
        "implicit name, gate off",
        requests={IMPLICIT_GPU: "2"},
        gate=False,
        want=Status.unresolvable(f"Insufficient {IMPLICIT_GPU}"),
    ),
    FilterCase(
        "device plugin capacity > 0 wins over the class",
        requests={GPU: "2"},
        capacity={GPU: "1"},
        want=Status.unresolvable(f"Insufficient {GPU}"),
    ),
    FilterCase(
        "capacity used by other pods: preemption may help",
        requests={GPU: "2"},
        capacity={GPU: "2"},
        existing=({GPU: "1"},),
        want=Status.unschedulable(f"Insufficient {GPU}"),
    ),
    FilterCase("zero request ignored", requests={GPU: "0"}, gate=False),
    FilterCase(
        "cpu and memory fit",
        requests={"cpu": "1", "memory": "1Gi"},
        capacity={"cpu": "2", "memory": "1Gi"},
        existing=({"cpu": "1"},),
    ),
    FilterCase(
        "cpu used by other pods",
        requests={"cpu": "1"},
        capacity={"cpu": "2"},
        existing=({"cpu": "1500m"},),
        want=Status.unschedulable("Insufficient cpu"),
    ),
    FilterCase(
        "all reasons, in upstream order",
        requests={GPU: "1", "ephemeral-storage": "2Gi", "memory": "2Gi", "cpu": "2"},
        capacity={"cpu": "1", "memory": "1Gi", "ephemeral-storage": "1Gi"},
        gate=False,
        want=Status.unresolvable(
            "Insufficient cpu",
            "Insufficient memory",
            "Insufficient ephemeral-storage",
            f"Insufficient {GPU}",
        ),
    ),
    FilterCase(
        "too many pods",
        requests={},
        capacity={"pods": "1"},
        existing=({},),
        want=Status.unschedulable("Too many pods"),
    ),
    FilterCase(
        "too many pods and a resource the node never has",
        requests={"example.com/bbb": "1"},
        capacity={"pods": "1"},
        existing=({},),
        want=Status.unresolvable("Too many pods", "Insufficient example.com/bbb"),
    ),
]


def run_filter(
    plugin: NodeResourcesFit, requests: dict[str, str], info: framework.NodeInfo
) -> Status | None:
    pod = make_pod().req(requests).obj()
    state = framework.CycleState()
    assert plugin.pre_filter(state, pod, [info]) == (None, None)
    return plugin.filter(state, pod, info)


@pytest.mark.parametrize("case", FILTER_CASES, ids=lambda c: c.name)
def test_filter(case: FilterCase) -> None:
    plugin = NodeResourcesFit(resolve_device_class=resolve if case.gate else None)
    assert run_filter(plugin, case.requests, node_info(case.capacity, case.existing)) == case.want


def test_filter_takes_the_largest_init_container() -> None:
    """Init containers run one at a time: the largest counts, not their sum (upstream
    `PodRequests`)."""
    pod = make_pod().init_req({"cpu": "2"}).init_req({"cpu": "3"}).req({"cpu": "1"}).obj()
    info = node_info({"cpu": "3"})
    state = framework.CycleState()
    NodeResourcesFit().pre_filter(state, pod, [info])
    assert NodeResourcesFit().filter(state, pod, info) is None


@pytest.mark.parametrize(
    ("args", "want"),
    [
        (NodeResourcesFitArgs(ignored_resources=frozenset({GPU})), None),
        (NodeResourcesFitArgs(ignored_resource_groups=frozenset({"example.com"})), None),
        (NodeResourcesFitArgs(), Status.unresolvable(f"Insufficient {GPU}")),
    ],
    ids=["ignored resource", "ignored group", "not ignored"],
)
def test_filter_ignored_resources(args: NodeResourcesFitArgs, want: Status | None) -> None:
    assert run_filter(NodeResourcesFit(args), {GPU: "1"}, node_info({})) == want


def test_filter_without_pre_filter_is_an_error() -> None:
    status = NodeResourcesFit().filter(framework.CycleState(), make_pod().obj(), node_info({}))
    assert status is not None and status.code == Code.ERROR


def test_fits_reports_what_is_missing() -> None:
    [missing] = node_resources_fit.fits(make_pod().req({GPU: "3"}).obj(), node_info({GPU: "1"}))
    assert missing == node_resources_fit.InsufficientResource(
        GPU, f"Insufficient {GPU}", requested=3, used=0, capacity=1, unresolvable=True
    )


# --- queueing hints ----------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class DeviceClassHintCase:
    name: str
    requests: dict[str, str]
    new: resource_v1.DeviceClass
    old: resource_v1.DeviceClass | None = None  # None: the class was added
    want: QueueingHint = QueueingHint.QUEUE_SKIP


DEVICE_CLASS_HINT_CASES = [  # upstream `Test_isSchedulableAfterDeviceClassChange`
    DeviceClassHintCase(
        "update with identical extendedResourceName",
        requests={GPU: "1"},
        old=make_device_class("class", GPU),
        new=make_device_class("class", GPU),
    ),
    DeviceClassHintCase(
        "add class whose implicit name is requested",
        requests={IMPLICIT_GPU: "1"},
        new=make_device_class("gpuclass"),
        want=QueueingHint.QUEUE,
    ),
    DeviceClassHintCase(
        "add unrelated class", requests={IMPLICIT_GPU: "1"}, new=make_device_class("myclass")
    ),
    DeviceClassHintCase(
        "add class with the requested explicit name",
        requests={GPU: "1"},
        new=make_device_class("class", GPU),
        want=QueueingHint.QUEUE,
    ),
    DeviceClassHintCase(
        "update to the requested explicit name",
        requests={GPU: "1"},
        old=make_device_class("class"),
        new=make_device_class("class", GPU),
        want=QueueingHint.QUEUE,
    ),
    DeviceClassHintCase(
        "add class with an explicit name not requested",
        requests={GPU: "1"},
        new=make_device_class("class", "example.com/other"),
    ),
    DeviceClassHintCase(
        "update to an explicit name not requested",
        requests={GPU: "1"},
        old=make_device_class("class", GPU),
        new=make_device_class("class", "example.com/other"),
    ),
    DeviceClassHintCase(
        "update of an implicitly requested class: its name cannot change",
        requests={IMPLICIT_GPU: "1"},
        old=make_device_class("gpuclass"),
        new=make_device_class("gpuclass", GPU),
    ),
]


@pytest.mark.parametrize("case", DEVICE_CLASS_HINT_CASES, ids=lambda c: c.name)
def test_device_class_hint(case: DeviceClassHintCase) -> None:
    plugin = NodeResourcesFit(resolve_device_class=resolve)
    pod = make_pod().req(case.requests).obj()
    assert plugin.is_schedulable_after_device_class_event(pod, case.old, case.new) == case.want


@pytest.mark.parametrize(
    ("deleted", "want"),
    [
        (make_pod("other").obj(), QueueingHint.QUEUE_SKIP),
        (make_pod("other").node("worker").obj(), QueueingHint.QUEUE),
        (make_pod("other").nominated_node("worker").obj(), QueueingHint.QUEUE),
    ],
    ids=["unscheduled pod deleted", "bound pod deleted", "nominated pod deleted"],
)
def test_pod_deleted_hint(deleted: object, want: QueueingHint) -> None:
    pod = make_pod().req({"cpu": "1"}).obj()
    assert NodeResourcesFit().is_schedulable_after_pod_event(pod, deleted, None) == want


@dataclasses.dataclass(frozen=True)
class NodeHintCase:
    name: str
    requests: dict[str, str]
    new: dict[str, str]
    old: dict[str, str] | None = None  # None: the node was added
    gate: bool = False
    want: QueueingHint = QueueingHint.QUEUE_SKIP


NODE_HINT_CASES = [
    NodeHintCase(
        "node added that fits", requests={"cpu": "1"}, new={"cpu": "2"}, want=QueueingHint.QUEUE
    ),
    NodeHintCase("node added that is too small", requests={"cpu": "4"}, new={"cpu": "2"}),
    NodeHintCase(
        "allocatable grew enough",
        requests={"cpu": "4"},
        old={"cpu": "2"},
        new={"cpu": "4"},
        want=QueueingHint.QUEUE,
    ),
    NodeHintCase(
        "allocatable unchanged", requests={"cpu": "1"}, old={"cpu": "2"}, new={"cpu": "2"}
    ),
    NodeHintCase(
        "only an unrequested resource grew",
        requests={"cpu": "1"},
        old={"cpu": "2", "memory": "1Gi"},
        new={"cpu": "2", "memory": "2Gi"},
    ),
    NodeHintCase(
        "pod slots grew", requests={}, old={"pods": "1"}, new={"pods": "2"}, want=QueueingHint.QUEUE
    ),
    NodeHintCase(
        "update of a node DRA may serve the pod on",
        requests={GPU: "1"},
        old={"cpu": "1"},
        new={"cpu": "1"},
        gate=True,
        want=QueueingHint.QUEUE,
    ),
    NodeHintCase("added node without the resource, gate off", requests={GPU: "1"}, new={}),
    NodeHintCase(
        "added node without the resource, DRA serves it",
        requests={GPU: "1"},
        new={},
        gate=True,
        want=QueueingHint.QUEUE,
    ),
]


@pytest.mark.parametrize("case", NODE_HINT_CASES, ids=lambda c: c.name)
def test_node_change_hint(case: NodeHintCase) -> None:
    plugin = NodeResourcesFit(resolve_device_class=resolve if case.gate else None)
    old = None if case.old is None else make_node().capacity(case.old).obj()
    new = make_node().capacity(case.new).obj()
    pod = make_pod().req(case.requests).obj()
    assert plugin.is_schedulable_after_node_change(pod, old, new) == case.want


ACTION = framework.ActionType
RESOURCE = framework.EventResource


@pytest.mark.parametrize(
    ("gate", "want"),
    [
        (
            False,
            [
                (RESOURCE.POD, ACTION.DELETE),
                (RESOURCE.NODE, ACTION.ADD | ACTION.UPDATE_NODE_ALLOCATABLE),
            ],
        ),
        (
            True,
            [
                (RESOURCE.POD, ACTION.DELETE),
                (RESOURCE.NODE, ACTION.ADD | ACTION.UPDATE_NODE_ALLOCATABLE),
                (RESOURCE.DEVICE_CLASS, ACTION.ADD | ACTION.UPDATE),
            ],
        ),
    ],
    ids=["gate off", "gate on adds DeviceClass Add|Update"],
)
def test_events_to_register(
    gate: bool, want: list[tuple[framework.EventResource, framework.ActionType]]
) -> None:
    events = NodeResourcesFit(resolve_device_class=resolve if gate else None).events_to_register()
    assert [(e.event.resource, e.event.action_type) for e in events] == want
    assert all(e.queueing_hint_fn is not None for e in events)


# --- Score -------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class AllocatableCase:
    name: str
    resource: str
    pod_request: int
    want: tuple[int, int]  # (allocatable, requested with the pod)
    capacity: dict[str, str] = dataclasses.field(default_factory=dict)
    existing: tuple[dict[str, str], ...] = ()
    devices: tuple[int, int] | None = None  # the DRA stand-in's (capacity, allocated)
    gate: bool = True


ALLOCATABLE_CASES = [  # upstream `TestCalculateResourceAllocatableRequest`
    AllocatableCase("C7 device plugin node", GPU, 1, (4, 1), capacity={GPU: "4"}),
    AllocatableCase("C7 device plugin node, gate off", GPU, 1, (4, 1), {GPU: "4"}, gate=False),
    AllocatableCase("C8 DRA node with one device", GPU, 1, (1, 1), devices=(1, 0)),
    AllocatableCase("C9 DRA node, implicit name", IMPLICIT_GPU, 1, (1, 1), devices=(1, 0)),
    AllocatableCase("C10 class without devices: not scored", GPU, 1, (0, 0), devices=(0, 0)),
    AllocatableCase("C11 two devices, one allocated", GPU, 1, (2, 2), devices=(2, 1)),
    AllocatableCase("DRA node, gate off: not scored", GPU, 1, (0, 0), devices=(2, 0), gate=False),
    AllocatableCase(
        "device plugin node, pods using it", GPU, 1, (4, 3), {GPU: "4"}, existing=({GPU: "2"},)
    ),
    AllocatableCase("resource not requested: not scored", GPU, 0, (0, 0), {GPU: "4"}),
    AllocatableCase(
        "cpu of a request-less pod counts the default",
        "cpu",
        100,
        (2000, 200),
        {"cpu": "2"},
        existing=({},),
    ),
    AllocatableCase(
        "memory of a request-less pod counts the default",
        "memory",
        0,
        (1024**3, 200 * 1024**2),
        {"memory": "1Gi"},
        existing=({},),
    ),
]


@pytest.mark.parametrize("case", ALLOCATABLE_CASES, ids=lambda c: c.name)
def test_allocatable_and_requested(case: AllocatableCase) -> None:
    def dra_capacity(info: framework.NodeInfo, name: str) -> tuple[int, int]:
        assert case.devices is not None, "device plugin nodes must not be asked for devices"
        return case.devices

    plugin = NodeResourcesFit(
        resolve_device_class=resolve if case.gate else None, dra_capacity=dra_capacity
    )
    info = node_info(case.capacity, case.existing)
    assert plugin.allocatable_and_requested(info, case.resource, case.pod_request) == case.want


@dataclasses.dataclass(frozen=True)
class ScoreCase:
    name: str
    requests: dict[str, str]
    capacity: dict[str, str]
    want: int
    existing: tuple[dict[str, str], ...] = ()
    resources: tuple[ResourceSpec, ...] = (ResourceSpec("cpu"), ResourceSpec("memory"))


SCORE_CASES = [
    ScoreCase(
        "half of cpu and memory free",
        requests={"cpu": "1", "memory": "1Gi"},
        capacity={"cpu": "4", "memory": "4Gi"},
        existing=({"cpu": "1", "memory": "1Gi"},),
        want=50,
    ),
    ScoreCase(
        "weights: (0*3 + 50*1) // 4",
        requests={"cpu": "4", "memory": "2Gi"},
        capacity={"cpu": "4", "memory": "4Gi"},
        resources=(ResourceSpec("cpu", 3), ResourceSpec("memory", 1)),
        want=12,
    ),
    ScoreCase(
        "overcommitted cpu scores 0: (0 + 75) // 2",
        requests={"cpu": "2", "memory": "1Gi"},
        capacity={"cpu": "1", "memory": "4Gi"},
        want=37,
    ),
    ScoreCase(
        "gpu in the strategy: (75 + 25) // 2",
        requests={"cpu": "1", GPU: "3"},
        capacity={"cpu": "4", GPU: "4"},
        resources=(ResourceSpec("cpu"), ResourceSpec(GPU)),
        want=50,
    ),
    ScoreCase(
        "gpu in the strategy but not requested",
        requests={"cpu": "1"},
        capacity={"cpu": "4", GPU: "4"},
        resources=(ResourceSpec("cpu"), ResourceSpec(GPU)),
        want=75,
    ),
    ScoreCase(
        "request-less pod counts 100m",
        requests={},
        capacity={"cpu": "1"},
        resources=(ResourceSpec("cpu"),),
        want=90,
    ),
]


@pytest.mark.parametrize("case", SCORE_CASES, ids=lambda c: c.name)
def test_score(case: ScoreCase) -> None:
    args = NodeResourcesFitArgs(scoring_strategy=ScoringStrategy(resources=case.resources))
    plugin = NodeResourcesFit(args)
    info = node_info(case.capacity, case.existing)
    pod = make_pod().req(case.requests).obj()
    state = framework.CycleState()
    assert plugin.pre_score(state, pod, [info]) is None
    assert plugin.score(state, pod, info) == case.want
    # Without PreScore the plugin works the requests out itself.
    assert plugin.score(framework.CycleState(), pod, info) == case.want


def test_score_of_a_dra_node_counts_devices() -> None:
    """A DRA-served name in the strategy is scored by device count (upstream
    `calculateDRAExtendedResourceAllocatableRequest`)."""
    args = NodeResourcesFitArgs(scoring_strategy=ScoringStrategy(resources=(ResourceSpec(GPU),)))
    plugin = NodeResourcesFit(
        args, resolve_device_class=resolve, dra_capacity=lambda info, name: (4, 1)
    )
    pod = make_pod().req({GPU: "1"}).obj()
    assert plugin.score(framework.CycleState(), pod, node_info({})) == 50  # (4-2)*100//4


@pytest.mark.parametrize(
    ("strategy", "message"),
    [
        (lambda: ScoringStrategy(type="MostAllocated"), "MostAllocated is not supported"),
        (lambda: ScoringStrategy(resources=()), "at least one resource"),
        (lambda: ScoringStrategy(resources=(ResourceSpec("cpu", 0),)), r"range \[1, 100\]"),
    ],
    ids=["unsupported type", "no resources", "weight out of range"],
)
def test_scoring_strategy_validation(strategy: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        strategy()  # type: ignore[operator]


# --- the candidate nodes of a device plugin's resource ------------------------------------


def test_only_nodes_advertising_a_device_plugin_resource_are_filtered() -> None:
    """With many nodes and few advertising the resource, Filter looks only at those; a pod
    that fits none still gets every node's own reason, as upstream's message has it."""
    calls: list[str] = []

    class Counting(NodeResourcesFit):
        def filter(self, state, pod, node_info):  # type: ignore[no-untyped-def]
            calls.append(node_info.name)
            return super().filter(state, pod, node_info)

    def worker(name: str, **extra: str) -> framework.NodeInfo:
        return framework.NodeInfo(make_node(name).capacity({"cpu": "4", **extra}).obj())

    nodes = [worker(f"plain-{i}") for i in range(5)] + [worker("dp", **{"foo.com/bar": "1"})]
    fwk = framework.Framework([Counting(resolve_device_class=CLASSES.get)])
    pod = make_pod().req({"foo.com/bar": "1"}).obj()
    feasible, _ = fwk.find_nodes_that_fit(framework.CycleState(), pod, nodes)
    assert [n.name for n in feasible] == ["dp"] and calls == ["dp"]

    calls.clear()
    greedy = make_pod().req({"foo.com/bar": "2"}).obj()
    feasible, diagnosis = fwk.find_nodes_that_fit(framework.CycleState(), greedy, nodes)
    assert feasible == [] and len(calls) == 6
    assert diagnosis.message(6) == "0/6 nodes are available: 6 Insufficient foo.com/bar."

    # A name DRA may serve is no shortcut: nodes without the resource can still fit.
    calls.clear()
    fwk.find_nodes_that_fit(framework.CycleState(), make_pod().req({GPU: "1"}).obj(), nodes)
    assert len(calls) == 6
