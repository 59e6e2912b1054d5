"""Reused Filter verdicts and scores never change a scheduling decision.

Two frameworks of the default profile share one cache and one DraManager: one reuses the
verdicts and scores of earlier attempts for pods of the same spec
(`framework.VerdictCache`), the other filters and scores every node each time. Along a
long random history of what a cluster produces (pods reserved, bound, failed and deleted;
devices of node-local and shared pools taken and freed; nodes, DeviceClasses,
ResourceSlices and DeviceTaintRules changing), every attempt must find the same feasible
nodes, the same rejection of every other node and the same scores in both. No servers:
informer events are the DraManager's and the cache's handlers called directly.
"""

from __future__ import annotations

import collections
import copy
import dataclasses
import itertools
import random
from collections.abc import Callable
from typing import Any

import pytest

from drasim.common import codec
from drasim.common.api import core_v1, resource_v1
from drasim.scheduler import framework
from drasim.scheduler.cache import Cache, Snapshot
from drasim.scheduler.dra_manager import DraManager
from drasim.scheduler.framework import CycleState, Framework, NodeInfo, verdict_cache
from drasim.scheduler.framework.verdict_cache import KeptPositions
from drasim.scheduler.plugins import names
from drasim.scheduler.server import new_default_framework

DRIVER = "test-driver.cdi.k8s.io"
NIC_DRIVER = "nic.example.com"
NIC = "example.com/nic"
DEVICE_PLUGIN_NODE = "dp-0"
# Nodes stay below framework.MIN_FEASIBLE_NODES_TO_FIND, so that every attempt filters
# every node: with more, Filter stops early at a rotating index and the two frameworks
# would look at different nodes.
MAX_NODES = 16
NOTHING = 'device.driver == "nobody.example.com"'
CLASSES = {
    # class name -> (extended resource name, selector)
    "class-0": ("example.com/gpu-0", f'device.driver == "{DRIVER}"'),
    "class-1": (
        "example.com/gpu-1",
        f'device.driver == "{DRIVER}" && device.attributes["{DRIVER}"].index < 2',
    ),
    "class-2": ("example.com/gpu-2", f'device.driver == "{DRIVER}"'),
    # No class at first: added (and removed) as the history goes.
    "class-3": ("example.com/gpu-3", f'device.driver == "{DRIVER}"'),
    "nic-class": (NIC, f'device.driver == "{NIC_DRIVER}"'),
}
EXTENDED = [name for name, _ in CLASSES.values()]
# Pod UIDs unique in the process, as in a cluster: `framework.pod_resource_request` keeps
# the requests of a (UID, resourceVersion) for every later test.
_POD_UIDS = itertools.count()


# --- objects -----------------------------------------------------------------------------


def node_dict(name: str, rng: random.Random) -> dict[str, Any]:
    allocatable = {"cpu": "4", "memory": "8Gi", "pods": "8"}
    if name == DEVICE_PLUGIN_NODE:
        allocatable["example.com/gpu-0"] = "2"  # a device plugin's: NodeResourcesFit's path
    return {
        "metadata": {
            "name": name,
            "uid": f"uid-{name}",
            "labels": {"kubernetes.io/hostname": name, "zone": rng.choice("ab")},
        },
        "spec": {},
        "status": {
            "capacity": dict(allocatable),
            "allocatable": allocatable,
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def device(index: int, rng: random.Random) -> dict[str, Any]:
    found: dict[str, Any] = {"name": f"dev-{index}", "attributes": {"index": {"int": index}}}
    if rng.random() < 0.1:  # unusable for pods, which tolerate no device taint
        found["taints"] = [{"key": "broken", "value": "yes", "effect": "NoSchedule"}]
    return found


def devices(count: int, rng: random.Random) -> list[dict[str, Any]]:
    return [device(i, rng) for i in range(count)]


def slice_dict(
    name: str, driver: str, pool: str, devices: list[dict[str, Any]], **placement: Any
) -> dict[str, Any]:
    """A one-slice pool; `placement` is `nodeName`, `allNodes` or `nodeSelector`."""
    return {
        "metadata": {"name": name, "resourceVersion": "1"},
        "spec": {
            "driver": driver,
            "pool": {"name": pool, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
            **placement,
        },
    }


def class_dict(name: str, selector: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "resourceVersion": "1"},
        "spec": {
            "selectors": [{"cel": {"expression": selector}}],
            "extendedResourceName": CLASSES[name][0],
        },
    }


def random_pod_spec(rng: random.Random) -> dict[str, Any]:
    """One of the specs the history's pods share: extended resources (DRA-served,
    device-plugin-served, unmapped or shared-pool), maybe cpu and memory, maybe an init
    container; or cpu alone."""

    def container(name: str) -> dict[str, Any]:
        requests: dict[str, str] = {}
        limits: dict[str, str] = {}
        for resource in rng.sample(EXTENDED, k=rng.choice([1, 1, 1, 2])):
            count = str(rng.randint(1, 3) if resource != NIC else 1)
            requests[resource] = limits[resource] = count
        if rng.random() < 0.5:
            requests["cpu"] = rng.choice(["500m", "1", "1500m"])
        if rng.random() < 0.3:
            requests["memory"] = rng.choice(["1Gi", "3Gi"])
        return {
            "name": name,
            "image": "pause",
            "resources": {"requests": requests, "limits": limits},
        }

    if rng.random() < 0.15:
        cpu = rng.choice(["1", "2"])
        return {
            "containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": cpu}}}]
        }
    spec: dict[str, Any] = {"containers": [container("c")]}
    if rng.random() < 0.2:
        spec["containers"].append(container("d"))
    if rng.random() < 0.25:
        spec["initContainers"] = [container("init")]
    return spec


