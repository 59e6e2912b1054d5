"""The special ResourceClaim that carries a pod's DRA-backed extended resources (spec §3.3,
§3.5): how to recognise it, its in-memory form, and its device requests with the
container → request mappings that end up in `pod.status.extendedResourceClaimStatus`.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence

from drasim.common.api import core_v1, meta_v1, resource_v1, resources

__all__ = [
    "DELETE_PROTECTION_FINALIZER",
    "EXTENDED_RESOURCE_CLAIM_ANNOTATION",
    "EXTENDED_RESOURCE_CLAIM_ANNOTATION_VALUE",
    "SPECIAL_CLAIM_GENERATE_NAME_SUFFIX",
    "SPECIAL_CLAIM_IN_MEMORY_NAME",
    "device_requests_for_pod",
    "is_special_claim_for",
    "new_special_claim",
]

EXTENDED_RESOURCE_CLAIM_ANNOTATION = resource_v1.EXTENDED_RESOURCE_CLAIM_ANNOTATION
EXTENDED_RESOURCE_CLAIM_ANNOTATION_VALUE = resource_v1.EXTENDED_RESOURCE_CLAIM_ANNOTATION_VALUE
DELETE_PROTECTION_FINALIZER = resource_v1.DELETE_PROTECTION_FINALIZER
# Deliberately not a valid object name: a claim with it has not been created yet (§3.3.3).
SPECIAL_CLAIM_IN_MEMORY_NAME = "<extended-resources>"
# The API server appends random characters to `<pod name>` + this (§9).
SPECIAL_CLAIM_GENERATE_NAME_SUFFIX = "-extended-resources-"

ResolveDeviceClass = Callable[[str], resource_v1.DeviceClass | None]


def is_special_claim_for(claim: resource_v1.ResourceClaim, pod: core_v1.Pod) -> bool:
    """The pod's special claim: annotated `"true"` and controlled by this very pod (name and
    UID), as upstream's `findExtendedResourceClaim` checks (§3.3.2)."""
    if (
        claim.metadata.annotations.get(EXTENDED_RESOURCE_CLAIM_ANNOTATION)
        != EXTENDED_RESOURCE_CLAIM_ANNOTATION_VALUE
    ):
        return False
    return any(
        ref.controller and ref.name == pod.metadata.name and ref.uid == pod.metadata.uid
        for ref in claim.metadata.owner_references
    )


def new_special_claim(pod: core_v1.Pod) -> resource_v1.ResourceClaim:
    """The in-memory special claim of §3.3.3: no requests yet (Filter adds them per node),
    and a random UID that keys its in-flight allocation until PreBind creates it."""
    return resource_v1.ResourceClaim(
        metadata=meta_v1.ObjectMeta(
            name=SPECIAL_CLAIM_IN_MEMORY_NAME,
            generate_name=pod.metadata.name + SPECIAL_CLAIM_GENERATE_NAME_SUFFIX,
            namespace=pod.metadata.namespace,
            uid=str(uuid.uuid4()),
            annotations={
                EXTENDED_RESOURCE_CLAIM_ANNOTATION: EXTENDED_RESOURCE_CLAIM_ANNOTATION_VALUE
            },
            owner_references=[
                meta_v1.OwnerReference(
                    api_version="v1",
                    kind="Pod",
                    name=pod.metadata.name,
                    uid=pod.metadata.uid,
                    controller=True,
                )
            ],
        )
    )


