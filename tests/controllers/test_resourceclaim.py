"""The ResourceClaim controller: claims from templates, and releasing claims of finished pods,
the scheduler's special claim included (upstream `pkg/controller/resourceclaim/controller.go`
and its `controller_test.go`)."""

from __future__ import annotations

import re
from typing import Any

import msgspec
import pytest

from drasim.common import codec
from drasim.common.api import core_v1, resource_v1
from drasim.common.client import ApiClient
from drasim.common.informer import Informer
from drasim.controllers import ControllerManager, claimutil
from drasim.controllers.metrics import SOURCE_EXTENDED_RESOURCE, SOURCE_RESOURCE_CLAIM_TEMPLATE
from drasim.controllers.resourceclaim import ResourceClaimController, WorkKey, claim_from_template
from tests.builders import make_claim, make_pod
from tests.controllers.conftest import Changes, run_pod

SUFFIX = "[bcdfghjklmnpqrstvwxz2456789]{5}"
CLASS = "gpu.example.com"
REQUEST = "container-0-request-0"


def make_template(name: str = "gpu-template") -> resource_v1.ResourceClaimTemplate:
    return codec.convert(
        {
            "metadata": {"name": name, "namespace": "default"},
            "spec": {
                "metadata": {"labels": {"team": "a"}, "annotations": {"note": "from-template"}},
                "spec": {
                    "devices": {
                        "requests": [{"name": "gpu", "exactly": {"deviceClassName": CLASS}}]
                    }
                },
            },
        },
        resource_v1.ResourceClaimTemplate,
    )


def claims_of(manager: ControllerManager, pod: core_v1.Pod) -> list[resource_v1.ResourceClaim]:
    return [c for c in manager.resource_claims.list() if claimutil.is_for_pod(pod, c)]


def recorded(manager: ControllerManager, name: str) -> dict[str, str | None]:
    pod = manager.pods.get(name, "default")
    statuses = pod.status.resource_claim_statuses if pod else []
    return {s.name: s.resource_claim_name for s in statuses}


# -- claims from templates --------------------------------------------------------------------


async def test_template_claims_are_made_recorded_owned_and_go_with_the_pod(
    api: ApiClient, manager: ControllerManager, changes: Changes
) -> None:
    template = await api.create(make_template())
    pod = await api.create(
        make_pod("my-pod")
        .claim("gpu", template="gpu-template")
        .claim("gpu2", template="gpu-template")
        .obj()
    )
    names = await changes.until(
        lambda: len(recorded(manager, "my-pod")) == 2 and recorded(manager, "my-pod")
    )
    assert re.fullmatch(f"my-pod-gpu-{SUFFIX}", names["gpu"])
    assert re.fullmatch(f"my-pod-gpu2-{SUFFIX}", names["gpu2"])
    claims = {
        c.metadata.name: c
        for c in await changes.until(
            lambda: len(claims_of(manager, pod)) == 2 and claims_of(manager, pod)
        )
    }
    assert set(claims) == set(names.values())
    for pod_claim, claim_name in names.items():
        claim = claims[claim_name]
        assert claim.metadata.annotations == {
            "note": "from-template",
            resource_v1.POD_CLAIM_NAME_ANNOTATION: pod_claim,
        }
        assert claim.metadata.labels == {"team": "a"}
        [owner] = claim.metadata.owner_references
        assert (owner.api_version, owner.kind, owner.name, owner.uid) == (
            "v1",
            "Pod",
            "my-pod",
            pod.metadata.uid,
        )
        # As upstream's controller: the pod controls it, without blockOwnerDeletion.
        assert owner.controller and not owner.block_owner_deletion
        assert claim.spec == template.spec.spec
    gauge = manager.resource_claim.gauge
    assert gauge.value(allocated=False, source=SOURCE_RESOURCE_CLAIM_TEMPLATE) == 2
    # Upstream's create counter, shared with the scheduler: a Pod owns each claim.
    assert manager.resource_claim.creates.items() == [(("success", "false", "", "Pod"), 2.0)]

    await api.delete(core_v1.Pod, "my-pod", namespace="default")
    await changes.until(lambda: not claims_of(manager, pod))
    assert gauge.samples() == {}