# --- the two frameworks ------------------------------------------------------------------


@dataclasses.dataclass
class Outcome:
    """What an attempt decided: all of it must be the same with and without reuse."""

    feasible: frozenset[str] = frozenset()
    # node -> (code, reasons, plugin) of the rejected nodes
    rejected: dict[str, tuple[str, tuple[str, ...], str]] = dataclasses.field(default_factory=dict)
    message: str = ""
    unschedulable_plugins: frozenset[str] = frozenset()
    # node -> (total, per plugin), when more than one node is feasible
    scores: dict[str, tuple[int, tuple[tuple[str, int], ...]]] = dataclasses.field(
        default_factory=dict
    )
    error: str = ""
    evaluated: int = 0


def attempt(
    fwk: Framework,
    state: CycleState,
    pod: core_v1.Pod,
    nodes: list[NodeInfo],
    calls: collections.Counter[str] | None = None,
    *,
    name_every_rejection: bool = False,
) -> tuple[Outcome, list[NodeInfo]]:
    """Filter and, with a choice to make, Score, as `schedule_one.schedule_pod` does. The
    reusing framework picks its host as the scheduler does (`Framework.pick_host`, from
    kept scores where they answer): one of the best. Every node's scores are then taken
    afresh for the comparison, not counted in `calls`."""
    try:
        feasible, diagnosis = fwk.find_nodes_that_fit(
            state, pod, nodes, name_every_rejection=name_every_rejection
        )
        scores = {}
        if len(feasible) > 1:
            picked = None
            if fwk.verdict_cache.enabled:
                picked = fwk.pick_host(state, pod, feasible, random.Random(len(feasible)))
            before = calls["score"] if calls is not None else 0
            status = fwk.run_pre_score_plugins(state, pod, feasible)
            assert framework.is_success(status), status
            scores = {
                s.name: (s.total_score, tuple((p.name, p.score) for p in s.scores))
                for s in fwk.run_score_plugins(state, pod, feasible)
            }
            if calls is not None and picked is not None:
                calls["score"] = before
            if picked is not None:
                assert scores[picked][0] == max(total for total, _ in scores.values())
    except framework.FrameworkError as err:
        return Outcome(error=str(err)), []
    rejected = {
        name: (str(status.code), tuple(status.all_reasons()), status.plugin)
        for name, status in diagnosis.node_to_status.items()
    }
    outcome = Outcome(
        feasible=frozenset(n.name for n in feasible),
        rejected=rejected,
        message=diagnosis.message(len(nodes)),
        unschedulable_plugins=frozenset(diagnosis.unschedulable_plugins),
        scores=scores,
        evaluated=diagnosis.evaluated_nodes,
    )
    return outcome, feasible


def count_calls(fwk: Framework) -> collections.Counter[str]:
    """Count the framework's Filter calls per node and NodeResourcesFit's Score calls (a
    wrapper on each plugin instance: the frameworks read `pl.filter` at every attempt)."""
    calls: collections.Counter[str] = collections.Counter()

    def counted(key: str, call: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any) -> Any:
            calls[key] += 1
            return call(*args)

        return wrapper

    # The first Filter plugin of the profile runs for every node not reused.
    first = fwk.filter_plugins[0]
    setattr(first, "filter", counted("filter", first.filter))  # noqa: B010
    for pl in fwk.score_plugins:
        if pl.name == names.NODE_RESOURCES_FIT:
            setattr(pl, "score", counted("score", pl.score))  # noqa: B010
    # Picks of a host from kept positions' scores.
    best_kept_node = fwk.verdict_cache.best_kept_node

    def counted_pick(*args: Any) -> Any:
        host = best_kept_node(*args)
        calls["kept picks"] += host is not None
        return host

    setattr(fwk.verdict_cache, "best_kept_node", counted_pick)  # noqa: B010
    return calls


# --- the cluster and its history ---------------------------------------------------------


