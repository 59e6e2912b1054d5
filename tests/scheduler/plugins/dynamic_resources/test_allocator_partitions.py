"""The allocator with partitionable devices (shared counters, KEP-4815), consumable capacity
(shares of `allowMultipleAllocations` devices, KEP-5075) and admin access (KEP-5018),
checked against a brute-force search over every assignment of small random cases.

The reference walks the assignments in upstream's search order (claims, requests, then
subrequests in order; devices of one request as ascending combinations) and checks each
with rules written apart from the allocator: picks in order, a device taken once unless
shared or picked for admin access, every counter of a pool left non-negative, every
share's rounded consumption within the device's capacity.
"""

from __future__ import annotations

import itertools
import math
import random
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import pytest

from drasim.common import codec
from drasim.common.api import core_v1, meta_v1, resource_v1
from drasim.common.quantity import Quantity
from drasim.scheduler.dra_manager import DraManager
from drasim.scheduler.plugins.dynamic_resources import search
from drasim.scheduler.plugins.dynamic_resources.allocator import Allocator, AllocatorError

DRIVER = "gpu.example.com"
NODE = "worker"
CLASSES = {
    "gpu": codec.convert(
        {"metadata": {"name": "gpu"}, "spec": {"selectors": []}}, resource_v1.DeviceClass
    ),
    "part": codec.convert(
        {
            "metadata": {"name": "part"},
            "spec": {"selectors": [{"cel": {"expression": f"device.attributes['{DRIVER}'].part"}}]},
        },
        resource_v1.DeviceClass,
    ),
}


@dataclass
class DeviceSpec:
    name: str
    part: bool
    counters: dict[str, int]  # counter in set "s" → consumption
    multi: bool
    capacity: int | None  # "bw" capacity of a shared device
    step: int | None  # its requestPolicy validRange step (min = step)
    group: int | None = None  # attribute "g", for claim constraints


@dataclass
class RequestSpec:
    name: str
    cls: str
    count: int
    mode: str  # ExactCount or All
    admin: bool
    bw: int | Fraction | None  # capacity.requests["bw"]
    subs: list[RequestSpec] | None = None


def _device_wire(d: DeviceSpec) -> dict[str, Any]:
    wire: dict[str, Any] = {"name": d.name, "attributes": {"part": {"bool": d.part}}}
    if d.group is not None:
        wire["attributes"]["g"] = {"int": d.group}
    if d.counters:
        wire["consumesCounters"] = [
            {"counterSet": "s", "counters": {k: {"value": str(v)} for k, v in d.counters.items()}}
        ]
    if d.multi:
        wire["allowMultipleAllocations"] = True
    if d.capacity is not None:
        cap: dict[str, Any] = {"value": str(d.capacity)}
        if d.multi and d.step is not None:
            cap["requestPolicy"] = {
                "default": str(d.step),
                "validRange": {"min": str(d.step), "step": str(d.step)},
            }
        wire["capacity"] = {"bw": cap}
    return wire


def _slices(devices: list[DeviceSpec], counters: dict[str, int]) -> list[resource_v1.ResourceSlice]:
    """The devices in one slice, the counter set in a second slice of the same pool."""
    pool = {"name": NODE, "generation": 1, "resourceSliceCount": 2}
    return [
        codec.convert(
            {
                "metadata": {"name": "devices"},
                "spec": {
                    "driver": DRIVER,
                    "pool": pool,
                    "nodeName": NODE,
                    "devices": [_device_wire(d) for d in devices],
                },
            },
            resource_v1.ResourceSlice,
        ),
        codec.convert(
            {
                "metadata": {"name": "counters"},
                "spec": {
                    "driver": DRIVER,
                    "pool": pool,
                    "nodeName": NODE,
                    "sharedCounters": [
                        {
                            "name": "s",
                            "counters": {k: {"value": str(v)} for k, v in counters.items()},
                        }
                    ],
                },
            },
            resource_v1.ResourceSlice,
        ),
    ]


