"""DaemonSet controller: one pod on each node that should run it (upstream
`pkg/controller/daemon/daemon_controller.go` and `update.go`).

A node should run the set's pod when its template's `nodeName` (if any), `nodeSelector`
and required node affinity match it and its NoSchedule/NoExecute taints are tolerated,
counting the tolerations every daemon pod gets (not-ready, unreachable, the pressure
taints, unschedulable: a cordoned node keeps its daemon pods). A pod is made for a node
with node affinity to that node alone, and the scheduler binds it, as upstream's; it
carries the `controller-revision-hash` of the template and the `pod-template-generation`
label. Nodes added get a pod, nodes removed or no longer matching lose it (a pod may stay
on a node whose only untolerated taints are NoSchedule); failed and succeeded daemon pods
are deleted and replaced. A template change rolls out with `RollingUpdate` (old pods
deleted while at most maxUnavailable nodes are without an available pod; `OnDelete` waits
for the user). Status: desiredNumberScheduled, currentNumberScheduled,
numberMisscheduled, numberReady, updatedNumberScheduled, numberAvailable,
numberUnavailable, observedGeneration, which `kubectl rollout status` reads.

drasim stores no ControllerRevisions: the hash is the template's, as the Deployment
controller's pod-template-hash.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict

from drasim.common import errors
from drasim.common.api import apps_v1, core_v1
from drasim.common.client import ApiClient
from drasim.common.informer import Informer, Key, key_of
from drasim.controllers import daemonsetutil, events, owners, podutil, status_patch
from drasim.controllers.queue import WorkQueue
from drasim.controllers.replicaset import slow_start_batch

__all__ = ["COMPONENT", "DaemonSetController"]

log = logging.getLogger(__name__)

COMPONENT = "daemonset-controller"


class DaemonSetController:
    """Reconciles each DaemonSet's pods with the nodes, and reports its status."""

    def __init__(
        self,
        api: ApiClient,
        *,
        daemon_sets: Informer[apps_v1.DaemonSet],
        nodes: Informer[core_v1.Node],
        pods: Informer[core_v1.Pod],
        concurrency: int = 16,
    ) -> None:
        self.api = api
        self.events = events.EventRecorder(api, component=COMPONENT)
        self.daemon_sets = daemon_sets
        self.nodes = nodes
        self.pods = pods
        self.queue: WorkQueue[Key] = WorkQueue("daemonset", self.sync, concurrency=concurrency)
        self._pods_by_set = owners.OwnerIndex(kind="DaemonSet", api_version="apps/v1")
        self._pods_by_set.attach(pods)
        self._written: dict[Key, int] = {}
        daemon_sets.add_handlers(
            on_add=self._enqueue,
            on_update=lambda _old, new: self._enqueue(new),
            on_delete=self._on_delete,
        )
        pods.add_handlers(
            on_add=self._enqueue_owner,
            on_update=lambda _old, new: self._enqueue_owner(new),
            on_delete=self._enqueue_owner,
        )
        nodes.add_handlers(
            on_add=self._enqueue_all,
            on_update=self._on_node_update,
            on_delete=self._enqueue_all,
        )

    def _enqueue(self, ds: apps_v1.DaemonSet) -> None:
        self.queue.add(key_of(ds))

    def _on_delete(self, ds: apps_v1.DaemonSet) -> None:
        self.events.forget(ds.metadata.uid)
        self._enqueue(ds)

    def _enqueue_owner(self, pod: core_v1.Pod) -> None:
        ref = owners.controller_ref(pod, kind="DaemonSet", api_version="apps/v1")
        if ref is not None:
            self.queue.add((pod.metadata.namespace, ref.name))

    def _enqueue_all(self, _node: core_v1.Node) -> None:
        for ds in self.daemon_sets.cache.values():
            self._enqueue(ds)

    def _on_node_update(self, old: core_v1.Node, new: core_v1.Node) -> None:
        """Only what decides where daemon pods run (`shouldIgnoreNodeUpdate`): labels,
        taints, readiness aside."""
        if (old.metadata.labels, old.spec.taints) != (new.metadata.labels, new.spec.taints):
            self._enqueue_all(new)

    async def sync(self, key: Key) -> None:
        namespace, name = key
        ds = self.daemon_sets.get(name, namespace)
        if ds is None:
            self._written.pop(key, None)
            return
        if self.pods.resource_version < self._written.get(key, 0):
            return
        hash_ = daemonsetutil.template_hash(ds)
        pods_by_node = self._pods_by_node(ds)
        should_run: list[str] = []
        may_stay: set[str] = set()
        for node in self.nodes.cache.values():
            run, stay = daemonsetutil.node_should_run(ds, node)
            if run:
                should_run.append(node.metadata.name)
            if stay:
                may_stay.add(node.metadata.name)
        if ds.metadata.deletion_timestamp is None:
            await self._manage(key, ds, pods_by_node, should_run, may_stay, hash_)
        await self._update_status(ds, pods_by_node, should_run, hash_)

    def _pods_by_node(self, ds: apps_v1.DaemonSet) -> dict[str, list[core_v1.Pod]]:
        by_node: dict[str, list[core_v1.Pod]] = defaultdict(list)
        for key in self._pods_by_set.keys(ds.metadata.uid):
            pod = self.pods.cache.get(key)
            if pod is not None:
                by_node[daemonsetutil.target_node(pod)].append(pod)
        return by_node

    async def _manage(
        self,
        key: Key,
        ds: apps_v1.DaemonSet,
        pods_by_node: dict[str, list[core_v1.Pod]],
        should_run: list[str],
        may_stay: set[str],
        hash_: str,
    ) -> None:
        """`manage` (`podsShouldBeOnNode` per node), then the rolling update's deletions."""
        create: list[str] = []
        delete: list[core_v1.Pod] = []
        for node in should_run:
            if not any(p.metadata.deletion_timestamp is None for p in pods_by_node.get(node, [])):
                create.append(node)
        for node, pods in pods_by_node.items():
            live = [p for p in pods if p.metadata.deletion_timestamp is None]
            if node not in may_stay:
                delete += live
                continue
            ended = [p for p in live if podutil.is_pod_terminal(p)]
            for pod in ended:
                reason, verb = (
                    ("FailedDaemonPod", "failed")
                    if pod.status.phase == "Failed"
                    else ("SucceededDaemonPod", "succeeded")
                )
                self.events.event(
                    ds,
                    events.WARNING if verb == "failed" else events.NORMAL,
                    reason,
                    f"Found {verb} daemon pod {pod.metadata.namespace}/{pod.metadata.name} on "
                    f"node {node}, will try to {'kill' if verb == 'failed' else 'delete'} it",
                )
            running = sorted(
                (p for p in live if p not in ended),
                key=lambda p: p.metadata.creation_timestamp or "",
            )
            delete += ended + running[1:]
        if ds.spec.update_strategy.type == "RollingUpdate":
            now = podutil.now()
            for pod in daemonsetutil.rolling_update_deletions(
                ds, pods_by_node, should_run, hash_, now
            ):
                if pod not in delete:
                    delete.append(pod)
        # A pod bound to a node that is gone has no kubelet to end it: it is deleted at once,
        # as upstream's pod garbage collector deletes such orphans.
        gone = {n for n in pods_by_node if n and self.nodes.get(n) is None}
        written: list[core_v1.Pod] = []
        try:
            await self._delete_pods(ds, delete, written, gone)
            await self._create_pods(ds, create, hash_, written)
        finally:
            versions = [int(p.metadata.resource_version) for p in written]
            if versions:
                self._written[key] = max(self._written.get(key, 0), *versions)

    async def _create_pods(
        self, ds: apps_v1.DaemonSet, nodes: list[str], hash_: str, written: list[core_v1.Pod]
    ) -> None:
        pending = list(nodes)
        ref = owners.new_controller_ref(ds)

        async def create() -> None:
            node = pending.pop(0)
            try:
                pod = await self.api.create(daemonsetutil.pod_for_node(ds, node, hash_, ref))
            except errors.ApiError as exc:
                self.events.event(ds, events.WARNING, "FailedCreate", f"Error creating: {exc}")
                raise
            written.append(pod)
            self.events.event(
                ds, events.NORMAL, "SuccessfulCreate", f"Created pod: {pod.metadata.name}"
            )

        await slow_start_batch(len(nodes), create)

    async def _delete_pods(
        self,
        ds: apps_v1.DaemonSet,
        pods: list[core_v1.Pod],
        written: list[core_v1.Pod],
        gone: set[str],
    ) -> None:
        async def delete(pod: core_v1.Pod) -> None:
            meta = pod.metadata
            grace = 0 if daemonsetutil.target_node(pod) in gone else None
            try:
                deleted = await self.api.delete(
                    core_v1.Pod,
                    meta.name,
                    namespace=meta.namespace,
                    uid=meta.uid,
                    grace_period_seconds=grace,
                )
            except errors.NotFound:
                return
            except errors.ApiError as exc:
                self.events.event(ds, events.WARNING, "FailedDelete", f"Error deleting: {exc}")
                raise
            written.append(deleted)
            self.events.event(ds, events.NORMAL, "SuccessfulDelete", f"Deleted pod: {meta.name}")

        results = await asyncio.gather(*(delete(p) for p in pods), return_exceptions=True)
        failures = [r for r in results if isinstance(r, BaseException)]
        if failures:
            raise failures[0]

    async def _update_status(
        self,
        ds: apps_v1.DaemonSet,
        pods_by_node: dict[str, list[core_v1.Pod]],
        should_run: list[str],
        hash_: str,
    ) -> None:
        """`updateDaemonSetStatus`, from the pods as the sync found them."""
        wanted = set(should_run)
        now = podutil.now()
        current = misscheduled = ready = updated = available = 0
        for node, pods in pods_by_node.items():
            live = [p for p in pods if p.metadata.deletion_timestamp is None]
            if not live:
                continue
            if node not in wanted:
                misscheduled += 1
                continue
            current += 1
            pod = min(live, key=lambda p: p.metadata.creation_timestamp or "")
            if podutil.is_pod_ready(pod):
                ready += 1
                if podutil.is_pod_available(pod, ds.spec.min_ready_seconds, now):
                    available += 1
            if any(
                p.metadata.labels.get(apps_v1.CONTROLLER_REVISION_HASH_LABEL) == hash_ for p in live
            ):
                updated += 1
        status = apps_v1.DaemonSetStatus(
            current_number_scheduled=current,
            number_misscheduled=misscheduled,
            desired_number_scheduled=len(wanted),
            number_ready=ready,
            observed_generation=ds.metadata.generation,
            updated_number_scheduled=updated,
            number_available=available,
            number_unavailable=max(0, len(wanted) - available),
            collision_count=ds.status.collision_count,
            conditions=ds.status.conditions,
        )
        if status != ds.status:
            await self.api.patch(
                apps_v1.DaemonSet,
                ds.metadata.name,
                status_patch.merge_patch(status),
                namespace=ds.metadata.namespace,
                subresource="status",
            )
        if ds.spec.min_ready_seconds and ready > available:
            self.queue.add_after(key_of(ds), float(ds.spec.min_ready_seconds))
