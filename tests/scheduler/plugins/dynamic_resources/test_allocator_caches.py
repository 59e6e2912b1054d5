"""The allocator's caches never change an answer.

`test_verdict_reuse.py` compares two frameworks that share one DraManager, hence one
allocator `Snapshot` with its node views, CEL results and kept first-free answers: a stale
entry there would fool both alike. Here ONE long-lived DraManager goes through a random
history of what the scheduler and the informers do to it (Reserve, Unreserve, PreBind with
and without a timed-out write, informer claim events old and new, slices republished or
deleted, device taints, classes, node labels), and after every step each node's answer for
a few claims from `manager.allocator()` (a new Allocator per attempt over the same Snapshot
while no slice changes, as PreFilter builds it) must equal the answer of an allocator built
from scratch over a plain copy of the taken devices.
"""

from __future__ import annotations

import dataclasses
import itertools
import random
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from drasim.common import codec
from drasim.common.api import core_v1, resource_v1
from drasim.scheduler.dra_manager import ClaimKey, DraManager, claim_devices
from drasim.scheduler.plugins.dynamic_resources import allocator
from drasim.scheduler.plugins.dynamic_resources.allocator import Allocator, AllocatorError

GPU = "gpu.example.com"
NIC = "nic.example.com"
NAMESPACE = "default"
NODES = [f"node-{i}" for i in range(5)]
NO_SCHEDULE = {"key": "broken", "value": "yes", "effect": "NoSchedule"}
ZONE_A = {
    "nodeSelectorTerms": [
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
    ]
}
# class name -> the selectors it starts with, and those it may be switched to.
CLASSES: dict[str, tuple[list[str], list[str]]] = {
    "gpu": ([f'device.driver == "{GPU}"'], [f'device.driver == "{GPU}"', "false"]),
    "gpu-low": (
        [f'device.driver == "{GPU}"', f'device.attributes["{GPU}"].index < 2'],
        [f'device.driver == "{GPU}"', f'device.attributes["{GPU}"].index >= 2'],
    ),
    "model-a": (
        [f'device.driver == "{GPU}" && device.attributes["{GPU}"].model == "a"'],
        [f'device.driver == "{GPU}" && device.attributes["{GPU}"].model == "b"'],
    ),
    "nic": ([f'device.driver == "{NIC}"'], [f'device.driver == "{NIC}"', "false"]),
    "any": ([], []),  # never changed: the probe below whose selector may fail uses it
}


# --- objects -------------------------------------------------------------------------------


def make_node(name: str, zone: str) -> core_v1.Node:
    raw = {"metadata": {"name": name, "uid": f"uid-{name}", "labels": {"zone": zone}}}
    return codec.convert(raw, core_v1.Node)


def make_devices(
    rng: random.Random, prefix: str, count: int, taint: bool = False
) -> list[dict[str, Any]]:
    """Devices named by position (so a republished pool offers allocated names again),
    with an index and a model to select on; with `taint`, maybe one of them tainted (a
    tainted device stops the node's first-free answers being kept, so not too often)."""
    found = [
        {
            "name": f"{prefix}{i}",
            "attributes": {"index": {"int": i}, "model": {"string": rng.choice("ab")}},
        }
        for i in range(count)
    ]
    if taint and rng.random() < 0.3:
        rng.choice(found)["taints"] = [dict(NO_SCHEDULE)]
    return found


def make_slice(
    name: str,
    driver: str,
    pool: str,
    devices: list[dict[str, Any]],
    *,
    generation: int = 1,
    count: int = 1,
    **placement: Any,
) -> resource_v1.ResourceSlice:
    raw = {
        "metadata": {"name": name},
        "spec": {
            "driver": driver,
            "pool": {"name": pool, "generation": generation, "resourceSliceCount": count},
            "devices": devices,
            **placement,
        },
    }
    return codec.convert(raw, resource_v1.ResourceSlice)