def device_requests_for_pod(
    pod: core_v1.Pod,
    resolve: ResolveDeviceClass,
    dra_names: set[str] | None = None,
) -> tuple[list[resource_v1.DeviceRequest], list[core_v1.ContainerExtendedResourceRequest]]:
    """The special claim's device requests and the request mappings (spec §3.5).

    `resolve` maps a resource name to its DeviceClass (§2). `dra_names` are the names that
    DRA serves on the node at hand (§3.4.2); by default every DRA-capable name the pod
    requests that resolves to a class.

    Long-lived containers (regular ones and sidecars) each get a request for their full
    quantity. A short-lived init container first reuses the requests of long-lived
    containers that start after it (it runs before them, so their devices are free), and asks
    only for what is still missing; of those extra requests only the largest per resource is
    kept, since init containers run one at a time.
    """
    if dra_names is None:
        dra_names = {
            name
            for name, quantity in resources.pod_requests(pod).items()
            if not quantity.is_zero()
            and resources.is_dra_capable_name(name)
            and resolve(name) is not None
        }
    containers = pod.spec.all_containers()
    init_count = len(pod.spec.init_containers)
    short_lived = [
        i for i in range(init_count) if not resources.is_restartable_init_container(containers[i])
    ]
    long_lived = [i for i in range(len(containers)) if i not in short_lived]

    requests: list[resource_v1.DeviceRequest] = []
    mappings: list[core_v1.ContainerExtendedResourceRequest] = []
    for resource_name in sorted(dra_names):
        cls = resolve(resource_name)
        if cls is None:
            continue
        # Indexed by container position; short-lived containers reuse entries after theirs.
        long_lived_requests: list[resource_v1.DeviceRequest | None] = [None] * len(containers)
        long_lived_mappings: list[core_v1.ContainerExtendedResourceRequest] = []
        for i in long_lived:
            request, container_mappings = _request_and_mappings(
                i, containers[i], resource_name, cls.metadata.name, ()
            )
            long_lived_requests[i] = request
            long_lived_mappings += container_mappings

        largest: resource_v1.DeviceRequest | None = None
        short_lived_names: set[str] = set()
        short_lived_mappings: list[core_v1.ContainerExtendedResourceRequest] = []
        for i in short_lived:
            request, container_mappings = _request_and_mappings(
                i, containers[i], resource_name, cls.metadata.name, long_lived_requests[i:]
            )
            if request is not None:
                short_lived_names.add(request.name)
                if largest is None or _count(largest) < _count(request):
                    largest = request
            short_lived_mappings += container_mappings

        if largest is not None:
            requests.append(largest)
            if len(short_lived_names) > 1:
                # §3.5.6: every init container is served by the one kept short-lived request.
                for mapping in short_lived_mappings:
                    if mapping.request_name in short_lived_names:
                        mapping.request_name = largest.name
        requests += [r for r in long_lived_requests if r is not None]
        mappings += long_lived_mappings + short_lived_mappings

    requests.sort(key=lambda r: r.name)
    return requests, mappings


def _request_and_mappings(
    index: int,
    container: core_v1.Container,
    resource_name: str,
    class_name: str,
    reusable: Sequence[resource_v1.DeviceRequest | None],
) -> tuple[resource_v1.DeviceRequest | None, list[core_v1.ContainerExtendedResourceRequest]]:
    """One container's request for one resource (upstream `createResourceRequestAndMappings`).

    Requests in `reusable` are mapped first until they cover the container's need; a new
    request is made only for the rest. No request and no mapping for a zero or non-integer
    quantity (§3.5.8).
    """
    container_reqs = resources.container_requests(container)
    quantity = container_reqs.get(resource_name)
    # Upstream converts with AsInt64, which refuses a whole number past int64, and so makes
    # no request: the pod would run with none of its devices. Here such a number saturates,
    # as upstream's Value() does, and asks for more devices than a claim may hold (§3.4.5).
    need = None
    if quantity is not None and quantity.value.denominator == 1:
        need = quantity.saturated_int64()
    if not need:
        return None, []
    mappings: list[core_v1.ContainerExtendedResourceRequest] = []
    covered = 0
    for request in reusable:
        if request is None:
            continue
        covered += _count(request)
        mappings.append(_mapping(container, resource_name, request.name))
        if covered >= need:
            return None, mappings
    # §3.5.2: j is the position among all of the container's request keys, cpu included.
    name = f"container-{index}-request-{sorted(container_reqs).index(resource_name)}"
    request = resource_v1.DeviceRequest(
        name=name,
        exactly=resource_v1.ExactDeviceRequest(
            device_class_name=class_name,
            allocation_mode=resource_v1.ALLOCATION_MODE_EXACT_COUNT,
            count=need - covered,
        ),
    )
    mappings.append(_mapping(container, resource_name, name))
    return request, mappings


def _mapping(
    container: core_v1.Container, resource_name: str, request_name: str
) -> core_v1.ContainerExtendedResourceRequest:
    return core_v1.ContainerExtendedResourceRequest(
        container_name=container.name, resource_name=resource_name, request_name=request_name
    )


def _count(request: resource_v1.DeviceRequest) -> int:
    # Every request made here is an ExactCount one.
    return request.exactly.count if request.exactly is not None else 0