@dataclasses.dataclass
class Placed:
    """A pod Reserve placed on a node, followed through binding and deletion."""

    pod: core_v1.Pod  # the assumed copy, `spec.nodeName` set
    state: CycleState  # the reusing framework's attempt, for Unreserve
    in_flight: list[resource_v1.ResourceClaim]  # Reserve's in-flight allocations
    stage: str = "reserved"  # then "unreserved", "written", "bound", "deleted"
    stored: list[resource_v1.ResourceClaim] = dataclasses.field(default_factory=list)
    claims_informed: bool = False  # the informer delivered the written claims


class Cluster:
    """The cache, the DraManager and both frameworks, plus the objects the informers
    would hold, changed by random steps."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.dra = DraManager()
        self.reusing = new_default_framework(object(), self.dra)  # type: ignore[arg-type]
        self.reference = new_default_framework(object(), self.dra)  # type: ignore[arg-type]
        self.reference.verdict_cache.enabled = False
        assert self.reusing.verdict_cache.enabled
        self.reusing_calls = count_calls(self.reusing)
        self.reference_calls = count_calls(self.reference)
        self.cache = Cache()
        self.snapshot = Snapshot()
        self.nodes: dict[str, core_v1.Node] = {}
        self.slices: dict[str, resource_v1.ResourceSlice] = {}
        self.classes: dict[str, resource_v1.DeviceClass] = {}
        self.rules: dict[str, resource_v1.DeviceTaintRule] = {}
        self.placed: list[Placed] = []
        self.specs = [random_pod_spec(rng) for _ in range(rng.randint(6, 10))]
        self.serial = 0
        self.attempts = self.feasible = self.scored = self.reserved = self.reused_feasible = 0

        for i in range(rng.randint(6, 12)):
            self.add_node(f"node-{i}", slice_devices=rng.choice([0, 2, 3, 4, 4, 6]))
        self.add_node(DEVICE_PLUGIN_NODE, slice_devices=0)
        for name, (_, selector) in CLASSES.items():
            if name != "class-3":
                self.set_class(name, selector)
        self.set_slice(slice_dict("nic-all", NIC_DRIVER, "nic-all", devices(2, rng), allNodes=True))
        zone_a = {
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
            ]
        }
        self.set_slice(
            slice_dict("nic-zone", NIC_DRIVER, "nic-zone", devices(2, rng), nodeSelector=zone_a)
        )
        if PER_DEVICE_SLICE:
            # Each device says which nodes reach it: one node, a zone, every node.
            each = [
                {"name": "dev-0", "nodeName": "node-0"},
                {"name": "dev-1", "nodeSelector": zone_a},
                {"name": "dev-2", "allNodes": True},
            ]
            self.set_slice(
                slice_dict(
                    "nic-a-each", NIC_DRIVER, "nic-a-each", each, perDeviceNodeSelection=True
                )
            )

    def next_serial(self) -> int:
        self.serial += 1
        return self.serial

    # -- informer events: nodes, classes, slices --

    def add_node(self, name: str, slice_devices: int) -> None:
        node = codec.convert(node_dict(name, self.rng), core_v1.Node)
        self.nodes[name] = node
        self.cache.add_node(node)
        if slice_devices:
            self.set_slice(
                slice_dict(
                    f"{name}-slice", DRIVER, name, devices(slice_devices, self.rng), nodeName=name
                )
            )

    def add_random_node(self) -> None:
        if len(self.nodes) < MAX_NODES:
            self.add_node(f"node-{self.next_serial()}", slice_devices=self.rng.randint(0, 4))

    def update_node(self) -> None:
        """A change Filter or Score sees: allocatable, a taint, cordon, a label."""
        name = self.rng.choice(sorted(self.nodes))
        old = self.nodes[name]
        raw = codec.to_builtins(old)
        allocatable = raw["status"]["allocatable"]
        change = self.rng.choice(["cpu", "taint", "unschedulable", "zone", "device plugin"])
        if change == "cpu":
            allocatable["cpu"] = self.rng.choice(["1", "2", "4", "8"])
        elif change == "taint":
            taints = raw["spec"].get("taints")
            raw["spec"]["taints"] = (
                [] if taints else [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]
            )
        elif change == "unschedulable":
            raw["spec"]["unschedulable"] = not raw["spec"].get("unschedulable", False)
        elif change == "zone":
            labels = raw["metadata"]["labels"]
            labels["zone"] = "b" if labels.get("zone") == "a" else "a"
        else:  # a device plugin appears, changes its count or goes (0: DRA serves gpu-0)
            allocatable["example.com/gpu-0"] = self.rng.choice(["0", "1", "2", "3"])
        new = codec.convert(raw, core_v1.Node)
        self.nodes[name] = new
        self.cache.update_node(old, new)

    def remove_node(self) -> None:
        busy = {p.pod.spec.node_name for p in self.placed}
        idle = sorted(set(self.nodes) - busy)
        if len(self.nodes) > 2 and idle:
            name = self.rng.choice(idle)
            self.cache.remove_node(self.nodes.pop(name))

    def set_class(self, name: str, selector: str) -> None:
        new = codec.convert(class_dict(name, selector), resource_v1.DeviceClass)
        old = self.classes.get(name)
        if old is None:
            self.dra.on_class_add(new)
        else:
            new.metadata.resource_version = str(int(old.metadata.resource_version) + 1)
            self.dra.on_class_update(old, new)
        self.classes[name] = new

    def change_class(self) -> None:
        """Add a missing class, delete one, or make one select nothing (or all again)."""
        name = self.rng.choice(sorted(CLASSES))
        current = self.classes.get(name)
        if current is None:
            self.set_class(name, CLASSES[name][1])
        elif self.rng.random() < 0.3:
            self.dra.on_class_delete(self.classes.pop(name))
        else:
            selector = current.spec.selectors[0].cel
            assert selector is not None
            self.set_class(name, CLASSES[name][1] if selector.expression == NOTHING else NOTHING)

    def set_slice(self, raw: dict[str, Any]) -> None:
        new = codec.convert(raw, resource_v1.ResourceSlice)
        old = self.slices.get(new.metadata.name)
        if old is None:
            self.dra.on_slice_add(new)
        else:
            self.dra.on_slice_update(old, new)
        self.slices[new.metadata.name] = new

    def change_slice(self) -> None:
        """A node's slice added (for a node without one), republished with other devices
        (a new pool generation), or deleted; or the shared pools' slices resized."""
        name = self.rng.choice(sorted(self.nodes))
        slice_name = f"{name}-slice"
        if name != DEVICE_PLUGIN_NODE and slice_name not in self.slices:
            found = devices(self.rng.randint(1, 4), self.rng)
            self.set_slice(slice_dict(slice_name, DRIVER, name, found, nodeName=name))
            return
        if slice_name not in self.slices or self.rng.random() < 0.3:
            slice_name = self.rng.choice(["nic-all", "nic-zone"])
        elif self.rng.random() < 0.25:
            self.dra.on_slice_delete(self.slices.pop(slice_name))
            return
        raw = codec.to_builtins(self.slices[slice_name])
        raw["spec"]["pool"]["generation"] += 1
        raw["metadata"]["resourceVersion"] = str(int(raw["metadata"]["resourceVersion"]) + 1)
        raw["spec"]["devices"] = devices(self.rng.randint(1, 4), self.rng)
        self.set_slice(raw)

    # -- the scheduling cycle --

    def change_taint_rule(self) -> None:
        """A DeviceTaintRule made (NoSchedule on a node's pool, or one device of it) or
        deleted: the devices it taints are kept from the pods, none of which tolerates it."""
        if self.rules and self.rng.random() < 0.5:
            name = self.rng.choice(sorted(self.rules))
            self.dra.on_taint_rule_delete(self.rules.pop(name))
            return
        pools = sorted(s.spec.pool.name for s in self.slices.values() if s.spec.driver == DRIVER)
        if not pools:
            return
        selector = {"driver": DRIVER, "pool": self.rng.choice(pools)}
        if self.rng.random() < 0.3:
            selector["device"] = f"dev-{self.rng.randint(0, 5)}"
        rule = codec.convert(
            {
                "metadata": {"name": f"rule-{self.next_serial()}"},
                "spec": {
                    "deviceSelector": selector,
                    "taint": {"key": "maintenance", "effect": "NoSchedule"},
                },
            },
            resource_v1.DeviceTaintRule,
        )
        self.rules[rule.metadata.name] = rule
        self.dra.on_taint_rule_add(rule)

    async def schedule(self) -> None:
        """One attempt in both frameworks, compared; then Reserve on a feasible node."""
        n = self.next_serial()
        spec = copy.deepcopy(self.rng.choice(self.specs))
        pod = codec.convert(
            {
                "metadata": {
                    "name": f"pod-{n}",
                    "namespace": "default",
                    "uid": f"pod-uid-{next(_POD_UIDS)}",
                    "resourceVersion": "1",
                },
                "spec": spec,
            },
            core_v1.Pod,
        )
        self.cache.update_snapshot(self.snapshot)
        nodes = self.snapshot.node_info_list
        assert len(nodes) < framework.MIN_FEASIBLE_NODES_TO_FIND
        state, reference_state = CycleState(), CycleState()
        # Without, rejections are named only when no node fits (`open_nodes`).
        name_all = self.attempts % 2 == 0
        # Either may go first: they share the DraManager and its allocator caches.
        if self.rng.random() < 0.5:
            got, feasible = attempt(
                self.reusing, state, pod, nodes, self.reusing_calls, name_every_rejection=name_all
            )
            want, _ = attempt(self.reference, reference_state, pod, nodes)
        else:
            want, _ = attempt(self.reference, reference_state, pod, nodes)
            got, feasible = attempt(
                self.reusing, state, pod, nodes, self.reusing_calls, name_every_rejection=name_all
            )
        if got.feasible and not name_all:
            assert not got.rejected and not got.unschedulable_plugins
            want = dataclasses.replace(
                want, rejected={}, message=got.message, unschedulable_plugins=frozenset()
            )
        assert got == want, f"attempt {self.attempts} of {pod.metadata.name}: {spec}"
        assert verdict_cache.attempt_verdicts(reference_state) is None
        self.attempts += 1
        self.feasible += bool(got.feasible)
        self.scored += bool(got.scores)
        kept = verdict_cache.attempt_verdicts(state)
        if kept is not None:
            self.reused_feasible += sum(kept.reused_verdict(name) for name in got.feasible)
        if not feasible:
            return
        chosen = self.rng.choice(feasible)
        # As `schedule_pod` does: Filter runs for real on a node whose verdict was reused.
        self.reusing.verdict_cache.confirm(state, pod, chosen)
        assumed = codec.clone(pod)
        assumed.spec.node_name = chosen.name
        self.cache.assume_pod(assumed)
        before = {c.metadata.uid for c in self.dra.pending_allocations()}
        status = await self.reusing.run_reserve_plugins_reserve(state, assumed, chosen.name)
        assert framework.is_success(status), status
        in_flight = [c for c in self.dra.pending_allocations() if c.metadata.uid not in before]
        self.placed.append(Placed(assumed, state, in_flight))
        self.reserved += 1

    # -- the binding cycle and the informers --

    def pre_bind(self, placed: Placed) -> None:
        """Write the in-flight allocations as PreBind does: either stored at once as the
        scheduler's own write (the informer's copy comes later), or the informer brings
        the created claim and its allocation before the in-flight entry goes."""
        for pending in placed.in_flight:
            n = self.next_serial()
            written = codec.clone(pending)
            written.metadata.name = f"{placed.pod.metadata.name}-extended-resources-{n}"
            written.metadata.uid = f"claim-uid-{n}"
            written.metadata.resource_version = "2"
            written.status.reserved_for = [
                resource_v1.ResourceClaimConsumerReference(
                    resource="pods", name=placed.pod.metadata.name, uid=placed.pod.metadata.uid
                )
            ]
            if self.rng.random() < 0.5:
                self.dra.assume_claim_after_api_call(written)
            else:
                created = codec.clone(written)
                created.metadata.resource_version = "1"
                created.status = resource_v1.ResourceClaimStatus()
                self.dra.on_claim_add(created)
                self.dra.on_claim_update(created, written)
            self.dra.remove_claim_pending_allocation(pending.metadata.uid)
            placed.stored.append(written)
        placed.stage = "written"

    def inform_claims(self, placed: Placed) -> None:
        """The claim informer catches up with a newer version (e.g. a driver's update)."""
        for i, old in enumerate(placed.stored):
            new = codec.clone(old)
            new.metadata.resource_version = str(int(old.metadata.resource_version) + 1)
            self.dra.on_claim_update(old, new)
            placed.stored[i] = new
        placed.claims_informed = True

    def bind(self, placed: Placed) -> None:
        """The pod informer reports the bound pod: the assumed one is confirmed."""
        bound = codec.clone(placed.pod)
        bound.metadata.resource_version = "2"
        self.cache.add_pod(bound)
        placed.pod = bound
        placed.stage = "bound"

    async def unreserve(self, placed: Placed) -> None:
        """The binding failed before PreBind wrote anything; forgetting follows."""
        await self.reusing.run_reserve_plugins_unreserve(
            placed.state, placed.pod, placed.pod.spec.node_name
        )
        placed.stage = "unreserved"

    def forget(self, placed: Placed) -> None:
        self.cache.forget_pod(placed.pod)
        self.placed.remove(placed)

    def delete_pod(self, placed: Placed) -> None:
        """The pod is deleted; its claims go later (the garbage collector, finalizers)."""
        self.cache.remove_pod(placed.pod)
        placed.stage = "deleted"

    def delete_claims(self, placed: Placed) -> None:
        for claim in placed.stored:
            self.dra.on_claim_delete(claim)
        self.placed.remove(placed)

    async def step(self) -> None:
        """One random event of those the cluster's state allows."""
        steps: list[tuple[float, Callable[[], Any]]] = [
            (12.0, self.schedule),
            (0.3, self.add_random_node),
            (0.2, self.remove_node),
            (1.2, self.update_node),
            (0.6, self.change_class),
            (0.8, self.change_slice),
            (0.3, self.change_taint_rule),
        ]
        for placed in self.placed:
            if placed.stage == "reserved":
                steps.append((1.5, lambda p=placed: self.pre_bind(p)))
                steps.append((0.4, lambda p=placed: self.unreserve(p)))
            elif placed.stage == "unreserved":
                steps.append((3.0, lambda p=placed: self.forget(p)))
            elif placed.stage in ("written", "bound"):
                if placed.stored and not placed.claims_informed:
                    steps.append((1.5, lambda p=placed: self.inform_claims(p)))
                if placed.stage == "written":
                    steps.append((1.5, lambda p=placed: self.bind(p)))
                else:
                    steps.append((0.4, lambda p=placed: self.delete_pod(p)))
            elif placed.stage == "deleted":
                steps.append((1.5, lambda p=placed: self.delete_claims(p)))
        weights = [w for w, _ in steps]
        [(_, chosen)] = self.rng.choices(steps, weights=weights)
        result = chosen()
        if result is not None:
            await result