async def test_a_template_created_after_the_pod_is_used_once_it_exists(
    api: ApiClient, manager: ControllerManager, changes: Changes
) -> None:
    await api.create(make_pod("my-pod").claim("gpu", template="gpu-template").obj())
    await changes.until(lambda: manager.pods.get("my-pod", "default"))
    await api.create(make_template())
    names = await changes.until(lambda: recorded(manager, "my-pod"))
    assert re.fullmatch(f"my-pod-gpu-{SUFFIX}", names["gpu"])


async def test_a_deleted_template_claim_is_made_again_while_the_pod_lives(
    api: ApiClient, manager: ControllerManager, changes: Changes
) -> None:
    await api.create(make_template())
    pod = await api.create(make_pod("my-pod").claim("gpu", template="gpu-template").obj())
    first = (await changes.until(lambda: recorded(manager, "my-pod")))["gpu"]
    await changes.until(lambda: claims_of(manager, pod))
    await api.delete(resource_v1.ResourceClaim, first, namespace="default")
    second = await changes.until(
        lambda: (
            (recorded(manager, "my-pod").get("gpu") or first) != first
            and recorded(manager, "my-pod")["gpu"]
        )
    )
    [claim] = await changes.until(lambda: claims_of(manager, pod))
    assert claim.metadata.name == second


async def test_claims_of_a_finished_pod_are_deleted_while_the_pod_object_stays(
    api: ApiClient, manager: ControllerManager, changes: Changes
) -> None:
    made: list[str] = []
    manager.resource_claims.add_handlers(on_add=lambda claim: made.append(claim.metadata.name))
    await api.create(make_template())
    pod = await api.create(make_pod("my-pod").claim("gpu", template="gpu-template").obj())
    await changes.until(lambda: claims_of(manager, pod))
    await run_pod(api, manager.pods.get("my-pod", "default"), phase="Succeeded")
    await changes.until(lambda: not claims_of(manager, pod))
    await manager.resource_claim.queue.join()
    assert manager.pods.get("my-pod", "default") is not None
    # A finished pod needs no claim: the deleted one is not made again.
    assert len(made) == 1 and not claims_of(manager, pod)


def test_long_names_are_cut_in_proportion_to_keep_both() -> None:
    pod = make_pod("p" * 60).claim("gpu-claim", template="t").obj()
    claim = claim_from_template(pod, pod.spec.resource_claims[0], make_template())
    # "<pod>-<claim>-" is 71 characters: each name keeps 57/71 of its length.
    assert claim.metadata.generate_name == "p" * 48 + "-gpu-cla"


async def test_a_users_claim_is_reserved_for_a_pod_bound_without_scheduler_then_released(
    api: ApiClient, manager: ControllerManager, changes: Changes
) -> None:
    claim = await api.create(
        make_claim("shared", finalizers=[resource_v1.DELETE_PROTECTION_FINALIZER])
    )
    claim = await allocate(api, claim, None, request="gpu")
    pod = await api.create(
        make_pod("my-pod").claim("gpu", claim_name="shared").node("worker").obj()
    )

    def stored() -> resource_v1.ResourceClaim:
        return manager.resource_claims.get("shared", "default")

    await changes.until(lambda: claimutil.is_reserved_for_pod(pod, stored()))
    await run_pod(api, manager.pods.get("my-pod", "default"), phase="Succeeded")
    # The last consumer is done: deallocated and unprotected, but a user's claim stays.
    released = await changes.until(
        lambda: stored().status.allocation is None and not stored().metadata.finalizers and stored()
    )
    assert released.status.reserved_for == []
    await manager.resource_claim.queue.join()
    assert await api.get(resource_v1.ResourceClaim, "shared", namespace="default")


# -- the special claim (upstream `enqueuePod`, `syncClaim`) --------------------------------------


async def special_claim_for(api: ApiClient, pod: core_v1.Pod) -> resource_v1.ResourceClaim:
    """What the scheduler's PreBind creates (upstream `bindClaim`): annotation, finalizer,
    owner."""
    return await api.create(
        codec.convert(
            {
                "metadata": {
                    "generateName": f"{pod.metadata.name}-extended-resources-",
                    "namespace": "default",
                    "annotations": {resource_v1.EXTENDED_RESOURCE_CLAIM_ANNOTATION: "true"},
                    "finalizers": [resource_v1.DELETE_PROTECTION_FINALIZER],
                    "ownerReferences": [
                        {
                            "apiVersion": "v1",
                            "kind": "Pod",
                            "name": pod.metadata.name,
                            "uid": pod.metadata.uid,
                            "controller": True,
                        }
                    ],
                },
                "spec": {
                    "devices": {
                        "requests": [
                            {
                                "name": REQUEST,
                                "exactly": {
                                    "deviceClassName": CLASS,
                                    "allocationMode": "ExactCount",
                                    "count": 1,
                                },
                            }
                        ]
                    }
                },
            },
            resource_v1.ResourceClaim,
        )
    )


