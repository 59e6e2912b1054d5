"""What the scheduler does for a pod whose extended resources DRA serves (upstream
`Reserve`, `PreBind`):
create the special claim already allocated and reserved for the pod, map the containers'
resources to its requests in the pod status, then bind. Tests call it in place of a
scheduler so that they choose the devices."""

from __future__ import annotations

from drasim.common import codec
from drasim.common.api import core_v1, resource_v1
from drasim.common.client import ApiClient

DRIVER = "gpu.example.com"
EXTENDED_RESOURCE_ANNOTATION = "resource.kubernetes.io/extended-resource-claim"
DELETE_PROTECTION = "resource.kubernetes.io/delete-protection"

Mapping = tuple[str, str, str]  # container, resource, request
Result = tuple[str, str]  # request, device


async def create_special_claim(
    api: ApiClient,
    pod: core_v1.Pod,
    node: str,
    results: list[Result],
    *,
    reserved: bool = True,
    driver: str = DRIVER,
    pool: str = "",
) -> resource_v1.ResourceClaim:
    """The special claim of `pod`, allocated on `node` with one result per (request, device)."""
    requests: dict[str, int] = {}
    for request, _ in results:
        requests[request] = requests.get(request, 0) + 1
    claim = codec.convert(
        {
            "metadata": {
                "generateName": f"{pod.metadata.name}-extended-resources-",
                "namespace": pod.metadata.namespace,
                "annotations": {EXTENDED_RESOURCE_ANNOTATION: "true"},
                "finalizers": [DELETE_PROTECTION],
                "ownerReferences": [
                    {
                        "apiVersion": "v1",
                        "kind": "Pod",
                        "name": pod.metadata.name,
                        "uid": pod.metadata.uid,
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            },
            "spec": {
                "devices": {
                    "requests": [
                        {"name": name, "exactly": {"deviceClassName": DRIVER, "count": count}}
                        for name, count in requests.items()
                    ]
                }
            },
        },
        resource_v1.ResourceClaim,
    )
    claim = await api.create(claim)
    claim.status = codec.convert(
        {
            "allocation": {
                "devices": {
                    "results": [
                        {"request": r, "driver": driver, "pool": pool or node, "device": d}
                        for r, d in results
                    ]
                },
                "nodeSelector": {
                    "nodeSelectorTerms": [
                        {
                            "matchFields": [
                                {"key": "metadata.name", "operator": "In", "values": [node]}
                            ]
                        }
                    ]
                },
            },
            "reservedFor": (
                [{"resource": "pods", "name": pod.metadata.name, "uid": pod.metadata.uid}]
                if reserved
                else []
            ),
        },
        resource_v1.ResourceClaimStatus,
    )
    return await api.update_status(claim)


async def reserve(api: ApiClient, claim: resource_v1.ResourceClaim, pod: core_v1.Pod) -> None:
    claim = await api.get(
        resource_v1.ResourceClaim, claim.metadata.name, namespace=claim.metadata.namespace
    )
    claim.status.reserved_for.append(
        resource_v1.ResourceClaimConsumerReference(
            resource="pods", name=pod.metadata.name, uid=pod.metadata.uid
        )
    )
    await api.update_status(claim)


async def schedule_with_dra(
    api: ApiClient,
    pod: core_v1.Pod,
    node: str,
    *,
    mappings: list[Mapping],
    results: list[Result],
    reserved: bool = True,
) -> tuple[core_v1.Pod, resource_v1.ResourceClaim]:
    """Create `pod` and do what the scheduler's Reserve/PreBind/Bind would, then bind it."""
    pod = await api.create(pod)
    claim = await create_special_claim(api, pod, node, results, reserved=reserved)
    await api.patch(
        core_v1.Pod,
        pod.metadata.name,
        {
            "status": {
                "extendedResourceClaimStatus": {
                    "resourceClaimName": claim.metadata.name,
                    "requestMappings": [
                        {"containerName": c, "resourceName": r, "requestName": q}
                        for c, r, q in mappings
                    ],
                }
            }
        },
        namespace=pod.metadata.namespace,
        subresource="status",
    )
    await api.bind(pod, node)
    return pod, claim
