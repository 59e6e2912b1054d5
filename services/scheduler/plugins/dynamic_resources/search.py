"""The backtracking search of the allocator and what one tentative pick takes: the device
itself (unless shared or for admin access), counters of its pool, capacity of a shared
device, a place in its claim's constraints. Every pick is undone exactly when the search
backs out of it.

What the search sees as already taken (`AllocatedState`): devices allocated exclusively
(stored claims and in-flight allocations), devices with shares and the capacity their
shares consume. Counters are not stored: a pool's counters left are its counter sets
minus what its allocated devices (exclusive or shared, each once) consume, worked out once
per pool and allocator.

Counters also bound the search (`CounterBounds`, drasim's own; upstream's allocator walks
every combination): when the devices a request still needs cannot fit in what their pools
have left, even taking the cheapest of the candidates left, the search backs out at once
instead of trying each combination to its last pick. That changes no answer: only
subtrees without a solution are skipped.

Upstream: `allocateOne`, `allocateDevice`, `rollbackDevice` and `checkAvailableCounters` in
`staging/src/k8s.io/dynamic-resource-allocation/structured/internal/incubating/
allocator_incubating.go`.
"""

from __future__ import annotations

from collections.abc import Container, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING

from drasim.common.api import resource_v1
from drasim.common.quantity import Quantity
from drasim.scheduler.plugins.dynamic_resources import capacity
from drasim.scheduler.plugins.dynamic_resources.constraints import Constraint
from drasim.scheduler.plugins.dynamic_resources.pools import (
    AllocatorError,
    Candidate,
    DeviceID,
    PoolID,
    Snapshot,
)

if TYPE_CHECKING:
    from drasim.scheduler.plugins.dynamic_resources.allocator import _Alternative, _AlternativePlan

__all__ = [
    "AllocatedState",
    "CounterBounds",
    "Counters",
    "Ledger",
    "Pick",
    "Search",
    "allocate_request",
]

ALLOCATION_RESULTS_MAX_SIZE = resource_v1.ALLOCATION_RESULTS_MAX_SIZE

Counters = dict[tuple[str, str], Fraction]
"""(counter set, counter) → amount: counters left, or consumed, in one pool."""


@dataclass(frozen=True, slots=True)
class AllocatedState:
    """What other claims hold (upstream `AllocatedState`): `exclusive` are the containers
    of exclusively allocated devices (stored, in flight); `shared` maps each device with at
    least one share to what its shares consume together."""

    exclusive: tuple[Container[DeviceID], ...]
    shared: Mapping[DeviceID, Mapping[str, Quantity]]

    def taken(self, device: DeviceID) -> bool:
        return any(device in c for c in self.exclusive)

    def allocated(self, device: DeviceID) -> bool:
        """Exclusively or shared: its counters are consumed."""
        return device in self.shared or self.taken(device)


@dataclass(slots=True)
class Pick:
    """One device picked for one request, with what the pick took, to give it back."""

    plan: _AlternativePlan
    candidate: Candidate
    claim_index: int
    marked: bool = False  # in `Ledger.in_use` (not shared)
    counters: bool = False  # its counters were charged
    constraints: int = 0  # how many of its claim's constraints took it
    consumed: capacity.ConsumedCapacity | None = None  # a share's consumption