SEEDS = range(6)
STEPS = 800
# Whether the history has a perDeviceNodeSelection pool too (its own test below).
PER_DEVICE_SLICE = False


@pytest.mark.parametrize("seed", SEEDS)
async def test_reused_verdicts_and_scores_never_change_a_decision(seed: int) -> None:
    cluster = Cluster(random.Random(seed))
    for _ in range(STEPS):
        await cluster.step()
    print(
        f"seed {seed}: {cluster.attempts} attempts ({cluster.feasible} feasible, "
        f"{cluster.scored} scored), {cluster.reserved} reserved, "
        f"{cluster.reused_feasible} feasible verdicts reused; Filter runs "
        f"{cluster.reusing_calls['filter']} vs {cluster.reference_calls['filter']}, "
        f"Score runs {cluster.reusing_calls['score']} vs {cluster.reference_calls['score']}"
    )
    # A history in which nothing is reused proves nothing.
    assert cluster.attempts > 250 and cluster.scored > 50 and cluster.reserved > 70
    assert cluster.reused_feasible > 80
    assert cluster.reusing_calls["kept picks"] > 30
    assert cluster.reusing_calls["filter"] < 0.8 * cluster.reference_calls["filter"]
    assert cluster.reusing_calls["score"] < 0.9 * cluster.reference_calls["score"]


