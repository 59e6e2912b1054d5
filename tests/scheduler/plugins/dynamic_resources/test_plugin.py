"""DynamicResources: the special claim's lifecycle (upstream `TestPlugin` in
`dynamicresources_test.go`, ids B1–B16), user claims, scoring and queueing hints, over an
in-memory fake of the API client; then PreBind's writes and their failure paths (upstream
`bindClaim`, `unreserveExtendedResourceClaim`) through a real apistore."""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import itertools
import logging
import re
from collections.abc import AsyncIterator
from typing import Any, cast

import msgspec
import pytest

from drasim.apistore import patches
from drasim.apistore.faults import FaultPlan, FaultRule
from drasim.apistore.server import ApiServer
from drasim.common import codec, errors
from drasim.common.api import core_v1, meta_v1, resource_v1
from drasim.common.bus.client import Bus
from drasim.common.client import ApiClient
from drasim.common.informer import Informer
from drasim.scheduler import framework
from drasim.scheduler.dra_manager import DraManager
from drasim.scheduler.framework import Code, QueueingHint
from drasim.scheduler.plugins import names, registry
from drasim.scheduler.plugins.dynamic_resources import extended
from drasim.scheduler.plugins.dynamic_resources.plugin import DynamicResources
from drasim.scheduler.plugins.feature import DEFAULT_FEATURES, Features
from tests.scheduler.wrappers import make_device_class, make_node, make_pod

GPU = "example.com/gpu"
GPU2 = "example.com/gpu2"
IMPLICIT = "deviceclass.resource.kubernetes.io/class"
DRIVER = "gpu.example.com"
WORKER = "worker"
ANNOTATION = {resource_v1.EXTENDED_RESOURCE_CLAIM_ANNOTATION: "true"}
FINALIZER = resource_v1.DELETE_PROTECTION_FINALIZER

CLASS = make_device_class("class", GPU)
CLASS2 = make_device_class("class2", GPU2)
DRA_NODE = make_node(WORKER).obj()

ER_OFF = Features(enable_dra_extended_resource=False)


# --- builders ------------------------------------------------------------------------------


def make_slice(node: str = WORKER, devices: int = 1) -> resource_v1.ResourceSlice:
    return codec.convert(
        {
            "metadata": {"name": f"{node}-slice"},
            "spec": {
                "driver": DRIVER,
                "nodeName": node,
                "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                "devices": [{"name": f"instance-{i + 1}"} for i in range(devices)],
            },
        },
        resource_v1.ResourceSlice,
    )


def unstamped(allocation: resource_v1.AllocationResult | None) -> resource_v1.AllocationResult:
    """An allocation PreBind wrote, which it stamps with when (upstream 1.37, with the
    DRADeviceBindingConditions and DRAResourceClaimDeviceStatus gates on by default), without
    that stamp."""
    assert allocation is not None
    assert allocation.allocation_timestamp is not None, "PreBind did not stamp the allocation"
    return msgspec.structs.replace(allocation, allocation_timestamp=None)


def allocation_on(node: str, *results: tuple[str, str]) -> dict[str, Any]:
    """Wire form of an allocation of `(request, device)` pairs on `node`."""
    return {
        "devices": {
            "results": [
                {"request": request, "driver": DRIVER, "pool": node, "device": device}
                for request, device in results
            ]
        },
        "nodeSelector": {
            "nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
            ]
        },
    }


def make_claim(
    name: str,
    *,
    requests: list[dict[str, Any]] | None = None,
    allocated_on: str = "",
    reserved_for: tuple[str, ...] | list[str] = (),
    owner: core_v1.Pod | None = None,
    special: bool = False,
    deleting: bool = False,
) -> resource_v1.ResourceClaim:
    """A claim as the API server stores it; `special` makes it the special claim of
    `owner` from an earlier attempt."""
    if requests is None:
        requests = [{"name": "gpu", "exactly": {"deviceClassName": "class"}}]
    meta: dict[str, Any] = {"name": name, "namespace": "default", "uid": f"uid-{name}"}
    if owner is not None:
        meta["ownerReferences"] = [
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": owner.metadata.name,
                "uid": owner.metadata.uid,
                "controller": True,
            }
        ]
    if special:
        meta["annotations"] = dict(ANNOTATION)
        meta["finalizers"] = [FINALIZER]
    if deleting:
        meta["deletionTimestamp"] = "2026-07-01T00:00:00Z"
    status: dict[str, Any] = {}
    if allocated_on:
        status["allocation"] = allocation_on(allocated_on, (requests[0]["name"], "instance-1"))
        status["reservedFor"] = [
            {"resource": "pods", "name": uid, "uid": uid} for uid in reserved_for
        ]
    return codec.convert(
        {"metadata": meta, "spec": {"devices": {"requests": requests}}, "status": status},
        resource_v1.ResourceClaim,
    )


def with_claims(
    pod: core_v1.Pod, *claims: dict[str, str], statuses: dict[str, str] | None = None
) -> core_v1.Pod:
    """The pod with `spec.resourceClaims` (wire form) and `status.resourceClaimStatuses`."""
    pod = copy.deepcopy(pod)
    pod.spec.resource_claims = [codec.convert(c, core_v1.PodResourceClaim) for c in claims]
    pod.status.resource_claim_statuses = [
        core_v1.PodResourceClaimStatus(name=n, resource_claim_name=c)
        for n, c in (statuses or {}).items()
    ]
    return pod


def pod_with(requests: dict[str, str]) -> core_v1.Pod:
    return make_pod().uid("1234").req(requests).obj()


GPU_POD = pod_with({GPU: "1"})


def naming(pod: core_v1.Pod, claim_name: str) -> core_v1.Pod:
    """The pod with the `extendedResourceClaimStatus` an earlier attempt's PreBind wrote."""
    pod = copy.deepcopy(pod)
    pod.status.extended_resource_claim_status = core_v1.PodExtendedResourceClaimStatus(
        request_mappings=[
            core_v1.ContainerExtendedResourceRequest(
                container_name="con0", resource_name=GPU, request_name="container-0-request-0"
            )
        ],
        resource_claim_name=claim_name,
    )
    return pod


# --- a fake API client -----------------------------------------------------------------------


