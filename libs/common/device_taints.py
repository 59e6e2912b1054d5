"""Device taints (KEP-5055): which taints a device has, and which tolerations accept them.

A device's taints are those its ResourceSlice lists plus one per DeviceTaintRule whose
selector picks it. Upstream's `resourceslicetracker`
(`staging/src/k8s.io/dynamic-resource-allocation/resourceslice/tracker`) hands the
scheduler slices with the rules' taints added, so the allocator never asks where a taint
came from; `with_rule_taints` does the same here. The eviction controller keeps the origin
of each taint (its events and a rule's status name it), so it asks `rule_matches_device`
itself. Consumers react to NoSchedule and NoExecute only, and treat None and unknown effects as
no effect.
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from drasim.common.api import core_v1, resource_v1

__all__ = [
    "rule_matches_device",
    "tolerates",
    "with_rule_taints",
]


def tolerates(
    toleration: core_v1.Toleration | resource_v1.DeviceToleration,
    taint: core_v1.Taint | resource_v1.DeviceTaint,
) -> bool:
    """Upstream `resourceclaim.ToleratesTaint`, the same rule as a pod's toleration of a
    node taint: an empty effect or key matches any; `Exists` any value, `Equal` (or no
    operator) only the same value."""
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    if toleration.operator in ("", "Equal"):
        return toleration.value == taint.value
    return toleration.operator == "Exists"


def rule_matches_device(
    rule: resource_v1.DeviceTaintRule, driver: str, pool: str, device: str
) -> bool:
    """Every criterion the selector sets must match; no selector matches no device."""
    selector = rule.spec.device_selector
    if selector is None:
        return False
    return (
        (selector.driver is None or selector.driver == driver)
        and (selector.pool is None or selector.pool == pool)
        and (selector.device is None or selector.device == device)
    )


def with_rule_taints(
    slices: Iterable[resource_v1.ResourceSlice], rules: Iterable[resource_v1.DeviceTaintRule]
) -> list[resource_v1.ResourceSlice]:
    """The slices with each rule's taint added to the devices it selects; a slice no rule
    touches is returned as is (the stored objects are never changed)."""
    active = [r for r in rules if r.spec.device_selector is not None]
    if not active:
        return list(slices)
    out = []
    for slice_ in slices:
        driver, pool = slice_.spec.driver, slice_.spec.pool.name
        devices = []
        changed = False
        for device in slice_.spec.devices:
            added = [
                r.spec.taint for r in active if rule_matches_device(r, driver, pool, device.name)
            ]
            if added:
                device = msgspec.structs.replace(device, taints=[*device.taints, *added])
                changed = True
            devices.append(device)
        if changed:
            spec = msgspec.structs.replace(slice_.spec, devices=devices)
            slice_ = msgspec.structs.replace(slice_, spec=spec)
        out.append(slice_)
    return out