async def test_devices_freed_on_the_node_changed_last_are_seen() -> None:
    """A bound pod is deleted, a pod of the same spec is rejected on its node (the
    pod's claim still holds the devices), then the claim is deleted: a pod of that spec
    must find the node again.

    The Reserve of the first pod logged the node's change; the second attempt moved the
    spec's place in the log past it and stored a fresh rejection; the claim's deletion
    reports the same node again. `VerdictCache.node_changed` once dropped that report
    because it equals the log's last entry, and as the node's generation did not change
    (the pod had left the cache already), the stale rejection was reused: the pod,
    requeued by that very ResourceClaim deletion, stayed unschedulable until something
    else changed the node (found by the randomized test above, seeds 2 and 4).
    """
    dra = DraManager()
    reusing = new_default_framework(object(), dra)  # type: ignore[arg-type]
    reference = new_default_framework(object(), dra)  # type: ignore[arg-type]
    reference.verdict_cache.enabled = False
    cache, snapshot = Cache(), Snapshot()
    dra.on_class_add(
        codec.convert(class_dict("class-0", CLASSES["class-0"][1]), resource_v1.DeviceClass)
    )
    cache.add_node(codec.convert(node_dict("node-0", random.Random(0)), core_v1.Node))
    two = [{"name": "dev-0"}, {"name": "dev-1"}]
    dra.on_slice_add(
        codec.convert(
            slice_dict("node-0-slice", DRIVER, "node-0", two, nodeName="node-0"),
            resource_v1.ResourceSlice,
        )
    )
    spec = {
        "containers": [
            {
                "name": "c",
                "image": "pause",
                "resources": {
                    "requests": {"example.com/gpu-0": "2"},
                    "limits": {"example.com/gpu-0": "2"},
                },
            }
        ]
    }

    def new_pod() -> core_v1.Pod:
        uid = f"pod-uid-{next(_POD_UIDS)}"
        meta = {"name": uid, "namespace": "default", "uid": uid, "resourceVersion": "1"}
        return codec.convert({"metadata": meta, "spec": copy.deepcopy(spec)}, core_v1.Pod)

    def both(pod: core_v1.Pod) -> tuple[Outcome, Outcome, CycleState]:
        cache.update_snapshot(snapshot)
        state = CycleState()
        got, _ = attempt(reusing, state, pod, snapshot.node_info_list)
        want, _ = attempt(reference, CycleState(), pod, snapshot.node_info_list)
        return got, want, state

    # The first pod: Reserve, PreBind (the claim written), bound.
    pod = new_pod()
    got, want, state = both(pod)
    assert got == want and got.feasible == {"node-0"}
    assumed = codec.clone(pod)
    assumed.spec.node_name = "node-0"
    cache.assume_pod(assumed)
    assert framework.is_success(await reusing.run_reserve_plugins_reserve(state, assumed, "node-0"))
    [pending] = dra.pending_allocations()
    claim = codec.clone(pending)
    claim.metadata.name, claim.metadata.uid, claim.metadata.resource_version = "c", "c", "2"
    dra.assume_claim_after_api_call(claim)
    dra.remove_claim_pending_allocation(pending.metadata.uid)
    cache.add_pod(assumed)

    # The pod is deleted; its claim still holds the devices: no room on node-0.
    cache.remove_pod(assumed)
    got, want, _ = both(new_pod())
    assert got == want and not got.feasible

    # The claim is deleted too: the devices are free.
    dra.on_claim_delete(claim)
    got, want, _ = both(new_pod())
    assert want.feasible == {"node-0"}
    assert got == want