def make_class(name: str, expressions: Sequence[str]) -> resource_v1.DeviceClass:
    raw = {
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": e}} for e in expressions]},
    }
    return codec.convert(raw, resource_v1.DeviceClass)


def exact(name: str, cls: str, count: int, *selectors: str, **more: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"deviceClassName": cls, "count": count, **more}
    if selectors:
        body["selectors"] = [{"cel": {"expression": e}} for e in selectors]
    return {"name": name, "exactly": body}


def make_claim(name: str, uid: str, requests: list[dict[str, Any]]) -> resource_v1.ResourceClaim:
    raw = {
        "metadata": {"name": name, "namespace": NAMESPACE, "uid": uid, "resourceVersion": "1"},
        "spec": {"devices": {"requests": requests}},
    }
    return codec.convert(raw, resource_v1.ResourceClaim)


def simple_requests(rng: random.Random) -> list[dict[str, Any]]:
    """The special claim's shape (`Allocator.find_one`): one ExactCount request."""
    return [exact("r", rng.choice(["gpu", "gpu-low", "model-a", "nic"]), rng.randint(1, 3))]


# The claims asked about on every node after every step: the special-claim shape (the
# first-free cache) and general ones (the search over the node view's cached matches).
SIMPLE_PROBES: list[list[dict[str, Any]]] = [
    [exact("r", "gpu", 1)],
    [exact("r", "gpu", 2)],
    [exact("r", "gpu-low", 1)],
    [exact("r", "model-a", 3)],
    [exact("r", "nic", 1)],
    [exact("r", "gpu", 1, f'device.attributes["{GPU}"].model == "b"')],
    # Fails on every free NIC device (no such attribute): the CEL error path.
    [exact("r", "any", 1, f'device.attributes["{GPU}"].index >= 1')],
    # Tolerates the taint: never kept (a tainted view), but the answer must still hold.
    [exact("r", "gpu", 2, tolerations=[{"operator": "Exists"}])],
]
GENERAL_PROBES: list[list[dict[str, Any]]] = [
    [exact("g", "gpu", 1), exact("n", "nic", 1)],
    [
        {
            "name": "f",
            "firstAvailable": [
                {"name": "three", "deviceClassName": "gpu", "count": 3},
                {"name": "low", "deviceClassName": "gpu-low", "count": 1},
            ],
        }
    ],
    [{"name": "all", "exactly": {"deviceClassName": "gpu-low", "allocationMode": "All"}}],
    [exact("a", "model-a", 1), exact("b", "gpu", 2, f'device.attributes["{GPU}"].index > 0')],
]


# --- answers -------------------------------------------------------------------------------

Answer = tuple[str, Any]


def answer(call: Callable[[], list[allocator.Allocation] | None]) -> Answer:
    """What an allocator call decided, comparable across allocators."""
    try:
        found = call()
    except AllocatorError as err:
        return "error", str(err)
    if found is None:
        return "infeasible", None
    return "found", [codec.to_builtins(allocation.result()) for allocation in found]


@dataclasses.dataclass
class Hits:
    """First-free lookups of the manager's allocators, and how many were answered from the
    kept answer (no `_matching` call below them)."""

    lookups: int = 0
    kept: int = 0
    matching: int = 0


def count_first_free(monkeypatch: pytest.MonkeyPatch) -> Hits:
    """Wrap the allocator's first-free search to count the manager's lookups and hits."""
    hits = Hits()
    find_first_free = Allocator._find_first_free
    matching = Allocator._matching

    def counted_matching(self: Allocator, *args: Any) -> Any:
        hits.matching += 1
        return matching(self, *args)

    def counted_find_first_free(self: Allocator, *args: Any) -> Any:
        before = hits.matching
        result = find_first_free(self, *args)
        if self._pool_versions is not None:
            hits.lookups += 1
            hits.kept += hits.matching == before
        return result

    monkeypatch.setattr(Allocator, "_matching", counted_matching)
    monkeypatch.setattr(Allocator, "_find_first_free", counted_find_first_free)
    return hits


# --- the history ---------------------------------------------------------------------------


