"""What a pod is charged (upstream `pkg/quota/v1/evaluator/core/pods.go`).

A pod counts toward `count/pods` while it is stored, and toward `pods` and its compute
resources while it may still run: a pod in a terminal phase, or one whose deletion grace
period has passed, is charged only its object count. Compute resources are its effective
requests and limits (`PodRequests`/`PodLimits`: init containers at their peak, sidecars and
overhead added): `cpu`/`requests.cpu`/`limits.cpu`, the same for memory and
ephemeral-storage, hugepages, and `requests.<name>` for every extended resource, the
implicit `deviceclass.resource.kubernetes.io/<class>` names included, whether a device
plugin or DRA serves it.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta

from drasim.common import labels
from drasim.common.api import core_v1, resources
from drasim.common.quantity import Quantity
from drasim.common.quota import generic
from drasim.common.quota.resources import ResourceList

__all__ = ["PodEvaluator", "is_terminating", "pod_usage"]

POD_OBJECT_COUNT = "count/pods"
_HUGEPAGES = "hugepages-"
_REQUESTS_HUGEPAGES = "requests.hugepages-"
_REQUESTS_IMPLICIT = (
    resources.RESOURCE_REQUESTS_PREFIX + resources.IMPLICIT_EXTENDED_RESOURCE_PREFIX
)
_COMPUTE = ("cpu", "memory", "ephemeral-storage")
# The names quota measures for pods besides prefixed ones (hugepages, extended resources).
POD_RESOURCES = frozenset(
    {
        POD_OBJECT_COUNT,
        "pods",
        *_COMPUTE,
        *(f"requests.{name}" for name in _COMPUTE),
        *(f"limits.{name}" for name in _COMPUTE),
    }
)
# A quota on these makes every container say how much it wants of them (upstream keeps
# this mistake for compatibility and adds nothing to it).
_MUST_BE_SET = frozenset(
    {"cpu", "memory", "requests.cpu", "requests.memory", "limits.cpu", "limits.memory"}
)
_ONE = Quantity(1)

TERMINATING, NOT_TERMINATING = "Terminating", "NotTerminating"
BEST_EFFORT, NOT_BEST_EFFORT = "BestEffort", "NotBestEffort"
PRIORITY_CLASS = "PriorityClass"
CROSS_NAMESPACE_POD_AFFINITY = "CrossNamespacePodAffinity"


def is_extended_resource_name_for_quota(name: str) -> bool:
    """`requests.<extended resource>`, the implicit class names included: the only form
    quota takes for extended resources (they cannot be overcommitted)."""
    if not name.startswith(resources.RESOURCE_REQUESTS_PREFIX):
        return False
    return not resources.is_native_resource(name) or name.startswith(_REQUESTS_IMPLICIT)


def compute_usage(requests: dict[str, Quantity], limits: dict[str, Quantity]) -> ResourceList:
    """The quota names a set of requests and limits charges (`podComputeUsageHelper`)."""
    result: ResourceList = {"pods": _ONE}
    for name in _COMPUTE:
        if name in requests:
            result[name] = result[f"requests.{name}"] = requests[name]
        if name in limits:
            result[f"limits.{name}"] = limits[name]
    for name, quantity in requests.items():
        if name.startswith(_HUGEPAGES):
            result[name] = result[f"requests.{name}"] = quantity
        if resources.is_dra_capable_name(name):
            result[resources.RESOURCE_REQUESTS_PREFIX + name] = quantity
    return result


def is_charged(pod: core_v1.Pod, now: datetime) -> bool:
    """Whether the pod's compute resources count (`QuotaV1Pod`): not in a terminal phase,
    and not past its deletion grace period (a pod stuck terminating on a lost node does not
    keep its namespace from scaling)."""
    if pod.status.phase in ("Succeeded", "Failed"):
        return False
    meta = pod.metadata
    if meta.deletion_timestamp and meta.deletion_grace_period_seconds is not None:
        deleted = datetime.fromisoformat(meta.deletion_timestamp)
        if now > deleted + timedelta(seconds=meta.deletion_grace_period_seconds):
            return False
    return True


def pod_usage(pod: core_v1.Pod, now: datetime) -> ResourceList:
    """What the pod is charged now (`PodUsageFunc`)."""
    result: ResourceList = {POD_OBJECT_COUNT: _ONE}
    if not is_charged(pod, now):
        return result
    return {**result, **compute_usage(resources.pod_requests(pod), resources.pod_limits(pod))}


def is_terminating(pod: core_v1.Pod) -> bool:
    """A pod with an active deadline: the Terminating scope."""
    return pod.spec.active_deadline_seconds is not None and pod.spec.active_deadline_seconds >= 0


def is_best_effort(pod: core_v1.Pod) -> bool:
    """No container requests or limits cpu or memory (the BestEffort QoS class)."""
    for container in pod.spec.all_containers():
        for values in (container.resources.requests, container.resources.limits):
            if any(q > Quantity(0) for n, q in values.items() if n in ("cpu", "memory")):
                return False
    return True


def uses_cross_namespace_pod_affinity(pod: core_v1.Pod) -> bool:
    """A pod (anti-)affinity term that names namespaces or a namespace selector."""
    affinity = pod.spec.affinity
    if affinity is None:
        return False
    for kind in (affinity.pod_affinity, affinity.pod_anti_affinity):
        terms = list((kind or {}).get("requiredDuringSchedulingIgnoredDuringExecution") or [])
        for weighted in (kind or {}).get("preferredDuringSchedulingIgnoredDuringExecution") or []:
            terms.append(weighted.get("podAffinityTerm") or {})
        if any(t.get("namespaces") or t.get("namespaceSelector") is not None for t in terms):
            return True
    return False


def matches_scope(selector: core_v1.ScopedResourceSelectorRequirement, pod: core_v1.Pod) -> bool:
    """Whether the pod falls in one scope of a quota (`podMatchesScopeFunc`)."""
    scope = selector.scope_name
    if scope == TERMINATING:
        return is_terminating(pod)
    if scope == NOT_TERMINATING:
        return not is_terminating(pod)
    if scope == BEST_EFFORT:
        return is_best_effort(pod)
    if scope == NOT_BEST_EFFORT:
        return not is_best_effort(pod)
    if scope == PRIORITY_CLASS:
        name = pod.spec.priority_class_name
        if selector.operator == "Exists":
            return bool(name)
        requirement = labels.Requirement(
            PRIORITY_CLASS, selector.operator, frozenset(selector.values)
        )
        return requirement.matches({PRIORITY_CLASS: name} if name else {})
    if scope == CROSS_NAMESPACE_POD_AFFINITY:
        return uses_cross_namespace_pod_affinity(pod)
    return False


def missing_constraints(required: Iterable[str], pod: core_v1.Pod) -> str | None:
    """With a quota on cpu or memory, every container must set them: the complaint
    (`must specify limits.cpu for: a,b; requests.memory for: a`), or None."""
    wanted = _MUST_BE_SET.intersection(required)
    missing: dict[str, set[str]] = {}
    for container in pod.spec.all_containers():
        have = compute_usage(resources.container_requests(container), container.resources.limits)
        for name in wanted - have.keys():
            missing.setdefault(name, set()).add(container.name)
    if not missing:
        return None
    parts = [f"{name} for: {','.join(sorted(missing[name]))}" for name in sorted(missing)]
    return "must specify " + "; ".join(parts)


class PodEvaluator(generic.Evaluator):
    """Pods: charged on create, and again when the Terminating scope of an update changes."""

    group = ""
    resource = "pods"

    def __init__(self, clock: generic.Clock) -> None:
        self._clock = clock

    def handles(self, operation: str, obj: object, old: object | None) -> bool:
        if operation == generic.UPDATE:
            assert isinstance(obj, core_v1.Pod) and isinstance(old, core_v1.Pod)
            return is_terminating(old) != is_terminating(obj)
        return operation == generic.CREATE

    def matching_resources(self, names: Iterable[str]) -> list[str]:
        return sorted(
            {
                n
                for n in names
                if n in POD_RESOURCES
                or n.startswith((_HUGEPAGES, _REQUESTS_HUGEPAGES))
                or is_extended_resource_name_for_quota(n)
            }
        )

    def matches_scope(
        self, selector: core_v1.ScopedResourceSelectorRequirement, obj: object
    ) -> bool:
        assert isinstance(obj, core_v1.Pod)
        return matches_scope(selector, obj)

    def constraints(self, required: Iterable[str], obj: object) -> str | None:
        assert isinstance(obj, core_v1.Pod)
        return missing_constraints(required, obj)

    def usage(self, obj: object) -> ResourceList:
        assert isinstance(obj, core_v1.Pod)
        return pod_usage(obj, self._clock())
