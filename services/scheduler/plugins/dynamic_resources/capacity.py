"""Consumable capacity (KEP-5075): how much of a device's capacity one allocation consumes,
and whether it still fits beside what other allocations consume.

A request's `capacity.requests` are rounded up by the device's `requestPolicy` (to the
range's next step or the next valid value); a capacity the request does not name costs the
policy's default, or the whole capacity. The device fits when every name the request
asks for exists on it, no consumed value breaks the policy, and for each capacity what is
consumed already, what this search is allocating and this request together stay within
the device's value. Only devices with `allowMultipleAllocations` record consumption: an
exclusive device is checked against its capacity alone.

Arithmetic follows DRAFractionalCapacityRange (on in 1.37): a range whose bounds are all
whole thousandths is stepped in thousandths, any other in whole units rounded up.

Upstream: `consumable_capacity.go` in
`staging/src/k8s.io/dynamic-resource-allocation/structured/internal/incubating/`.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction

from drasim.common.api import resource_v1
from drasim.common.quantity import Quantity

__all__ = ["CapacityError", "ConsumedCapacity", "add", "consumed_capacity", "fits"]

ConsumedCapacity = dict[str, Quantity]
"""Capacity name → amount consumed (or requested), as in `consumedCapacity` of a result."""


class CapacityError(Exception):
    """A request no device can honour (a negative consumption): allocation stops."""


def _milli(q: Quantity) -> Fraction | None:
    """The value in thousandths if that is exact (upstream `safeMilliValue`)."""
    v = q.value * 1000
    return v if v.denominator == 1 else None


def _use_milli(r: resource_v1.CapacityRequestPolicyRange) -> bool:
    values = [q for q in (r.min, r.max, r.step) if q is not None]
    if any(_milli(q) is None for q in values):
        return False
    return r.step is None or r.step.value * 1000 >= 1


def _units(q: Quantity, milli: bool) -> int:
    return int(q.value * 1000) if milli else q.int_value()


def _round_up_range(requested: Quantity, r: resource_v1.CapacityRequestPolicyRange) -> Quantity:
    assert r.min is not None
    if requested < r.min:
        return r.min
    if r.step is None:
        return requested
    milli = _use_milli(r)
    if milli:
        exact = _milli(requested)
        if exact is None:
            raise CapacityError(f"request {requested} is not a representable milli value")
        req = int(exact)
    else:
        req = requested.int_value()
    lo, step = _units(r.min, milli), _units(r.step, milli)
    n = -((lo - req) // step)  # ceil((req - lo) / step)
    value = lo + step * n
    return Quantity(Fraction(value, 1000) if milli else value, r.step.format)


def _consumed(requested: Quantity | None, capacity: resource_v1.DeviceCapacity) -> Quantity:
    """What one allocation consumes of one capacity (upstream `calculateConsumedCapacity`)."""
    policy = capacity.request_policy
    if requested is None:
        if policy is not None and policy.default is not None:
            return policy.default
        return capacity.value
    if policy is None:
        return requested
    if policy.valid_range is not None and policy.valid_range.min is not None:
        return _round_up_range(requested, policy.valid_range)
    for valid in policy.valid_values:
        if requested <= valid:
            return valid
    return requested


def _violates(value: Quantity, policy: resource_v1.CapacityRequestPolicy | None) -> bool:
    if policy is None or (policy.default is not None and value == policy.default):
        return False
    r = policy.valid_range
    if r is not None:
        if r.max is not None and value > r.max:
            return True
        if r.step is not None and r.min is not None:
            milli = _use_milli(r)
            if milli and _milli(value) is None:
                return True
            return (_units(value, milli) - _units(r.min, milli)) % _units(r.step, milli) != 0
        return False
    if policy.valid_values:
        return value not in policy.valid_values
    return False


def consumed_capacity(
    requests: Mapping[str, Quantity] | None, device: resource_v1.Device
) -> ConsumedCapacity:
    """What allocating `device` for a request consumes of each of its capacities (upstream
    `GetConsumedCapacityFromRequest`)."""
    requests = requests or {}
    return {name: _consumed(requests.get(name), cap) for name, cap in device.capacity.items()}


def fits(
    requests: Mapping[str, Quantity] | None,
    device: resource_v1.Device,
    consumed: Mapping[str, Quantity] | None = None,
    allocating: Mapping[str, Quantity] | None = None,
) -> bool:
    """Can the device serve a request with these capacity `requests`, beside what stored
    claims have `consumed` and this search is `allocating` (upstream
    `CmpRequestOverCapacity`)? Raises CapacityError for a negative consumption."""
    if requests and any(name not in device.capacity for name in requests):
        return False
    wanted = consumed_capacity(requests, device)
    for name, value in wanted.items():
        if value.value < 0:
            raise CapacityError(f"capacity {name!r}: capacity value is negative")
    for name, cap in device.capacity.items():
        value = wanted[name]
        if _violates(value, cap.request_policy):
            return False
        total = value.value
        if consumed and name in consumed:
            total += consumed[name].value
        if allocating and name in allocating:
            total += allocating[name].value
        if total > cap.value.value:
            return False
    return True


def add(into: dict[str, Quantity], more: Mapping[str, Quantity], sign: int = 1) -> None:
    """Add (or with `sign=-1` take away) one allocation's consumption; names reaching zero
    stay, as a device with a share keeps its entry."""
    for name, value in more.items():
        into[name] = into.get(name, Quantity()) + (value if sign > 0 else -value)