async def allocate(
    api: ApiClient,
    claim: resource_v1.ResourceClaim,
    pod: core_v1.Pod | None,
    request: str = REQUEST,
) -> resource_v1.ResourceClaim:
    """Allocate the claim's request on node `worker`, reserved for `pod` if given."""
    consumers = (
        []
        if pod is None
        else [{"resource": "pods", "name": pod.metadata.name, "uid": pod.metadata.uid}]
    )
    status = codec.convert(
        {
            "allocation": {
                "devices": {
                    "results": [
                        {"request": request, "driver": CLASS, "pool": "worker", "device": "gpu-0"}
                    ]
                },
                "nodeSelector": {
                    "nodeSelectorTerms": [
                        {
                            "matchFields": [
                                {"key": "metadata.name", "operator": "In", "values": ["worker"]}
                            ]
                        }
                    ]
                },
            },
            "reservedFor": consumers,
        },
        resource_v1.ResourceClaimStatus,
    )
    return await api.update_status(msgspec.structs.replace(claim, status=status))


def extended_resource_claim_status(claim: resource_v1.ResourceClaim) -> dict[str, Any]:
    """What the scheduler's PreBind writes into the pod status (upstream
    `patchPodExtendedResourceClaimStatus`)."""
    mapping = {"containerName": "con0", "resourceName": "example.com/gpu", "requestName": REQUEST}
    return {"requestMappings": [mapping], "resourceClaimName": claim.metadata.name}