def _request_wire(r: RequestSpec) -> dict[str, Any]:
    body: dict[str, Any] = {"deviceClassName": r.cls, "allocationMode": r.mode}
    if r.mode == "ExactCount":
        body["count"] = r.count
    if r.admin:
        body["adminAccess"] = True
    if r.bw is not None:
        body["capacity"] = {"requests": {"bw": str(float(r.bw))}}
    if r.subs is not None:
        subs = []
        for s in r.subs:
            sub = {"name": s.name, **_request_wire(s)["exactly"]}
            sub.pop("adminAccess", None)
            subs.append(sub)
        return {"name": r.name, "firstAvailable": subs}
    return {"name": r.name, "exactly": body}


@dataclass
class ConstraintSpec:
    distinct: bool
    requests: list[str]  # empty: all of the claim's


def _claim(
    name: str, requests: list[RequestSpec], constraint: ConstraintSpec | None = None
) -> resource_v1.ResourceClaim:
    devices: dict[str, Any] = {"requests": [_request_wire(r) for r in requests]}
    if constraint is not None:
        kind = "distinctAttribute" if constraint.distinct else "matchAttribute"
        devices["constraints"] = [{"requests": constraint.requests, kind: f"{DRIVER}/g"}]
    return codec.convert(
        {
            "metadata": {"name": name, "namespace": "default", "uid": name},
            "spec": {"devices": devices},
        },
        resource_v1.ResourceClaim,
    )


# --- The reference ---------------------------------------------------------------------


def _consumed(d: DeviceSpec, bw: int | None) -> int:
    """A share's consumption of "bw": the request rounded up to the step (min = step), or
    the default (one step), or without a policy the request or the whole capacity."""
    assert d.capacity is not None
    if d.step is None:
        return d.capacity if bw is None else bw
    if bw is None:
        return d.step
    return max(d.step, math.ceil(bw / d.step) * d.step)


def _matches(r: RequestSpec, d: DeviceSpec) -> bool:
    if r.cls == "part" and not d.part:
        return False
    if r.bw is not None and d.capacity is None:
        return False
    # A device whose capacity could never serve the request (upstream's static check).
    return not (d.multi and d.capacity is not None and _consumed(d, r.bw) > d.capacity)


@dataclass
class World:
    devices: list[DeviceSpec]
    counters: dict[str, int]
    exclusive: set[str]  # allocated to other claims
    shared: dict[str, int]  # device → "bw" its existing shares consume
    constraints: dict[int, ConstraintSpec] = field(default_factory=dict)  # per claim index


def _constraints_hold(
    world: World, picks: list[tuple[int, RequestSpec, DeviceSpec]], names: dict[int, str]
) -> bool:
    for claim, constraint in world.constraints.items():
        groups = [
            d.group
            for c, r, d in picks
            if c == claim
            and (
                not constraint.requests
                or names[id(r)] in constraint.requests
                or names[id(r)].split("/")[0] in constraint.requests
            )
        ]
        if None in groups:
            return False
        if constraint.distinct and len(set(groups)) != len(groups):
            return False
        if not constraint.distinct and len(set(groups)) > 1:
            return False
    return True


def _feasible(
    world: World, picks: list[tuple[int, RequestSpec, DeviceSpec]], names: dict[int, str]
) -> bool:
    if not _constraints_hold(world, picks, names):
        return False
    in_use: list[tuple[str, int]] = []  # (device, claim) picked exclusively
    shares: dict[str, int] = {}
    charged: list[DeviceSpec] = []  # devices whose counters the picks charge
    for claim, r, d in picks:
        if r.admin:
            if not d.multi and (d.name, claim) in in_use:
                return False
        elif d.name in world.exclusive or any(n == d.name for n, _ in in_use):
            return False
        if not d.multi:
            in_use.append((d.name, claim))
        if d.counters and not (d.multi and (d.name in world.shared or d.name in shares)):
            charged.append(d)
        if d.multi and d.capacity is not None:
            used = world.shared.get(d.name, 0) + shares.get(d.name, 0) + _consumed(d, r.bw)
            if used > d.capacity:
                return False
        if d.multi:
            shares[d.name] = shares.get(d.name, 0) + (
                _consumed(d, r.bw) if d.capacity is not None else 0
            )
    if not charged:
        return True
    left = dict(world.counters)
    allocated = world.exclusive | set(world.shared)
    for d in world.devices:
        if d.name in allocated:
            for k, v in d.counters.items():
                left[k] -= v
    for d in charged:
        for k, v in d.counters.items():
            left[k] -= v
    return all(v >= 0 for v in left.values())


