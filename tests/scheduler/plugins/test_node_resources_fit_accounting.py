"""NodeInfo's integer resource accounting, which NodeResourcesFit's Filter and Score read:
per-pod conversion (upstream `calculateResource`: init-container max rule, overhead, scalar
names, `MilliValue` rounding), incremental add/remove against a from-scratch sum, cheap
snapshots, and Filter/Score agreeing with the same rules worked out on quantities."""

from __future__ import annotations

import dataclasses
import random

import msgspec
import pytest

from drasim.common.api import core_v1, resources
from drasim.common.quantity import Quantity, parse_quantity
from drasim.scheduler import framework
from drasim.scheduler.cache import Cache, Snapshot
from drasim.scheduler.framework import Code, NodeInfo
from drasim.scheduler.plugins import node_resources_fit
from drasim.scheduler.plugins.node_resources_fit import (
    NodeResourcesFit,
    NodeResourcesFitArgs,
    ResourceSpec,
    ScoringStrategy,
)
from tests.scheduler.wrappers import make_device_class, make_node, make_pod

GPU = "example.com/gpu"

# --- per-pod conversion ------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class PodCase:
    name: str
    pod: core_v1.Pod
    requested: dict[str, int]
    non_zero: dict[str, int]


MIB = 1024**2
DEFAULT_MEMORY = framework.DEFAULT_MEMORY_REQUEST
DEFAULT_CPU = framework.DEFAULT_MILLI_CPU_REQUEST

POD_CASES = [
    PodCase(
        "request-less pod: nothing requested, defaults for scoring",
        make_pod().obj(),
        requested={},
        non_zero={"cpu": DEFAULT_CPU, "memory": DEFAULT_MEMORY},
    ),
    PodCase(
        "cpu in millicores, memory in bytes",
        make_pod().req({"cpu": "1500m", "memory": "1Gi"}).obj(),
        requested={"cpu": 1500, "memory": 1024 * MIB},
        non_zero={"cpu": 1500, "memory": 1024 * MIB},
    ),
    PodCase(
        "MilliValue rounds a fraction of a millicore up",
        make_pod().req({"cpu": "0.0001"}).obj(),
        requested={"cpu": 1},
        non_zero={"cpu": 1, "memory": DEFAULT_MEMORY},
    ),
    PodCase(
        "Value rounds memory and scalars up to whole units",
        make_pod().req({"memory": "1500m", "hugepages-2Mi": "0.5"}).obj(),
        requested={"memory": 2, "hugepages-2Mi": 1},
        non_zero={"cpu": DEFAULT_CPU, "memory": 2},
    ),
    PodCase(
        "containers add up; a missing cpu or memory counts the default per container",
        make_pod().container({"cpu": "1"}).container({"memory": "1Mi"}).obj(),
        requested={"cpu": 1000, "memory": MIB},
        non_zero={"cpu": 1000 + DEFAULT_CPU, "memory": DEFAULT_MEMORY + MIB},
    ),
    PodCase(
        "the largest init container counts, not the sum",
        make_pod().init_req({"cpu": "2"}).init_req({"cpu": "3"}).req({"cpu": "1"}).obj(),
        requested={"cpu": 3000},
        non_zero={"cpu": 3000, "memory": DEFAULT_MEMORY},
    ),
    PodCase(
        "a sidecar runs beside the containers and the later init containers",
        make_pod()
        .init_req({"cpu": "1"}, sidecar=True)
        .init_req({"cpu": "2"})
        .req({"cpu": "500m"})
        .obj(),
        requested={"cpu": 3000},  # max(1 + 0.5, 1 + 2)
        non_zero={"cpu": 3000, "memory": 2 * DEFAULT_MEMORY},  # sidecar + container
    ),
    PodCase(
        "overhead on top",
        make_pod().req({"cpu": "1", GPU: "1"}).overhead({"cpu": "250m", "memory": "10Mi"}).obj(),
        requested={"cpu": 1250, "memory": 10 * MIB, GPU: 1},
        non_zero={"cpu": 1250, "memory": DEFAULT_MEMORY + 10 * MIB},
    ),
    PodCase(
        "scalar names kept, other names dropped, zeros left out",
        make_pod()
        .req(
            {
                GPU: "2",
                "deviceclass.resource.kubernetes.io/gpuclass": "1",
                "attachable-volumes-csi-x": "3",
                "ephemeral-storage": "1Ki",
                "unknown": "7",
                "example.com/zero": "0",
            }
        )
        .obj(),
        requested={
            GPU: 2,
            "deviceclass.resource.kubernetes.io/gpuclass": 1,
            "attachable-volumes-csi-x": 3,
            "ephemeral-storage": 1024,
        },
        non_zero={"cpu": DEFAULT_CPU, "memory": DEFAULT_MEMORY},
    ),
    PodCase(
        "limits only: API defaulting makes them requests",
        make_pod().limits({GPU: "1", "cpu": "2"}).obj(),
        requested={GPU: 1, "cpu": 2000},
        non_zero={"cpu": 2000, "memory": DEFAULT_MEMORY},
    ),
]