async def running_pod_with_special_claim(
    api: ApiClient, manager: ControllerManager, changes: Changes, *, leftovers: int = 0
) -> tuple[core_v1.Pod, resource_v1.ResourceClaim]:
    """A bound, running pod whose `example.com/gpu` came from DRA, as the scheduler and
    kubelet leave it; returned once the controllers have handled all of it. `leftovers`:
    special claims of earlier binding attempts, allocated and reserved for the pod, made
    first and never named by it (their create answers were lost)."""
    pod = await api.create(make_pod("my-pod").limits({"example.com/gpu": "1"}).obj())
    for _ in range(leftovers):
        await allocate(api, await special_claim_for(api, pod), pod)
    # The scheduler's PreBind, then its binding; then the kubelet.
    claim = await allocate(api, await special_claim_for(api, pod), pod)
    status = {"extendedResourceClaimStatus": extended_resource_claim_status(claim)}
    await api.patch(
        core_v1.Pod, "my-pod", {"status": status}, namespace="default", subresource="status"
    )
    await api.bind(pod, "worker")
    pod = await api.patch(
        core_v1.Pod,
        "my-pod",
        {"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}},
        namespace="default",
        subresource="status",
    )
    await settled(manager, changes, pod, claim)
    return pod, claim


async def settled(
    manager: ControllerManager,
    changes: Changes,
    pod: core_v1.Pod,
    claim: resource_v1.ResourceClaim,
) -> None:
    """The controllers have seen these versions and finished all work they caused."""

    def seen(informer: Informer[Any], obj: Any) -> bool:
        cached = informer.get(obj.metadata.name, obj.metadata.namespace)
        return cached is not None and int(cached.metadata.resource_version) >= int(
            obj.metadata.resource_version
        )

    await changes.until(lambda: seen(manager.pods, pod) and seen(manager.resource_claims, claim))
    await manager.resource_claim.queue.join()


async def assert_untouched(api: ApiClient, claim: resource_v1.ResourceClaim) -> None:
    stored = await api.get(resource_v1.ResourceClaim, claim.metadata.name, namespace="default")
    assert stored.metadata.resource_version == claim.metadata.resource_version
    assert stored.status.allocation is not None and stored.status.reserved_for
    assert stored.metadata.finalizers == [resource_v1.DELETE_PROTECTION_FINALIZER]


@pytest.mark.parametrize("end", ["Succeeded", "Failed", "deleted"])
async def test_the_special_claim_is_released_when_its_pod_ends_and_untouched_while_it_runs(
    api: ApiClient, manager: ControllerManager, changes: Changes, end: str
) -> None:
    pod, claim = await running_pod_with_special_claim(api, manager, changes)
    await assert_untouched(api, claim)
    history: list[resource_v1.ResourceClaim] = []
    manager.resource_claims.add_handlers(
        on_update=lambda _old, new: history.append(new), on_delete=history.append
    )

    if end == "deleted":
        # A bound pod terminates gracefully: it still runs, so its claim stays as it is.
        pod = await api.delete(core_v1.Pod, "my-pod", namespace="default")
        assert pod.metadata.deletion_timestamp is not None
        await settled(manager, changes, pod, claim)
        await assert_untouched(api, claim)
        # The kubelet confirms the pod is gone.
        await api.delete(core_v1.Pod, "my-pod", namespace="default", grace_period_seconds=0)
    else:
        await run_pod(api, pod, phase=end)

    await changes.until(lambda: manager.resource_claims.get(claim.metadata.name, "default") is None)
    deallocated = [c for c in history if c.status.allocation is None]
    # Deallocated (no allocation, no consumer) while still protected, then unfinalized.
    assert deallocated[0].status.reserved_for == []
    assert deallocated[0].metadata.finalizers == [resource_v1.DELETE_PROTECTION_FINALIZER]
    assert history[-1].metadata.finalizers == []
    assert history[-1].status.allocation is None


async def test_a_special_claim_its_bound_pod_does_not_name_is_released_and_deleted(
    api: ApiClient, manager: ControllerManager, changes: Changes
) -> None:
    """A binding attempt's special claim whose create answer was lost, found by nothing
    before the next attempt made and bound another: the pod, bound, names the other one.
    The leftover goes (released, deallocated, deleted); the named claim stays as it is."""
    deleted: list[resource_v1.ResourceClaim] = []
    manager.resource_claims.add_handlers(on_delete=deleted.append)
    pod, named = await running_pod_with_special_claim(api, manager, changes, leftovers=1)
    await changes.until(lambda: deleted)
    await manager.resource_claim.queue.join()
    [leftover] = deleted
    assert leftover.metadata.name != named.metadata.name
    assert claimutil.is_for_pod(pod, leftover)
    await assert_untouched(api, named)
    assert [c.metadata.name for c in claims_of(manager, pod)] == [named.metadata.name]


async def test_a_special_claim_of_a_pod_bound_to_a_device_plugin_node_is_deleted(
    api: ApiClient, manager: ControllerManager, changes: Changes
) -> None:
    """An attempt made a special claim, then the pod bound to a node whose device plugin
    serves `example.com/gpu` (no status names a claim): the claim is deleted once the
    pod is bound, not before."""
    pod = await api.create(make_pod("my-pod").limits({"example.com/gpu": "1"}).obj())
    claim = await special_claim_for(api, pod)
    await settled(manager, changes, pod, claim)
    assert manager.resource_claims.get(claim.metadata.name, "default") is not None
    await api.bind(pod, "worker")
    await changes.until(lambda: manager.resource_claims.get(claim.metadata.name, "default") is None)


async def test_the_special_claim_gauge_follows_allocation_and_deletion(
    api: ApiClient, manager: ControllerManager, changes: Changes
) -> None:
    """The special claim counts as `source=extended_resource` (upstream
    `NumResourceClaimsDesc`), allocated or not, until it is gone."""
    gauge = manager.resource_claim.gauge
    pod = await api.create(make_pod("my-pod").limits({"example.com/gpu": "1"}).obj())
    claim = await special_claim_for(api, pod)
    await changes.until(lambda: gauge.value(allocated=False, source=SOURCE_EXTENDED_RESOURCE) == 1)
    assert len(gauge.samples()) == 1

    claim = await allocate(api, claim, pod)
    await changes.until(lambda: gauge.value(allocated=True, source=SOURCE_EXTENDED_RESOURCE) == 1)
    assert len(gauge.samples()) == 1  # the allocated=false series is gone, not 0

    status = {"extendedResourceClaimStatus": extended_resource_claim_status(claim)}
    await api.patch(
        core_v1.Pod, "my-pod", {"status": status}, namespace="default", subresource="status"
    )
    await api.bind(pod, "worker")
    await api.patch(
        core_v1.Pod,
        "my-pod",
        {"status": {"phase": "Succeeded"}},
        namespace="default",
        subresource="status",
    )
    await changes.until(lambda: not gauge.samples())


# -- which pod events enqueue which claims (upstream `enqueuePod`, `testEventHandlers`) --------


class RecordingQueue:
    def __init__(self) -> None:
        self.keys: list[WorkKey] = []

    def add(self, key: WorkKey) -> None:
        self.keys.append(key)


SPECIAL = "my-pod-extended-resources-x2b4c"
TEMPLATE_CLAIM = "my-pod-gpu-x2b4c"


def pod_with_special_claim(**status: Any) -> core_v1.Pod:
    pod = make_pod("my-pod").limits({"example.com/gpu": "1"}).node("worker").dict()
    pod["metadata"]["uid"] = "1234"
    pod["status"] = {
        "phase": "Running",
        "extendedResourceClaimStatus": {
            "requestMappings": [
                {"containerName": "con0", "resourceName": "example.com/gpu", "requestName": REQUEST}
            ],
            "resourceClaimName": SPECIAL,
        },
        **status,
    }
    return codec.convert(pod, core_v1.Pod)


def terminating(pod: core_v1.Pod, *, bound: bool) -> core_v1.Pod:
    meta = msgspec.structs.replace(pod.metadata, deletion_timestamp="2026-07-01T12:00:00Z")
    spec = msgspec.structs.replace(pod.spec, node_name=pod.spec.node_name if bound else "")
    return msgspec.structs.replace(pod, metadata=meta, spec=spec)


def with_template_claim(pod: core_v1.Pod) -> core_v1.Pod:
    data = codec.to_builtins(pod)
    data["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "t"}]
    data["status"]["resourceClaimStatuses"] = [{"name": "gpu", "resourceClaimName": TEMPLATE_CLAIM}]
    return codec.convert(data, core_v1.Pod)


@pytest.mark.parametrize(
    ("pod", "deleted", "claims"),
    [
        (pod_with_special_claim(), False, []),
        (pod_with_special_claim(phase="Succeeded"), False, [SPECIAL]),
        (pod_with_special_claim(phase="Failed"), False, [SPECIAL]),
        (pod_with_special_claim(), True, [SPECIAL]),
        (terminating(pod_with_special_claim(), bound=True), False, []),
        (terminating(pod_with_special_claim(), bound=False), False, [SPECIAL]),
        (with_template_claim(pod_with_special_claim()), False, []),
        (
            with_template_claim(pod_with_special_claim(phase="Succeeded")),
            False,
            [TEMPLATE_CLAIM, SPECIAL],
        ),
    ],
    ids=[
        "running",
        "succeeded",
        "failed",
        "deleted",
        "terminating-while-bound",
        "deleted-before-scheduling",
        "running-with-template-claim",
        "succeeded-with-template-claim",
    ],
)
def test_which_pod_events_enqueue_their_claims(
    pod: core_v1.Pod, deleted: bool, claims: list[str]
) -> None:
    controller = ResourceClaimController(
        None,  # type: ignore[arg-type] - no API calls: only the event handling runs
        pods=Informer(None, core_v1.Pod),  # type: ignore[arg-type]
        claims=Informer(None, resource_v1.ResourceClaim),  # type: ignore[arg-type]
        templates=Informer(None, resource_v1.ResourceClaimTemplate),  # type: ignore[arg-type]
    )
    queue = RecordingQueue()
    controller.queue = queue  # type: ignore[assignment]
    controller.enqueue_pod(pod, deleted=deleted)
    assert [name for kind, _, name in queue.keys if kind == "claim"] == claims


async def test_a_claim_deleted_since_the_informer_saw_it_needs_no_release(
    api: ApiClient, manager: ControllerManager, changes: Changes
) -> None:
    """Its pod gone, the claim's garbage collection can win the race with the controller's
    sync; the update that would release it then finds nothing, which is not an error to
    retry (the informer's DELETED event follows)."""
    gone = make_pod("gone").obj()
    gone.metadata.uid = "gone-uid"
    claim = await allocate(api, await api.create(make_claim("orphan")), gone, request="gpu")
    await changes.until(
        lambda: (
            (seen := manager.resource_claims.get("orphan", "default")) is not None
            and seen.status.reserved_for == []
        )  # the controller released the gone pod's entry
    )
    stale = claim  # as the informer held it before the release
    await api.delete(resource_v1.ResourceClaim, "orphan", namespace="default")
    await changes.until(lambda: manager.resource_claims.get("orphan", "default") is None)

    manager.resource_claims.cache[("default", "orphan")] = stale
    await manager.resource_claim.sync_claim("default", "orphan")  # no NotFound raised