def _options(
    world: World, claim: int, r: RequestSpec
) -> list[list[tuple[int, RequestSpec, DeviceSpec]]]:
    alternatives = r.subs if r.subs is not None else [r]
    options = []
    for alt in alternatives:
        matching = [d for d in world.devices if _matches(alt, d)]
        if alt.mode == "All":
            if matching:
                options.append([(claim, alt, d) for d in matching])
            continue
        for combo in itertools.combinations(matching, alt.count):
            options.append([(claim, alt, d) for d in combo])
    return options


def brute_force(
    world: World, claims: list[list[RequestSpec]]
) -> list[list[tuple[str, str]]] | None:
    """The first feasible assignment in search order: per claim, (request, device)."""
    names = {id(q): q.name for requests in claims for q in requests}
    names |= {
        id(s): f"{q.name}/{s.name}" for requests in claims for q in requests for s in q.subs or []
    }
    per_request = [_options(world, i, r) for i, requests in enumerate(claims) for r in requests]
    for choice in itertools.product(*per_request):
        picks = [p for option in choice for p in option]
        if _feasible(world, picks, names):
            found: list[list[tuple[str, str]]] = [[] for _ in claims]
            for claim, r, d in picks:
                found[claim].append((names[id(r)], d.name))
            return found
    return None


# --- Random small cases ----------------------------------------------------------------


def _random_case(rng: random.Random) -> tuple[World, list[list[RequestSpec]]]:
    counters = {"mem": rng.randint(2, 6), "sm": rng.randint(1, 4)}
    devices = []
    for i in range(rng.randint(2, 5)):
        kind = rng.choice(["partition", "partition", "whole", "shared", "plain"])
        if kind == "partition":
            consumes = {"mem": rng.randint(1, 3)} | ({"sm": 1} if rng.random() < 0.5 else {})
            devices.append(DeviceSpec(f"d{i}", True, consumes, False, None, None))
        elif kind == "whole":
            devices.append(DeviceSpec(f"d{i}", False, dict(counters), False, None, None))
        elif kind == "shared":
            step = rng.choice([None, 1, 2])
            consumes = {"mem": 1} if rng.random() < 0.5 else {}
            devices.append(
                DeviceSpec(f"d{i}", rng.random() < 0.5, consumes, True, rng.randint(2, 6), step)
            )
        else:
            devices.append(DeviceSpec(f"d{i}", rng.random() < 0.5, {}, False, None, None))
    exclusive = {d.name for d in devices if not d.multi and rng.random() < 0.2}
    shared = {d.name: rng.randint(0, 2) for d in devices if d.multi and rng.random() < 0.3}
    world = World(devices, counters, exclusive, shared)

    def request(name: str, allow_subs: bool) -> RequestSpec:
        if allow_subs and rng.random() < 0.2:
            subs = [request(f"s{j}", False) for j in range(2)]
            for s in subs:
                s.admin = False
            return RequestSpec(name, "gpu", 1, "ExactCount", False, None, subs)
        return RequestSpec(
            name,
            rng.choice(["gpu", "part"]),
            rng.randint(1, 2),
            "All" if rng.random() < 0.1 else "ExactCount",
            rng.random() < 0.15,
            rng.choice([None, None, 1, 2, 3]),
        )

    claims = [
        [request(f"r{j}", True) for j in range(rng.randint(1, 2))] for _ in range(rng.randint(1, 2))
    ]
    # Drawn last, so that the cases above stay those of earlier seeds.
    for d in devices:
        d.group = rng.choice([0, 0, 0, 1, None])
    for i, requests in enumerate(claims):
        alternatives = [a for q in requests for a in (q.subs or [q])]
        if rng.random() < 0.5 and all(a.mode != "All" for a in alternatives):
            named = [q.name for q in requests if rng.random() < 0.5]
            world.constraints[i] = ConstraintSpec(rng.random() < 0.6, named)
    return world, claims