@dataclasses.dataclass
class Pending:
    """An in-flight allocation made by Reserve, until PreBind or Unreserve ends it."""

    uid: str  # the claim's, or the special claim's temporary one
    claim: resource_v1.ResourceClaim  # the in-flight copy, allocation set
    user: bool  # a stored user claim; else an in-memory special claim
    held: resource_v1.ResourceClaim | None = None  # created, when writing it timed out


class History:
    """One DraManager and the objects its informers would hold, changed by random steps."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.manager = DraManager()
        self.serial = itertools.count()
        self.nodes = {name: make_node(name, rng.choice("ab")) for name in NODES}
        self.pending: list[Pending] = []
        self.steps: dict[str, int] = {}
        self.reserved = 0
        for name, (selectors, _) in CLASSES.items():
            self.manager.on_class_add(make_class(name, selectors))
        self.generation: dict[str, int] = {}
        for name in self.slice_names():
            self.publish(name)

    def slice_names(self) -> list[str]:
        # node-0's pool has two slices: republishing one leaves it being updated.
        return [
            "node-0-a",
            "node-0-b",
            *(f"{node}-gpus" for node in NODES[1:4]),  # node-4 has no local devices
            "per-device",  # perDeviceNodeSelection: node-1 and node-2's, and a shared one
            "nic-all",  # allNodes
            "nic-zone",  # nodeSelector: node views depend on labels
        ]

    def publish(self, name: str) -> None:
        """Add the slice or republish it with fresh devices, as a new generation of its
        pool; of node-0's pool, one slice catches up with the other's newer generation, or
        leaves the other behind (the pool is being updated meanwhile)."""
        rng = self.rng
        mine = self.generation.get(name, 0)
        newest = 0
        if name.startswith("node-0-"):
            newest = self.generation.get("node-0-b" if name == "node-0-a" else "node-0-a", 0)
        generation = newest if mine < newest else mine + 1
        self.generation[name] = generation
        count = rng.randint(1, 5)
        if name.startswith("node-0-"):
            devices = make_devices(rng, f"{name[-1]}-dev-", count, taint=True)
            new = make_slice(
                name, GPU, "node-0", devices, generation=generation, count=2, nodeName="node-0"
            )
        elif name == "per-device":
            devices = make_devices(rng, "pd-", count + 1)
            for device in devices:
                where = rng.choice(["node-1", "node-2", None])
                if where is None:
                    device["allNodes"] = True
                else:
                    device["nodeName"] = where
            new = make_slice(
                name, GPU, "per-device", devices, generation=generation, perDeviceNodeSelection=True
            )
        elif name == "nic-all":
            new = make_slice(
                name,
                NIC,
                "nic-all",
                make_devices(rng, "nic-", count),
                generation=generation,
                allNodes=True,
            )
        elif name == "nic-zone":
            new = make_slice(
                name,
                NIC,
                "nic-zone",
                make_devices(rng, "nic-", count),
                generation=generation,
                nodeSelector=ZONE_A,
            )
        else:
            node = name.removesuffix("-gpus")
            new = make_slice(
                name,
                GPU,
                node,
                make_devices(rng, "dev-", count, taint=True),
                generation=generation,
                nodeName=node,
            )
        old = self.manager.slices.get(name)
        if old is None:
            self.manager.on_slice_add(new)
        else:
            self.manager.on_slice_update(old, new)

    # -- the scheduler --

    def reserve(self) -> None:
        """Filter every node with the manager's allocator, then Reserve on a random
        feasible one: a stored user claim not allocated yet, or a pod's in-memory special
        claim."""
        rng = self.rng
        n = next(self.serial)
        free_user = [
            c
            for c in self.manager.claims.values()
            if c.status.allocation is None
            and c.metadata.name.startswith("user-")
            and not self.manager.claim_is_pending_allocation(c.metadata.uid)
        ]
        if free_user and rng.random() < 0.4:
            claim, user = rng.choice(free_user), True
        elif rng.random() < 0.2:
            claim = make_claim(f"user-{n}", f"uid-user-{n}", rng.choice(GENERAL_PROBES[:2]))
            self.manager.on_claim_add(claim)
            claim, user = self.manager.claims[(NAMESPACE, claim.metadata.name)], True
        else:
            claim = make_claim("special", f"uid-temporary-{n}", simple_requests(rng))
            user = False
        alloc = self.manager.allocator()
        feasible = []
        for name in NODES:
            try:
                found = alloc.find_one(self.nodes[name], claim)
            except AllocatorError:
                return
            if found is not None:
                feasible.append(found)
        if not feasible:
            return
        self.reserved += 1
        pending = codec.clone(claim)
        pending.status.allocation = rng.choice(feasible)[0].result()
        self.manager.signal_claim_pending_allocation(claim.metadata.uid, pending)
        self.pending.append(Pending(claim.metadata.uid, pending, user))

    def unreserve(self) -> None:
        """Unreserve drops the in-flight allocation (refused while held)."""
        pending = self.rng.choice(self.pending)
        if self.manager.remove_claim_pending_allocation(pending.uid):
            self.pending.remove(pending)
        else:
            assert pending.held is not None

    def pre_bind(self) -> None:
        """Write the allocation, as PreBind does. A user claim is assumed at once or the
        informer brings it first; a special claim is created and its allocation written,
        and the informer's copies come before the in-flight entry goes; or the write
        times out and the in-flight devices stay held."""
        ready = [p for p in self.pending if p.held is None]
        if not ready:
            return
        pending = self.rng.choice(ready)
        manager = self.manager
        if pending.user:
            key = (NAMESPACE, pending.claim.metadata.name)
            old = manager.claims.get(key)
            if old is None or old.metadata.uid != pending.uid:
                # Deleted meanwhile: the write fails, Unreserve drops the allocation.
                assert manager.remove_claim_pending_allocation(pending.uid)
                self.pending.remove(pending)
                return
            written = codec.clone(pending.claim)
            written.metadata.resource_version = str(int(old.metadata.resource_version) + 1)
            if self.rng.random() < 0.5:
                manager.assume_claim_after_api_call(written)
            else:
                manager.on_claim_update(old, written)
            assert manager.remove_claim_pending_allocation(pending.uid)
            self.pending.remove(pending)
            return
        n = next(self.serial)
        created = codec.clone(pending.claim)
        created.status.allocation = None
        created.metadata.name = f"special-{n}"
        created.metadata.uid = f"uid-special-{n}"
        if self.rng.random() < 0.7:
            manager.on_claim_add(created)
        if self.rng.random() < 0.25:
            manager.hold_pending_allocation(pending.uid, NAMESPACE, created.metadata.name)
            assert not manager.remove_claim_pending_allocation(pending.uid)  # PreBind's finally
            pending.held = created
            return
        written = codec.clone(pending.claim)
        written.metadata = codec.clone(created.metadata)
        written.metadata.resource_version = "2"
        manager.on_claim_update(created, written)
        assert manager.remove_claim_pending_allocation(pending.uid)
        self.pending.remove(pending)

    def resolve_hold(self) -> None:
        """The claim cache learns what the timed-out write did: the claim shows up
        allocated, or Unreserve deleted it."""
        held = [p for p in self.pending if p.held is not None]
        if not held:
            return
        pending = self.rng.choice(held)
        assert pending.held is not None
        key = (NAMESPACE, pending.held.metadata.name)
        created = self.manager.claims.get(key, pending.held)
        if self.rng.random() < 0.5:
            written = codec.clone(created)
            written.metadata.resource_version = str(int(created.metadata.resource_version) + 1)
            written.status.allocation = codec.clone(pending.claim.status.allocation)
            self.manager.on_claim_update(created, written)
        else:
            self.manager.on_claim_delete(created)
        assert not self.manager.claim_is_pending_allocation(pending.uid)
        self.pending.remove(pending)

    # -- the claim informer --

    def claim_event(self) -> None:
        """A stored claim changes: a newer version with the same devices (a driver's
        status update), an older one arriving late (ignored), deallocated, allocated
        anew (a relist that skipped the deallocation: old and new devices may overlap),
        or deleted."""
        if not self.manager.claims:
            return
        manager = self.manager
        old = manager.claims[self.rng.choice(sorted(manager.claims))]
        version = int(old.metadata.resource_version)
        new = codec.clone(old)
        kinds = ["newer", "stale", "deallocated", "reallocated", "deleted", "deleted"]
        kind = self.rng.choice(kinds)
        if kind == "deleted":
            manager.on_claim_delete(old)
            self.forget_holds((NAMESPACE, old.metadata.name))
            return
        if kind == "stale":
            if version < 2:
                return
            new.metadata.resource_version = str(version - 1)
            new.status.allocation = None
            manager.on_claim_update(old, new)
            assert manager.claims[(NAMESPACE, old.metadata.name)] is old
            return
        new.metadata.resource_version = str(version + 1)
        if kind == "deallocated":
            new.status.allocation = None
        elif kind == "reallocated":
            if old.status.allocation is None:
                return
            new.status.allocation = None
            others = set(manager.allocated) - claim_devices(old)
            alloc = Allocator(manager.snapshot(), manager.classes, others)
            try:
                found = alloc.allocate(self.nodes[self.rng.choice(NODES)], [new])
            except AllocatorError:  # its class is gone
                return
            if found is None:
                return
            new.status.allocation = found[0]
        manager.on_claim_update(old, new)
        if new.status.allocation is not None:
            self.forget_holds((NAMESPACE, old.metadata.name))

    def forget_holds(self, key: ClaimKey) -> None:
        """Held entries the manager released on this claim event."""
        held = [p for p in self.pending if p.held is not None and p.held.metadata.name == key[1]]
        for pending in held:
            assert not self.manager.claim_is_pending_allocation(pending.uid)
            self.pending.remove(pending)

    # -- slices, classes, nodes --

    def change_slice(self) -> None:
        """A slice deleted, or republished (node-0's two mostly together)."""
        name = self.rng.choice(self.slice_names())
        if name in self.manager.slices and self.rng.random() < 0.2:
            self.manager.on_slice_delete(self.manager.slices[name])
        elif name.startswith("node-0-") and self.rng.random() < 0.7:
            self.publish("node-0-a")
            self.publish("node-0-b")
        else:
            self.publish(name)

    def change_class(self) -> None:
        name = self.rng.choice(sorted(set(CLASSES) - {"any"}))
        first, second = CLASSES[name]
        current = self.manager.classes.get(name)
        if current is None:
            self.manager.on_class_add(make_class(name, first))
        elif self.rng.random() < 0.3:
            self.manager.on_class_delete(current)
        else:
            now = [s.cel.expression for s in current.spec.selectors if s.cel is not None]
            new = make_class(name, second if now == first else first)
            self.manager.on_class_update(current, new)

    def relabel_node(self) -> None:
        """A new Node object with the other zone, as the node informer delivers it."""
        name = self.rng.choice(NODES)
        zone = self.nodes[name].metadata.labels["zone"]
        self.nodes[name] = make_node(name, "b" if zone == "a" else "a")

    def step(self) -> None:
        steps: list[tuple[float, Callable[[], None]]] = [
            (4.0, self.reserve),
            (3.0, self.claim_event),
            (0.6, self.change_slice),
            (0.4, self.change_class),
            (0.8, self.relabel_node),
        ]
        if self.pending:
            steps += [(2.0, self.unreserve), (3.0, self.pre_bind), (1.0, self.resolve_hold)]
        [(_, chosen)] = self.rng.choices(steps, weights=[w for w, _ in steps])
        chosen()
        self.steps[chosen.__name__] = self.steps.get(chosen.__name__, 0) + 1


# --- the comparison ------------------------------------------------------------------------


def from_scratch(manager: DraManager) -> Allocator:
    """An allocator that remembers nothing from earlier steps: a new Snapshot, and the
    taken devices as a plain frozenset. `Allocator.__init__` reads `pool_versions` with
    `getattr(allocated, "pool_versions", None)`: a frozenset has none, so
    `_find_first_free` never keeps an answer (`cacheable` is False) and always walks the
    node's devices; `parts` is absent too, so lookups go to the frozenset itself."""
    snapshot = allocator.Snapshot(list(manager.slices.values()))
    reference = Allocator(snapshot, dict(manager.classes), frozenset(manager.allocated))
    assert reference._pool_versions is None
    return reference


def compare(history: History, probes: list[resource_v1.ResourceClaim]) -> int:
    """Every node, every probe: the manager's allocator (`find_one` for the special-claim
    shape, as Filter calls it, and `find`) against one from scratch. Returns the number
    of comparisons."""
    manager = history.manager
    cached, reference = manager.allocator(), from_scratch(manager)
    compared = 0
    for name in NODES:
        node = history.nodes[name]
        for claim in probes:
            want = answer(lambda: reference.find(node, [claim]))  # noqa: B023
            got = answer(lambda: cached.find_one(node, claim))  # noqa: B023
            assert got == want, (name, claim.metadata.name)
            got = answer(lambda: cached.find(node, [claim]))  # noqa: B023
            assert got == want, (name, claim.metadata.name)
            compared += 2
        # Two claims of one pod: the general search, devices never shared.
        pair = [probes[0], probes[4]]
        want = answer(lambda: reference.find(node, pair))  # noqa: B023
        assert answer(lambda: cached.find(node, pair)) == want, name  # noqa: B023
        compared += 1
        # NodeResourcesFit's capacity and usage, read through the same Snapshot.
        for cls in manager.classes.values():
            got_capacity = allocator.node_device_capacity(
                node, manager.snapshot(), cls, manager.allocated
            )
            want_capacity = allocator.node_device_capacity(
                node, reference._snapshot, cls, reference._allocated
            )
            assert got_capacity == want_capacity, (name, cls.metadata.name)
            compared += 1
    # The reference kept nothing.
    for _, view in reference._snapshot._views.values():
        assert not view.first_free
    return compared


def new_probes() -> list[resource_v1.ResourceClaim]:
    return [
        make_claim(f"probe-{i}", f"uid-probe-{i}", requests)
        for i, requests in enumerate(SIMPLE_PROBES + GENERAL_PROBES)
    ]


SEEDS = range(5)
STEPS = 250


def run_history(seed: int, steps: int, monkeypatch: pytest.MonkeyPatch) -> None:
    hits = count_first_free(monkeypatch)
    history = History(random.Random(seed))
    probes = new_probes()
    compared = compare(history, probes)
    snapshots_kept = views_kept = 0
    snapshot = history.manager.snapshot()
    views = {name: snapshot._views.get(name) for name in NODES}
    for _ in range(steps):
        history.step()
        compared += compare(history, probes)
        current = history.manager.snapshot()
        if current is snapshot:
            snapshots_kept += 1
            views_kept += sum(current._views.get(n) is views[n] for n in NODES)
        snapshot = current
        views = {name: snapshot._views.get(name) for name in NODES}
    print(
        f"seed {seed}: {compared} comparisons; steps {history.steps}, "
        f"{history.reserved} reserved; first-free lookups {hits.lookups}, {hits.kept} "
        f"answered from the kept answer; snapshot kept {snapshots_kept} steps, node views "
        f"kept {views_kept}"
    )
    # A history in which the caches never answer proves nothing.
    assert hits.kept > 0.25 * hits.lookups
    assert snapshots_kept > steps // 2 and views_kept > steps
    assert history.reserved > 12 and history.steps.get("resolve_hold", 0) > 0


@pytest.mark.parametrize("seed", SEEDS)
def test_cached_answers_equal_answers_from_scratch(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_history(seed, STEPS, monkeypatch)