@pytest.mark.parametrize("case", POD_CASES, ids=lambda c: c.name)
def test_pod_resource_request(case: PodCase) -> None:
    request = framework.pod_resource_request(case.pod)
    assert request.requested == case.requested
    assert request.non_zero_requested == case.non_zero


def test_pod_resource_request_is_converted_once_per_pod_version() -> None:
    pod = make_pod().req({"cpu": "1"}).obj()
    versioned = msgspec.structs.replace(
        pod, metadata=msgspec.structs.replace(pod.metadata, resource_version="7")
    )
    first = framework.pod_resource_request(versioned)
    # The assumed copy (nodeName set) shares the conversion.
    assumed = msgspec.structs.replace(
        versioned, spec=msgspec.structs.replace(versioned.spec, node_name="worker")
    )
    assert framework.pod_resource_request(assumed) is first
    newer = msgspec.structs.replace(
        versioned, metadata=msgspec.structs.replace(versioned.metadata, resource_version="8")
    )
    assert framework.pod_resource_request(newer) is not first
    # Without a resourceVersion nothing is cached.
    assert framework.pod_resource_request(pod) is not framework.pod_resource_request(pod)


def test_resource_vector_of_node_allocatable() -> None:
    node = make_node().capacity({"cpu": "3500m", "memory": "1Gi", GPU: "0", "foo": "1"}).obj()
    info = NodeInfo(node)
    # Zero is kept: the name is advertised (a device plugin with no healthy device).
    assert info.allocatable_resource == {"cpu": 3500, "memory": 1024 * MIB, GPU: 0, "pods": 110}
    assert info.allowed_pod_number == 110
    info.set_node(make_node().capacity({"pods": "3"}).obj())
    assert info.allocatable_resource == {"pods": 3} and info.allowed_pod_number == 3


# --- incremental accounting --------------------------------------------------------------

PODS = [
    make_pod("a").req({"cpu": "0.0005", "memory": "100Mi"}).obj(),
    make_pod("b").req({"cpu": "0.0005", GPU: "1"}).obj(),
    make_pod("c").init_req({"cpu": "2", "ephemeral-storage": "1Gi"}).req({"cpu": "1"}).obj(),
    make_pod("d").req({GPU: "2"}).overhead({"cpu": "100m"}).obj(),
    make_pod("e").obj(),
    make_pod("f").init_req({"memory": "1Gi"}, sidecar=True).req({"hugepages-1Gi": "1"}).obj(),
]


def from_scratch(pods: list[core_v1.Pod]) -> tuple[dict[str, int], dict[str, int]]:
    """The sums NodeInfo must hold, each pod converted on its own as upstream does."""
    requested: dict[str, int] = {}
    non_zero: dict[str, int] = {}
    for pod in pods:
        for name, value in framework.resource_vector(resources.pod_requests(pod)).items():
            requested[name] = requested.get(name, 0) + value
        nz = framework.resource_vector(framework.pod_non_zero_requests(pod))
        for name in ("cpu", "memory"):
            non_zero[name] = non_zero.get(name, 0) + nz.get(name, 0)

    def without_zeros(vector: dict[str, int]) -> dict[str, int]:
        return {name: value for name, value in vector.items() if value}

    return without_zeros(requested), without_zeros(non_zero)


@pytest.mark.parametrize(
    "removal_order",  # indexes into the pods still on the node
    [[0, 0, 0, 0, 0, 0], [5, 3, 1, 0, 1, 0], [2, 2, 2, 0, 1, 0]],
    ids=["in order", "shuffled", "from the middle"],
)
def test_add_and_remove_keep_the_sums_of_the_pods_there(removal_order: list[int]) -> None:
    info = NodeInfo(make_node().capacity({"cpu": "4"}).obj())
    on_node: list[core_v1.Pod] = []
    for pod in PODS:
        info.add_pod(pod)
        on_node.append(pod)
        assert (info.requested, info.non_zero_requested) == from_scratch(on_node)
    for index in removal_order:
        pod = on_node.pop(index)
        info.remove_pod(pod)
        assert (info.requested, info.non_zero_requested) == from_scratch(on_node)
        fresh = NodeInfo(info.node, on_node)
        assert (info.requested, info.non_zero_requested) == (
            fresh.requested,
            fresh.non_zero_requested,
        )
    assert info.requested == {} and info.non_zero_requested == {} and info.pods == []