@dataclass(slots=True)
class Ledger:
    """What the picks of one search hold, on top of `AllocatedState`."""

    state: AllocatedState
    snapshot: Snapshot
    available: dict[PoolID, Counters]  # shared by the allocator's searches
    consumable_capacity: bool = True  # the gate; off, every device is exclusive
    in_use: dict[DeviceID, list[int]] = field(default_factory=dict)  # → claim indices
    allocating_capacity: dict[DeviceID, capacity.ConsumedCapacity] = field(default_factory=dict)
    allocating_shares: dict[DeviceID, int] = field(default_factory=dict)
    counters: dict[PoolID, Counters] = field(default_factory=dict)
    constraints: list[list[Constraint]] = field(default_factory=list)  # per claim

    def take(self, plan: _AlternativePlan, candidate: Candidate, claim_index: int) -> Pick | None:
        """Take the device for the request if it can be had, or None (upstream
        `allocateDevice`). Admin access takes a device others use too, but never one this
        claim takes already."""
        device = candidate.id
        multi = candidate.multi and self.consumable_capacity
        if plan.admin_access:
            if not multi and claim_index in self.in_use.get(device, ()):
                return None
        elif self.state.taken(device) or self.in_use.get(device):
            return None
        pick = Pick(plan, candidate, claim_index)
        # A shared device's counters are charged by its first share only.
        shared_already = multi and (
            device in self.state.shared or self.allocating_shares.get(device, 0) > 0
        )
        if candidate.counters and not shared_already:
            if not self._charge_counters(candidate):
                return None
            pick.counters = True
        if self.constraints:
            for constraint in self.constraints[claim_index]:
                if not constraint.add(plan.name, candidate.device, device):
                    self.give_back(pick)
                    if not plan.exact:
                        # "All" must have every device: a constraint in its way is an error.
                        raise AllocatorError(
                            f"{plan.where}: cannot add device {'/'.join(device)} because a "
                            "claim constraint would not be satisfied"
                        )
                    return None
                pick.constraints += 1
        if not multi:
            self.in_use.setdefault(device, []).append(claim_index)
            pick.marked = True
        if not self.consumable_capacity:
            return pick
        try:
            ok = capacity.fits(
                plan.capacity,
                candidate.device,
                self.state.shared.get(device),
                self.allocating_capacity.get(device),
            )
        except capacity.CapacityError as err:
            self.give_back(pick)
            raise AllocatorError(
                f"{plan.where}: computing consumed capacity for device {'/'.join(device)}: {err}"
            ) from None
        if not ok:
            self.give_back(pick)
            return None
        if multi:
            pick.consumed = capacity.consumed_capacity(plan.capacity, candidate.device)
            capacity.add(self.allocating_capacity.setdefault(device, {}), pick.consumed)
            self.allocating_shares[device] = self.allocating_shares.get(device, 0) + 1
        return pick

    def give_back(self, pick: Pick) -> None:
        """Undo `take` (upstream `rollbackDevice`)."""
        device = pick.candidate.id
        if pick.consumed is not None:
            capacity.add(self.allocating_capacity[device], pick.consumed, -1)
            self.allocating_shares[device] -= 1
            if not self.allocating_shares[device]:
                del self.allocating_shares[device]
                del self.allocating_capacity[device]
        if pick.marked:
            self.in_use[device].remove(pick.claim_index)
        if pick.constraints:
            for constraint in self.constraints[pick.claim_index][: pick.constraints]:
                constraint.remove(pick.plan.name)
        if pick.counters:
            self._add_counters(pick.candidate, -1)

    def _available(self, pool: PoolID) -> Counters:
        available = self.available.get(pool)
        if available is None:
            available = {
                (set_name, name): value.value
                for set_name, counters in self.snapshot.counter_sets.get(pool, {}).items()
                for name, value in counters.items()
            }
            # May go below zero if stored allocations overdraw: then nothing is left.
            for c in self.snapshot.counter_consumers.get(pool, ()):
                if self.state.allocated(c.id):
                    for set_name, name, amount in c.counters:
                        key = (set_name, name)
                        if key in available:
                            available[key] -= amount.value
            self.available[pool] = available
        return available

    def _add_counters(self, candidate: Candidate, sign: int) -> Counters:
        consumed = self.counters.setdefault((candidate.id[0], candidate.id[1]), {})
        for set_name, name, amount in candidate.counters:
            key = (set_name, name)
            consumed[key] = consumed.get(key, Fraction(0)) + sign * amount.value
        return consumed

    def cannot_fit(self, bounds: Mapping[tuple[PoolID, str, str], Fraction | int]) -> bool:
        """Whether counters the picks must still consume at least (`CounterBounds`)
        exceed what their pools have left."""
        for (pool, set_name, name), least in bounds.items():
            key = (set_name, name)
            available = self._available(pool)
            if key in available:
                consumed = self.counters.get(pool, {}).get(key, Fraction(0))
                if consumed + least > available[key]:
                    return True
        return False

    def _charge_counters(self, candidate: Candidate) -> bool:
        """Charge the device's counters; False (and nothing charged) if any counter of
        its pool would be overdrawn (upstream `checkAvailableCounters`)."""
        available = self._available((candidate.id[0], candidate.id[1]))
        consumed = self._add_counters(candidate, 1)
        if any(value < consumed.get(key, 0) for key, value in available.items()):
            self._add_counters(candidate, -1)
            return False
        return True