class FakeApi:
    """The ApiClient methods DynamicResources uses, over dicts. Writes feed the DraManager at
    once, as its informer would; `fail` maps "<verb> <plural>[/status]" to the error that
    verb raises."""

    def __init__(
        self, dra_manager: DraManager, fail: dict[str, errors.ApiError] | None = None
    ) -> None:
        self.dra_manager = dra_manager
        self.fail = fail or {}
        self.objects: dict[tuple[str, str, str], Any] = {}
        self.writes: list[str] = []
        self._versions = itertools.count(100)
        self._suffixes = itertools.count()

    def add(self, obj: Any) -> None:
        obj = copy.deepcopy(obj)
        obj.metadata.resource_version = str(next(self._versions))
        self.objects[self._key(obj)] = obj
        if isinstance(obj, resource_v1.ResourceClaim):
            self.dra_manager.on_claim_add(obj)

    def claims(self) -> list[resource_v1.ResourceClaim]:
        return [o for o in self.objects.values() if isinstance(o, resource_v1.ResourceClaim)]

    @staticmethod
    def _key(obj: Any) -> tuple[str, str, str]:
        return (obj.KIND, obj.metadata.namespace, obj.metadata.name)

    def _write(self, verb: str, obj: Any, subresource: str = "") -> None:
        what = f"{verb} {obj.KIND.lower()}s" + (f"/{subresource}" if subresource else "")
        if what in self.fail:
            raise self.fail[what]
        self.writes.append(what)

    def _store(self, obj: Any) -> Any:
        obj.metadata.resource_version = str(next(self._versions))
        old = self.objects.get(self._key(obj))
        self.objects[self._key(obj)] = obj
        if isinstance(obj, resource_v1.ResourceClaim):
            if old is None:
                self.dra_manager.on_claim_add(obj)
            else:
                self.dra_manager.on_claim_update(old, obj)
        return copy.deepcopy(obj)

    def _current(self, type_: type, name: str, namespace: str) -> Any:
        obj = self.objects.get((type_.KIND, namespace, name))
        if obj is None:
            raise errors.NotFound(f'{type_.KIND.lower()}s "{name}" not found')
        return obj

    async def create(self, obj: Any) -> Any:
        self._write("create", obj)
        obj = copy.deepcopy(obj)
        obj.metadata.name = obj.metadata.generate_name + f"{next(self._suffixes):05d}"
        obj.metadata.uid = f"uid-{obj.metadata.name}"
        return self._store(obj)

    async def get(self, type_: type, name: str, *, namespace: str = "") -> Any:
        return copy.deepcopy(self._current(type_, name, namespace))

    async def update(self, obj: Any, *, subresource: str = "") -> Any:
        self._write("update", obj, subresource)
        old = self._current(type(obj), obj.metadata.name, obj.metadata.namespace)
        if obj.metadata.resource_version != old.metadata.resource_version:
            raise errors.Conflict("the object has been modified")
        new = copy.deepcopy(old)
        if subresource == "status":
            new.status = copy.deepcopy(obj.status)
        else:
            new.metadata.finalizers = list(obj.metadata.finalizers)
        if new.metadata.deletion_timestamp and not new.metadata.finalizers:
            return self._remove(new)
        return self._store(new)

    async def update_status(self, obj: Any) -> Any:
        return await self.update(obj, subresource="status")

    async def patch(
        self, type_: type, name: str, patch: Any, *, namespace: str = "", subresource: str = ""
    ) -> Any:
        old = self._current(type_, name, namespace)
        self._write("patch", old, subresource)
        merged = patches.merge_patch(codec.to_builtins(old), patch)
        return self._store(codec.convert(merged, type_))

    async def delete(self, type_: type, name: str, *, namespace: str = "") -> Any:
        obj = copy.deepcopy(self._current(type_, name, namespace))
        self._write("delete", obj)
        if obj.metadata.finalizers:
            obj.metadata.deletion_timestamp = "2026-07-01T00:00:00Z"
            return self._store(obj)
        return self._remove(obj)

    def _remove(self, obj: Any) -> Any:
        del self.objects[self._key(obj)]
        if isinstance(obj, resource_v1.ResourceClaim):
            self.dra_manager.on_claim_delete(obj)
        return obj


def make_plugin(
    *,
    classes: tuple[resource_v1.DeviceClass, ...] = (CLASS,),
    devices: int = 1,
    objects: tuple[Any, ...] = (),
    fail: dict[str, errors.ApiError] | None = None,
    features: Features = DEFAULT_FEATURES,
) -> tuple[DynamicResources, DraManager, FakeApi]:
    dra_manager = DraManager()
    for cls in classes:
        dra_manager.on_class_add(cls)
    if devices:
        dra_manager.on_slice_add(make_slice(devices=devices))
    api = FakeApi(dra_manager, fail)
    for obj in objects:
        api.add(obj)
    plugin = DynamicResources(
        dra_manager,
        cast(ApiClient, api),
        features=features,
        assume_extended_resource_timeout=0.5,
    )
    return plugin, dra_manager, api


# --- one scheduling attempt ----------------------------------------------------------------

Summary = tuple[Code, str] | None


def summary(status: framework.Status | None) -> Summary:
    return None if status is None else (status.code, status.message())


async def schedule(
    plugin: DynamicResources,
    pod: core_v1.Pod,
    nodes: tuple[core_v1.Node, ...],
    *,
    bind_fails: bool = False,
    stop_after_reserve: bool = False,
) -> dict[str, Summary]:
    """Run the plugin's points as the framework would, on the first feasible node; returns
    each point's status by name (`filter <node>` per node)."""
    state = framework.CycleState()
    node_infos = [framework.NodeInfo(node) for node in nodes]
    _, status = plugin.pre_filter(state, pod, node_infos)
    got: dict[str, Summary] = {"pre_filter": summary(status)}
    feasible = []
    if framework.is_skip(status):
        feasible = node_infos
    elif status is None:
        for node_info in node_infos:
            status = plugin.filter(state, pod, node_info)
            got[f"filter {node_info.name}"] = summary(status)
            if status is None:
                feasible.append(node_info)
    if not feasible:
        got["post_filter"] = summary(await plugin.post_filter(state, pod, framework.Diagnosis()))
        return got
    node_name = feasible[0].name
    got["reserve"] = summary(plugin.reserve(state, pod, node_name))
    if stop_after_reserve:
        await plugin.unreserve(state, pod, node_name)
        return got
    status = await plugin.pre_bind(state, pod, node_name)
    got["pre_bind"] = summary(status)
    if status is not None or bind_fails:
        await plugin.unreserve(state, pod, node_name)
    return got


def matches(got: dict[str, Summary], want: dict[str, Summary]) -> bool:
    """Same points ran; each status has the wanted code and its message contains the
    wanted text (an empty one: has no message at all)."""
    if got.keys() != want.keys():
        return False
    for point, wanted in want.items():
        actual = got[point]
        if (actual is None) != (wanted is None):
            return False
        if actual is None or wanted is None:
            continue
        text_ok = wanted[1] in actual[1] if wanted[1] else actual[1] == ""
        if actual[0] != wanted[0] or not text_ok:
            return False
    return True


def special_claims(api: FakeApi) -> list[resource_v1.ResourceClaim]:
    return [c for c in api.claims() if c.metadata.annotations == ANNOTATION]


def in_api_devices(api: FakeApi) -> set[tuple[str, str, str]]:
    return {
        (r.driver, r.pool, r.device)
        for c in api.claims()
        if c.status.allocation is not None
        for r in c.status.allocation.devices.results
    }


SKIP = (Code.SKIP, "")
OK = None
# PostFilter with nothing to deallocate: upstream 1.37 logs why and gives no reason.
NO_REASON = (Code.UNSCHEDULABLE, "")
UNRESOLVABLE = Code.UNSCHEDULABLE_AND_UNRESOLVABLE


# --- B: the special claim's lifecycle ------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    pod: core_v1.Pod
    want: dict[str, Summary]
    nodes: tuple[core_v1.Node, ...] = (DRA_NODE,)
    classes: tuple[resource_v1.DeviceClass, ...] = (CLASS,)
    devices: int = 1
    claims: tuple[resource_v1.ResourceClaim, ...] = ()
    pending: str = ""  # a claim whose allocation is in flight
    fail: dict[str, errors.ApiError] = dataclasses.field(default_factory=dict)
    bind_fails: bool = False
    stop_after_reserve: bool = False
    # The special claim in the API at the end: its requests (name, class, count), devices.
    want_requests: list[tuple[str, str, int]] | None = None
    want_devices: int = 0
    want_mappings: list[tuple[str, str, str]] | None = None
    want_creates: dict[str, int] = dataclasses.field(default_factory=dict)
    want_writes: list[str] | None = None


STALE_SPECIAL = dict(
    requests=[
        {
            "name": "container-0-request-0",
            "exactly": {"deviceClassName": "class", "allocationMode": "ExactCount", "count": 1},
        }
    ],
    owner=GPU_POD,
    special=True,
)

