"""What a ResourceClaim is charged (upstream `pkg/quota/v1/evaluator/core/resource_claims.go`).

Every claim counts as `count/resourceclaims.resource.k8s.io` and, per device class its
requests name, as `<class>.deviceclass.resource.k8s.io/devices`: the count of an ExactCount
request, the 32 devices a claim may hold at most for an `All` request, and for a
prioritized list (`firstAvailable`) the largest of its alternatives for each class.
Administrative access is charged like any other request.

A claim also uses the extended resources its classes stand for (KEP-5004): each class's
devices are charged again as `requests.deviceclass.resource.kubernetes.io/<class>` and, when
the class declares `extendedResourceName: X`, as `requests.X`. The claim the scheduler makes
for a pod's extended resources would so be charged twice, once through its pod; so a
*verified* special claim is charged only what exceeds its pod's own usage of those names.
Verified (kubernetes#135434): it carries the annotation, its controlling owner is a v1 Pod
that exists with that uid, and that pod's `extendedResourceClaimStatus` names it, or, while
the pod names none yet, no other special claim of the pod is older (at equal times, has a
smaller name). A claim that only looks special is charged in full.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any, Protocol

from drasim.common.api import core_v1, resource_v1, resources
from drasim.common.quantity import Quantity
from drasim.common.quota import generic, pods
from drasim.common.quota.resources import ResourceList

__all__ = [
    "ClaimEvaluator",
    "DeviceClassCache",
    "DeviceClassMapping",
    "SpecialClaims",
    "claim_devices",
    "devices_name",
    "special_claim_owner",
]

CLAIM_OBJECT_COUNT = generic.object_count_name("resource.k8s.io", "resourceclaims")
CLAIMS_PER_CLASS = ".deviceclass.resource.k8s.io/devices"
_REQUESTS = resources.RESOURCE_REQUESTS_PREFIX
_REQUESTS_IMPLICIT = _REQUESTS + resources.IMPLICIT_EXTENDED_RESOURCE_PREFIX
_NEVER = datetime.min.replace(tzinfo=UTC)


class DeviceClassMapping(Protocol):
    """Which class serves an extended resource name, and a class's own explicit name."""

    def class_for(self, resource_name: str) -> object | None: ...

    def extended_resource_name_of(self, class_name: str) -> str | None: ...


class DeviceClassCache(DeviceClassMapping, Protocol):
    """A `DeviceClassMapping` fed by DeviceClass events."""

    def on_add(self, cls: resource_v1.DeviceClass) -> None: ...

    def on_update(self, old: resource_v1.DeviceClass, new: resource_v1.DeviceClass) -> None: ...

    def on_delete(self, cls: resource_v1.DeviceClass) -> None: ...


# (name, creationTimestamp) of the special claims a pod (namespace, uid) controls.
OwnedClaims = Callable[[str, str], Iterable[tuple[str, str]]]
# A pod by (namespace, name), or None.
PodGetter = Callable[[str, str], core_v1.Pod | None]


def devices_name(class_name: str) -> str:
    """`<class>.deviceclass.resource.k8s.io/devices`."""
    return class_name + CLAIMS_PER_CLASS


def _devices(mode: str, count: int) -> int:
    """Devices a request may be given: its count (1 when unset), the most a claim can hold
    for `All`; an unknown mode (after a downgrade) is not charged."""
    if mode in ("", resource_v1.ALLOCATION_MODE_EXACT_COUNT):
        return count or 1
    if mode == resource_v1.ALLOCATION_MODE_ALL:
        return resource_v1.ALLOCATION_RESULTS_MAX_SIZE
    return 0


def claim_devices(claim: resource_v1.ResourceClaim) -> ResourceList:
    """The object count and the devices per class a claim may be allocated."""
    result: ResourceList = {CLAIM_OBJECT_COUNT: Quantity(1)}
    for request in claim.spec.devices.requests:
        worst: dict[str, int] = {}
        if request.first_available:
            for sub in request.first_available:
                name = devices_name(sub.device_class_name)
                worst[name] = max(worst.get(name, 0), _devices(sub.allocation_mode, sub.count))
        elif request.exactly is not None:
            exact = request.exactly
            worst[devices_name(exact.device_class_name)] = _devices(
                exact.allocation_mode, exact.count
            )
        for name, count in worst.items():
            result[name] = result.get(name, Quantity(0)) + count
    return result


def _created(stamp: str | None) -> datetime:
    """A creation time; none (an object never stored) is the earliest, as Go's zero time."""
    return datetime.fromisoformat(stamp) if stamp else _NEVER