class CounterBounds:
    """The least each counter must still be charged when `remaining` more devices are
    picked from `candidates[start:]`: per counter, the sum of its `remaining` smallest
    charges there (a device not consuming it charges 0; a shared device may charge
    nothing, so it counts 0 too). Worked out once per (start, remaining)."""

    def __init__(self, candidates: list[Candidate], consumable_capacity: bool) -> None:
        self._charges: dict[tuple[PoolID, str, str], list[Fraction | int]] = {}
        for k, c in enumerate(candidates):
            if c.multi and consumable_capacity:
                continue
            for set_name, name, amount in c.counters:
                key = ((c.id[0], c.id[1]), set_name, name)
                charges = self._charges.setdefault(key, [0] * len(candidates))
                value = charges[k] + amount.value
                # Whole numbers sort and add faster as ints.
                charges[k] = int(value) if value.denominator == 1 else value
        self._bounds: dict[tuple[int, int], dict[tuple[PoolID, str, str], Fraction | int]] = {}

    def __bool__(self) -> bool:
        return bool(self._charges)

    def least(self, start: int, remaining: int) -> dict[tuple[PoolID, str, str], Fraction | int]:
        bounds = self._bounds.get((start, remaining))
        if bounds is None:
            bounds = {}
            for key, charges in self._charges.items():
                left = charges[start:]
                if left.count(0) >= remaining:
                    continue  # enough devices charge nothing: no bound
                bounds[key] = sum(sorted(left)[:remaining])
            self._bounds[(start, remaining)] = bounds
        return bounds


@dataclass(slots=True)
class Search:
    requests: list  # list[_Request]
    picks: list[list[Pick]]  # per claim
    ledger: Ledger
    bounds: dict[int, CounterBounds] = field(default_factory=dict)  # by id(alternative)


def allocate_request(search: Search, index: int) -> bool:
    """Allocate requests `index`.. in order; for a `firstAvailable` request the first
    subrequest for which the whole rest succeeds wins."""
    if index == len(search.requests):
        return True
    for alternative in search.requests[index].alternatives:
        if alternative.count and _pick_devices(search, index, alternative, alternative.count, 0):
            return True
    return False


def _pick_devices(
    search: Search, index: int, alternative: _Alternative, remaining: int, start: int
) -> bool:
    """Pick `remaining` more devices for one request from its candidates at `start`..,
    then go on with the next request; undo and try the next candidate when that fails.
    An "All" request must get each of its candidates, so it tries no other."""
    if remaining == 0:
        return allocate_request(search, index + 1)
    claim_index = search.requests[index].claim_index
    picks = search.picks[claim_index]
    if len(picks) + remaining > ALLOCATION_RESULTS_MAX_SIZE:
        return False
    candidates = alternative.candidates
    ledger = search.ledger
    last = len(candidates) - remaining + 1
    if not alternative.plan.exact:
        last = min(start + 1, len(candidates))
    elif remaining > 1:
        bounds = search.bounds.get(id(alternative))
        if bounds is None:
            bounds = CounterBounds(candidates, ledger.consumable_capacity)
            search.bounds[id(alternative)] = bounds
        if bounds and ledger.cannot_fit(bounds.least(start, remaining)):
            return False
    for k in range(start, last):
        pick = ledger.take(alternative.plan, candidates[k], claim_index)
        if pick is None:
            continue
        picks.append(pick)
        if _pick_devices(search, index, alternative, remaining - 1, k + 1):
            return True
        picks.pop()
        ledger.give_back(pick)
    return False