B_CASES = [
    Case(
        "B1 no requests, no claims",
        make_pod().uid("1234").obj(),
        nodes=(),
        want={
            "pre_filter": SKIP,
            "post_filter": NO_REASON,
        },
    ),
    Case(
        "B2 device plugin serves gpu: no claim",
        GPU_POD,
        nodes=(make_node(WORKER).capacity({GPU: "1"}).obj(),),
        want={"pre_filter": OK, f"filter {WORKER}": OK, "reserve": OK, "pre_bind": OK},
        want_writes=[],
    ),
    Case(
        "B3 device plugin gpu, DRA gpu2",
        pod_with({GPU: "1", GPU2: "1"}),
        nodes=(make_node(WORKER).capacity({GPU: "1"}).obj(),),
        classes=(CLASS, CLASS2),
        want={"pre_filter": OK, f"filter {WORKER}": OK, "reserve": OK, "pre_bind": OK},
        want_requests=[("container-0-request-1", "class2", 1)],
        want_devices=1,
        want_mappings=[("con0", GPU2, "container-0-request-1")],
        want_creates={"success": 1},
    ),
    Case(
        "B4 device plugin capacity 0 means DRA",
        GPU_POD,
        nodes=(make_node(WORKER).capacity({GPU: "0"}).obj(),),
        want={"pre_filter": OK, f"filter {WORKER}": OK, "reserve": OK, "pre_bind": OK},
        want_requests=[("container-0-request-0", "class", 1)],
        want_devices=1,
        want_mappings=[("con0", GPU, "container-0-request-0")],
        want_creates={"success": 1},
    ),
    Case(
        "B5 class without explicit name: gpu not DRA-backed",
        GPU_POD,
        nodes=(make_node(WORKER).capacity({GPU: "0"}).obj(),),
        classes=(make_device_class("class"),),
        want={"pre_filter": SKIP, "reserve": OK, "pre_bind": OK},
        want_writes=[],
    ),
    Case(
        "B6 no slices",
        GPU_POD,
        devices=0,
        want={
            "pre_filter": OK,
            f"filter {WORKER}": (UNRESOLVABLE, "cannot allocate all claims"),
            "post_filter": NO_REASON,
        },
    ),
    Case(
        "B7 one device",
        GPU_POD,
        want={"pre_filter": OK, f"filter {WORKER}": OK, "reserve": OK, "pre_bind": OK},
        want_requests=[("container-0-request-0", "class", 1)],
        want_devices=1,
        want_mappings=[("con0", GPU, "container-0-request-0")],
        want_creates={"success": 1},
    ),
    Case(
        "B8 implicit and explicit name in one container",
        pod_with({IMPLICIT: "1", GPU: "2"}),
        devices=4,
        want={"pre_filter": OK, f"filter {WORKER}": OK, "reserve": OK, "pre_bind": OK},
        want_requests=[
            ("container-0-request-0", "class", 1),
            ("container-0-request-1", "class", 2),
        ],
        want_devices=3,
        want_mappings=[
            ("con0", IMPLICIT, "container-0-request-0"),
            ("con0", GPU, "container-0-request-1"),
        ],
        want_creates={"success": 1},
    ),
    Case(
        "B9 two containers",
        make_pod().uid("1234").container({IMPLICIT: "1"}).container({GPU: "2"}).obj(),
        devices=4,
        want={"pre_filter": OK, f"filter {WORKER}": OK, "reserve": OK, "pre_bind": OK},
        want_requests=[
            ("container-0-request-0", "class", 1),
            ("container-1-request-0", "class", 2),
        ],
        want_devices=3,
        want_mappings=[
            ("con0", IMPLICIT, "container-0-request-0"),
            ("con1", GPU, "container-1-request-0"),
        ],
        want_creates={"success": 1},
    ),
    Case(
        "B10 pod status patch fails",
        GPU_POD,
        fail={"patch pods/status": errors.InternalError("patch error")},
        want={
            "pre_filter": OK,
            f"filter {WORKER}": OK,
            "reserve": OK,
            "pre_bind": (Code.ERROR, "patch error"),
        },
        want_creates={"success": 1},
    ),
    Case(
        "B11 special claim from an earlier attempt",
        GPU_POD,
        claims=(make_claim("stale", allocated_on=WORKER, **STALE_SPECIAL),),
        want={
            "pre_filter": OK,
            f"filter {WORKER}": (UNRESOLVABLE, "cannot schedule extended resource claim"),
            "post_filter": (Code.UNSCHEDULABLE, "deletion of ResourceClaim completed"),
        },
    ),
    Case(
        "B12 special claim allocated for another node",
        GPU_POD,
        claims=(make_claim("stale", allocated_on="worker-2", **STALE_SPECIAL),),
        want={
            "pre_filter": OK,
            f"filter {WORKER}": (UNRESOLVABLE, "cannot schedule extended resource claim"),
            "post_filter": (Code.UNSCHEDULABLE, "deletion of ResourceClaim completed"),
        },
    ),
    Case(
        "B13 bind fails after PreBind: the claim goes, and the status naming it",
        GPU_POD,
        bind_fails=True,
        want={"pre_filter": OK, f"filter {WORKER}": OK, "reserve": OK, "pre_bind": OK},
        want_creates={"success": 1},
        want_writes=[
            "create resourceclaims",
            "update resourceclaims",
            "update resourceclaims/status",
            "patch pods/status",
            "update resourceclaims",  # Unreserve: the finalizer
            "delete resourceclaims",
            "patch pods/status",  # the status names no claim
        ],
    ),
    Case(
        "B14 unreserve before PreBind",
        GPU_POD,
        stop_after_reserve=True,
        want={"pre_filter": OK, f"filter {WORKER}": OK, "reserve": OK},
        want_writes=[],
    ),
    Case(
        "B15 create fails",
        GPU_POD,
        fail={"create resourceclaims": errors.BadRequest("claim creation errors")},
        want={
            "pre_filter": OK,
            f"filter {WORKER}": OK,
            "reserve": OK,
            "pre_bind": (Code.ERROR, "claim creation errors"),
        },
        want_creates={"failure": 1},
        want_writes=[],
    ),
    Case(
        "B16 allocation in flight",
        GPU_POD,
        claims=(make_claim("stale", owner=GPU_POD, special=True),),
        pending="stale",
        want={
            "pre_filter": (
                UNRESOLVABLE,
                "resource claim default/stale is in the process of being allocated",
            ),
            "post_filter": NO_REASON,
        },
    ),
    Case(
        "B17 device plugin node: a status naming a deleted claim is cleared before binding",
        naming(GPU_POD, "gone"),
        nodes=(make_node(WORKER).capacity({GPU: "1"}).obj(),),
        want={"pre_filter": OK, f"filter {WORKER}": OK, "reserve": OK, "pre_bind": OK},
        want_writes=["patch pods/status"],
    ),
    Case(
        "B18 device plugin node: the stale status cannot be cleared, the pod does not bind",
        naming(GPU_POD, "gone"),
        nodes=(make_node(WORKER).capacity({GPU: "1"}).obj(),),
        fail={"patch pods/status": errors.InternalError("patch error")},
        want={
            "pre_filter": OK,
            f"filter {WORKER}": OK,
            "reserve": OK,
            "pre_bind": (
                Code.ERROR,
                "clear pod default/my-pod ExtendedResourceClaimStatus: patch error",
            ),
        },
        want_mappings=[("con0", GPU, "container-0-request-0")],
        want_writes=[],
    ),
    Case(
        "B19 DRA node: a status naming a deleted claim names the new one",
        naming(GPU_POD, "gone"),
        want={"pre_filter": OK, f"filter {WORKER}": OK, "reserve": OK, "pre_bind": OK},
        want_requests=[("container-0-request-0", "class", 1)],
        want_devices=1,
        want_mappings=[("con0", GPU, "container-0-request-0")],
        want_creates={"success": 1},
    ),
    Case(
        "B20 PostFilter deletes the earlier attempt's claim and clears the status naming it",
        naming(GPU_POD, "stale"),
        claims=(make_claim("stale", allocated_on=WORKER, **STALE_SPECIAL),),
        want={
            "pre_filter": OK,
            f"filter {WORKER}": (UNRESOLVABLE, "cannot schedule extended resource claim"),
            "post_filter": (Code.UNSCHEDULABLE, "deletion of ResourceClaim completed"),
        },
        want_writes=["update resourceclaims", "delete resourceclaims", "patch pods/status"],
    ),
]


