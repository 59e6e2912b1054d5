"""One emulated node: its hardware probe, driver shims, Node object, Lease and pods.

Life of a pod bound here (the kubelet's `syncPod`, reduced to what KEP-5004 touches):
1. admission, as soon as the watch shows the pod, in watch order: the pod must fit what the
   node has left (`admission`) and the device plugins must have devices for its containers;
   otherwise it is rejected: phase Failed with the reason, as the kubelet does;
2. its ResourceClaims are prepared by their DRA drivers (`dra_manager`), retried until they
   can be; failures are reported as `FailedPrepareDynamicResources` events;
3. every container gets its devices (`runtime`) and its containers run as their
   annotations say (`containers`: init containers first, exits, restarts with
   CrashLoopBackOff), each change written to the pod's status; the node syncs the pod
   again whenever a container is next due to exit or start;
4. once the pod has ended (Succeeded or Failed), its claims are unprepared and its
   device-plugin devices released, so that other pods get them;
5. on deletion the same, and the deletion confirmed (`grace_period_seconds=0`), which lets
   the object go, whether the pod had ended or not.

A device group is exposed through exactly one of a DRA driver and a device plugin. The
choice starts from the cluster file and is recorded in the Node's labels
(`exposure.drasim.io/<group>`), so a restarted kubelet keeps what `drasim node migrate`
chose.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from drasim.common import codec, container_devices, container_runs, errors, tracing
from drasim.common.api import core_v1
from drasim.common.bus.client import Bus
from drasim.common.client import ApiClient
from drasim.common.cluster_file import (
    DEVICE_PLUGIN,
    DRA,
    DeviceExposure,
    Exposure,
    NodeConfig,
    PodDefault,
)
from drasim.common.driver_profiles import DevicePluginView
from drasim.common.quantity import Quantity
from drasim.drivers import cdi
from drasim.drivers.device_plugin import AllocateResponse, DevicePlugin
from drasim.drivers.dra_driver import DraDriver
from drasim.drivers.errors import PermanentError, TemporaryError
from drasim.drivers.probe import EmulatedProbe
from drasim.kubelet import (
    admission,
    backoff,
    containers,
    device_manager,
    lease,
    node_status,
    runtime,
)
from drasim.kubelet.dra_manager import DraManager
from drasim.kubelet.events import EventRecorder
from drasim.kubelet.pod_record import PodRecord

__all__ = ["GroupInUse", "NodeAgent"]

log = logging.getLogger(__name__)

TERMINAL_PHASES = ("Succeeded", "Failed")


class GroupInUse(Exception):
    """An exposure switch was refused because pods hold devices of the group."""

    def __init__(self, message: str, pods: list[str]) -> None:
        super().__init__(message)
        self.pods = pods


class NodeAgent:
    """Everything of one node that lives in a kubelet process (see the module docstring).

    The process feeds it pod events: `admit` synchronously in watch order, then
    `sync_pod` from the pod's worker; `requeue` is how it asks the process to sync a pod
    again (after a device's health changed).
    """

    def __init__(
        self,
        *,
        config: NodeConfig,
        api: ApiClient,
        bus: Bus,
        state_dir: Path | None = None,
        heartbeat_period: float = 10.0,
        crash_loop_backoff: backoff.CrashLoopBackOff = backoff.UPSTREAM,
        pod_defaults: list[PodDefault] | None = None,
    ) -> None:
        self.config = config
        self.name = config.name
        self.api = api
        self.bus = bus
        self.heartbeat_period = heartbeat_period
        self.crash_loop_backoff = crash_loop_backoff
        self.pod_defaults = pod_defaults or []
        self.node_dir = state_dir / config.name if state_dir is not None else None
        self.probe = EmulatedProbe.of(config)
        self.cdi = cdi.Registry()
        self.events = EventRecorder(api, self.name)
        self.dra = DraManager(
            api=api, bus=bus, node=self.name, checkpoint_path=self._path("dra_manager_state.json")
        )
        self.exposures = {g.name: config.exposure(g.name) for g in config.profile.devices}
        self.drivers: dict[str, DraDriver] = {}
        self.plugins: dict[str, DevicePlugin] = {}  # by extended resource name
        self.pods: dict[str, PodRecord] = {}  # by pod UID
        self.node: core_v1.Node | None = None  # as last written
        self.requeue: Callable[[str, str], None] = lambda namespace, name: None
        # `(resource name, seconds)` of each device plugin Allocate call, for metrics.
        self.observe_allocation: Callable[[str, float], None] | None = None
        self.internal_ip = node_status.internal_ip(config.index)
        self.pod_cidr = node_status.pod_cidr(config.index)
        self._next_pod_ip = 2
        self._control = asyncio.Lock()
        self._tasks: set[asyncio.Task[None]] = set()

    def _path(self, name: str) -> Path | None:
        return self.node_dir / name if self.node_dir is not None else None

    # -- registration and heartbeat -----------------------------------------------------
    async def register(self) -> None:
        """Create the Node (or, after a restart, adopt it), its Lease and its slices."""
        self._open_device_plugins()
        try:
            self.node = await self.api.create(
                node_status.new_node(
                    self.config,
                    node_labels=self._labels(),
                    node_status=self._status(),
                    pod_cidr=self.pod_cidr,
                )
            )
        except errors.AlreadyExists:
            existing = await self.api.get(core_v1.Node, self.name)
            self._adopt_exposures(existing)
            self._open_device_plugins()
            self.node = await self.api.patch(
                core_v1.Node, self.name, {"metadata": {"labels": self._labels()}}
            )
            await self._write_status()
        local = self._dra_groups()
        for driver in {*local, *self.config.network_drivers}:
            await self._driver(driver).serve(
                local.get(driver, set()), node_uid=self.node.metadata.uid
            )
        await lease.ensure_lease(self.api, self.node)

    def _adopt_exposures(self, node: core_v1.Node) -> None:
        """Keep the exposure a migration recorded on the Node before this process started."""
        for group, current in self.exposures.items():
            recorded = node.metadata.labels.get(node_status.EXPOSURE_LABEL_PREFIX + group)
            if recorded in (DRA, DEVICE_PLUGIN) and recorded != current.exposure:
                if recorded == DEVICE_PLUGIN and not current.extended_resource_name:
                    continue  # nothing to advertise the devices as
                self.exposures[group] = DeviceExposure(
                    exposure=recorded, extended_resource_name=current.extended_resource_name
                )

    async def heartbeat_forever(self) -> None:
        assert self.node is not None
        await lease.renew_forever(self.api, self.node, self.heartbeat_period)

    async def close(self) -> None:
        for record in self.pods.values():
            record.cancel_wake()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for driver in self.drivers.values():
            await driver.close()

    # -- the Node object -------------------------------------------------------------------
    def _labels(self) -> dict[str, str]:
        return node_status.labels(self.config, self.exposures)

    def allocatable(self) -> dict[str, Quantity]:
        return node_status.allocatable(self.probe.machine(), self.plugins)

    def _status(self) -> core_v1.NodeStatus:
        return node_status.status(
            self.config,
            machine=self.probe.machine(),
            plugins=self.plugins,
            internal_ip=self.internal_ip,
            previous=self.node.status if self.node is not None else None,
        )

    async def _write_status(self) -> None:
        """Replace the Node's status with what the node has now (capacity, allocatable)."""
        assert self.node is not None
        while True:
            self.node.status = self._status()
            try:
                self.node = await self.api.update_status(self.node)
                return
            except errors.Conflict:
                self.node = await self.api.get(core_v1.Node, self.name)

    # -- device shims ----------------------------------------------------------------------
    def _dra_groups(self) -> dict[str, set[str]]:
        """Driver → the device groups it publishes on this node."""
        found: dict[str, set[str]] = {}
        for group in self.config.profile.devices:
            if self.exposures[group.name].exposure == DRA:
                found.setdefault(group.driver, set()).add(group.name)
        return found

    def _driver(self, name: str) -> DraDriver:
        driver = self.drivers.get(name)
        profile = self.config.driver_profile
        if driver is None:
            driver = self.drivers[name] = DraDriver(
                api=self.api,
                bus=self.bus,
                node=self.name,
                driver=name,
                probe=self.probe,
                cdi_registry=self.cdi,
                checkpoint_path=self._path(f"plugins/{name}.json"),
                network=name in self.config.network_drivers,
                profile=profile if profile is not None and profile.driver == name else None,
            )
        return driver

    def _wanted_device_plugins(self) -> dict[str, str]:
        """Extended resource name → device group, for groups exposed by a device plugin."""
        wanted = {}
        for group, e in self.exposures.items():
            if e.exposure == DEVICE_PLUGIN:
                view = self._vendor_plugin(group)
                names = view.resources if view is not None else [e.extended_resource_name]
                wanted.update(dict.fromkeys(names, group))
        return wanted

    def _vendor_plugin(self, group: str) -> DevicePluginView | None:
        """The device plugin of the driver profile the group plays, if it has its own."""
        profile = self.config.driver_profile
        if profile is None or profile.group != group:
            return None
        return profile.device_plugin(self.name)

    def _close_device_plugins(self) -> None:
        """Stop the device plugins of groups no longer exposed that way."""
        wanted = self._wanted_device_plugins()
        for name in [n for n in self.plugins if n not in wanted]:
            self.plugins.pop(name).close()

    def _open_device_plugins(self) -> None:
        """Start a device plugin for every group exposed that way."""
        self._close_device_plugins()
        for name, group in self._wanted_device_plugins().items():
            if name not in self.plugins:
                view = self._vendor_plugin(group)
                self.plugins[name] = DevicePlugin(
                    resource_name=name,
                    group=group,
                    probe=self.probe,
                    on_health_change=self._on_plugin_health_change,
                    checkpoint_path=self._path(f"device-plugins/{name.replace('/', '_')}.json"),
                    ids=view.resources[name] if view is not None else None,
                    env_name=view.env if view is not None else "",
                )

    def _on_plugin_health_change(self) -> None:
        """ListAndWatch reported a health change: allocatable follows (upstream's device
        manager counts healthy devices only, `GetCapacity` in
        `pkg/kubelet/cm/devicemanager/manager.go`)."""
        self._background(self._write_status(), f"node-status-{self.name}")

    def _background(self, work: Coroutine[Any, Any, None], name: str) -> None:
        task = asyncio.get_running_loop().create_task(work, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _health(self) -> dict[tuple[str, str], bool]:
        """(driver or plugin resource name, device) → healthy, for the pod status."""
        found = {(d.driver, d.name): d.healthy for d in self.probe.devices()}
        for name, plugin in self.plugins.items():
            found.update({(name, d.name): d.healthy for d in plugin.devices()})
        return found

    # -- commands (drasim node fault / migrate) ----------------------------------------
    async def set_device_health(self, device: str, *, healthy: bool) -> str:
        async with self._control:
            found = self.probe.set_health(device, healthy=healthy)
            # The shims heard it already; wait until what they changed is written.
            if self.exposures[found.group.name].exposure == DRA:
                await self._driver(found.driver).publish()
            else:
                await self._write_status()
            for record in self.pods.values():
                record.resync = True
                self.requeue(record.namespace, record.name)
            state = "healthy" if healthy else "unhealthy"
            return f"node/{self.name}: device {found.driver}/{found.name} is {state}"

    async def set_exposure(
        self, group: str, exposure: Exposure, extended_resource_name: str
    ) -> str:
        async with self._control:
            current = self.exposures.get(group)
            if current is None:
                raise KeyError(f"node/{self.name}: no device group {group}")
            name = extended_resource_name or current.extended_resource_name
            if exposure == DEVICE_PLUGIN and not name:
                raise ValueError(
                    f"node/{self.name}: an extended resource name is needed for {group}"
                )
            if current.exposure == exposure:
                return f"node/{self.name}: {group} is already exposed through {exposure}"
            users = self._group_users(group)
            if users:
                raise GroupInUse(f"node/{self.name}: pods still use {group} devices", users)
            # Withdraw the old exposure before the new one appears: never both (KEP-5004's
            # "Proposal": one node cannot serve a name by DRA and a device plugin at once).
            self.exposures[group] = DeviceExposure(exposure=exposure, extended_resource_name=name)
            assert self.node is not None
            self._close_device_plugins()
            wanted = self._dra_groups()
            for driver_name, driver in list(self.drivers.items()):
                if driver.groups and not wanted.get(driver_name):
                    await driver.withdraw()
            for driver_name, groups in wanted.items():
                if self._driver(driver_name).groups != groups:
                    await self._driver(driver_name).serve(groups, node_uid=self.node.metadata.uid)
            self._open_device_plugins()
            self.node = await self.api.patch(
                core_v1.Node, self.name, {"metadata": {"labels": self._labels()}}
            )
            await self._write_status()
            return f"node/{self.name}: {group} is now exposed through {exposure}"

    def _group_users(self, group: str) -> list[str]:
        """namespace/name of the pods holding devices of `group`."""
        uids: set[str] = set()
        for plugin in self.plugins.values():
            if plugin.group == group:
                uids.update(plugin.in_use().values())
        for driver in self.drivers.values():
            devices = {d.name for d in driver.devices() if d.group.name == group}
            claim_uids = {
                uid for name, holders in driver.prepared_devices().items() if name in devices
                for uid in holders
            }  # fmt: skip
            for info in self.dra.claims.values():
                if info.uid in claim_uids:
                    uids.update(info.pod_uids)
        return sorted(
            f"{self.pods[uid].namespace}/{self.pods[uid].name}" if uid in self.pods else uid
            for uid in uids
        )

    # -- pods ---------------------------------------------------------------------------
    def admit(self, event_type: str, pod: core_v1.Pod, traceparent: str = "") -> None:
        """Admit a pod the first time the watch shows it, before any other pod seen later.

        Admission is a span continuing `traceparent`, the trace of the event that showed
        the pod here (its binding), which the pod's later work continues too."""
        uid = pod.metadata.uid
        if (
            uid in self.pods
            or event_type == "DELETED"
            or pod.metadata.deletion_timestamp
            or pod.status.phase in TERMINAL_PHASES
        ):
            return
        with tracing.span_from("admit pod", traceparent) as span:
            self._admit(pod)
            record = self.pods[uid]
            record.traceparent = traceparent
            if span.is_recording():
                span.set_attribute("k8s.node.name", self.name)
                span.set_attribute("k8s.pod.name", pod.metadata.name)
                span.set_attribute("k8s.namespace.name", pod.metadata.namespace)
                if record.rejection is not None:
                    span.set_attribute("drasim.rejection", record.rejection.reason)
                    tracing.fail(span, record.rejection.message)

    def _admit(self, pod: core_v1.Pod) -> None:
        uid = pod.metadata.uid
        allocatable = self.allocatable()
        requests = admission.counted_requests(pod, allocatable)
        used: dict[str, Quantity] = {}
        admitted = [r for r in self.pods.values() if r.rejection is None and not r.finished]
        for record in admitted:
            for name, quantity in record.requests.items():
                used[name] = used[name] + quantity if name in used else quantity
        rejection = admission.fit(requests, allocatable=allocatable, used=used, pods=len(admitted))
        if rejection is None:
            try:
                device_manager.allocate_pod(pod, self.plugins, observe=self.observe_allocation)
            except PermanentError as exc:
                rejection = admission.Rejection("UnexpectedAdmissionError", str(exc))
        self.pods[uid] = PodRecord(pod.metadata.namespace, pod.metadata.name, requests, rejection)

    async def sync_pod(self, event_type: str, pod: core_v1.Pod, traceparent: str = "") -> None:
        """Bring the pod to what its latest event asks for (see the module docstring).

        The work continues the trace of the event that admitted the pod; releasing it,
        the trace of the event (`traceparent`) that ended it."""
        record = self.pods.get(pod.metadata.uid)
        ending = (
            event_type == "DELETED"
            or pod.metadata.deletion_timestamp
            or pod.status.phase in TERMINAL_PHASES
        )
        if not ending and record is not None and record.traceparent:
            traceparent = record.traceparent
        with tracing.continued(traceparent):
            await self._sync_pod(event_type, pod)

    async def _sync_pod(self, event_type: str, pod: core_v1.Pod) -> None:
        uid = pod.metadata.uid
        if event_type == "DELETED" or (
            pod.status.phase in TERMINAL_PHASES and not pod.metadata.deletion_timestamp
        ):
            await self._release(pod)
            return
        if pod.metadata.deletion_timestamp:
            # Finished or not: once its resources are back, the kubelet removes the pod (as
            # upstream's status manager deletes a terminal pod marked for deletion). A pod
            # that finished as it was marked is seen both ways at once.
            await self._release(pod)
            # NotFound: already gone; Conflict: a new pod under the same name.
            with contextlib.suppress(errors.NotFound, errors.Conflict):
                await self.api.delete(
                    core_v1.Pod,
                    pod.metadata.name,
                    namespace=pod.metadata.namespace,
                    grace_period_seconds=0,
                    uid=uid,
                )
            return
        record = self.pods.get(uid)
        if record is None:
            return
        echo = int(pod.metadata.resource_version) <= record.written
        if echo and record.settled and not record.resync:
            return
        record.resync = record.settled = False
        await self._sync_admitted(pod, record)
        record.settled = True

    async def _sync_admitted(self, pod: core_v1.Pod, record: PodRecord) -> None:
        uid = pod.metadata.uid
        if record.rejection is not None:
            await self._reject(pod, record.rejection)
            return
        if record.finished:  # its devices are back; what is left is its final status
            await self._run_containers(pod, record, record.assigned)
            return
        try:
            try:
                claims = await self._prepare_resources(pod)
            except TemporaryError as exc:  # wrapped as upstream's DRA manager wraps it
                raise TemporaryError(f"prepare dynamic resources: {exc}", delay=exc.delay) from exc
            assigned = runtime.assign_devices(
                pod,
                claims=claims,
                plugin_allocations=self._plugin_allocations(uid),
                health=self._health(),
                cdi_registry=self.cdi,
            )
        except TemporaryError as exc:
            await self.events.warn(
                pod, "FailedPrepareDynamicResources", f"Failed to prepare dynamic resources: {exc}"
            )
            raise
        for plugin in self.plugins.values():
            await plugin.save()  # what Allocate gave the pod, on disk before it starts
        record.assigned = assigned
        await self._write_devices(pod, record, assigned)
        await self._run_containers(pod, record, assigned)

    async def _prepare_resources(self, pod: core_v1.Pod) -> dict[str, Any]:
        """The DRA manager's prepare, as a span for a pod that has claims."""
        if not pod.spec.resource_claims and pod.status.extended_resource_claim_status is None:
            return await self.dra.prepare(pod)
        with tracing.span("prepare resources") as span:
            if span.is_recording():
                span.set_attribute("k8s.node.name", self.name)
                span.set_attribute("k8s.pod.name", pod.metadata.name)
            return await self.dra.prepare(pod)

    def _plugin_allocations(self, uid: str) -> dict[str, dict[str, AllocateResponse]]:
        """Container name → resource name → what the device plugin gave it."""
        found: dict[str, dict[str, AllocateResponse]] = {}
        for name, plugin in self.plugins.items():
            for container, response in plugin.allocated(uid).items():
                found.setdefault(container, {})[name] = response
        return found

    async def _write_devices(
        self, pod: core_v1.Pod, record: PodRecord, assigned: dict[str, runtime.Assignment]
    ) -> None:
        """Record what the runtime gives each container in the pod's annotation."""
        devices = {
            name: a.devices
            for name, a in assigned.items()
            if a.devices.cdi_devices or a.devices.env
        }
        annotations = pod.metadata.annotations
        key = container_devices.CONTAINER_DEVICES_ANNOTATION
        if devices or key in annotations:
            value = container_devices.encode_container_devices(devices)
            if annotations.get(key) != value:
                written = await self.api.patch(
                    core_v1.Pod,
                    pod.metadata.name,
                    {"metadata": {"annotations": {key: value}}},
                    namespace=pod.metadata.namespace,
                )
                record.written = int(written.metadata.resource_version)

    async def _run_containers(
        self, pod: core_v1.Pod, record: PodRecord, assigned: dict[str, runtime.Assignment]
    ) -> None:
        """Start, end and restart the pod's containers as due now, write the status that
        shows it, and sync the pod again when the next one is due."""
        now = datetime.now(UTC)
        if record.run is None:
            record.run = containers.PodRun.recover(pod, now)
        plans = container_runs.plans(pod, self.pod_defaults)
        waiting = {c.name for c in record.run.containers.values() if c.backoff_message}
        due = containers.sync(pod, record.run, plans, self.crash_loop_backoff, now)
        for c in record.run.containers.values():
            if c.backoff_message and c.name not in waiting:
                meta = pod.metadata
                await self.events.warn(
                    pod,
                    "BackOff",
                    f"Back-off restarting failed container {c.name} in pod "
                    f"{meta.name}_{meta.namespace}({meta.uid})",
                )
        status = containers.pod_status(
            pod,
            record.run,
            {name: a.resource_status for name, a in assigned.items()},
            host_ip=self.internal_ip,
            pod_ip=pod.status.pod_ip or self._pod_ip(),
            now=now,
        )
        if record.run.phase:
            # Upstream's kubelet unprepares a pod's resources after its containers stopped
            # and before its final status is written, so that nothing deallocates a claim
            # that is still prepared.
            await self._finish(pod, record)
        if codec.encode(status) != codec.encode(pod.status):
            span_name = "set pod running" if status.phase == "Running" else "set pod status"
            with tracing.span(span_name) as span:
                if span.is_recording():
                    span.set_attribute("k8s.node.name", self.name)
                    span.set_attribute("k8s.pod.name", pod.metadata.name)
                written = await self.api.patch(
                    core_v1.Pod,
                    pod.metadata.name,
                    {"status": codec.to_builtins(status)},
                    namespace=pod.metadata.namespace,
                    subresource="status",
                )
            record.written = int(written.metadata.resource_version)
        record.cancel_wake()
        if due is not None and not record.run.phase:
            delay = max((due - datetime.now(UTC)).total_seconds(), 0.0)
            record.wake = asyncio.get_running_loop().call_later(delay, self._wake, pod.metadata.uid)

    def _wake(self, uid: str) -> None:
        record = self.pods.get(uid)
        if record is not None and not record.finished:
            record.wake = None
            record.resync = True
            self.requeue(record.namespace, record.name)

    async def _finish(self, pod: core_v1.Pod, record: PodRecord) -> None:
        """The pod has ended: its devices go back (upstream's kubelet unprepares a
        terminated pod's claims, and its device manager counts active pods only)."""
        await self._release_devices(pod.metadata.uid)
        record.finished = True

    def _pod_ip(self) -> str:
        host = self._next_pod_ip
        self._next_pod_ip = host + 1 if host < 254 else 2
        return self.pod_cidr.replace("0/24", str(host))

    async def _reject(self, pod: core_v1.Pod, rejection: admission.Rejection) -> None:
        if pod.status.phase != "Failed":
            await self.events.warn(pod, rejection.reason, rejection.message)
            await self.api.patch(
                core_v1.Pod,
                pod.metadata.name,
                {
                    "status": {
                        "phase": "Failed",
                        "reason": rejection.reason,
                        "message": rejection.message,
                    }
                },
                namespace=pod.metadata.namespace,
                subresource="status",
            )

    async def _release(self, pod: core_v1.Pod) -> None:
        """Give back everything the pod holds and forget it; safe to repeat."""
        uid = pod.metadata.uid
        record = self.pods.pop(uid, None)
        if record is not None:
            record.cancel_wake()
        self.events.forget(uid)
        await self._release_devices(uid)

    async def _release_devices(self, uid: str) -> None:
        for plugin in self.plugins.values():
            plugin.release(uid)
            await plugin.save()
        await self.dra.unprepare(uid)
