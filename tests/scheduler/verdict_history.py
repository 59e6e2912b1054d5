"""Random histories of what a cluster produces, run through two frameworks of the default
profile that share one cache and one DraManager: one reuses the verdicts and scores of
earlier attempts for pods of the same spec (`framework.VerdictCache`), the other filters
and scores every node each time (`test_verdict_reuse`).

Pods are reserved, written (PreBind), bound, failed and deleted; devices of node-local and
shared pools are taken and freed, their binding conditions met or failed; nodes,
DeviceClasses, ResourceSlices and DeviceTaintRules change. Every attempt must find the same
feasible nodes, the same rejection of every other node and the same scores in both, and
nothing reserved may be a tainted device or take more than the devices have. No servers:
informer events are the DraManager's and the cache's handlers called directly.
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
import random
from collections.abc import Callable
from typing import Any

from drasim.common import codec, device_taints
from drasim.common.api import core_v1, meta_v1, resource_v1
from drasim.scheduler import framework
from drasim.scheduler.cache import Cache, Snapshot
from drasim.scheduler.dra_manager import DraManager
from drasim.scheduler.framework import CycleState, NodeInfo, verdict_cache
from drasim.scheduler.server import new_default_framework
from tests.scheduler import history_objects as objects
from tests.scheduler.framework_attempt import Outcome, attempt, count_calls
from tests.scheduler.history_objects import (
    CLASSES,
    DEVICE_PLUGIN_NODE,
    DRIVER,
    NIC_DRIVER,
    NOTHING,
    Features,
)

# Nodes stay below framework.MIN_FEASIBLE_NODES_TO_FIND, so that every attempt filters
# every node: with more, Filter stops early at a rotating index and the two frameworks
# would look at different nodes.
MAX_NODES = 16
# Pod UIDs unique in the process, as in a cluster: `framework.pod_resource_request` keeps
# the requests of a (UID, resourceVersion) for every later test.
POD_UIDS = itertools.count()

# --- the cluster and its history ---------------------------------------------------------


@dataclasses.dataclass
class Placed:
    """A pod Reserve placed on a node, followed through binding and deletion."""

    pod: core_v1.Pod  # the assumed copy, `spec.nodeName` set
    state: CycleState  # the reusing framework's attempt, for Unreserve
    in_flight: list[resource_v1.ResourceClaim]  # Reserve's in-flight allocations
    # The pools' generations when Reserve allocated (`objects.overcommitted`).
    generations: dict[tuple[str, str], int]
    user_claim: resource_v1.ResourceClaim | None = None  # as stored, if the pod has one
    stage: str = "reserved"  # then "unreserved", "written", "bound", "deleted"
    stored: list[resource_v1.ResourceClaim] = dataclasses.field(default_factory=list)
    claims_informed: bool = False  # the informer delivered the written claims
    # PreBind waits: a written claim's device has binding conditions not yet True.
    waiting: bool = False


class Cluster:
    """The cache, the DraManager and both frameworks, plus the objects the informers
    would hold, changed by random steps."""

    def __init__(self, rng: random.Random, features: Features) -> None:
        self.rng = rng
        self.features = features
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
        self.deleted_generations: dict[str, int] = {}  # slice name -> its last generation
        self.classes: dict[str, resource_v1.DeviceClass] = {}
        self.rules: dict[str, resource_v1.DeviceTaintRule] = {}
        self.placed: list[Placed] = []
        self.specs = [objects.random_pod_spec(rng, features) for _ in range(rng.randint(6, 10))]
        self.specs += objects.feature_specs(features)
        self.serial = 0
        self.attempts = self.feasible = self.scored = self.reserved = self.reused_feasible = 0
        self.reused_for_claims_alone = 0
        # Every device result Reserve gave out, and how many bindings failed.
        self.reserved_results: list[resource_v1.DeviceRequestAllocationResult] = []
        self.binding_failures = 0

        for i in range(rng.randint(6, 12)):
            self.add_node(f"node-{i}", slice_devices=rng.choice([0, 2, 3, 4, 4, 6]))
        self.add_node(DEVICE_PLUGIN_NODE, slice_devices=0)
        for name, (_, selector) in CLASSES.items():
            if name != "class-3":
                self.set_class(name, selector)
        self.set_slice(
            objects.slice_dict("nic-all", NIC_DRIVER, "nic-all", self.devices(2), allNodes=True)
        )
        zone_a = {
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
            ]
        }
        self.set_slice(
            objects.slice_dict(
                "nic-zone", NIC_DRIVER, "nic-zone", self.devices(2), nodeSelector=zone_a
            )
        )
        if features.per_device_slice:
            # Each device says which nodes reach it: one node, a zone, every node.
            each = [
                {"name": "dev-0", "nodeName": "node-0"},
                {"name": "dev-1", "nodeSelector": zone_a},
                {"name": "dev-2", "allNodes": True},
            ]
            self.set_slice(
                objects.slice_dict(
                    "nic-a-each", NIC_DRIVER, "nic-a-each", each, perDeviceNodeSelection=True
                )
            )

    def devices(self, count: int) -> list[dict[str, Any]]:
        return objects.devices(count, self.rng, self.features)

    def next_serial(self) -> int:
        self.serial += 1
        return self.serial

    # -- informer events: nodes, classes, slices --

    def add_node(self, name: str, slice_devices: int) -> None:
        node = codec.convert(objects.node_dict(name, self.rng), core_v1.Node)
        self.nodes[name] = node
        self.cache.add_node(node)
        if slice_devices:
            self.set_slice(
                objects.slice_dict(
                    f"{name}-slice", DRIVER, name, self.devices(slice_devices), nodeName=name
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
        new = codec.convert(objects.class_dict(name, selector), resource_v1.DeviceClass)
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
            found = self.devices(self.rng.randint(1, 4))
            raw = objects.slice_dict(slice_name, DRIVER, name, found, nodeName=name)
            # A pool published again after its deletion starts past its last generation,
            # as a driver's does: allocations made on the old devices are outdated.
            raw["spec"]["pool"]["generation"] = self.deleted_generations.get(slice_name, 0) + 1
            self.set_slice(raw)
            return
        if slice_name not in self.slices or self.rng.random() < 0.3:
            slice_name = self.rng.choice(["nic-all", "nic-zone"])
        elif self.rng.random() < 0.25:
            deleted = self.slices.pop(slice_name)
            self.deleted_generations[slice_name] = deleted.spec.pool.generation
            self.dra.on_slice_delete(deleted)
            return
        raw = codec.to_builtins(self.slices[slice_name])
        raw["spec"]["pool"]["generation"] += 1
        raw["metadata"]["resourceVersion"] = str(int(raw["metadata"]["resourceVersion"]) + 1)
        raw["spec"]["devices"] = self.devices(self.rng.randint(1, 4))
        raw["spec"]["sharedCounters"] = objects.shared_counters(raw["spec"]["devices"])
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

    def new_pod(self, spec: dict[str, Any]) -> core_v1.Pod:
        """A pod of `spec`; for a spec with a user claim, the user creates the claim first.
        Each pod gets a hostname and container names of its own, as a Job's pods do: no
        plugin reads them, so pods of one spec still share verdicts (by signature)."""
        n = self.next_serial()
        spec["hostname"] = f"pod-{n}"
        for container in [*spec.get("initContainers", ()), *spec["containers"]]:
            container["name"] = f"{container['name']}-{n}"
        uid = f"pod-uid-{next(POD_UIDS)}"
        claim_name = f"pod-{n}-{objects.POD_CLAIM}"
        if objects.CLAIM_SPEC_KEY in spec:
            raw = objects.claim_dict(
                claim_name, f"claim-uid-{claim_name}", spec[objects.CLAIM_SPEC_KEY]
            )
            self.dra.on_claim_add(codec.convert(raw, resource_v1.ResourceClaim))
        return codec.convert(objects.pod_dict(f"pod-{n}", uid, spec, claim_name), core_v1.Pod)

    def user_claim(self, pod: core_v1.Pod) -> resource_v1.ResourceClaim | None:
        if not pod.spec.resource_claims:
            return None
        name = pod.spec.resource_claims[0].resource_claim_name
        assert name is not None
        return self.dra.get_claim(pod.metadata.namespace, name)

    def compare(self, pod: core_v1.Pod, state: CycleState) -> tuple[Outcome, list[NodeInfo]]:
        """One attempt in both frameworks, compared: the reusing one's outcome and the
        feasible nodes."""
        self.cache.update_snapshot(self.snapshot)
        nodes = self.snapshot.node_info_list
        assert len(nodes) < framework.MIN_FEASIBLE_NODES_TO_FIND
        reference_state = CycleState()
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
        if got.feasible and not name_all and verdict_cache.attempt_verdicts(state) is not None:
            assert not got.rejected and not got.unschedulable_plugins
            want = dataclasses.replace(
                want, rejected={}, message=got.message, unschedulable_plugins=frozenset()
            )
        assert got == want, f"attempt {self.attempts} of {pod.metadata.name}: {pod.spec}"
        assert verdict_cache.attempt_verdicts(reference_state) is None
        self.attempts += 1
        self.feasible += bool(got.feasible)
        self.scored += bool(got.scores)
        kept = verdict_cache.attempt_verdicts(state)
        if kept is not None:
            reused = sum(kept.reused_verdict(name) for name in got.feasible)
            self.reused_feasible += reused
            if pod.spec.resource_claims and not any(
                c.resources.limits for c in pod.spec.containers
            ):  # signed by their claims' specs: any verdict kept, feasible or not
                names = (n.node.metadata.name for n in nodes)
                self.reused_for_claims_alone += sum(map(kept.reused_verdict, names))
        return got, feasible

    async def schedule(self) -> None:
        """One attempt in both frameworks, compared; then Reserve on a feasible node."""
        pod = self.new_pod(copy.deepcopy(self.rng.choice(self.specs)))
        state = CycleState()
        _, feasible = self.compare(pod, state)
        if not feasible:
            if (claim := self.user_claim(pod)) is not None:
                self.dra.on_claim_delete(claim)  # the user gives up
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
        generations = {
            (s.spec.driver, s.spec.pool.name): s.spec.pool.generation for s in self.slices.values()
        }
        placed = Placed(assumed, state, in_flight, generations, self.user_claim(pod))
        self.placed.append(placed)
        self.reserved += 1
        for claim in in_flight:
            assert claim.status.allocation is not None
            self.reserved_results += claim.status.allocation.devices.results
            self.assert_untainted(claim.status.allocation)
        self.assert_not_overcommitted()

    # -- what must hold --

    def assert_untainted(self, allocation: resource_v1.AllocationResult) -> None:
        """No pod tolerates a device taint: no device Reserve gave out may have one, from
        its slice or a DeviceTaintRule (admin access aside)."""
        devices = {
            (s.spec.driver, s.spec.pool.name, d.name): d
            for s in self.slices.values()
            for d in s.spec.devices
        }
        for r in allocation.devices.results:
            if r.admin_access:
                continue
            taints = list(devices[(r.driver, r.pool, r.device)].taints)
            taints += [
                rule.spec.taint
                for rule in self.rules.values()
                if device_taints.rule_matches_device(rule, r.driver, r.pool, r.device)
            ]
            assert not taints, f"{r} is tainted: {taints}"

    def assert_not_overcommitted(self) -> None:
        held = []
        for p in self.placed:
            claims = p.in_flight if p.stage == "reserved" else p.stored
            held += [(p.generations, c.status.allocation) for c in claims if c.status.allocation]
        problems = objects.overcommitted(self.slices.values(), held)
        assert not problems, problems

    # -- the binding cycle and the informers --

    @staticmethod
    def is_user_claim(placed: Placed, claim: resource_v1.ResourceClaim) -> bool:
        return (
            placed.user_claim is not None and claim.metadata.uid == placed.user_claim.metadata.uid
        )

    def store_claim(self, old: resource_v1.ResourceClaim, new: resource_v1.ResourceClaim) -> None:
        """A write of the scheduler's own, stored at once or seen through the informer."""
        if self.rng.random() < 0.5:
            self.dra.assume_claim_after_api_call(new)
        else:
            self.dra.on_claim_update(old, new)

    def pre_bind(self, placed: Placed) -> None:
        """Write the in-flight allocations as PreBind does: either stored at once as the
        scheduler's own write (the informer's copy comes later), or the informer brings
        the created claim and its allocation before the in-flight entry goes. PreBind then
        waits while a device's binding conditions are not all True."""
        for pending in placed.in_flight:
            n = self.next_serial()
            written = codec.clone(pending)
            written.status.reserved_for = [
                resource_v1.ResourceClaimConsumerReference(
                    resource="pods", name=placed.pod.metadata.name, uid=placed.pod.metadata.uid
                )
            ]
            if self.is_user_claim(placed, pending):
                assert placed.user_claim is not None
                written.metadata.resource_version = _next_version(placed.user_claim)
                self.store_claim(placed.user_claim, written)
            else:
                written.metadata.name = f"{placed.pod.metadata.name}-extended-resources-{n}"
                written.metadata.uid = f"claim-uid-{n}"
                written.metadata.resource_version = "2"
                created = codec.clone(written)
                created.metadata.resource_version = "1"
                created.status = resource_v1.ResourceClaimStatus()
                if self.rng.random() < 0.5:
                    self.dra.assume_claim_after_api_call(written)
                else:
                    self.dra.on_claim_add(created)
                    self.dra.on_claim_update(created, written)
            self.dra.remove_claim_pending_allocation(pending.metadata.uid)
            placed.stored.append(written)
        placed.stage = "written"
        placed.waiting = any(
            r.binding_conditions
            for c in placed.stored
            if c.status.allocation is not None
            for r in c.status.allocation.devices.results
        )
        self.assert_not_overcommitted()

    def update_stored(
        self, placed: Placed, change: Callable[[resource_v1.ResourceClaim], None]
    ) -> None:
        """A newer version of each written claim, as the informer delivers it."""
        for i, old in enumerate(placed.stored):
            new = codec.clone(old)
            new.metadata.resource_version = _next_version(old)
            change(new)
            self.dra.on_claim_update(old, new)
            placed.stored[i] = new

    def set_binding_conditions(self, placed: Placed, condition: str) -> None:
        """The driver reports `condition` True for each device with binding conditions."""

        def report(claim: resource_v1.ResourceClaim) -> None:
            assert claim.status.allocation is not None
            claim.status.devices = [
                resource_v1.AllocatedDeviceStatus(
                    driver=r.driver,
                    pool=r.pool,
                    device=r.device,
                    share_id=r.share_id,
                    conditions=[
                        meta_v1.Condition(
                            type=condition,
                            status="True",
                            reason="Test",
                            last_transition_time="2026-01-01T00:00:00Z",
                        )
                    ],
                )
                for r in claim.status.allocation.devices.results
                if r.binding_conditions
            ]

        self.update_stored(placed, report)

    def attach(self, placed: Placed) -> None:
        """Every binding condition becomes True: PreBind goes on."""
        self.set_binding_conditions(placed, objects.ATTACHED)
        placed.waiting = False

    async def fail_binding(self, placed: Placed) -> None:
        """A binding failure condition becomes True: PreBind fails and the framework
        unreserves (the special claim deleted, the user claim no longer reserved) and
        forgets the pod. Its retry finds its user claim, allocated still, usable on no node;
        PostFilter deallocates it, and the pod leaves the history."""
        self.set_binding_conditions(placed, objects.ATTACH_FAILED)
        self.binding_failures += 1
        user_claim = None
        for claim in placed.stored:
            if self.is_user_claim(placed, claim):
                user_claim = claim
            else:
                self.dra.on_claim_delete(claim)
        self.cache.forget_pod(placed.pod)
        self.placed.remove(placed)
        if user_claim is None:
            return
        unreserved = codec.clone(user_claim)
        unreserved.metadata.resource_version = _next_version(user_claim)
        unreserved.status.reserved_for = []
        self.store_claim(user_claim, unreserved)
        retry = codec.clone(placed.pod)
        retry.spec.node_name = None
        got, _ = self.compare(retry, CycleState())
        if unreserved.status.devices:  # its own binding failed, not only the special claim's
            assert not got.feasible, f"{retry.metadata.name} may use a claim whose binding failed"
        deallocated = codec.clone(unreserved)
        deallocated.metadata.resource_version = _next_version(unreserved)
        deallocated.status = resource_v1.ResourceClaimStatus()
        self.dra.on_claim_update(unreserved, deallocated)
        self.dra.on_claim_delete(deallocated)

    def inform_claims(self, placed: Placed) -> None:
        """The claim informer catches up with a newer version (e.g. a driver's update)."""
        self.update_stored(placed, lambda claim: None)
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
        if placed.user_claim is not None:
            self.dra.on_claim_delete(placed.user_claim)

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
            elif placed.waiting:
                steps.append((1.5, lambda p=placed: self.attach(p)))
                steps.append((0.5, lambda p=placed: self.fail_binding(p)))
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


def _next_version(claim: resource_v1.ResourceClaim) -> str:
    return str(int(claim.metadata.resource_version) + 1)
