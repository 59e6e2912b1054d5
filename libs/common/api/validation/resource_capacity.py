"""Validation of what partitionable devices (KEP-4815) and consumable capacity (KEP-5075) add
to ResourceSlices: counter sets and their limits, devices consuming counters, and the
request policies of multi-allocatable devices' capacity.

Upstream: `validateCounterSet`, `validateDeviceCounterConsumption`,
`validateMultiAllocatableDeviceCapacity`, `validateRequestPolicy*` in
`pkg/apis/resource/validation/validation.go` (with DRAFractionalCapacityRange on, as 1.37).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from drasim.common.api import resource_v1
from drasim.common.api.validation import meta, names
from drasim.common.errors import (
    FieldError,
    field_duplicate,
    field_forbidden,
    field_invalid,
    field_required,
    field_too_many,
)
from drasim.common.quantity import Quantity

__all__ = ["max_devices", "validate_counter_sets", "validate_device_capacity"]

T = TypeVar("T")
_INT64_MAX = 2**63 - 1


def max_devices(spec: resource_v1.ResourceSliceSpec) -> int:
    """Devices one slice may hold: fewer once some device has taints or consumes counters
    (upstream `ResourceSliceMaxDevicesWithAdvancedFeatures`)."""
    if any(d.taints or d.consumes_counters for d in spec.devices):
        return resource_v1.RESOURCE_SLICE_MAX_DEVICES_WITH_ADVANCED_FEATURES
    return resource_v1.RESOURCE_SLICE_MAX_DEVICES


def _set(
    items: Sequence[T],
    max_size: int,
    validate: Callable[[T, str], list[FieldError]],
    key: Callable[[T], str],
    path: str,
) -> list[FieldError]:
    """Upstream `validateSet`: too many is the only error; then each item, then duplicates."""
    if len(items) > max_size:
        return [field_too_many(path, len(items), max_size)]
    errs: list[FieldError] = []
    for i, item in enumerate(items):
        errs += validate(item, f"{path}[{i}]")
    seen: set[str] = set()
    for i, item in enumerate(items):
        k = key(item)
        if k in seen:
            errs.append(field_duplicate(f"{path}[{i}]", k))
        seen.add(k)
    return errs


def _named_counters(
    name: str,
    name_path: str,
    counters: dict[str, resource_v1.Counter],
    max_counters: int,
    path: str,
) -> list[FieldError]:
    """A counter set, or a device's consumption of one: its name and its counters."""
    errs: list[FieldError] = []
    if not name:
        errs.append(field_required(name_path))
    else:
        errs += meta.each(name_path, name, names.is_dns1123_label(name))
    if not counters:
        errs.append(field_required(f"{path}.counters"))
    elif len(counters) > max_counters:
        errs.append(field_too_many(f"{path}.counters", len(counters), max_counters))
    else:
        for counter in counters:
            errs += meta.each(f"{path}.counters", counter, names.is_dns1123_label(counter))
    return errs


def _counter_set(counter_set: resource_v1.CounterSet, path: str) -> list[FieldError]:
    return _named_counters(
        counter_set.name,
        f"{path}.name",
        counter_set.counters,
        resource_v1.RESOURCE_SLICE_MAX_COUNTERS_PER_COUNTER_SET,
        path,
    )


def validate_counter_sets(spec: resource_v1.ResourceSliceSpec, path: str) -> list[FieldError]:
    """The slice's `sharedCounters`."""
    return _set(
        spec.shared_counters,
        resource_v1.RESOURCE_SLICE_MAX_COUNTER_SETS,
        _counter_set,
        lambda cs: cs.name,
        f"{path}.sharedCounters",
    )


def _consumption(c: resource_v1.DeviceCounterConsumption, path: str) -> list[FieldError]:
    return _named_counters(
        c.counter_set,
        f"{path}.counterSet",
        c.counters,
        resource_v1.RESOURCE_SLICE_MAX_COUNTERS_PER_DEVICE_COUNTER_CONSUMPTION,
        path,
    )


