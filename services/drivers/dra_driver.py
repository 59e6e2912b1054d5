"""The DRA driver shim: one driver's kubelet plugin on one node.

- Publishes the node's healthy devices of its groups as one resource pool (named after the
  node) of ResourceSlices, at most 128 devices each (`ResourceSliceMaxDevices`); every
  change is written as a
  new pool generation, so the scheduler never mixes old and new slices.
- Answers NodePrepareResources / NodeUnprepareResources (`dra_api`) for claims allocated
  on this node, the special claim of extended resources included: it reads the claim,
  refuses devices that are not its own or not healthy, and returns CDI device ids whose
  CDI edits set `<request with '-' → '_'>=true`, the end of what upstream's e2e test
  driver sets (`claim_<claim>_<request>=true`, `nodePrepareResource` in
  `test/e2e/dra/test-driver/app/kubeletplugin.go`) and its e2e tests look for. Prepare is
  idempotent per
  claim UID and checkpointed, so a restarted process answers from the checkpoint instead
  of preparing again (`prepare_count` counts real preparations).
- With `network`, it also prepares the devices of the driver's pools not tied to this node
  (network-attached devices of a cluster file's `resourceSlices`), which no probe of the
  node finds: whatever the scheduler allocated from them reaches the node.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from pathlib import Path

import msgspec
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

from drasim.common import codec, errors, tracing
from drasim.common.api import meta_v1, resource_v1
from drasim.common.bus.client import Bus
from drasim.common.client import ApiClient
from drasim.common.cluster_file import AttributeValue
from drasim.common.driver_profiles import DriverProfile, PrepareError, PrepareRequest
from drasim.drivers import cdi, dra_api
from drasim.drivers.checkpoint import Checkpoint
from drasim.drivers.probe import Probe, ProbedDevice

__all__ = [
    "ADMIN_ACCESS_ENV",
    "DraDriver",
    "DriverCheckpoint",
    "PreparedClaim",
    "new_slice",
    "pool_counter_sets",
    "pool_devices",
    "slice_spec",
]

log = logging.getLogger(__name__)

# Upstream `ResourceSliceMaxDevices` (`staging/src/k8s.io/api/resource/v1/types.go`).
MAX_DEVICES_PER_SLICE = 128
# Set to "true" for a container given a device with admin access, as the example DRA
# driver (kubernetes-sigs/dra-example-driver) does.
ADMIN_ACCESS_ENV = "DRA_ADMIN_ACCESS"


class PreparedClaim(msgspec.Struct, kw_only=True):
    namespace: str
    name: str
    devices: list[dra_api.PreparedDevice]
    # A driver profile's CDI specs: CDI device id → environment (else derived from devices).
    cdi_edits: dict[str, dict[str, str]] = {}


class DriverCheckpoint(msgspec.Struct, kw_only=True):
    prepared: dict[str, PreparedClaim] = {}  # by claim UID


class DraDriver:
    """`driver`'s plugin on `node`, serving the device groups in `groups` (and, with
    `network`, the devices of the driver's network-attached pools)."""

    def __init__(
        self,
        *,
        api: ApiClient,
        bus: Bus,
        node: str,
        driver: str,
        probe: Probe,
        cdi_registry: cdi.Registry,
        checkpoint_path: Path | None = None,
        network: bool = False,
        profile: DriverProfile | None = None,
    ) -> None:
        self.api = api
        self.profile = profile  # the real driver whose preparation this one plays
        self.network = network
        self.bus = bus
        self.node = node
        self.driver = driver
        self.pool = node  # one pool per node, named after it, as node-local drivers do
        self.groups: set[str] = set()
        self.prepare_count = 0
        self._probe = probe
        self._cdi = cdi_registry
        self._checkpoint = Checkpoint(checkpoint_path, DriverCheckpoint, DriverCheckpoint)
        self._state = self._checkpoint.load()
        for uid, claim in self._state.prepared.items():
            self._add_cdi_specs(uid, claim)
        self._node_uid = ""
        self._sub: Subscription | None = None
        self._slices: dict[str, resource_v1.ResourceSlice] | None = None  # None: not read yet
        self._generation = 0
        self._publish_lock = asyncio.Lock()
        self._republish: set[asyncio.Task[None]] = set()
        probe.watch(self._on_health_change)

    # -- lifecycle ---------------------------------------------------------------------
    async def serve(self, groups: set[str], *, node_uid: str) -> None:
        """Answer the kubelet and publish `groups` (replacing what was served before)."""
        self.groups = set(groups)
        self._node_uid = node_uid
        if self._sub is None:
            subject = dra_api.plugin_subject(self.bus.prefix, self.node, self.driver)
            self._sub = await self.bus.nc.subscribe(subject, cb=self._on_request)
        await self.publish()

    async def withdraw(self) -> None:
        """Stop serving the node (its exposure moved to a device plugin): slices go too."""
        self.groups = set()
        await self.publish()
        await self.close()

    async def close(self) -> None:
        """Stop answering; published slices stay, as when a driver restarts."""
        for task in list(self._republish):
            task.cancel()
        await asyncio.gather(*self._republish, return_exceptions=True)
        if self._sub is not None:
            with contextlib.suppress(Exception):
                await self._sub.unsubscribe()
            self._sub = None

    def devices(self) -> list[ProbedDevice]:
        """Every device of the served groups, healthy or not."""
        return [
            d
            for d in self._probe.devices()
            if d.driver == self.driver and d.group.name in self.groups
        ]

    def prepared_devices(self) -> dict[str, set[str]]:
        """Device name → UIDs of the prepared claims using it."""
        found: dict[str, set[str]] = {}
        for uid, claim in self._state.prepared.items():
            for device in claim.devices:
                found.setdefault(device.device_name, set()).add(uid)
        return found

    # -- ResourceSlices ----------------------------------------------------------------
    async def publish(self) -> None:
        """Make the pool's slices list exactly the healthy devices (a no-op if they do)."""
        async with self._publish_lock:
            if self._slices is None:
                listed, _ = await self.api.list(
                    resource_v1.ResourceSlice,
                    field_selector=f"spec.nodeName={self.node},spec.driver={self.driver}",
                )
                self._slices = {s.metadata.name: s for s in listed}
                self._generation = max((s.spec.pool.generation for s in listed), default=0)
            devices = self.devices()
            wanted = pool_devices(self.node, self.driver, devices) if self.groups else {}
            counters = pool_counter_sets(self.node, self.driver, devices) if self.groups else {}
            if self._published(wanted, counters):
                return
            self._generation += 1
            count = len(wanted) + len(counters)
            for name, chunk in wanted.items():
                self._slices[name] = await self._write_slice(name, chunk, [], count)
            for name, sets in counters.items():
                self._slices[name] = await self._write_slice(name, [], sets, count)
            wanted = {**wanted, **dict.fromkeys(counters, [])}
            for name in [n for n in self._slices if n not in wanted]:
                with contextlib.suppress(errors.NotFound):
                    await self.api.delete(resource_v1.ResourceSlice, name)
                del self._slices[name]

    def _published(
        self,
        wanted: dict[str, list[resource_v1.Device]],
        counters: dict[str, list[resource_v1.CounterSet]],
    ) -> bool:
        assert self._slices is not None
        if self._slices.keys() != wanted.keys() | counters.keys():
            return False
        generations = {s.spec.pool.generation for s in self._slices.values()}
        return (
            len(generations) <= 1
            and all(
                codec.encode(self._slices[name].spec.devices) == codec.encode(devices)
                for name, devices in wanted.items()
            )
            and all(
                codec.encode(self._slices[name].spec.shared_counters) == codec.encode(sets)
                for name, sets in counters.items()
            )
        )

    async def _write_slice(
        self,
        name: str,
        devices: list[resource_v1.Device],
        counter_sets: list[resource_v1.CounterSet],
        count: int,
    ) -> resource_v1.ResourceSlice:
        assert self._slices is not None
        spec = slice_spec(
            self.node,
            self.driver,
            devices,
            generation=self._generation,
            count=count,
            shared_counters=counter_sets,
        )
        current = self._slices.get(name)
        while True:
            if current is None:
                obj = new_slice(name, spec, node_uid=self._node_uid)
                try:
                    return await self.api.create(obj)
                except errors.AlreadyExists:
                    current = await self.api.get(resource_v1.ResourceSlice, name)
                    continue
            current.spec = spec
            try:
                return await self.api.update(current)
            except errors.Conflict:
                current = await self.api.get(resource_v1.ResourceSlice, name)
            except errors.NotFound:
                current = None

    def _on_health_change(self, device: ProbedDevice) -> None:
        """An unhealthy device leaves the slice; a recovered one comes back."""
        if device.driver == self.driver and device.group.name in self.groups:
            task = asyncio.get_running_loop().create_task(
                self.publish(), name=f"publish-{self.node}-{self.driver}"
            )
            self._republish.add(task)
            task.add_done_callback(self._republished)

    def _republished(self, task: asyncio.Task[None]) -> None:
        self._republish.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("%s on %s: republishing failed: %s", self.driver, self.node, task.exception())

    # -- NodePrepareResources / NodeUnprepareResources ---------------------------------
    async def _on_request(self, msg: Msg) -> None:
        request = dra_api.decode_request(msg.data)
        # Handling continues the kubelet's trace: prepare is a span of the pod's trace.
        with tracing.span_from(
            str(type(request).__struct_config__.tag), msg.headers, kind=tracing.SpanKind.SERVER
        ) as span:
            if span.is_recording():
                span.set_attribute("k8s.node.name", self.node)
                span.set_attribute("drasim.driver", self.driver)
                span.set_attribute("drasim.claims", [c.name for c in request.claims])
            response = await self._handle(request)
            if span.is_recording():
                failed = [uid for uid, r in response.claims.items() if r.error]
                if failed:
                    tracing.fail(span, "; ".join(response.claims[uid].error for uid in failed))
        await msg.respond(dra_api.encode(response))

    async def _handle(
        self, request: dra_api.Request
    ) -> dra_api.NodePrepareResourcesResponse | dra_api.NodeUnprepareResourcesResponse:
        """The answer to one request; a failure becomes an error for each of its claims."""
        response: dra_api.NodePrepareResourcesResponse | dra_api.NodeUnprepareResourcesResponse
        try:
            match request:
                case dra_api.NodePrepareResourcesRequest():
                    response = await self.node_prepare_resources(request)
                case dra_api.NodeUnprepareResourcesRequest():
                    response = await self.node_unprepare_resources(request)
        except Exception as exc:  # answer at once rather than let the kubelet time out
            log.exception("%s on %s: %s failed", self.driver, self.node, type(request).__name__)
            error = f"{self.driver} on {self.node}: {exc}"
            if isinstance(request, dra_api.NodePrepareResourcesRequest):
                response = dra_api.NodePrepareResourcesResponse(
                    claims={
                        c.uid: dra_api.NodePrepareResourceResponse(error=error)
                        for c in request.claims
                    }
                )
            else:
                response = dra_api.NodeUnprepareResourcesResponse(
                    claims={
                        c.uid: dra_api.NodeUnprepareResourceResponse(error=error)
                        for c in request.claims
                    }
                )
        return response

    async def node_prepare_resources(
        self, request: dra_api.NodePrepareResourcesRequest
    ) -> dra_api.NodePrepareResourcesResponse:
        results = {}
        for claim in request.claims:
            prepared = self._state.prepared.get(claim.uid)
            if prepared is not None:
                results[claim.uid] = dra_api.NodePrepareResourceResponse(devices=prepared.devices)
                continue
            try:
                prepared = await self._prepare(claim)
            except (_PrepareError, PrepareError) as exc:
                results[claim.uid] = dra_api.NodePrepareResourceResponse(error=str(exc))
                continue
            devices = prepared.devices
            self._state.prepared[claim.uid] = prepared
            self._add_cdi_specs(claim.uid, prepared)
            self.prepare_count += 1
            results[claim.uid] = dra_api.NodePrepareResourceResponse(devices=devices)
        await self._checkpoint.save(self._state)
        return dra_api.NodePrepareResourcesResponse(claims=results)

    async def node_unprepare_resources(
        self, request: dra_api.NodeUnprepareResourcesRequest
    ) -> dra_api.NodeUnprepareResourcesResponse:
        """Idempotent: a claim this driver does not hold is already unprepared."""
        for claim in request.claims:
            prepared = self._state.prepared.pop(claim.uid, None)
            if prepared is not None:
                # A CDI device may be common to claims (a driver's `common` one): it stays
                # while another prepared claim names it.
                kept = {
                    cdi_id
                    for other in self._state.prepared.values()
                    for device in other.devices
                    for cdi_id in device.cdi_device_ids
                }
                for device in prepared.devices:
                    for cdi_id in device.cdi_device_ids:
                        if cdi_id not in kept:
                            self._cdi.remove(cdi_id)
        await self._checkpoint.save(self._state)
        return dra_api.NodeUnprepareResourcesResponse(
            claims={c.uid: dra_api.NodeUnprepareResourceResponse() for c in request.claims}
        )

    async def _prepare(self, ref: dra_api.Claim) -> PreparedClaim:
        try:
            claim = await self.api.get(resource_v1.ResourceClaim, ref.name, namespace=ref.namespace)
        except errors.ApiError as exc:
            raise _PrepareError(f"fetch ResourceClaim {ref.namespace}/{ref.name}: {exc}") from exc
        if claim.metadata.uid != ref.uid:
            raise _PrepareError(
                f"ResourceClaim {ref.namespace}/{ref.name} has UID {claim.metadata.uid}, "
                f"not {ref.uid}"
            )
        allocation = claim.status.allocation
        if allocation is None:
            raise _PrepareError(f"ResourceClaim {ref.namespace}/{ref.name} is not allocated")
        own = {d.name: d for d in self.devices()}
        # One prepared device per device, or per share of a shared device (KEP-5075):
        # each share is prepared, and gets its CDI device, on its own.
        by_device: dict[tuple[str, str | None], dra_api.PreparedDevice] = {}
        local: list[tuple[resource_v1.DeviceRequestAllocationResult, ProbedDevice]] = []
        for result in allocation.devices.results:
            if result.driver != self.driver:
                continue
            if self.network and result.pool != self.pool:
                prepared = by_device.setdefault(
                    f"{result.pool}/{result.device}",
                    dra_api.PreparedDevice(
                        pool_name=result.pool,
                        device_name=result.device,
                        request_names=[],
                        cdi_device_ids=[
                            cdi.device_id(self.driver, "network", f"{ref.uid}-{result.device}")
                        ],
                        share_id=result.share_id,
                    ),
                )
                prepared.request_names.append(result.request)
                continue
            device = own.get(result.device) if result.pool == self.pool else None
            if device is None:
                raise _PrepareError(
                    f"device {result.driver}/{result.pool}/{result.device} of ResourceClaim "
                    f"{ref.namespace}/{ref.name} is not a device of driver {self.driver} "
                    f"on node {self.node}"
                )
            if not device.usable:
                raise _PrepareError(f"device {self.driver}/{self.pool}/{device.name} is unhealthy")
            local.append((result, device))
            key = (device.name, result.share_id)
            prepared = by_device.get(key)
            if prepared is None:
                name = f"{ref.uid}-{device.name}"
                if result.share_id is not None:
                    name += f"-{result.share_id}"
                prepared = by_device[key] = dra_api.PreparedDevice(
                    pool_name=self.pool,
                    device_name=device.name,
                    request_names=[],
                    cdi_device_ids=[cdi.device_id(self.driver, device.group.name, name)],
                    share_id=result.share_id,
                )
            prepared.request_names.append(result.request)
            prepared.admin_access = prepared.admin_access or bool(result.admin_access)
        if self.profile is not None:
            return self._profile_prepare(claim, [r for r, _ in local])
        return PreparedClaim(
            namespace=ref.namespace, name=ref.name, devices=list(by_device.values())
        )

    def _profile_prepare(
        self,
        claim: resource_v1.ResourceClaim,
        results: list[resource_v1.DeviceRequestAllocationResult],
    ) -> PreparedClaim:
        """The driver profile prepares what the shim has checked (its own, healthy)."""
        assert self.profile is not None
        done = self.profile.prepare(PrepareRequest(node=self.node, claim=claim, results=results))
        devices = [
            dra_api.PreparedDevice(
                pool_name=d.result.pool,
                device_name=d.result.device,
                request_names=[d.result.request],
                cdi_device_ids=d.cdi_device_ids,
                share_id=d.result.share_id,
                admin_access=bool(d.result.admin_access),
            )
            for d in done.devices
        ]
        return PreparedClaim(
            namespace=claim.metadata.namespace,
            name=claim.metadata.name,
            devices=devices,
            cdi_edits=done.cdi_edits,
        )

    def _add_cdi_specs(self, uid: str, claim: PreparedClaim) -> None:
        if claim.cdi_edits:
            for cdi_id, env in claim.cdi_edits.items():
                self._cdi.add(cdi_id, env)
            return
        for device in claim.devices:
            env = {_env_name(request): "true" for request in device.request_names}
            if device.admin_access:  # as the example DRA driver tells its containers
                env[ADMIN_ACCESS_ENV] = "true"
            for cdi_id in device.cdi_device_ids:
                self._cdi.add(cdi_id, env)