@pytest.mark.parametrize("case", B_CASES, ids=lambda c: c.name)
async def test_special_claim_lifecycle(case: Case) -> None:
    pod = case.pod
    plugin, dra_manager, api = make_plugin(
        classes=case.classes, devices=case.devices, objects=(pod, *case.claims), fail=case.fail
    )
    if case.pending:
        claim = dra_manager.get_claim("default", case.pending)
        assert claim is not None
        dra_manager.signal_claim_pending_allocation(claim.metadata.uid, claim)

    got = await schedule(
        plugin,
        pod,
        case.nodes,
        bind_fails=case.bind_fails,
        stop_after_reserve=case.stop_after_reserve,
    )

    assert matches(got, case.want), got
    existing = {claim.metadata.name for claim in case.claims}
    specials = [c for c in special_claims(api) if c.metadata.name not in existing]
    if case.want_requests is None:
        assert specials == []
    else:
        [claim] = specials
        requests = [
            (r.name, r.exactly.device_class_name, r.exactly.count)
            for r in claim.spec.devices.requests
            if r.exactly is not None
        ]
        assert requests == case.want_requests
        assert claim.status.allocation is not None
        assert len(claim.status.allocation.devices.results) == case.want_devices
        assert [ref.uid for ref in claim.status.reserved_for] == ["1234"]
        assert claim.metadata.finalizers == [FINALIZER]
    stored_pod = api.objects[("Pod", "default", "my-pod")]
    status = stored_pod.status.extended_resource_claim_status
    if case.want_mappings is None:
        assert status is None
    else:
        assert status is not None
        if specials:
            assert status.resource_claim_name == specials[0].metadata.name
        assert [
            (m.container_name, m.resource_name, m.request_name) for m in status.request_mappings
        ] == case.want_mappings
    assert dict(plugin.resourceclaim_creates_total) == case.want_creates
    if case.want_writes is not None:
        assert api.writes == case.want_writes
    # Nothing stays in flight: the devices taken are those the API records.
    if not case.pending:
        assert dra_manager.pending_allocations() == []
        assert set(dra_manager.allocated) == in_api_devices(api)


async def test_b7_reserve_holds_the_in_memory_claim_until_pre_bind() -> None:
    plugin, dra_manager, api = make_plugin(objects=(GPU_POD,))
    state = framework.CycleState()
    node_info = framework.NodeInfo(DRA_NODE)
    assert plugin.pre_filter(state, GPU_POD, [node_info]) == (None, None)
    assert plugin.filter(state, GPU_POD, node_info) is None
    assert plugin.reserve(state, GPU_POD, WORKER) is None

    [pending] = dra_manager.pending_allocations()
    assert pending.metadata.name == extended.SPECIAL_CLAIM_IN_MEMORY_NAME
    assert pending.metadata.finalizers == [FINALIZER]
    assert pending.status.allocation == codec.convert(
        allocation_on(WORKER, ("container-0-request-0", "instance-1")),
        resource_v1.AllocationResult,
    )
    assert (DRIVER, WORKER, "instance-1") in dra_manager.allocated
    assert api.writes == []

    assert await plugin.pre_bind(state, GPU_POD, WORKER) is None
    [claim] = special_claims(api)
    assert claim.metadata.name.startswith("my-pod-extended-resources-")
    assert unstamped(claim.status.allocation) == pending.status.allocation
    assert dra_manager.pending_allocations() == []
    assert dra_manager.get_claim("default", claim.metadata.name) == claim
    assert api.writes == [
        "create resourceclaims",
        "update resourceclaims",
        "update resourceclaims/status",
        "patch pods/status",
    ]