def _stored_shares(world: World) -> dict:
    return {
        (DRIVER, NODE, name): ({"bw": Quantity(used)} if used else {})
        for name, used in world.shared.items()
    }


@pytest.mark.parametrize("seed", range(400))
def test_allocator_agrees_with_brute_force(seed: int) -> None:
    rng = random.Random(seed)
    world, claims = _random_case(rng)
    alloc = Allocator(
        _slices(world.devices, world.counters),
        CLASSES,
        frozenset((DRIVER, NODE, n) for n in world.exclusive),
        shared=_stored_shares(world),
    )
    node = core_v1.Node(metadata=meta_v1.ObjectMeta(name=NODE))
    resource_claims = [
        _claim(f"c{i}", requests, world.constraints.get(i)) for i, requests in enumerate(claims)
    ]
    want = brute_force(world, claims)
    try:
        got = alloc.allocate(node, resource_claims)
    except AllocatorError as err:
        pytest.fail(f"unexpected error: {err}")
    if want is None:
        assert got is None
        return
    assert got is not None
    by_name = {d.name: d for d in world.devices}
    for result, expected, requests in zip(got, want, claims, strict=True):
        assert [(r.request, r.device) for r in result.devices.results] == expected
        by_request = {q.name: q for q in requests}
        by_request |= {f"{q.name}/{s.name}": s for q in requests for s in q.subs or []}
        for r in result.devices.results:
            d = by_name[r.device]
            request = by_request[r.request]
            assert (r.share_id is not None) == d.multi
            assert (r.admin_access is True) == request.admin
            if d.multi and d.capacity is not None:
                assert r.consumed_capacity == {"bw": Quantity(_consumed(d, request.bw))}
            else:
                assert r.consumed_capacity == {}


def test_the_brute_force_finds_both_outcomes() -> None:
    """The random cases are not all one-sided: some fit, some do not."""
    outcomes = set()
    for seed in range(400):
        world, claims = _random_case(random.Random(seed))
        outcomes.add(brute_force(world, claims) is None)
    assert outcomes == {True, False}


# --- The scheduler's accounting ----------------------------------------------------------


def _allocated_claim(
    name: str, uid: str, results: list[dict[str, Any]]
) -> resource_v1.ResourceClaim:
    return codec.convert(
        {
            "metadata": {
                "name": name,
                "namespace": "default",
                "uid": uid,
                "resourceVersion": "5",
            },
            "status": {"allocation": {"devices": {"results": results}}},
        },
        resource_v1.ResourceClaim,
    )


def _result(device: str, **more: Any) -> dict[str, Any]:
    return {"request": "r", "driver": DRIVER, "pool": NODE, "device": device, **more}


def test_dra_manager_counts_shares_once_and_admin_access_never() -> None:
    """A claim's in-flight copy and its stored version hold the same shares once; admin
    access takes nothing; deleting the claim gives everything back."""
    manager = DraManager()
    claim = _allocated_claim(
        "c",
        "uid-c",
        [
            _result("d0"),
            _result("d1", adminAccess=True),
            _result("d2", shareID="s-1", consumedCapacity={"bw": "2"}),
            _result("d2", shareID="s-2", consumedCapacity={"bw": "1"}),
        ],
    )
    manager.signal_claim_pending_allocation("uid-c", claim)
    manager.on_claim_add(claim)
    assert set(manager.allocated) == {(DRIVER, NODE, "d0")}
    assert dict(manager.shared) == {(DRIVER, NODE, "d2"): {"bw": Quantity(3)}}
    manager.remove_claim_pending_allocation("uid-c")
    assert dict(manager.shared) == {(DRIVER, NODE, "d2"): {"bw": Quantity(3)}}
    manager.on_claim_delete(claim)
    assert set(manager.allocated) == set()
    assert dict(manager.shared) == {}