def test_milli_cpu_is_rounded_per_pod_as_upstream() -> None:
    """Two pods of 0.5m count 1m each (upstream converts each pod, then adds), not 1m."""
    info = NodeInfo(make_node().obj(), PODS[:2])
    assert info.requested["cpu"] == 2
    assert (Quantity(parse_quantity("0.0005").value * 2)).milli_value() == 1


def test_remove_subtracts_what_the_stored_copy_added() -> None:
    info = NodeInfo(make_node().obj(), [make_pod("p").req({"cpu": "1"}).obj()])
    info.remove_pod(make_pod("p").req({"cpu": "3"}).obj())  # same UID, other spec
    assert info.requested == {} and info.non_zero_requested == {}


def test_snapshot_does_not_follow_later_changes() -> None:
    info = NodeInfo(make_node().capacity({"cpu": "4"}).obj(), PODS[:3])
    snapshot = info.snapshot()
    before = (dict(snapshot.requested), dict(snapshot.non_zero_requested))
    info.add_pod(PODS[3])
    info.remove_pod(PODS[0])
    info.set_node(make_node().capacity({"cpu": "8"}).obj())
    assert (snapshot.requested, snapshot.non_zero_requested) == before
    assert [p.metadata.name for p in snapshot.pods] == ["a", "b", "c"]
    assert snapshot.allocatable_resource["cpu"] == 4000
    assert snapshot.generation < info.generation


# --- Filter and Score against the rules worked out on quantities --------------------------

CLASSES = {GPU: make_device_class("class", GPU)}


def quantity_filter_reasons(
    pod: core_v1.Pod, info: NodeInfo, *, gate: bool
) -> tuple[list[str], bool]:
    """Upstream `fitsRequest` on quantities: each request against allocatable minus the
    pods' requests
    (each pod rounded on its own), reasons in upstream's order; unresolvable when even an
    empty node is too small."""
    reasons: list[str] = []
    unresolvable = False
    if len(info.pods) + 1 > info.allocatable["pods"].int_value():
        reasons.append("Too many pods")
    want = framework.resource_vector(resources.pod_requests(pod))
    used, _ = from_scratch(info.pods)
    have = framework.resource_vector(info.allocatable)
    native = ["cpu", "memory", "ephemeral-storage"]
    scalars = sorted(n for n in want if n not in native and n != "pods")
    for name in native + scalars:
        if want.get(name, 0) <= 0:
            continue
        if want[name] > have.get(name, 0) - used.get(name, 0):
            if gate and have.get(name, 0) <= 0 and name in CLASSES:
                continue
            reasons.append(f"Insufficient {name}")
            unresolvable = unresolvable or want[name] > have.get(name, 0)
    return reasons, unresolvable


FIT_PODS = [
    make_pod("cpu").req({"cpu": "1"}).obj(),
    make_pod("big").req({"cpu": "5", "memory": "1Gi"}).obj(),
    make_pod("gpu").req({GPU: "1"}).obj(),
    make_pod("gpu2").req({GPU: "2", "cpu": "100m"}).obj(),
    make_pod("init").init_req({"cpu": "3500m"}).req({"cpu": "1"}).obj(),
    make_pod("overhead").req({"cpu": "3"}).overhead({"cpu": "600m"}).obj(),
    make_pod("other").req({"example.com/other": "1"}).obj(),
    make_pod("empty").obj(),
]
FIT_NODES = [
    make_node().capacity({"cpu": "4", "memory": "2Gi", GPU: "2", "pods": "3"}).obj(),
    make_node().capacity({"cpu": "4", "memory": "2Gi"}).obj(),
    make_node().capacity({"cpu": "4", GPU: "0", "pods": "2"}).obj(),
]
EXISTING = [(), (PODS[1],), (PODS[1], PODS[2])]