@pytest.mark.parametrize("seed", range(3))
def test_kept_positions_pass_the_same_nodes_and_pick_a_best_one(seed: int) -> None:
    """With more nodes than `MIN_FEASIBLE_NODES_TO_FIND`, Filter stops early and the next
    attempt starts where it stopped. A walk over a spec's kept positions (the VerdictCache's)
    must find the same nodes in the same order, pass over as many and leave the same next
    start as one that visits every node, and the host picked from kept scores must have the
    best total score, along a history of pods placed and removed, nodes changed, added and
    removed."""
    rng = random.Random(seed)
    dra = DraManager()
    reusing = new_default_framework(object(), dra)  # type: ignore[arg-type]
    reference = new_default_framework(object(), dra)  # type: ignore[arg-type]
    reference.verdict_cache.enabled = False
    reusing_calls, reference_calls = count_calls(reusing), count_calls(reference)
    cache, snapshot = Cache(), Snapshot()
    node_names = [f"node-{i:03}" for i in range(300)]
    for name in node_names:
        cache.add_node(codec.convert(node_dict(name, rng), core_v1.Node))
    cpus = ["500m", "1", "1500m", "3"]
    placed: list[core_v1.Pod] = []
    picks = 0
    for step in range(1500):
        roll = rng.random()
        if roll < 0.15 and placed:
            cache.remove_pod(placed.pop(rng.randrange(len(placed))))
        elif roll < 0.18:
            name = rng.choice(node_names)
            node = codec.convert(node_dict(name, rng), core_v1.Node)
            node.status.allocatable["cpu"] = node.status.capacity["cpu"] = codec.convert(
                rng.choice(["2", "4", "8"]), type(node.status.allocatable["cpu"])
            )
            cache.update_node(node, node)
        elif roll < 0.19:
            name = f"extra-{step}"
            node_names.append(name)
            cache.add_node(codec.convert(node_dict(name, rng), core_v1.Node))
        elif roll < 0.20:
            name = node_names.pop(rng.randrange(len(node_names)))
            cache.remove_node(codec.convert(node_dict(name, rng), core_v1.Node))
        else:
            uid = f"pod-uid-{next(_POD_UIDS)}"
            pod = codec.convert(
                {
                    "metadata": {"name": uid, "namespace": "d", "uid": uid, "resourceVersion": "1"},
                    "spec": {
                        "containers": [
                            {
                                "name": "c",
                                "image": "pause",
                                "resources": {"requests": {"cpu": rng.choice(cpus)}},
                            }
                        ]
                    },
                },
                core_v1.Pod,
            )
            cache.update_snapshot(snapshot)
            nodes = snapshot.node_info_list
            state, reference_state = CycleState(), CycleState()
            got, got_diagnosis = reusing.find_nodes_that_fit(state, pod, nodes)
            want, want_diagnosis = reference.find_nodes_that_fit(reference_state, pod, nodes)
            assert [n.name for n in got] == [n.name for n in want], f"step {step}"
            assert got_diagnosis.evaluated_nodes == want_diagnosis.evaluated_nodes
            assert reusing._next_start_node_index == reference._next_start_node_index
            if not want:
                assert got_diagnosis.node_to_status == want_diagnosis.node_to_status
                continue
            host = reusing.pick_host(state, pod, got, rng)
            status = reference.run_pre_score_plugins(reference_state, pod, want)
            assert framework.is_success(status)
            totals = dict(
                zip(
                    [n.name for n in want],
                    reference.total_scores(reference_state, pod, want),
                    strict=True,
                )
            )
            assert totals[host] == max(totals.values()), f"step {step}"
            kept = verdict_cache.attempt_verdicts(state)
            picks += kept is not None and kept.kept_walk is not None
            assumed = codec.clone(pod)
            assumed.spec.node_name = host
            cache.assume_pod(assumed)
            placed.append(assumed)
    # A history where nothing was kept would prove nothing.
    assert picks > 1000
    assert reusing_calls["filter"] < reference_calls["filter"] / 10, (
        reusing_calls,
        reference_calls,
    )
    assert reusing_calls["score"] < reference_calls["score"] / 5