def test_counters_of_allocated_partitions_are_taken() -> None:
    """Partitions allocated to stored claims consume their counters: a partition that
    needs more than is left does not fit, one that needs what is left does."""
    devices = [
        DeviceSpec("whole", False, {"mem": 4}, False, None, None),
        DeviceSpec("half-0", True, {"mem": 2}, False, None, None),
        DeviceSpec("half-1", True, {"mem": 2}, False, None, None),
    ]
    node = core_v1.Node(metadata=meta_v1.ObjectMeta(name=NODE))
    claim = _claim("c", [RequestSpec("r", "gpu", 1, "ExactCount", False, None)])
    two = _claim("two", [RequestSpec("r", "part", 2, "ExactCount", False, None)])
    slices = _slices(devices, {"mem": 4})
    free = Allocator(slices, CLASSES, frozenset())
    got = free.allocate(node, [claim])
    assert got is not None and got[0].devices.results[0].device == "whole"
    one_half = Allocator(slices, CLASSES, frozenset({(DRIVER, NODE, "half-0")}))
    got = one_half.allocate(node, [claim])
    assert got is not None and got[0].devices.results[0].device == "half-1"
    assert one_half.allocate(node, [two]) is None
    assert free.allocate(node, [two]) is not None


def test_gates_off() -> None:
    """DRAPartitionableDevices off: devices consuming counters are never allocated.
    DRAConsumableCapacity off: a capacity request is an error, shared devices exclusive."""
    devices = [
        DeviceSpec("part", True, {"mem": 1}, False, None, None),
        DeviceSpec("shared", False, {}, True, 4, 1),
    ]
    node = core_v1.Node(metadata=meta_v1.ObjectMeta(name=NODE))
    slices = _slices(devices, {"mem": 4})
    part = _claim("c", [RequestSpec("r", "part", 1, "ExactCount", False, None)])
    off = Allocator(slices, CLASSES, frozenset(), partitionable_devices=False)
    assert off.allocate(node, [part]) is None
    assert Allocator(slices, CLASSES, frozenset()).allocate(node, [part]) is not None

    two = _claim("c", [RequestSpec("r", "gpu", 2, "ExactCount", False, None)])
    no_capacity = Allocator(
        slices, CLASSES, frozenset(), partitionable_devices=False, consumable_capacity=False
    )
    assert no_capacity.allocate(node, [two]) is None  # "shared" only once, "part" never
    one = no_capacity.allocate(
        node, [_claim("c", [RequestSpec("r", "gpu", 1, "ExactCount", False, None)])]
    )
    assert one is not None and one[0].devices.results[0].share_id is None
    with pytest.raises(
        AllocatorError, match="has capacity requests, but the DRAConsumableCapacity"
    ):
        no_capacity.allocate(
            node, [_claim("c", [RequestSpec("r", "gpu", 1, "ExactCount", False, 2)])]
        )