class _PrepareError(Exception):
    """One claim could not be prepared; the message goes back to the kubelet."""


def _env_name(request: str) -> str:
    """`container-0-request-0` → `container_0_request_0` (a subrequest's `/` too)."""
    return request.replace("-", "_").replace("/", "_")


def pool_devices(
    node: str, driver: str, devices: list[ProbedDevice]
) -> dict[str, list[resource_v1.Device]]:
    """Slice name → devices of `driver`'s pool on `node`: the healthy ones of `devices`, at
    most 128 a slice, and one empty slice when none is healthy (the pool still exists).

    A function of its own so that `reference/` publishes exactly these slices to upstream's
    control plane: the two clusters under comparison cannot drift apart here.
    """
    usable = [d for d in devices if d.usable]
    healthy = [_slice_device(d) for d in usable]
    # Upstream allows fewer devices per slice when they consume counters.
    per_slice = MAX_DEVICES_PER_SLICE
    if any(d.consumes_counters for d in healthy):
        per_slice = resource_v1.RESOURCE_SLICE_MAX_DEVICES_WITH_ADVANCED_FEATURES
    # A driver that splits its pool itself (one slice per GPU) keeps its split.
    groups: dict[int | None, list[resource_v1.Device]] = {}
    for probed, device in zip(usable, healthy, strict=True):
        groups.setdefault(probed.slice, []).append(device)
    chunks = [
        group[i : i + per_slice]
        for group in groups.values()
        for i in range(0, len(group), per_slice)
    ] or [[]]
    return {f"{node}-{driver}-{i}": chunk for i, chunk in enumerate(chunks)}