def validate_device_capacity(device: resource_v1.Device, path: str) -> list[FieldError]:
    """`consumesCounters`, and the capacities' request policies: only a device with
    `allowMultipleAllocations` may have one, and it must be consistent."""
    errs = _set(
        device.consumes_counters,
        resource_v1.RESOURCE_SLICE_MAX_DEVICE_COUNTER_CONSUMPTIONS_PER_DEVICE,
        _consumption,
        lambda c: c.counter_set,
        f"{path}.consumesCounters",
    )
    multi = bool(device.allow_multiple_allocations)
    for name, capacity in device.capacity.items():
        policy = capacity.request_policy
        if policy is None:
            continue
        p_path = f"{path}.capacity[{name}].requestPolicy"
        if not multi:
            errs.append(field_forbidden(p_path, "allowMultipleAllocations must be true"))
        elif policy.valid_values and policy.valid_range is not None:
            errs.append(
                field_forbidden(
                    p_path,
                    'exactly one policy can be specified, cannot specify "validValues" and '
                    '"validRange" at the same time',
                )
            )
        elif policy.valid_values:
            if policy.default is None:
                errs.append(
                    field_required(f"{p_path}.default", "required when validValues is defined")
                )
            else:
                errs += _valid_values(
                    policy.default, capacity.value, policy.valid_values, f"{p_path}.validValues"
                )
        elif policy.valid_range is not None:
            if policy.default is None:
                errs.append(
                    field_required(f"{p_path}.default", "required when validRange is defined")
                )
            else:
                errs += _valid_range(
                    policy.default, capacity.value, policy.valid_range, f"{p_path}.validRange"
                )
    return errs


def _valid_values(
    default: Quantity, capacity: Quantity, values: list[Quantity], path: str
) -> list[FieldError]:
    errs = [
        field_invalid(
            f"{path}[{i + 1}]", str(values[i + 1]), "values must be sorted in ascending order"
        )
        for i in range(len(values) - 1)
        if values[i] > values[i + 1]
    ]

    def option(value: Quantity, at: str) -> list[FieldError]:
        if value > capacity:
            return [
                field_invalid(at, str(value), f"option is larger than capacity value: {capacity}")
            ]
        return []

    errs += _set(
        values,
        resource_v1.CAPACITY_REQUEST_POLICY_DISCRETE_MAX_OPTIONS,
        option,
        lambda q: str(q.value),
        path,
    )
    if (
        len(values) <= resource_v1.CAPACITY_REQUEST_POLICY_DISCRETE_MAX_OPTIONS
        and default not in values
    ):
        errs.append(
            field_invalid(
                path, str(default), "default value is not valid according to the requestPolicy"
            )
        )
    return errs


def _exact_milli(q: Quantity) -> bool:
    return (q.value * 1000).denominator == 1


def _valid_range(
    default: Quantity,
    capacity: Quantity,
    r: resource_v1.CapacityRequestPolicyRange,
    path: str,
) -> list[FieldError]:
    if r.min is None:
        return [field_required(f"{path}.min", "required when validRange is defined")]
    errs: list[FieldError] = []
    if r.min > capacity:
        errs.append(
            field_invalid(
                f"{path}.min", str(r.min), f"min is larger than capacity value: {capacity}"
            )
        )
    if default < r.min:
        errs.append(
            field_invalid(f"{path}.default", str(default), f"default is less than min: {r.min}")
        )
    if r.max is not None:
        if r.min > r.max:
            errs.append(
                field_invalid(f"{path}.max", str(r.min), f"min is larger than max: {r.max}")
            )
        if r.max > capacity:
            errs.append(
                field_invalid(
                    f"{path}.max", str(r.max), f"max is larger than capacity value: {capacity}"
                )
            )
        if default > r.max:
            errs.append(
                field_invalid(f"{path}.default", str(default), f"default is more than max: {r.max}")
            )
    values = [("default", default), ("min", r.min), ("max", r.max), ("step", r.step)]
    milli = any(q is not None and q.value.denominator != 1 for _, q in values)
    if milli:
        unsafe = [
            field_invalid(f"{path}.{name}", str(q), "value cannot be represented as a milli value")
            for name, q in values
            if q is not None and not _exact_milli(q)
        ]
        if unsafe:
            return errs + unsafe
    if r.step is None:
        return errs
    if r.step.value <= 0:
        return [*errs, field_invalid(f"{path}.step", str(r.step), "must be greater than zero")]
    added = r.min + r.step
    if added > capacity:
        errs.append(
            field_invalid(
                f"{path}.step",
                str(r.step),
                f"one step {added} is larger than capacity value: {capacity}",
            )
        )
    if not milli:
        unsafe = []
        for name, q in values:
            if q is None:
                continue
            if q.value < 0:
                unsafe.append(
                    field_invalid(f"{path}.{name}", str(q), "must be greater than or equal to 0")
                )
            elif q.value > _INT64_MAX:
                unsafe.append(
                    field_invalid(
                        f"{path}.{name}", str(q), "must not be larger than 9223372036854775807"
                    )
                )
        if unsafe:
            return errs + unsafe
    for value in (default, r.max):
        if value is None:
            continue
        unit = (lambda q: q.milli_value()) if milli else (lambda q: q.int_value())
        if (unit(value) - unit(r.min)) % unit(r.step) != 0:
            errs.append(
                field_invalid(
                    f"{path}.step",
                    str(value),
                    f"value is not a multiple of a given step ({r.step}) from ({r.min})",
                )
            )
    return errs
