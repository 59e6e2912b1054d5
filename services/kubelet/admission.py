"""Pod admission: does the pod fit what this node has left (upstream `lifecycle/predicate.go`)?

A pod that does not fit is rejected, as the kubelet does: phase Failed, reason
`OutOf<resource>`, and upstream's message. Extended resources a DRA driver serves are not
node capacity, so they are left out of the count (see `counted_requests`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from drasim.common.api import core_v1, resources
from drasim.common.quantity import Quantity

__all__ = ["Rejection", "counted_requests", "fit"]

_ZERO = Quantity()


@dataclass(frozen=True)
class Rejection:
    """Why the kubelet refused a pod: the pod's `status.reason` and `status.message`."""

    reason: str
    message: str


def counted_requests(pod: core_v1.Pod, allocatable: Mapping[str, Quantity]) -> dict[str, Quantity]:
    """The pod's effective requests as this node counts them.

    A DRA-capable name (an extended resource or `deviceclass.resource.kubernetes.io/…`) with
    no or zero allocatable here is served by DRA, not by node capacity, so it is not
    counted. The same name on a device-plugin node (allocatable > 0) counts as usual.
    Upstream's `removeMissingExtendedResources` (`pkg/kubelet/lifecycle/predicate.go`) drops
    only extended resource names missing from allocatable; leaving out implicit class names
    and names at 0 too is a drasim decision, so that a pod the scheduler placed through DRA
    is never refused for them.
    Effective requests are computed name by name, so dropping a name from the pod's total
    equals dropping it from every container first, as upstream does.
    """
    return {
        name: quantity
        for name, quantity in resources.pod_requests(pod).items()
        if not quantity.is_zero()
        and not (resources.is_dra_capable_name(name) and allocatable.get(name, _ZERO).is_zero())
    }


def fit(
    requests: Mapping[str, Quantity],
    *,
    allocatable: Mapping[str, Quantity],
    used: Mapping[str, Quantity],
    pods: int,
) -> Rejection | None:
    """Upstream's `AdmissionCheck` (`pkg/scheduler/eventhandlers.go`, `TestAdmissionCheck`):
    None when `requests` fit beside `pods` admitted
    pods using `used`; otherwise the first resource short, in name order."""
    allowed_pods = allocatable.get("pods", _ZERO).int_value()
    if pods + 1 > allowed_pods:
        return _insufficient("pods", 1, pods, allowed_pods)
    for name in sorted(requests):
        requested = requests[name]
        capacity = allocatable.get(name, _ZERO)
        in_use = used.get(name, _ZERO)
        if in_use + requested > capacity:
            return _insufficient(
                name, _number(name, requested), _number(name, in_use), _number(name, capacity)
            )
    return None


def _insufficient(name: str, requested: int, used: int, capacity: int) -> Rejection:
    return Rejection(
        reason=f"OutOf{name}",
        message=(
            f"Node didn't have enough resource: {name}, requested: {requested}, "
            f"used: {used}, capacity: {capacity}"
        ),
    )


def _number(name: str, quantity: Quantity) -> int:
    """As upstream reports it: cpu in millicores, everything else in units."""
    value = quantity.value * 1000 if name == "cpu" else quantity.value
    return math.ceil(value)