def pool_counter_sets(
    node: str, driver: str, devices: list[ProbedDevice]
) -> dict[str, list[resource_v1.CounterSet]]:
    """Slice name → the counter sets of the pool's healthy partitionable devices, published
    in a slice of their own (1.37 keeps `sharedCounters` and `devices` apart); empty when
    no device has counters."""
    sets: dict[str, resource_v1.CounterSet] = {}
    for d in devices:
        if not d.usable:
            continue
        if d.shared_counters is not None:  # a driver profile's: as long as a user is healthy
            sets.setdefault(d.shared_counters.name, d.shared_counters)
        elif d.parent is None and d.group.counters:
            sets[f"{d.name}-counters"] = resource_v1.CounterSet(
                name=f"{d.name}-counters",
                counters={n: resource_v1.Counter(value=v) for n, v in d.group.counters.items()},
            )
    return {f"{node}-{driver}-counters": list(sets.values())} if sets else {}


def slice_spec(
    node: str,
    driver: str,
    devices: list[resource_v1.Device],
    *,
    generation: int,
    count: int,
    shared_counters: list[resource_v1.CounterSet] | None = None,
) -> resource_v1.ResourceSliceSpec:
    """One slice of the pool named after `node` (node-local drivers publish one pool each):
    devices, or the counter sets they consume."""
    return resource_v1.ResourceSliceSpec(
        driver=driver,
        pool=resource_v1.ResourcePool(name=node, generation=generation, resource_slice_count=count),
        node_name=node,
        devices=devices,
        shared_counters=shared_counters or [],
    )


