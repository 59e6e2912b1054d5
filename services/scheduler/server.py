"""The scheduler service: informers feeding the cache, the DraManager and the queue, and
the loop running `schedule_one` (upstream `pkg/scheduler/{scheduler.go,eventhandlers.go}`).

Nothing is persisted: on start the informers list everything again, so a scheduler killed
mid-binding starts from what the API server holds. Pods it had bound are in the cache,
pending pods are queued again, and a special claim it had created for a pod it never bound
is found by DynamicResources' PreFilter and cleaned up (upstream `filterExtendedResources`
rejects it, PostFilter deletes it).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Callable, Mapping
from typing import Any

from drasim.common import events, metrics
from drasim.common import features as gates
from drasim.common.api import core_v1, policy_v1, resource_v1
from drasim.common.client import ApiClient
from drasim.common.featuregate import FeatureGate
from drasim.common.informer import Informer, event_traceparent
from drasim.scheduler import framework, schedule_one
from drasim.scheduler.cache import Cache, Snapshot
from drasim.scheduler.dra_manager import DraManager
from drasim.scheduler.framework import ActionType, ClusterEvent, EventResource
from drasim.scheduler.metrics import SchedulerMetrics
from drasim.scheduler.plugins import default_preemption, names, registry
from drasim.scheduler.plugins.feature import Features
from drasim.scheduler.queue import Nominator, SchedulingQueue

__all__ = ["DEFAULT_PLUGINS", "Scheduler", "new_default_framework"]

log = logging.getLogger(__name__)

# Scheduling cycles run back to back for this long before binding tasks and informers get
# the event loop (see `Scheduler.run`).
SCHEDULING_SLICE_SECONDS = 0.005

DEFAULT_PLUGINS = (
    names.NODE_UNSCHEDULABLE,
    names.NODE_NAME,
    names.TAINT_TOLERATION,
    names.NODE_AFFINITY,
    names.NODE_RESOURCES_FIT,
    names.DYNAMIC_RESOURCES,
    names.DEFAULT_PREEMPTION,
    names.DEFAULT_BINDER,
    names.SCHEDULING_GATES,
)
"""The default profile, in upstream's order of its Filter plugins; SchedulingGates only
holds pods back from the queue (PreEnqueue)."""


def new_default_framework(
    api: ApiClient,
    dra_manager: DraManager,
    *,
    observe_plugin_duration: framework.PluginDurationObserver | None = None,
    preemption: default_preemption.ClusterViews | None = None,
    resourceclaim_creates: metrics.CounterVec | None = None,
    features: FeatureGate = gates.DEFAULT,
    recorder: events.EventRecorder | None = None,
    plugin_args: Mapping[str, Any] | None = None,
) -> framework.Framework:
    """The default profile: NodeResourcesFit scores least allocated over cpu and memory and
    leaves extended resources that DRA serves to DynamicResources, which counts the special
    claims it creates in `resourceclaim_creates`; DefaultPreemption sees the cluster
    through `preemption` (nothing without it). The plugins honour `features`' gates, record
    their events with `recorder` and take `plugin_args` by plugin name."""
    handle = registry.Handle(
        dra_manager=dra_manager,
        api=api,
        features=Features.from_gate(features),
        preemption=preemption or default_preemption.ClusterViews(),
        resourceclaim_creates=resourceclaim_creates,
        recorder=recorder,
    )
    return registry.new_framework(
        DEFAULT_PLUGINS, handle, args=plugin_args, observe_plugin_duration=observe_plugin_duration
    )


class Scheduler:
    """kube-scheduler with the default profile, over the apistore's client, honouring the
    gates of `features`; `plugin_args` by plugin name, as a KubeSchedulerConfiguration's
    `pluginConfig` (e.g. `DynamicResourcesArgs`).

    `start()` lists and watches pods, nodes, ResourceClaims, ResourceSlices and
    DeviceClasses, waits until all are synced, then schedules until `stop()`.
    """

    def __init__(
        self,
        api: ApiClient,
        *,
        rng: random.Random | None = None,
        features: FeatureGate = gates.DEFAULT,
        plugin_args: Mapping[str, Any] | None = None,
    ) -> None:
        self.api = api
        self.rng = rng or random.Random()
        # FailedScheduling repeats on every attempt of a pending pod: counted, not rewritten.
        self.events = events.EventRecorder(api, component=schedule_one.DEFAULT_SCHEDULER_NAME)
        self.dra_manager = DraManager()
        # The queue's lengths are read when Prometheus scrapes, not on every queue change.
        self.metrics = SchedulerMetrics(pending_pods=lambda: self.queue.pending_pods_by_queue())
        self.cache = Cache()
        self.snapshot = Snapshot()
        # Budgets are read by DefaultPreemption only; nothing else follows them.
        self.pdb_informer = Informer(api, policy_v1.PodDisruptionBudget)
        self.nominator = Nominator()
        self.framework = new_default_framework(
            api,
            self.dra_manager,
            observe_plugin_duration=self.metrics.observe_plugin_duration,
            resourceclaim_creates=self.metrics.resourceclaim_creates,
            features=features,
            recorder=self.events,
            plugin_args=plugin_args,
            preemption=default_preemption.ClusterViews(
                nodes=lambda: self.snapshot.node_info_list,
                budgets=self.pdb_informer.list,
                nominated_on=self.nominator.on_node,
                recorder=self.events,
                observe=self.metrics.preempted,
            ),
        )
        self.queue = SchedulingQueue(
            self.framework.events_to_register(),
            pre_enqueue=self.framework.run_pre_enqueue_plugins,
        )
        self.binding_tasks: set[asyncio.Task[None]] = set()
        self.pod_informer = Informer(
            api,
            core_v1.Pod,
            on_add=self._add_pod,
            on_update=self._update_pod,
            on_delete=self._delete_pod,
        )
        self.node_informer = Informer(
            api,
            core_v1.Node,
            on_add=self._add_node_to_cache,
            on_update=self._update_node_in_cache,
            on_delete=self.cache.remove_node,
        )
        dra = self.dra_manager
        self.informers: list[Informer[Any]] = [
            self.node_informer,
            self._dra_informer(
                resource_v1.DeviceClass,
                EventResource.DEVICE_CLASS,
                dra.on_class_add,
                dra.on_class_update,
                dra.on_class_delete,
            ),
            self._dra_informer(
                resource_v1.ResourceSlice,
                EventResource.RESOURCE_SLICE,
                dra.on_slice_add,
                dra.on_slice_update,
                dra.on_slice_delete,
            ),
            *(
                [self._taint_rule_informer()]
                if features.enabled(gates.DRA_DEVICE_TAINT_RULES)
                else []
            ),
            self._dra_informer(
                resource_v1.ResourceClaim,
                EventResource.RESOURCE_CLAIM,
                dra.on_claim_add,
                dra.on_claim_update,
                dra.on_claim_delete,
            ),
            self.pod_informer,
            self.pdb_informer,
        ]
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self, *, timeout: float | None = None) -> None:
        """Sync every informer, then start the queue's timers and the scheduling loop."""
        for informer in self.informers:
            informer.start()
        for informer in self.informers:
            await informer.wait_synced(timeout)
        self._tasks = [
            asyncio.create_task(self.queue.run(), name="scheduler-queue-timers"),
            asyncio.create_task(self.run(), name="scheduler-schedule-one"),
        ]

    async def run(self) -> None:
        """Schedule pods one after the other, until cancelled."""
        last_yield = time.perf_counter()
        while True:
            try:
                await schedule_one.schedule_one(self)
            except Exception:  # a bug must not stop the scheduler for every other pod
                log.exception("schedule_one failed")
            # A cycle that finds work at once never suspends; yield so that binding tasks
            # and informers make progress, after a few ms of cycles rather than after each:
            # the binding writes of several pods then leave in one socket write and reach
            # the apistore together (one group commit).
            if time.perf_counter() - last_yield >= SCHEDULING_SLICE_SECONDS:
                await asyncio.sleep(0)
                last_yield = time.perf_counter()

    async def stop(self) -> None:
        """Stop scheduling; bindings in progress are cancelled, as a crash would."""
        tasks = [*self._tasks, *self.binding_tasks]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []
        for informer in self.informers:
            await informer.stop()

    # -- pods (upstream `addPodToCache`, `updatePodInSchedulingQueue`, ...) -------------------

    # Upstream's scheduler watches pods with the field selector
    # `status.phase!=Succeeded,status.phase!=Failed` (`newPodInformer`): a pod that ends
    # is deleted from its view, so what it held on its node is free for others.

    def _add_pod(self, pod: core_v1.Pod) -> None:
        if _is_terminal(pod):
            return
        self.nominator.follow(pod)
        if pod.spec.node_name:
            self._add_pod_to_cache(pod)
        elif schedule_one.responsible_for_pod(pod):
            self.queue.add(pod, traceparent=event_traceparent())

    def _update_pod(self, old: core_v1.Pod, new: core_v1.Pod) -> None:
        if _is_terminal(old):
            return
        if _is_terminal(new):
            self._delete_pod(old)
            return
        self.nominator.follow(new)
        if old.spec.node_name:
            self._update_pod_in_cache(old, new)
        elif new.spec.node_name:
            # Bound: it leaves the queue and counts on its node from now on.
            self.queue.delete(old)
            self._add_pod_to_cache(new)
        elif schedule_one.responsible_for_pod(new) and not self.cache.is_assumed_pod(new):
            # An assumed pod is being bound; its updates must not queue it again.
            self.queue.update(old, new, traceparent=event_traceparent())

    def _delete_pod(self, pod: core_v1.Pod) -> None:
        if _is_terminal(pod):
            return  # deleted from the view when it ended
        self.nominator.forget(pod)
        if pod.spec.node_name:
            self.cache.remove_pod(pod)
            self.queue.move_all_to_active_or_backoff_queue(
                ClusterEvent(EventResource.POD, ActionType.DELETE), pod, None
            )
        else:
            self.queue.delete(pod)

    def _add_pod_to_cache(self, pod: core_v1.Pod) -> None:
        self.cache.add_pod(pod)
        self.queue.move_all_to_active_or_backoff_queue(
            ClusterEvent(EventResource.POD, ActionType.ADD), None, pod
        )

    def _update_pod_in_cache(self, old: core_v1.Pod, new: core_v1.Pod) -> None:
        self.cache.update_pod(old, new)
        for event in framework.pod_scheduling_properties_change(new, old):
            self.queue.move_all_to_active_or_backoff_queue(event, old, new)

    # -- nodes ----------------------------------------------------------------------------

    def _add_node_to_cache(self, node: core_v1.Node) -> None:
        self.cache.add_node(node)
        self.queue.move_all_to_active_or_backoff_queue(
            ClusterEvent(EventResource.NODE, ActionType.ADD), None, node
        )

    def _update_node_in_cache(self, old: core_v1.Node, new: core_v1.Node) -> None:
        self.cache.update_node(old, new)
        for event in framework.node_scheduling_properties_change(new, old):
            self.queue.move_all_to_active_or_backoff_queue(event, old, new)

    # -- DRA objects ----------------------------------------------------------------------

    def _taint_rule_informer(self) -> Informer[Any]:
        """DeviceTaintRules, whose changes reach the queue as ResourceSlice updates: upstream's
        slice tracker turns a rule's change into an update of each slice it taints, so a
        rule removed (or a taint's effect relaxed) wakes the pods its taint kept away."""
        dra, queue = self.dra_manager, self.queue
        update = ClusterEvent(EventResource.RESOURCE_SLICE, ActionType.UPDATE)

        def add(rule: resource_v1.DeviceTaintRule) -> None:
            dra.on_taint_rule_add(rule)
            queue.move_all_to_active_or_backoff_queue(update, None, rule)

        def changed(old: resource_v1.DeviceTaintRule, new: resource_v1.DeviceTaintRule) -> None:
            dra.on_taint_rule_update(old, new)
            if old.spec != new.spec:
                queue.move_all_to_active_or_backoff_queue(update, old, new)

        def delete(rule: resource_v1.DeviceTaintRule) -> None:
            dra.on_taint_rule_delete(rule)
            queue.move_all_to_active_or_backoff_queue(update, rule, None)

        return Informer(
            self.api, resource_v1.DeviceTaintRule, on_add=add, on_update=changed, on_delete=delete
        )

    def _dra_informer(
        self,
        type_: type[Any],
        resource: EventResource,
        on_add: Callable[[Any], None],
        on_update: Callable[[Any, Any], None],
        on_delete: Callable[[Any], None],
    ) -> Informer[Any]:
        """An informer that updates the DraManager first, then tells the queue, so the
        queueing hints already see the change."""
        queue = self.queue

        def add(obj: Any) -> None:
            on_add(obj)
            queue.move_all_to_active_or_backoff_queue(
                ClusterEvent(resource, ActionType.ADD), None, obj
            )

        def update(old: Any, new: Any) -> None:
            on_update(old, new)
            queue.move_all_to_active_or_backoff_queue(
                ClusterEvent(resource, ActionType.UPDATE), old, new
            )

        def delete(obj: Any) -> None:
            on_delete(obj)
            queue.move_all_to_active_or_backoff_queue(
                ClusterEvent(resource, ActionType.DELETE), obj, None
            )

        return Informer(self.api, type_, on_add=add, on_update=update, on_delete=delete)


def _is_terminal(pod: core_v1.Pod) -> bool:
    return pod.status.phase in ("Succeeded", "Failed")
