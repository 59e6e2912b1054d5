"""One kubelet process: many nodes as asyncio tasks. Every task is spawned and stopped here.

- registration: every node registers (Node, Lease, ResourceSlices), a few at a time;
- `pod-watch`: one watch of the pods bound to all hosted nodes (`watch.pod_informer`); each
  event is admitted by its node at once, in order, then queued under ("pods", uid);
- workers: `queueing.WorkQueues`, one per pod with work in flight;
- `heartbeat-<node>`: one Lease-renewing task per node;
- control: one subscription per node for `drasim node fault|migrate` (`control`).

With the DRAExtendedResource gate off (`features`), pods reach the nodes without their
special claim's status, as upstream's kubelet ignores it then.

A process that is killed leaves its nodes' state in the API and in the checkpoints under
`state_dir`; a new process with the same nodes takes over without preparing anything again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from pathlib import Path

import msgspec
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

from drasim.common import features as gates
from drasim.common import nats_auth
from drasim.common.api import core_v1
from drasim.common.client import ApiClient
from drasim.common.cluster_file import NodeConfig, PodDefault
from drasim.common.featuregate import FeatureGate
from drasim.kubelet import backoff, control
from drasim.kubelet.metrics import KubeletMetrics
from drasim.kubelet.node import GroupInUse, NodeAgent
from drasim.kubelet.queueing import Key, WorkQueues
from drasim.kubelet.watch import pod_informer

__all__ = ["KubeletProcess"]

log = logging.getLogger(__name__)

REGISTER_CONCURRENCY = 64

PodEvent = tuple[str, core_v1.Pod, str]  # type, pod, the event's traceparent


class KubeletProcess:
    def __init__(
        self,
        *,
        api: ApiClient,
        nodes: list[NodeConfig],
        state_dir: Path | None = None,
        heartbeat_period: float = 10.0,
        features: FeatureGate = gates.DEFAULT,
        pod_defaults: list[PodDefault] | None = None,
        crash_loop_backoff: backoff.CrashLoopBackOff | None = None,
    ) -> None:
        self.api = api
        self.extended_resources = features.enabled(gates.DRA_EXTENDED_RESOURCE)
        if crash_loop_backoff is None:
            reduced = features.enabled(gates.REDUCE_DEFAULT_CRASH_LOOP_BACK_OFF_DECAY)
            crash_loop_backoff = backoff.REDUCED if reduced else backoff.UPSTREAM
        self.agents = {
            n.name: NodeAgent(
                config=n,
                # Each node writes as itself, which NodeRestriction holds to its own objects.
                api=ApiClient(api.bus, actor=nats_auth.node_identity(n.name), timeout=api.timeout),
                bus=api.bus,
                state_dir=state_dir,
                heartbeat_period=heartbeat_period,
                crash_loop_backoff=crash_loop_backoff,
                pod_defaults=pod_defaults,
            )
            for n in nodes
        }
        self.queues: WorkQueues[PodEvent] = WorkQueues(self._sync)
        self.watch = pod_informer(api, list(self.agents), self._on_pod_event)
        self._tasks: list[asyncio.Task[None]] = []
        self._subs: list[Subscription] = []
        self._by_subject = {
            control.node_subject(api.bus.prefix, name): agent for name, agent in self.agents.items()
        }
        self.metrics = KubeletMetrics(nodes=lambda: self.agents.keys())
        for agent in self.agents.values():
            agent.requeue = self._requeue
            agent.dra.observe_operation = self.metrics.observe_dra_operation
            agent.dra.observe_driver_call = self.metrics.observe_dra_grpc_operation
            agent.observe_allocation = self.metrics.observe_device_plugin_allocation

    async def start(self) -> None:
        """Register every node, then watch their pods; returns once the pods are listed."""
        limit = asyncio.Semaphore(REGISTER_CONCURRENCY)

        async def register(agent: NodeAgent) -> None:
            async with limit:
                await agent.register()

        await asyncio.gather(*(register(a) for a in self.agents.values()))
        for subject in self._by_subject:
            self._subs.append(await self.api.bus.nc.subscribe(subject, cb=self._on_control))
        if self.agents:  # a shard may be empty: more processes than nodes
            self._tasks.append(asyncio.create_task(self.watch.run(), name="pod-watch"))
            await self.watch.synced.wait()
        for name, agent in self.agents.items():
            self._tasks.append(
                asyncio.create_task(agent.heartbeat_forever(), name=f"heartbeat-{name}")
            )

    async def stop(self) -> None:
        for sub in self._subs:
            with contextlib.suppress(Exception):
                await sub.unsubscribe()
        self._subs.clear()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        await self.queues.stop()
        await asyncio.gather(*(agent.close() for agent in self.agents.values()))

    # -- pods ---------------------------------------------------------------------------
    def _on_pod_event(self, event_type: str, pod: core_v1.Pod, traceparent: str = "") -> None:
        agent = self.agents.get(pod.spec.node_name)
        if agent is None:
            return
        pod = self._as_gated(pod)
        try:
            agent.admit(event_type, pod, traceparent)
        except Exception:
            log.exception("node %s: admitting pod %s failed", agent.name, pod.metadata.name)
        self.queues.put(("pods", pod.metadata.uid), (event_type, pod, traceparent))

    def _requeue(self, namespace: str, name: str) -> None:
        pod = self.watch.cache.get((namespace, name))
        if pod is not None:
            self.queues.put(("pods", pod.metadata.uid), ("MODIFIED", self._as_gated(pod), ""))

    def _as_gated(self, pod: core_v1.Pod) -> core_v1.Pod:
        """The pod as the nodes see it. Upstream's kubelet reads the special claim only with
        DRAExtendedResource on (its DRA manager's claims, its device manager's skip of
        DRA-backed names, its admission's): off, the pod is as if it had none."""
        if self.extended_resources or pod.status.extended_resource_claim_status is None:
            return pod
        status = msgspec.structs.replace(pod.status, extended_resource_claim_status=None)
        return msgspec.structs.replace(pod, status=status)

    async def _sync(self, key: Key, event: PodEvent) -> None:
        event_type, pod, traceparent = event
        await self.agents[pod.spec.node_name].sync_pod(event_type, pod, traceparent)

    # -- control ------------------------------------------------------------------------
    async def _on_control(self, msg: Msg) -> None:
        agent = self._by_subject[msg.subject]
        try:
            command = control.decode_command(msg.data)
            match command:
                case control.SetDeviceHealth():
                    message = await agent.set_device_health(command.device, healthy=command.healthy)
                case control.SetExposure():
                    message = await agent.set_exposure(
                        command.group, command.exposure, command.extended_resource_name
                    )
            reply = control.ControlReply(ok=True, message=message)
        except GroupInUse as exc:
            reply = control.ControlReply(ok=False, message=str(exc), pods=exc.pods)
        except (KeyError, ValueError) as exc:
            reply = control.ControlReply(ok=False, message=str(exc.args[0]))
        except Exception as exc:
            log.exception("node %s: command failed", agent.name)
            reply = control.ControlReply(ok=False, message=f"node/{agent.name}: {exc}")
        await msg.respond(control.encode(reply))