def new_slice(
    name: str, spec: resource_v1.ResourceSliceSpec, *, node_uid: str
) -> resource_v1.ResourceSlice:
    """The slice as first created: owned by its Node, so it goes when the Node goes."""
    assert spec.node_name is not None
    return resource_v1.ResourceSlice(
        metadata=meta_v1.ObjectMeta(
            name=name,
            owner_references=[
                meta_v1.OwnerReference(
                    api_version="v1", kind="Node", name=spec.node_name, uid=node_uid
                )
            ],
        ),
        spec=spec,
    )


def _slice_device(device: ProbedDevice) -> resource_v1.Device:
    if device.published is not None:
        return device.published
    attributes = {name: _attribute(value) for name, value in device.attributes.items()}
    attributes["index"] = resource_v1.DeviceAttribute(int_value=device.index)
    group = device.group
    shared = group.allow_multiple_allocations and device.partition is None
    published = resource_v1.Device(
        name=device.name,
        attributes=attributes,
        capacity={
            name: resource_v1.DeviceCapacity(
                value=value, request_policy=group.request_policy.get(name) if shared else None
            )
            for name, value in device.capacity.items()
        },
        binds_to_node=group.binds_to_node or None,
        binding_conditions=list(group.binding_conditions),
        binding_failure_conditions=list(group.binding_failure_conditions),
        allow_multiple_allocations=True if shared else None,
    )
    counter_set = device.counter_set
    if counter_set is not None:
        # The whole device consumes all of its counters, a partition its share of them.
        counters = group.counters if device.partition is None else device.partition.counters
        published.consumes_counters = [
            resource_v1.DeviceCounterConsumption(
                counter_set=counter_set,
                counters={n: resource_v1.Counter(value=v) for n, v in counters.items()},
            )
        ]
    return published


def _attribute(value: AttributeValue) -> resource_v1.DeviceAttribute:
    if isinstance(value, resource_v1.DeviceAttribute):
        return value
    if isinstance(value, bool):  # before int: a bool is an int in Python
        return resource_v1.DeviceAttribute(bool_value=value)
    if isinstance(value, int):
        return resource_v1.DeviceAttribute(int_value=value)
    return resource_v1.DeviceAttribute(string_value=value)