def test_kept_totals_belong_to_the_score_plugins_that_made_them() -> None:
    """Totals kept for one set of Score plugins and weights are not read for another."""
    kept = KeptPositions(4)
    kept.score_with((("NodeResourcesFit", 1),))
    for position in (0, 2, 3):
        kept.found(position, feasible=True)
    kept.found(1, feasible=False)
    kept.scored(0, 50)
    kept.scored(2, 70)
    assert kept.unscored == [3] and kept.by_score == {50: [0], 70: [2]}
    kept.score_with((("NodeResourcesFit", 1),))  # the same: kept
    assert kept.by_score == {50: [0], 70: [2]}
    kept.score_with((("NodeResourcesFit", 2),))
    assert kept.unscored == [0, 2, 3] and kept.by_score == {} and kept.score_at == {}
    kept.forget(2)
    assert kept.unscored == [0, 3] and kept.unknown == [2] and kept.feasible == [0, 3]


# --- partitions and shares ---------------------------------------------------------------


def partitioned_device(index: int, rng: random.Random) -> dict[str, Any]:
    """A device that may consume its pool's counters (KEP-4815) or be shared (KEP-5075)."""
    found = _plain_device(index, rng)
    roll = rng.random()
    if roll < 0.4:
        found["consumesCounters"] = [{"counterSet": "gpu", "counters": {"mem": {"value": "1"}}}]
    elif roll < 0.6:
        found["allowMultipleAllocations"] = True
        found["capacity"] = {
            "bw": {"value": "3", "requestPolicy": {"default": "1", "validRange": {"min": "1"}}}
        }
    return found


