"""Resource names and a pod's effective requests: the arithmetic the scheduler, kubelet and
quota share, so they agree on what a pod asks for.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from drasim.common.api import core_v1
from drasim.common.api.validation import names
from drasim.common.quantity import Quantity

__all__ = [
    "IMPLICIT_EXTENDED_RESOURCE_PREFIX",
    "RESOURCE_DEFAULT_NAMESPACE_PREFIX",
    "RESOURCE_REQUESTS_PREFIX",
    "container_requests",
    "is_dra_capable_name",
    "is_extended_resource_name",
    "is_native_resource",
    "is_restartable_init_container",
    "pod_limits",
    "pod_qos_class",
    "pod_requests",
    "same_request_inputs",
]

# Every DeviceClass `C` can be requested as `deviceclass.resource.kubernetes.io/C` (upstream
# `ResourceDeviceClassPrefix` in `staging/src/k8s.io/api/resource/v1/types.go`).
IMPLICIT_EXTENDED_RESOURCE_PREFIX = "deviceclass.resource.kubernetes.io/"
# Names containing this are Kubernetes' own ("native"), never extended resources.
RESOURCE_DEFAULT_NAMESPACE_PREFIX = "kubernetes.io/"
# Quota tracks requests of resource R as `requests.R`.
RESOURCE_REQUESTS_PREFIX = "requests."


def is_native_resource(name: str) -> bool:
    """Unprefixed (`cpu`) or in the `kubernetes.io/` namespace (`IsNativeResource`)."""
    return "/" not in name or RESOURCE_DEFAULT_NAMESPACE_PREFIX in name


def is_extended_resource_name(name: str) -> bool:
    """An extended resource name (upstream `IsExtendedResourceName`,
    `pkg/apis/core/v1/helper/helpers.go`).

    It has a `/`, is not in the `kubernetes.io/` namespace, does not start with
    `requests.`, and its quota name `requests.<name>` is a qualified name (so the part after
    the `/` is at most 63 characters).
    """
    if is_native_resource(name) or name.startswith(RESOURCE_REQUESTS_PREFIX):
        return False
    return not names.is_qualified_name(RESOURCE_REQUESTS_PREFIX + name)


def is_dra_capable_name(name: str) -> bool:
    """A name DRA may serve: an extended resource name or an implicit class name (upstream
    `IsDRAExtendedResourceName`, `pkg/scheduler/util/utils.go`).

    Whether it is DRA-*backed* also needs a DeviceClass that maps it, which only the
    DeviceClass cache knows.
    """
    return is_extended_resource_name(name) or name.startswith(IMPLICIT_EXTENDED_RESOURCE_PREFIX)


def is_restartable_init_container(container: core_v1.Container) -> bool:
    """An init container with `restartPolicy: Always`: a sidecar, running beside the pod."""
    return container.restart_policy == "Always"


def container_requests(container: core_v1.Container) -> dict[str, Quantity]:
    """A container's requests after API defaulting: a resource with only a limit requests it.

    This is `SetDefaults_Pod`, which applies to every resource name (extended ones
    included), so pods stored without defaulting are read as the API server would store them.
    """
    return {**container.resources.limits, **container.resources.requests}


def pod_requests(pod: core_v1.Pod) -> dict[str, Quantity]:
    """The pod's effective requests (upstream `PodRequests`,
    `staging/src/k8s.io/component-helpers/resource/helpers.go`).

    Regular and sidecar containers run together, so they add up. A non-sidecar init container
    runs alone beside the sidecars started before it; the pod needs the largest of those
    moments. Overhead is added on top. Ephemeral containers request nothing.
    """
    requests = _aggregate(pod, container_requests)
    _add(requests, pod.spec.overhead)
    return requests


def pod_limits(pod: core_v1.Pod) -> dict[str, Quantity]:
    """The pod's effective limits (upstream `PodLimits`): aggregated as its requests are,
    with overhead added only to the limits the containers set (an unset limit stays
    unlimited)."""
    limits = _aggregate(pod, lambda c: c.resources.limits)
    for name, quantity in pod.spec.overhead.items():
        if name in limits and not limits[name].is_zero():
            limits[name] = limits[name] + quantity
    return limits


def _aggregate(
    pod: core_v1.Pod, own_of: Callable[[core_v1.Container], Mapping[str, Quantity]]
) -> dict[str, Quantity]:
    """What the pod's containers need at its peak, each container's share read by `own_of`."""
    total: dict[str, Quantity] = {}
    for container in pod.spec.containers:
        _add(total, own_of(container))

    sidecars: dict[str, Quantity] = {}  # sidecars started so far
    init_peak: dict[str, Quantity] = {}
    for container in pod.spec.init_containers:
        own = own_of(container)
        if is_restartable_init_container(container):
            _add(total, own)
            _add(sidecars, own)
            in_use = dict(sidecars)
        else:
            in_use = dict(own)
            _add(in_use, sidecars)
        _max(init_peak, in_use)

    _max(total, init_peak)
    return total


def pod_qos_class(pod: core_v1.Pod) -> str:
    """The pod's quality of service class (upstream `ComputePodQOS`), from the cpu and
    memory its init and regular containers request and are limited to.

    A container with neither requests nor limits is BestEffort; otherwise each of cpu and
    memory is Guaranteed when request equals a non-zero limit, BestEffort when both are
    zero, else Burstable. The pod is Burstable as soon as one resource of one container is,
    or when its containers disagree.
    """
    pod_class = ""
    for container in (*pod.spec.init_containers, *pod.spec.containers):
        container_class = _requirements_qos(container.resources)
        if container_class == _BURSTABLE:
            return _BURSTABLE
        if pod_class and pod_class != container_class:
            return _BURSTABLE
        pod_class = container_class
    return pod_class or _BEST_EFFORT


_BEST_EFFORT, _BURSTABLE, _GUARANTEED = "BestEffort", "Burstable", "Guaranteed"
_ZERO = Quantity()


def _requirements_qos(requirements: core_v1.ResourceRequirements) -> str:
    if not requirements.requests and not requirements.limits:
        return _BEST_EFFORT
    found = ""
    for name in ("cpu", "memory"):
        request = requirements.requests.get(name, _ZERO)
        limit = requirements.limits.get(name, _ZERO)
        if request != limit:
            return _BURSTABLE
        resource_class = _BEST_EFFORT if request.is_zero() else _GUARANTEED
        if found and found != resource_class:
            return _BURSTABLE
        found = resource_class
    return found


def same_request_inputs(a: core_v1.Pod, b: core_v1.Pod) -> bool:
    """Whether `pod_requests` reads the same fields of both pods, so their requests are
    equal without the arithmetic: a comparison of structs, which status updates (most pod
    events) pass."""
    return (
        a.spec.containers == b.spec.containers
        and a.spec.init_containers == b.spec.init_containers
        and a.spec.overhead == b.spec.overhead
    )


def _add(total: dict[str, Quantity], more: Mapping[str, Quantity]) -> None:
    for name, quantity in more.items():
        total[name] = total[name] + quantity if name in total else quantity


def _max(peak: dict[str, Quantity], other: Mapping[str, Quantity]) -> None:
    for name, quantity in other.items():
        if name not in peak or quantity > peak[name]:
            peak[name] = quantity