class ClaimEvaluator(generic.Evaluator):
    """ResourceClaims: charged on create and update of the claim itself."""

    group = "resource.k8s.io"
    resource = "resourceclaims"

    def __init__(
        self,
        *,
        classes: DeviceClassMapping,
        pod_of: PodGetter,
        owned_claims: OwnedClaims,
        clock: generic.Clock,
        extended_resources: bool = True,
    ) -> None:
        self._classes = classes
        self._pod_of = pod_of
        self._owned_claims = owned_claims
        self._clock = clock
        # The DRAExtendedResource gate: off, claims are charged their devices only.
        self._extended_resources = extended_resources

    def handles(self, operation: str, obj: object, old: object | None) -> bool:
        return operation in (generic.CREATE, generic.UPDATE)

    def matching_resources(self, names: Iterable[str]) -> list[str]:
        result = set()
        for name in names:
            if name == CLAIM_OBJECT_COUNT or name.endswith(CLAIMS_PER_CLASS):
                result.add(name)
            elif not self._extended_resources:
                continue
            elif name.startswith(_REQUESTS_IMPLICIT):
                # Upstream asks the class for its explicit name here, so a class without one
                # is not matched by its implicit name.
                if self._classes.extended_resource_name_of(name.removeprefix(_REQUESTS_IMPLICIT)):
                    result.add(name)
            elif (
                pods.is_extended_resource_name_for_quota(name)
                and self._classes.class_for(name.removeprefix(_REQUESTS)) is not None
            ):
                result.add(name)
        return sorted(result)

    def usage(self, obj: object) -> ResourceList:
        assert isinstance(obj, resource_v1.ResourceClaim)
        result = claim_devices(obj)
        if not self._extended_resources:
            return result
        extended: ResourceList = {}
        for name, quantity in result.items():
            class_name = name.removesuffix(CLAIMS_PER_CLASS)
            if class_name == name or not class_name:
                continue
            extended[_REQUESTS_IMPLICIT + class_name] = quantity
            if explicit := self._classes.extended_resource_name_of(class_name):
                extended[_REQUESTS + explicit] = quantity
        pod_usage = self.verified_pod_usage(obj) or {}
        for name, quantity in extended.items():
            remaining = quantity - pod_usage[name] if name in pod_usage else quantity
            if remaining > Quantity(0):
                result[name] = remaining
        return result

    def verified_pod_usage(self, claim: resource_v1.ResourceClaim) -> ResourceList | None:
        """The usage of the pod whose verified special claim this is, else None."""
        annotations = claim.metadata.annotations or {}
        if annotations.get(resource_v1.EXTENDED_RESOURCE_CLAIM_ANNOTATION) != "true":
            return None
        owner = claim.metadata.controller_ref()
        if owner is None or owner.kind != "Pod" or owner.api_version != "v1":
            return None
        namespace = claim.metadata.namespace or ""
        pod = self._pod_of(namespace, owner.name)
        if pod is None or pod.metadata.uid != owner.uid:
            return None
        status = pod.status.extended_resource_claim_status
        if status is not None and status.resource_claim_name != claim.metadata.name:
            return None
        if status is None and not self._is_oldest(claim, namespace, owner.uid):
            return None
        return pods.pod_usage(pod, self._clock())

    def _is_oldest(self, claim: resource_v1.ResourceClaim, namespace: str, pod_uid: str) -> bool:
        """No other special claim of the pod was made before this one (or at the same
        second with a smaller name)."""
        created = _created(claim.metadata.creation_timestamp)
        for name, stamp in self._owned_claims(namespace, pod_uid):
            other = _created(stamp)
            if other < created or (other == created and name < claim.metadata.name):
                return False
        return True


def special_claim_owner(meta: Any) -> str:
    """The uid of the pod that controls a claim marked as a pod's special claim, else ''
    (`meta` is a claim's metadata, or a view of it with the same fields)."""
    if (meta.annotations or {}).get(resource_v1.EXTENDED_RESOURCE_CLAIM_ANNOTATION) != "true":
        return ""
    for owner in meta.owner_references or ():
        if owner.controller and owner.kind == "Pod" and owner.api_version == "v1":
            return owner.uid
    return ""


class SpecialClaims:
    """The special claims each pod controls, kept from claim events (upstream indexes its
    claim informer by owning pod for the evaluator's `claimGetter`)."""

    def __init__(self) -> None:
        self._owned: dict[tuple[str, str], dict[str, str | None]] = {}
        self._owner: dict[tuple[str, str], str] = {}  # (namespace, claim) -> pod uid

    def observe(self, meta: Any, *, deleted: bool = False) -> None:
        """A claim was written (or deleted); `meta` as for `special_claim_owner`."""
        key = (meta.namespace or "", meta.name)
        previous = self._owner.pop(key, "")
        if previous:
            owned = self._owned.get((key[0], previous), {})
            owned.pop(meta.name, None)
            if not owned:
                self._owned.pop((key[0], previous), None)
        owner = "" if deleted else special_claim_owner(meta)
        if owner:
            self._owner[key] = owner
            self._owned.setdefault((key[0], owner), {})[meta.name] = meta.creation_timestamp

    def owned(self, namespace: str, pod_uid: str) -> list[tuple[str, str | None]]:
        """(name, creationTimestamp) of the special claims the pod controls."""
        return list(self._owned.get((namespace, pod_uid), {}).items())