async def test_a_status_unreserve_could_not_clear_is_cleared_before_binding(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The binding fails and so does Unreserve's clearing of the status naming the claim it
    deleted: the next attempt clears it before the pod binds to a device-plugin node, even
    though the pod, as the informer has it, does not show the name yet."""
    plugin, _, api = make_plugin(objects=(GPU_POD,))
    state = await through_reserve(plugin, GPU_POD)
    assert await plugin.pre_bind(state, GPU_POD, WORKER) is None
    api.fail["patch pods/status"] = errors.ServiceUnavailable("apistore unavailable")

    with caplog.at_level(logging.ERROR):
        await plugin.unreserve(state, GPU_POD, WORKER)

    assert special_claims(api) == []
    stored = api.objects[("Pod", "default", "my-pod")]
    status = stored.status.extended_resource_claim_status
    assert status is not None and status.resource_claim_name == "my-pod-extended-resources-00000"
    assert [r.getMessage() for r in caplog.records] == [
        "clear pod default/my-pod ExtendedResourceClaimStatus: apistore unavailable"
    ]

    del api.fail["patch pods/status"]
    api.writes.clear()
    dp_node = make_node(WORKER).capacity({GPU: "1"}).obj()
    got = await schedule(plugin, GPU_POD, (dp_node,))

    assert got == {"pre_filter": OK, f"filter {WORKER}": OK, "reserve": OK, "pre_bind": OK}
    assert api.writes == ["patch pods/status"]
    stored = api.objects[("Pod", "default", "my-pod")]
    assert stored.status.extended_resource_claim_status is None


async def test_gate_off_makes_no_special_claim() -> None:
    plugin, _, _ = make_plugin(objects=(GPU_POD,), features=ER_OFF)
    state = framework.CycleState()
    assert plugin.pre_filter(state, GPU_POD, [framework.NodeInfo(DRA_NODE)]) == (
        None,
        framework.Status.skip(),
    )


async def test_subrequests_are_unschedulable_while_prioritized_list_is_off() -> None:
    prioritized = make_claim(
        "my-claim",
        requests=[{"name": "gpu", "firstAvailable": [{"name": "a", "deviceClassName": "class"}]}],
    )
    pod = with_claims(pod_with({}), {"name": "gpu", "resourceClaimName": "my-claim"})
    off = Features(enable_dra_prioritized_list=False)
    plugin, _, _ = make_plugin(objects=(prioritized,), features=off)
    assert (await schedule(plugin, pod, (DRA_NODE,)))["pre_filter"] == (
        Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
        "resource claim default/my-claim, request gpu: has subrequests, but the "
        "DRAPrioritizedList feature is disabled",
    )
    plugin, _, _ = make_plugin(objects=(prioritized,))
    assert (await schedule(plugin, pod, (DRA_NODE,)))["pre_bind"] is None


async def test_admin_access_is_an_error_while_its_gate_is_off() -> None:
    admin = make_claim(
        "my-claim",
        requests=[{"name": "gpu", "exactly": {"deviceClassName": "class", "adminAccess": True}}],
    )
    pod = with_claims(pod_with({}), {"name": "gpu", "resourceClaimName": "my-claim"})
    off = Features(enable_dra_admin_access=False)
    plugin, _, _ = make_plugin(objects=(admin,), features=off)
    got = await schedule(plugin, pod, (DRA_NODE,))
    assert got[f"filter {WORKER}"] == (
        Code.ERROR,
        "claim default/my-claim, request gpu: admin access is requested, but the feature is "
        "disabled",
    )


async def test_too_many_devices_is_an_error() -> None:
    """More than 32 devices in one claim (`AllocationResultsMaxSize`) is an allocator
    error, not a misfit."""
    plugin, _, _ = make_plugin(objects=(GPU_POD,))
    pod = pod_with({GPU: "33"})
    state = framework.CycleState()
    node_info = framework.NodeInfo(DRA_NODE)
    plugin.pre_filter(state, pod, [node_info])
    status = plugin.filter(state, pod, node_info)
    assert status is not None and status.code == Code.ERROR
    assert "number of requested devices 33 exceeds the claim limit of 32" in status.message()


async def test_dra_capable_name_nowhere_served_cannot_fit() -> None:
    """An extended resource that neither DRA nor the node serves (upstream
    `filterExtendedResources`: "cannot fit resource")."""
    plugin, _, _ = make_plugin(objects=(GPU_POD,))
    pod = pod_with({GPU: "1", "example.com/other": "1"})
    state = framework.CycleState()
    node_info = framework.NodeInfo(DRA_NODE)
    plugin.pre_filter(state, pod, [node_info])
    assert plugin.filter(state, pod, node_info) == framework.Status.unresolvable(
        "cannot fit resource"
    )


# --- user claims -----------------------------------------------------------------------------

CLAIM_POD = with_claims(GPU_POD, {"name": "gpu", "resourceClaimName": "my-claim"})
NO_ER_CLAIM_POD = with_claims(
    make_pod().uid("1234").obj(), {"name": "gpu", "resourceClaimName": "my-claim"}
)
TEMPLATE_POD = with_claims(
    make_pod().uid("1234").obj(),
    {"name": "gpu", "resourceClaimTemplateName": "tmpl"},
    statuses={"gpu": "my-pod-gpu-abcde"},
)


@dataclasses.dataclass(frozen=True)
class ClaimCase:
    name: str
    pod: core_v1.Pod
    claims: tuple[resource_v1.ResourceClaim, ...]
    want: dict[str, Summary]
    nodes: tuple[core_v1.Node, ...] = (DRA_NODE,)
    devices: int = 1
    # Per user claim name at the end: (allocated devices or None, reservedFor uids).
    want_claims: dict[str, tuple[list[str] | None, list[str]]] = dataclasses.field(
        default_factory=dict
    )
    want_special: bool = False


USER_CLAIM_CASES = [
    ClaimCase(
        "claim missing",
        NO_ER_CLAIM_POD,
        claims=(),
        want={
            "pre_filter": (UNRESOLVABLE, 'resourceclaim.resource.k8s.io "my-claim" not found'),
            "post_filter": NO_REASON,
        },
    ),
    ClaimCase(
        "template claim not created yet",
        with_claims(
            make_pod().uid("1234").obj(), {"name": "gpu", "resourceClaimTemplateName": "t"}
        ),
        claims=(),
        want={
            "pre_filter": (UNRESOLVABLE, 'pod "default/my-pod": ResourceClaim not created yet'),
            "post_filter": NO_REASON,
        },
    ),
    ClaimCase(
        "template claim owned by another pod",
        TEMPLATE_POD,
        claims=(make_claim("my-pod-gpu-abcde", owner=make_pod("other").obj()),),
        want={
            "pre_filter": (UNRESOLVABLE, "(pod is not owner)"),
            "post_filter": NO_REASON,
        },
    ),
    ClaimCase(
        "claim being deleted",
        NO_ER_CLAIM_POD,
        claims=(make_claim("my-claim", deleting=True),),
        want={
            "pre_filter": (UNRESOLVABLE, 'resourceclaim "my-claim" is being deleted'),
            "post_filter": NO_REASON,
        },
    ),
    ClaimCase(
        "claim reserved for 256 other pods",
        NO_ER_CLAIM_POD,
        claims=(
            make_claim("my-claim", allocated_on=WORKER, reserved_for=[f"p{i}" for i in range(256)]),
        ),
        want={
            "pre_filter": (UNRESOLVABLE, "resourceclaim in use"),
            "post_filter": NO_REASON,
        },
        want_claims={"my-claim": (["instance-1"], [f"p{i}" for i in range(256)])},
    ),
    ClaimCase(
        "device class missing",
        NO_ER_CLAIM_POD,
        claims=(
            make_claim(
                "my-claim", requests=[{"name": "r", "exactly": {"deviceClassName": "nope"}}]
            ),
        ),
        want={
            "pre_filter": (UNRESOLVABLE, "request r: device class nope does not exist"),
            "post_filter": NO_REASON,
        },
        want_claims={"my-claim": (None, [])},
    ),
    ClaimCase(
        "template claim allocated and reserved",
        TEMPLATE_POD,
        claims=(make_claim("my-pod-gpu-abcde", owner=TEMPLATE_POD),),
        want={"pre_filter": OK, f"filter {WORKER}": OK, "reserve": OK, "pre_bind": OK},
        want_claims={"my-pod-gpu-abcde": (["instance-1"], ["1234"])},
    ),
    ClaimCase(
        "allocated claim restricts the nodes",
        NO_ER_CLAIM_POD,
        nodes=(DRA_NODE, make_node("worker-2").obj()),
        claims=(make_claim("my-claim", allocated_on="worker-2", reserved_for=["other"]),),
        want={
            "pre_filter": OK,
            f"filter {WORKER}": (UNRESOLVABLE, "resourceclaim not available on the node"),
            "filter worker-2": OK,
            "reserve": OK,
            "pre_bind": OK,
        },
        want_claims={"my-claim": (["instance-1"], ["other", "1234"])},
    ),
    ClaimCase(
        "unavailable unshared claim gets deallocated",
        NO_ER_CLAIM_POD,
        claims=(make_claim("my-claim", allocated_on="worker-2"),),
        want={
            "pre_filter": OK,
            f"filter {WORKER}": (UNRESOLVABLE, "resourceclaim not available on the node"),
            "post_filter": (Code.UNSCHEDULABLE, "deallocation of ResourceClaim completed"),
        },
        want_claims={"my-claim": (None, [])},
    ),
    ClaimCase(
        "unavailable shared claim stays",
        NO_ER_CLAIM_POD,
        claims=(make_claim("my-claim", allocated_on="worker-2", reserved_for=["other"]),),
        want={
            "pre_filter": OK,
            f"filter {WORKER}": (UNRESOLVABLE, "resourceclaim not available on the node"),
            "post_filter": NO_REASON,
        },
        want_claims={"my-claim": (["instance-1"], ["other"])},
    ),
    ClaimCase(
        "user claim and special claim share one allocation",
        CLAIM_POD,
        devices=2,
        claims=(make_claim("my-claim"),),
        want={"pre_filter": OK, f"filter {WORKER}": OK, "reserve": OK, "pre_bind": OK},
        want_claims={"my-claim": (["instance-1"], ["1234"])},
        want_special=True,
    ),
    ClaimCase(
        "user claim and special claim do not fit on one device",
        CLAIM_POD,
        claims=(make_claim("my-claim"),),
        want={
            "pre_filter": OK,
            f"filter {WORKER}": (UNRESOLVABLE, "cannot allocate all claims"),
            "post_filter": NO_REASON,
        },
        want_claims={"my-claim": (None, [])},
    ),
    ClaimCase(
        "device plugin serves gpu: only the user claim is allocated",
        CLAIM_POD,
        nodes=(make_node(WORKER).capacity({GPU: "1"}).obj(),),
        claims=(make_claim("my-claim"),),
        want={"pre_filter": OK, f"filter {WORKER}": OK, "reserve": OK, "pre_bind": OK},
        want_claims={"my-claim": (["instance-1"], ["1234"])},
    ),
]


@pytest.mark.parametrize("case", USER_CLAIM_CASES, ids=lambda c: c.name)
async def test_user_claims(case: ClaimCase) -> None:
    plugin, dra_manager, api = make_plugin(devices=case.devices, objects=(case.pod, *case.claims))
    got = await schedule(plugin, case.pod, case.nodes)

    assert matches(got, case.want), got
    for name, (want_devices, want_reserved) in case.want_claims.items():
        claim = api.objects[("ResourceClaim", "default", name)]
        allocation = claim.status.allocation
        devices = None if allocation is None else [r.device for r in allocation.devices.results]
        assert devices == want_devices
        assert [ref.uid for ref in claim.status.reserved_for] == want_reserved
        if "1234" in want_reserved:  # reserved for this pod: its PreBind stamped the allocation
            unstamped(allocation)
    specials = special_claims(api)
    assert len(specials) == (1 if case.want_special else 0)
    if case.want_special:
        # One allocator call: the special claim got the other device.
        assert specials[0].status.allocation is not None
        assert [r.device for r in specials[0].status.allocation.devices.results] == ["instance-2"]
    assert dra_manager.pending_allocations() == []
    assert set(dra_manager.allocated) == in_api_devices(api)


async def test_unreserve_drops_the_reservation_and_keeps_the_allocation() -> None:
    plugin, dra_manager, api = make_plugin(objects=(NO_ER_CLAIM_POD, make_claim("my-claim")))
    got = await schedule(plugin, NO_ER_CLAIM_POD, (DRA_NODE,), bind_fails=True)
    assert got["pre_bind"] is None
    claim = api.objects[("ResourceClaim", "default", "my-claim")]
    assert claim.status.allocation is not None
    assert claim.status.reserved_for == []
    assert set(dra_manager.allocated) == {(DRIVER, WORKER, "instance-1")}


# --- scoring ---------------------------------------------------------------------------------


async def test_score_prefers_earlier_subrequests_and_never_the_special_claim() -> None:
    prioritized = make_claim(
        "my-claim",
        requests=[
            {
                "name": "gpu",
                "firstAvailable": [
                    {"name": "big", "deviceClassName": "class", "count": 2},
                    {"name": "small", "deviceClassName": "class", "count": 1},
                ],
            }
        ],
    )
    plugin, dra_manager, _ = make_plugin(devices=2, objects=(prioritized,))
    dra_manager.on_slice_add(
        codec.convert(
            {
                "metadata": {"name": "small-slice"},
                "spec": {
                    "driver": DRIVER,
                    "nodeName": "worker-2",
                    "pool": {"name": "worker-2", "generation": 1, "resourceSliceCount": 1},
                    "devices": [{"name": "instance-1"}],
                },
            },
            resource_v1.ResourceSlice,
        )
    )
    pod = with_claims(pod_with({}), {"name": "gpu", "resourceClaimName": "my-claim"})
    nodes = [framework.NodeInfo(DRA_NODE), framework.NodeInfo(make_node("worker-2").obj())]
    state = framework.CycleState()
    plugin.pre_filter(state, pod, nodes)
    assert all(plugin.filter(state, pod, n) is None for n in nodes)
    assert plugin.pre_score(state, pod, nodes) is None
    scores = [framework.NodeScore(n.name, plugin.score(state, pod, n)) for n in nodes]
    # worker has two devices for "big" (first, 8); worker-2 only one, so "small" (7).
    assert scores == [framework.NodeScore(WORKER, 8), framework.NodeScore("worker-2", 7)]
    assert plugin.normalize_scores(state, pod, scores) == [
        framework.NodeScore(WORKER, 100),
        framework.NodeScore("worker-2", 87),
    ]

    # The special claim alone: Score is skipped (it would be 0 everywhere).
    state = framework.CycleState()
    plugin.pre_filter(state, GPU_POD, nodes)
    assert plugin.pre_score(state, GPU_POD, nodes) == framework.Status.skip()


# --- queueing --------------------------------------------------------------------------------


def test_events_to_register() -> None:
    plugin, _, _ = make_plugin()
    events = {e.event.resource: e.event.action_type for e in plugin.events_to_register()}
    action = framework.ActionType
    assert events == {
        framework.EventResource.NODE: action.ADD
        | action.UPDATE_NODE_LABEL
        | action.UPDATE_NODE_ALLOCATABLE,
        framework.EventResource.RESOURCE_CLAIM: action.ADD | action.UPDATE | action.DELETE,
        framework.EventResource.POD: action.UPDATE_POD_GENERATED_RESOURCE_CLAIM,
        framework.EventResource.DEVICE_CLASS: action.ADD | action.UPDATE,
        framework.EventResource.RESOURCE_SLICE: action.ADD | action.UPDATE,
    }


def _deallocated(claim: resource_v1.ResourceClaim) -> resource_v1.ResourceClaim:
    claim = copy.deepcopy(claim)
    claim.status = resource_v1.ResourceClaimStatus()
    return claim


ALLOCATED_OTHER = make_claim("other", allocated_on=WORKER, reserved_for=["x"])
STALE = make_claim("stale", **STALE_SPECIAL)


@pytest.mark.parametrize(
    ("old", "new", "want"),
    [
        (None, make_claim("my-claim"), QueueingHint.QUEUE),
        (None, make_claim("other"), QueueingHint.QUEUE_SKIP),
        (ALLOCATED_OTHER, _deallocated(ALLOCATED_OTHER), QueueingHint.QUEUE),
        (make_claim("my-claim"), make_claim("my-claim", allocated_on=WORKER), QueueingHint.QUEUE),
        (make_claim("my-claim"), make_claim("my-claim"), QueueingHint.QUEUE_SKIP),
        (ALLOCATED_OTHER, None, QueueingHint.QUEUE),
        (make_claim("other"), None, QueueingHint.QUEUE_SKIP),
        (STALE, None, QueueingHint.QUEUE),
    ],
    ids=[
        "own claim created",
        "other claim created",
        "other claim deallocated",
        "own claim allocated",
        "own claim status unchanged",
        "allocated claim deleted",
        "unallocated other claim deleted",
        "own special claim deleted",
    ],
)
def test_claim_change_hint(
    old: resource_v1.ResourceClaim | None,
    new: resource_v1.ResourceClaim | None,
    want: QueueingHint,
) -> None:
    plugin, dra_manager, _ = make_plugin()
    pod = with_claims(GPU_POD, {"name": "gpu", "resourceClaimName": "my-claim"})
    dra_manager.on_claim_add(make_claim("my-claim"))
    assert plugin.is_schedulable_after_claim_change(pod, old, new) == want


def test_pod_change_hint() -> None:
    plugin, dra_manager, _ = make_plugin()
    waiting = with_claims(
        make_pod().uid("1234").obj(), {"name": "gpu", "resourceClaimTemplateName": "tmpl"}
    )
    assert plugin.is_schedulable_after_pod_change(waiting, None, waiting) == QueueingHint.QUEUE_SKIP
    dra_manager.on_claim_add(make_claim("my-pod-gpu-abcde", owner=waiting))
    assert (
        plugin.is_schedulable_after_pod_change(waiting, waiting, TEMPLATE_POD) == QueueingHint.QUEUE
    )
    other = make_pod("other").obj()
    assert plugin.is_schedulable_after_pod_change(waiting, other, other) == QueueingHint.QUEUE_SKIP


# --- the registry ----------------------------------------------------------------------------


def test_registry_builds_the_plugin_from_the_handle() -> None:
    dra_manager = DraManager()
    api = cast(ApiClient, FakeApi(dra_manager))
    plugin = registry.REGISTRY[names.DYNAMIC_RESOURCES](
        None, registry.Handle(dra_manager=dra_manager, api=api, features=ER_OFF)
    )
    assert isinstance(plugin, DynamicResources) and plugin.features == ER_OFF
    assert registry.Handle(dra_manager=dra_manager, features=ER_OFF).resolve_device_class is None
    handle = registry.Handle(dra_manager=dra_manager)
    assert handle.resolve_device_class == dra_manager.resolve_device_class
    assert handle.dra_capacity == dra_manager.dra_capacity
    with pytest.raises(ValueError, match="needs the handle's dra_manager and api"):
        registry.REGISTRY[names.DYNAMIC_RESOURCES](None, registry.Handle())


def test_dra_capacity_counts_the_class_devices_on_the_node() -> None:
    """Devices of the mapped class here, and how many are taken (upstream
    `TestCalculateResourceAllocatableRequest`, ids C8/C11)."""
    _, dra_manager, _ = make_plugin(devices=2)
    node_info = framework.NodeInfo(DRA_NODE)
    assert dra_manager.dra_capacity(node_info, GPU) == (2, 0)
    dra_manager.on_claim_add(make_claim("other", allocated_on=WORKER, reserved_for=["x"]))
    assert dra_manager.dra_capacity(node_info, GPU) == (2, 1)
    assert dra_manager.dra_capacity(node_info, "example.com/unmapped") == (0, 0)


# --- PreBind through a real apistore ---------------------------------------------------------


@dataclasses.dataclass
class Cluster:
    server: ApiServer
    api: ApiClient
    dra_manager: DraManager
    plugin: DynamicResources

    def fail(
        self,
        resource: str,
        verb: str,
        subresource: str = "",
        *,
        times: int = 1,
        code: int = 500,
        reason: str = "",
    ) -> FaultRule:
        rule = FaultRule(
            resource=resource,
            verb=verb,
            subresource=subresource,
            times=times,
            code=code,
            reason=reason,
        )
        self.server.core.fault_plan = FaultPlan(rules=[rule])
        return rule

    async def claims(self) -> list[resource_v1.ResourceClaim]:
        claims, _ = await self.api.list(resource_v1.ResourceClaim, namespace="default")
        return claims


@pytest.fixture
async def cluster(fresh: Any) -> AsyncIterator[Cluster]:
    """An apistore, and a DraManager fed by a claim informer as the scheduler's is; classes
    and slices are given to the manager directly."""
    server = await ApiServer.start(
        nats_url=fresh.nats_url, database_url=fresh.database_url, prefix=fresh.prefix
    )
    bus = await Bus.connect(fresh.nats_url, prefix=fresh.prefix, name="scheduler")
    api = ApiClient(bus, actor="scheduler")
    dra_manager = DraManager()
    dra_manager.on_class_add(CLASS)
    dra_manager.on_slice_add(make_slice(devices=2))
    informer = Informer(
        api,
        resource_v1.ResourceClaim,
        on_add=dra_manager.on_claim_add,
        on_update=dra_manager.on_claim_update,
        on_delete=dra_manager.on_claim_delete,
    )
    informer.start()
    await informer.wait_synced(5)
    plugin = DynamicResources(dra_manager, api, assume_extended_resource_timeout=5)
    yield Cluster(server, api, dra_manager, plugin)
    await informer.stop()
    await bus.close()
    await server.stop()


async def create_pod(api: ApiClient, requests: dict[str, str]) -> core_v1.Pod:
    pod = make_pod().req(requests).limits(requests).obj()
    pod.metadata.uid = ""
    return await api.create(pod)


async def through_reserve(plugin: DynamicResources, pod: core_v1.Pod) -> framework.CycleState:
    state = framework.CycleState()
    node_info = framework.NodeInfo(DRA_NODE)
    assert plugin.pre_filter(state, pod, [node_info]) == (None, None)
    assert plugin.filter(state, pod, node_info) is None
    assert plugin.reserve(state, pod, WORKER) is None
    return state


async def test_pre_bind_writes_the_special_claim_and_the_pod_status(cluster: Cluster) -> None:
    pod = await create_pod(cluster.api, {"cpu": "1", GPU: "2"})
    state = await through_reserve(cluster.plugin, pod)

    assert await cluster.plugin.pre_bind(state, pod, WORKER) is None

    [claim] = await cluster.claims()
    assert re.fullmatch(
        r"my-pod-extended-resources-[bcdfghjklmnpqrstvwxz2456789]{5}", claim.metadata.name
    )
    assert claim.metadata.annotations == ANNOTATION
    assert claim.metadata.owner_references == [
        meta_v1.OwnerReference(
            api_version="v1", kind="Pod", name="my-pod", uid=pod.metadata.uid, controller=True
        )
    ]
    assert claim.metadata.finalizers == [FINALIZER]
    # The index counts every request key of the container, cpu included (upstream
    # `createResourceRequestAndMappings`).
    assert claim.spec.devices.requests == [
        resource_v1.DeviceRequest(
            name="container-0-request-1",
            exactly=resource_v1.ExactDeviceRequest(
                device_class_name="class", allocation_mode="ExactCount", count=2
            ),
        )
    ]
    assert unstamped(claim.status.allocation) == codec.convert(
        allocation_on(
            WORKER, ("container-0-request-1", "instance-1"), ("container-0-request-1", "instance-2")
        ),
        resource_v1.AllocationResult,
    )
    assert claim.status.reserved_for == [
        resource_v1.ResourceClaimConsumerReference(
            resource="pods", name="my-pod", uid=pod.metadata.uid
        )
    ]
    stored = await cluster.api.get(core_v1.Pod, "my-pod", namespace="default")
    assert stored.status.extended_resource_claim_status == core_v1.PodExtendedResourceClaimStatus(
        request_mappings=[
            core_v1.ContainerExtendedResourceRequest(
                container_name="con0", resource_name=GPU, request_name="container-0-request-1"
            )
        ],
        resource_claim_name=claim.metadata.name,
    )
    # PreBind waited for the informer; the in-flight allocation is gone.
    assert cluster.dra_manager.get_claim("default", claim.metadata.name) == claim
    assert cluster.dra_manager.pending_allocations() == []
    assert cluster.plugin.resourceclaim_creates_total == {"success": 1}


@pytest.mark.parametrize(
    ("resource", "verb", "subresource", "times", "created"),
    [
        ("resourceclaims", "create", "", 1, False),
        ("resourceclaims", "update", "status", 1, True),
        # The pod status patch is tried 4 times (retry.DefaultBackoff) before PreBind fails.
        ("pods", "patch", "status", 4, True),
    ],
    ids=["claim create fails", "claim status update fails", "pod status patch fails"],
)
async def test_pre_bind_failure_leaves_nothing_behind(
    cluster: Cluster, resource: str, verb: str, subresource: str, times: int, created: bool
) -> None:
    pod = await create_pod(cluster.api, {GPU: "1"})
    state = await through_reserve(cluster.plugin, pod)
    cluster.fail(resource, verb, subresource, times=times)

    status = await cluster.plugin.pre_bind(state, pod, WORKER)

    assert status is not None and status.code == Code.ERROR
    assert "injected fault" in status.message()
    assert len(await cluster.claims()) == (1 if created else 0)
    assert cluster.plugin.resourceclaim_creates_total == {"success" if created else "failure": 1}

    await cluster.plugin.unreserve(state, pod, WORKER)

    assert await cluster.claims() == []
    stored = await cluster.api.get(core_v1.Pod, "my-pod", namespace="default")
    assert stored.status.extended_resource_claim_status is None
    assert cluster.dra_manager.pending_allocations() == []


@pytest.mark.parametrize(
    ("code", "reason"),
    [(409, "Conflict"), (500, ""), (503, "")],
    ids=["conflict", "internal", "unavailable"],
)
async def test_pod_status_patch_is_sent_again_after_a_conflict(
    cluster: Cluster, code: int, reason: str
) -> None:
    """Upstream's PatchPodStatus retries `RetriableWithConflict` errors: the same patch,
    with no resourceVersion in it, succeeds on the fourth and last try."""
    pod = await create_pod(cluster.api, {GPU: "1"})
    state = await through_reserve(cluster.plugin, pod)
    rule = cluster.fail("pods", "patch", "status", times=3, code=code, reason=reason)

    assert await cluster.plugin.pre_bind(state, pod, WORKER) is None

    assert rule.seen == 4
    [claim] = await cluster.claims()
    stored = await cluster.api.get(core_v1.Pod, "my-pod", namespace="default")
    status = stored.status.extended_resource_claim_status
    assert status is not None and status.resource_claim_name == claim.metadata.name


async def test_pod_status_patch_conflicts_on_every_try_fail_pre_bind(cluster: Cluster) -> None:
    pod = await create_pod(cluster.api, {GPU: "1"})
    state = await through_reserve(cluster.plugin, pod)
    rule = cluster.fail("pods", "patch", "status", times=10, code=409, reason="Conflict")

    status = await cluster.plugin.pre_bind(state, pod, WORKER)

    assert status is not None and status.code == Code.ERROR
    assert status.message().startswith("update pod default/my-pod ExtendedResourceClaimStatus: ")
    assert "injected fault (patch pods/status #4)" in status.message()
    assert rule.seen == 4


async def test_pod_status_patch_does_not_retry_an_invalid_status(cluster: Cluster) -> None:
    pod = await create_pod(cluster.api, {GPU: "1"})
    state = await through_reserve(cluster.plugin, pod)
    rule = cluster.fail("pods", "patch", "status", times=10, code=422)

    status = await cluster.plugin.pre_bind(state, pod, WORKER)

    assert status is not None and status.code == Code.ERROR
    assert rule.seen == 1


async def test_unreserve_after_bind_failure_deletes_the_claim(cluster: Cluster) -> None:
    """B13 against the API: the claim is written with its finalizer, and still goes."""
    pod = await create_pod(cluster.api, {GPU: "1"})
    state = await through_reserve(cluster.plugin, pod)
    assert await cluster.plugin.pre_bind(state, pod, WORKER) is None
    assert len(await cluster.claims()) == 1

    await cluster.plugin.unreserve(state, pod, WORKER)

    assert await cluster.claims() == []
    stored = await cluster.api.get(core_v1.Pod, "my-pod", namespace="default")
    assert stored.status.extended_resource_claim_status is None  # it named the claim
    for _ in range(100):  # the informer reports the deletion
        if not cluster.dra_manager.claims:
            break
        await asyncio.sleep(0.01)
    assert set(cluster.dra_manager.allocated) == set()


async def test_unreserve_of_a_claim_gone_meanwhile_is_no_error(
    cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    """The pod went while binding and the garbage collector took its claim: Unreserve
    finds nothing to delete, which is not worth an error."""
    pod = await create_pod(cluster.api, {GPU: "1"})
    state = await through_reserve(cluster.plugin, pod)
    assert await cluster.plugin.pre_bind(state, pod, WORKER) is None
    [claim] = await cluster.claims()
    claim.metadata.finalizers = []
    await cluster.api.update(claim)
    await cluster.api.delete(resource_v1.ResourceClaim, claim.metadata.name, namespace="default")

    with caplog.at_level(logging.ERROR):
        await cluster.plugin.unreserve(state, pod, WORKER)

    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []
    assert await cluster.claims() == []


async def test_post_filter_deletes_a_special_claim_from_an_earlier_attempt(
    cluster: Cluster,
) -> None:
    pod = await create_pod(cluster.api, {GPU: "1"})
    stale = make_claim("stale", allocated_on=WORKER, **{**STALE_SPECIAL, "owner": pod})
    stale.metadata.uid = ""
    created = await cluster.api.create(stale)
    created.status = stale.status
    allocated = await cluster.api.update_status(created)
    await cluster.dra_manager.wait_for_claim(
        "default", "stale", allocated.metadata.resource_version, 5
    )
    # The earlier attempt named it in the pod's status before it failed.
    written = naming(pod, "stale").status.extended_resource_claim_status
    pod = await cluster.api.patch(
        core_v1.Pod,
        "my-pod",
        {"status": {"extendedResourceClaimStatus": codec.to_builtins(written)}},
        namespace="default",
        subresource="status",
    )

    got = await schedule(cluster.plugin, pod, (DRA_NODE,))

    assert got == {
        "pre_filter": None,
        f"filter {WORKER}": (UNRESOLVABLE, "cannot schedule extended resource claim"),
        "post_filter": (Code.UNSCHEDULABLE, "deletion of ResourceClaim completed"),
    }
    assert await cluster.claims() == []
    stored = await cluster.api.get(core_v1.Pod, "my-pod", namespace="default")
    assert stored.status.extended_resource_claim_status is None


async def test_user_claim_pre_bind_and_unreserve(cluster: Cluster) -> None:
    pod = make_pod().req({}).obj()
    pod.metadata.uid = ""
    pod = with_claims(pod, {"name": "gpu", "resourceClaimName": "my-claim"})
    pod = await cluster.api.create(pod)
    claim = make_claim("my-claim")
    claim.metadata.uid = ""
    await cluster.api.create(claim)
    await cluster.dra_manager.wait_for_claim("default", "my-claim", "0", 5)
    state = await through_reserve(cluster.plugin, pod)

    assert await cluster.plugin.pre_bind(state, pod, WORKER) is None

    written = await cluster.api.get(resource_v1.ResourceClaim, "my-claim", namespace="default")
    assert written.metadata.finalizers == [FINALIZER]
    assert written.status.allocation is not None
    assert [r.device for r in written.status.allocation.devices.results] == ["instance-1"]
    assert [ref.uid for ref in written.status.reserved_for] == [pod.metadata.uid]
    # Assumed at once: the devices stay taken without an in-flight entry.
    assert cluster.dra_manager.pending_allocations() == []
    assert (DRIVER, WORKER, "instance-1") in cluster.dra_manager.allocated

    await cluster.plugin.unreserve(state, pod, WORKER)

    written = await cluster.api.get(resource_v1.ResourceClaim, "my-claim", namespace="default")
    assert written.status.reserved_for == []
    assert written.status.allocation is not None


def _signature(
    plugin: DynamicResources, pod: core_v1.Pod, nodes: list[framework.NodeInfo]
) -> object:
    state = framework.CycleState()
    _, status = plugin.pre_filter(state, pod, nodes)
    assert status is None
    return plugin.sign_pod(state, pod)


def test_pods_with_unused_claims_of_one_spec_are_signed_alike() -> None:
    """A claims-mode Job's pods each have a claim of their own, made from one template:
    Filter reads nothing of a claim but its spec while it is unallocated and unused, so
    such pods share verdicts; an allocated or reserved claim, or another spec, does not."""
    two_gpus = [{"name": "gpu", "exactly": {"deviceClassName": "class", "count": 2}}]
    claims = {
        "a": make_claim("a"),
        "b": make_claim("b"),
        "c": make_claim("c", requests=two_gpus),
        "d": make_claim("d", allocated_on=WORKER),
        "e": make_claim("e", allocated_on=WORKER, reserved_for=["other"]),
    }
    plugin, _, _ = make_plugin(devices=2, objects=tuple(claims.values()))
    nodes = [framework.NodeInfo(DRA_NODE)]

    def signature(claim: str) -> object:
        pod = with_claims(
            make_pod(f"pod-{claim}").uid(f"uid-pod-{claim}").obj(),
            {"name": "gpu", "resourceClaimName": claim},
        )
        return _signature(plugin, pod, nodes)

    assert signature("a") is not None
    assert signature("a") == signature("b")
    assert signature("c") not in (None, signature("a"))
    assert signature("d") is None
    assert signature("e") is None