def test_claim_constraints() -> None:
    """distinctAttribute skips a device whose value is taken; matchAttribute skips devices
    until a pair agrees; a constraint naming one request leaves the other free."""
    devices = [
        DeviceSpec("d0", True, {}, False, None, None, group=0),
        DeviceSpec("d1", True, {}, False, None, None, group=0),
        DeviceSpec("d2", True, {}, False, None, None, group=1),
        DeviceSpec("d3", True, {}, False, None, None, group=1),
    ]
    node = core_v1.Node(metadata=meta_v1.ObjectMeta(name=NODE))
    alloc = Allocator(_slices(devices, {"mem": 1}), CLASSES, frozenset())
    two = [RequestSpec("r", "gpu", 2, "ExactCount", False, None)]

    def picked(constraint: ConstraintSpec, requests: list[RequestSpec] = two) -> list[str]:
        got = alloc.allocate(node, [_claim("c", requests, constraint)])
        assert got is not None
        return [r.device for r in got[0].devices.results]

    assert picked(ConstraintSpec(distinct=True, requests=[])) == ["d0", "d2"]
    alloc_taken = Allocator(
        _slices(devices, {"mem": 1}), CLASSES, frozenset({(DRIVER, NODE, "d0")})
    )
    got = alloc_taken.allocate(node, [_claim("c", two, ConstraintSpec(False, []))])
    assert got is not None and [r.device for r in got[0].devices.results] == ["d2", "d3"]
    one_each = [
        RequestSpec("a", "gpu", 1, "ExactCount", False, None),
        RequestSpec("b", "gpu", 1, "ExactCount", False, None),
    ]
    assert picked(ConstraintSpec(True, ["a"]), one_each) == ["d0", "d1"]
    assert picked(ConstraintSpec(True, ["a", "b"]), one_each) == ["d0", "d2"]


def test_distinct_shares_as_the_consumable_capacity_benchmark() -> None:
    """Upstream's ConsumableCapacity workload: four shared devices of 10 units, claims of
    two distinct devices at 2.5 units each: eight claims fit on the node, a ninth not."""
    devices = [DeviceSpec(f"d{i}", False, {}, True, 10, None, group=i) for i in range(4)]
    node = core_v1.Node(metadata=meta_v1.ObjectMeta(name=NODE))
    shared: dict = {}
    for i in range(9):
        alloc = Allocator(_slices(devices, {"mem": 1}), CLASSES, frozenset(), shared=shared)
        claim = _claim(
            f"c{i}",
            [RequestSpec("r", "gpu", 2, "ExactCount", False, Fraction(5, 2))],
            ConstraintSpec(distinct=True, requests=["r"]),
        )
        got = alloc.allocate(node, [claim])
        if i == 8:
            assert got is None
            break
        assert got is not None
        results = got[0].devices.results
        assert len({r.device for r in results}) == 2
        for r in results:
            device = (DRIVER, NODE, r.device)
            used = shared.get(device, {}).get("bw", Quantity())
            shared[device] = {"bw": used + r.consumed_capacity["bw"]}
    assert all(v == {"bw": Quantity(10)} for v in shared.values())


def test_counters_left_cut_the_search_short(monkeypatch: pytest.MonkeyPatch) -> None:
    """scheduler_perf's PartitionableBacktracking on one node: the first device consumes
    2 of the 7 units of memory, the seven others 1 each, and a claim asks for 7. Once
    the first is taken, the six more the claim needs cannot fit in the 5 units left, so
    the search backs out of it at once rather than trying every combination with it; the
    answer is the one the full search finds."""
    devices = [DeviceSpec("big", False, {"mem": 2}, False, None, None)]
    devices += [DeviceSpec(f"small-{i}", False, {"mem": 1}, False, None, None) for i in range(7)]
    node = core_v1.Node(metadata=meta_v1.ObjectMeta(name=NODE))
    request = RequestSpec("r", "gpu", 7, "ExactCount", False, None)
    claim = _claim("c", [request])
    takes = 0
    take = search.Ledger.take

    def counted(self: search.Ledger, *args: Any) -> search.Pick | None:
        nonlocal takes
        takes += 1
        return take(self, *args)

    monkeypatch.setattr(search.Ledger, "take", counted)
    got = Allocator(_slices(devices, {"mem": 7}), CLASSES, frozenset()).allocate(node, [claim])
    assert got is not None
    assert [r.device for r in got[0].devices.results] == [f"small-{i}" for i in range(7)]
    assert takes == 8  # "big", then each small device once
    want = brute_force(World(devices, {"mem": 7}, set(), {}), [[request]])
    assert want == [[("r", f"small-{i}") for i in range(7)]]