def slice_with_counters(
    name: str, driver: str, pool: str, devices: list[dict[str, Any]], **placement: Any
) -> dict[str, Any]:
    """`slice_dict`, with a counter set holding 2 of "mem" when some device consumes it."""
    found = _plain_slice_dict(name, driver, pool, devices, **placement)
    if any(d.get("consumesCounters") for d in devices):
        found["spec"]["sharedCounters"] = [{"name": "gpu", "counters": {"mem": {"value": "2"}}}]
    return found


_plain_device = device
_plain_slice_dict = slice_dict


async def run_history(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> tuple[Cluster, list[resource_v1.DeviceRequestAllocationResult]]:
    """A seed's history, and every device result Reserve gave out along it."""
    reserved: list[resource_v1.DeviceRequestAllocationResult] = []
    signal = DraManager.signal_claim_pending_allocation

    def signal_and_keep(self: DraManager, uid: str, claim: resource_v1.ResourceClaim) -> None:
        assert claim.status.allocation is not None
        reserved.extend(claim.status.allocation.devices.results)
        signal(self, uid, claim)

    monkeypatch.setattr(DraManager, "signal_claim_pending_allocation", signal_and_keep)
    cluster = Cluster(random.Random(seed))
    for _ in range(STEPS):
        await cluster.step()
    return cluster, reserved


# Histories that reuse enough verdicts to prove something (decisions agree for seeds 0-7;
# seeds 2 and 7 reuse too few since the history also changes DeviceTaintRules).
@pytest.mark.parametrize("seed", [0, 1, 3])
async def test_reuse_with_partitions_and_shares(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same, with devices that consume counters (one partition taken can leave another
    unusable) and shared devices (taken by up to three pods): each decision must still be
    the same with and without reuse."""
    monkeypatch.setitem(globals(), "device", partitioned_device)
    monkeypatch.setitem(globals(), "slice_dict", slice_with_counters)
    cluster, reserved = await run_history(seed, monkeypatch)
    assert cluster.attempts > 250 and cluster.reserved > 70
    assert cluster.reused_feasible > 50
    # The history exercised both: shares and partitions were reserved.
    consumers = {
        (s.spec.driver, s.spec.pool.name, d.name)
        for s in cluster.slices.values()
        for d in s.spec.devices
        if d.consumes_counters
    }
    assert sum(r.share_id is not None for r in reserved) >= 2
    assert sum((r.driver, r.pool, r.device) in consumers for r in reserved) >= 2


# Histories that give out the per-device pool's devices and reuse verdicts (decisions agree
# with and without reuse for every seed tried; most histories never reach for the pool).
@pytest.mark.parametrize("seed", [1, 3, 5])
async def test_reuse_with_devices_placed_one_by_one(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same, with a perDeviceNodeSelection pool beside the others: a device reachable
    from one node, one reachable from a zone's nodes, one from every node."""
    monkeypatch.setitem(globals(), "PER_DEVICE_SLICE", True)
    cluster, reserved = await run_history(seed, monkeypatch)
    assert cluster.attempts > 200 and cluster.reserved > 50
    assert cluster.reused_feasible > 50
    # The history gave out devices of the per-device pool.
    assert sum(r.pool == "nic-a-each" for r in reserved) >= 2