@pytest.mark.parametrize("gate", [True, False], ids=["gate on", "gate off"])
@pytest.mark.parametrize("existing", EXISTING, ids=["empty", "one pod", "two pods"])
@pytest.mark.parametrize("node", FIT_NODES, ids=["gpu node", "plain node", "gpu 0, 2 pods"])
@pytest.mark.parametrize("pod", FIT_PODS, ids=lambda p: p.metadata.name)
def test_filter_agrees_with_the_quantity_rules(
    pod: core_v1.Pod, node: core_v1.Node, existing: tuple[core_v1.Pod, ...], gate: bool
) -> None:
    info = NodeInfo(node, existing)
    plugin = NodeResourcesFit(resolve_device_class=CLASSES.get if gate else None)
    state = framework.CycleState()
    plugin.pre_filter(state, pod, [info])
    status = plugin.filter(state, pod, info)
    reasons, unresolvable = quantity_filter_reasons(pod, info, gate=gate)
    if not reasons:
        assert status is None
        assert node_resources_fit.fits(pod, info, plugin.resolve_device_class) == []
        return
    code = Code.UNSCHEDULABLE_AND_UNRESOLVABLE if unresolvable else Code.UNSCHEDULABLE
    assert status == framework.Status(code, reasons)
    missing = node_resources_fit.fits(pod, info, plugin.resolve_device_class)
    assert [m.reason for m in missing] == reasons


@pytest.mark.parametrize("existing", EXISTING, ids=["empty", "one pod", "two pods"])
@pytest.mark.parametrize("node", FIT_NODES, ids=["gpu node", "plain node", "gpu 0, 2 pods"])
@pytest.mark.parametrize("pod", FIT_PODS, ids=lambda p: p.metadata.name)
def test_score_is_least_allocated_of_allocatable_and_requested(
    pod: core_v1.Pod, node: core_v1.Node, existing: tuple[core_v1.Pod, ...]
) -> None:
    specs = (ResourceSpec("cpu", 2), ResourceSpec("memory"), ResourceSpec(GPU, 3))
    plugin = NodeResourcesFit(
        NodeResourcesFitArgs(scoring_strategy=ScoringStrategy(resources=specs)),
        resolve_device_class=CLASSES.get,
        dra_capacity=lambda info, name: (4, 1),
    )
    info = NodeInfo(node, existing)
    request = framework.pod_resource_request(pod)
    pairs = [
        plugin.allocatable_and_requested(
            info,
            spec.name,
            (
                request.non_zero_requested if spec.name in ("cpu", "memory") else request.requested
            ).get(spec.name, 0),
        )
        for spec in specs
    ]
    want = node_resources_fit.least_allocated_score(
        [requested for _, requested in pairs],
        [allocatable for allocatable, _ in pairs],
        [spec.weight for spec in specs],
    )
    state = framework.CycleState()
    plugin.pre_score(state, pod, [info])
    assert plugin.score(state, pod, info) == want


# --- candidate nodes of a device plugin's resource ---------------------------------------


@pytest.mark.parametrize("seed", range(3))
def test_candidate_nodes_from_the_followed_index_match_a_pass_over_every_node(
    seed: int,
) -> None:
    """On the snapshot's NodeInfoList, PreFilter names the nodes advertising a device
    plugin's resource from an index it keeps up to date with the list's changes; along
    random node updates, additions, removals and pods placed, the names must be those a
    pass over every node finds."""
    rng = random.Random(seed)
    plugin = NodeResourcesFit()
    cache, snapshot = Cache(), Snapshot()

    def node(name: str) -> core_v1.Node:
        resources = {"cpu": "4", "memory": "8Gi", "pods": "110"}
        for resource in ("foo.com/a", "foo.com/b"):
            if rng.random() < 0.5:
                resources[resource] = str(rng.randint(1, 3))
        return make_node(name).capacity(resources).obj()

    names = [f"n-{i}" for i in range(150)]
    for name in names:
        cache.add_node(node(name))
    checked_with = 0
    for step in range(600):
        roll = rng.random()
        if roll < 0.3:
            cache.update_node(node(rng.choice(names)), node(rng.choice(names)))
        elif roll < 0.35:
            names.append(f"extra-{step}")
            cache.add_node(node(names[-1]))
        elif roll < 0.4 and len(names) > 10:
            cache.remove_node(node(names.pop(rng.randrange(len(names)))))
        elif roll < 0.6:
            pod = make_pod(f"p-{step}").uid(f"p-{step}").req({"cpu": "100m"}).obj()
            pod.spec.node_name = rng.choice(names)
            cache.assume_pod(pod)
        cache.update_snapshot(snapshot)
        wants = {"foo.com/a": str(rng.randint(1, 3))}
        if rng.random() < 0.5:
            wants["foo.com/b"] = str(rng.randint(1, 2))
        pod = make_pod(f"q-{step}").req(wants).obj()
        indexed, scanned = framework.CycleState(), framework.CycleState()
        plugin.pre_filter(indexed, pod, snapshot.node_info_list)
        plugin.pre_filter(scanned, pod, list(snapshot.node_info_list))
        got, want = plugin.candidate_nodes(indexed), plugin.candidate_nodes(scanned)
        assert got == want, f"step {step}"
        checked_with += got is not None
    assert checked_with > 300
