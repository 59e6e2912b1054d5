"""StatefulSet controller: pods with stable names `<set>-<ordinal>` (upstream
`pkg/controller/statefulset`: `stateful_set_control.go`, `stateful_set_utils.go`).

Ordinals run from `spec.ordinals.start` over `spec.replicas`. Each pod gets its identity
(hostname its name, subdomain the set's `serviceName`, the labels
`statefulset.kubernetes.io/pod-name`, `apps.kubernetes.io/pod-index` and
`controller-revision-hash`) and, per `volumeClaimTemplates` entry, a volume of the claim
`<template>-<set>-<ordinal>`, which the controller creates when PersistentVolumeClaims are
served. `OrderedReady` makes pods one at a time in order, each Running and Ready before the
next, and removes them from the highest ordinal, one at a time; `Parallel` does both at
once. Failed pods are deleted and made again. A template change rolls out with
`RollingUpdate` from the highest ordinal down to `partition`, at most `maxUnavailable` pods
at a time; `OnDelete` waits for the user. Status (replicas, readyReplicas,
currentReplicas, updatedReplicas, availableReplicas, currentRevision, updateRevision,
observedGeneration) is what `kubectl rollout status` reads.

drasim stores no ControllerRevisions: a revision is named `<set>-<template hash>`.
"""

from __future__ import annotations

import asyncio
import logging
import re

import msgspec

from drasim.common import codec, errors
from drasim.common.api import apps_v1, core_v1, registry
from drasim.common.client import ApiClient
from drasim.common.informer import Informer, Key, key_of
from drasim.controllers import daemonsetutil, events, owners, podutil, status_patch
from drasim.controllers.deploymentutil import pod_template_hash
from drasim.controllers.queue import WorkQueue

__all__ = [
    "COMPONENT",
    "StatefulSetController",
    "claim_name",
    "new_pod",
    "ordinal_of",
    "revision_name",
]

log = logging.getLogger(__name__)

COMPONENT = "statefulset-controller"
_ORDINAL = re.compile(r"^(.*)-([0-9]+)$")


def ordinal_of(pod: core_v1.Pod, set_name: str) -> int | None:
    """`getParentNameAndOrdinal`: the ordinal of a pod named `<set>-<n>`, else None."""
    match = _ORDINAL.match(pod.metadata.name)
    if match is None or match[1] != set_name:
        return None
    return int(match[2])


def revision_name(sts: apps_v1.StatefulSet) -> str:
    return f"{sts.metadata.name}-{pod_template_hash(sts.spec.template, sts.status.collision_count)}"


def claim_name(template_name: str, sts: apps_v1.StatefulSet, ordinal: int) -> str:
    """`getPersistentVolumeClaimName`."""
    return f"{template_name}-{sts.metadata.name}-{ordinal}"


def _claim_templates(sts: apps_v1.StatefulSet) -> list[str]:
    return [
        t.get("metadata", {}).get("name", "")
        for t in sts.spec.volume_claim_templates
        if isinstance(t, dict)
    ]


def new_pod(sts: apps_v1.StatefulSet, ordinal: int, revision: str) -> core_v1.Pod:
    """`newVersionedStatefulSetPod`: the template with the pod's identity and storage."""
    template = sts.spec.template
    name = f"{sts.metadata.name}-{ordinal}"
    labels = {
        **template.metadata.labels,
        apps_v1.STATEFULSET_POD_NAME_LABEL: name,
        apps_v1.POD_INDEX_LABEL: str(ordinal),
        apps_v1.CONTROLLER_REVISION_HASH_LABEL: revision,
    }
    claims = {t: claim_name(t, sts, ordinal) for t in _claim_templates(sts) if t}
    volumes = [v for v in template.spec.volumes if v.get("name") not in claims]
    volumes += [
        {"name": t, "persistentVolumeClaim": {"claimName": claim}} for t, claim in claims.items()
    ]
    spec = msgspec.structs.replace(
        template.spec, hostname=name, subdomain=sts.spec.service_name, volumes=volumes
    )
    return core_v1.Pod(
        metadata=msgspec.structs.replace(
            template.metadata,
            name=name,
            generate_name="",
            namespace=sts.metadata.namespace,
            labels=labels,
            annotations=dict(template.metadata.annotations),
            owner_references=[owners.new_controller_ref(sts)],
        ),
        spec=spec,
    )


def _healthy(pod: core_v1.Pod) -> bool:
    """`isHealthy`: Running, Ready and not being deleted."""
    return (
        pod.status.phase == "Running"
        and podutil.is_pod_ready(pod)
        and pod.metadata.deletion_timestamp is None
    )


class StatefulSetController:
    """Reconciles each StatefulSet's ordered pods and reports its status."""

    def __init__(
        self,
        api: ApiClient,
        *,
        stateful_sets: Informer[apps_v1.StatefulSet],
        pods: Informer[core_v1.Pod],
        concurrency: int = 16,
    ) -> None:
        self.api = api
        self.events = events.EventRecorder(api, component=COMPONENT)
        self.stateful_sets = stateful_sets
        self.pods = pods
        self.queue: WorkQueue[Key] = WorkQueue("statefulset", self.sync, concurrency=concurrency)
        self._pods_by_set = owners.OwnerIndex(kind="StatefulSet", api_version="apps/v1")
        self._pods_by_set.attach(pods)
        self._written: dict[Key, int] = {}
        stateful_sets.add_handlers(
            on_add=self._enqueue,
            on_update=lambda _old, new: self._enqueue(new),
            on_delete=self._on_delete,
        )
        pods.add_handlers(
            on_add=self._enqueue_owner,
            on_update=lambda _old, new: self._enqueue_owner(new),
            on_delete=self._enqueue_owner,
        )

    def _enqueue(self, sts: apps_v1.StatefulSet) -> None:
        self.queue.add(key_of(sts))

    def _on_delete(self, sts: apps_v1.StatefulSet) -> None:
        self.events.forget(sts.metadata.uid)
        self._enqueue(sts)

    def _enqueue_owner(self, pod: core_v1.Pod) -> None:
        ref = owners.controller_ref(pod, kind="StatefulSet", api_version="apps/v1")
        if ref is not None:
            self.queue.add((pod.metadata.namespace, ref.name))

    async def sync(self, key: Key) -> None:
        namespace, name = key
        sts = self.stateful_sets.get(name, namespace)
        if sts is None:
            self._written.pop(key, None)
            return
        if self.pods.resource_version < self._written.get(key, 0):
            return
        pods = {
            ordinal: pod
            for k in self._pods_by_set.keys(sts.metadata.uid)
            if (pod := self.pods.cache.get(k)) is not None
            and (ordinal := ordinal_of(pod, sts.metadata.name)) is not None
        }
        revision = revision_name(sts)
        try:
            if sts.metadata.deletion_timestamp is None:
                await self._update_replicas(key, sts, pods, revision)
        finally:
            await self._update_status(sts, pods, revision)

    async def _update_replicas(
        self, key: Key, sts: apps_v1.StatefulSet, pods: dict[int, core_v1.Pod], revision: str
    ) -> None:
        """`updateStatefulSet`, one step: what a sync may do before it must wait."""
        start = sts.spec.ordinals.start if sts.spec.ordinals else 0
        replicas = 1 if sts.spec.replicas is None else sts.spec.replicas
        wanted = range(start, start + replicas)
        parallel = sts.spec.pod_management_policy == "Parallel"
        # Failed (or ended) pods are deleted, to be made again.
        ended = [
            p
            for p in pods.values()
            if podutil.is_pod_terminal(p) and not p.metadata.deletion_timestamp
        ]
        if ended:
            await self._delete(key, sts, ended)
            return
        for ordinal in wanted:
            pod = pods.get(ordinal)
            if pod is None:
                await self._create(key, sts, ordinal, revision)
                if not parallel:
                    return
                continue
            if not parallel and not _healthy(pod):
                return  # OrderedReady: wait for this one before the next
        condemned = sorted((o for o in pods if o not in wanted), reverse=True)
        live_condemned = [o for o in condemned if pods[o].metadata.deletion_timestamp is None]
        if condemned:
            if parallel:
                await self._delete(key, sts, [pods[o] for o in live_condemned])
            elif live_condemned and live_condemned[0] == condemned[0]:
                await self._delete(key, sts, [pods[condemned[0]]])
            return
        await self._rolling_update(key, sts, pods, wanted, revision)

    async def _rolling_update(
        self,
        key: Key,
        sts: apps_v1.StatefulSet,
        pods: dict[int, core_v1.Pod],
        wanted: range,
        revision: str,
    ) -> None:
        """Old-revision pods at or above the partition go, highest first, while fewer than
        maxUnavailable pods are unhealthy."""
        strategy = sts.spec.update_strategy
        if strategy.type != "RollingUpdate":
            return
        rolling = strategy.rolling_update or apps_v1.RollingUpdateStatefulSetStrategy()
        partition = rolling.partition or 0
        budget = max(
            1, daemonsetutil.scaled(rolling.max_unavailable, len(wanted), default=1, round_up=False)
        )
        unhealthy = sum(not _healthy(pods[o]) for o in wanted if o in pods)
        victims = []
        for ordinal in sorted(wanted, reverse=True):
            if ordinal < partition + wanted.start or ordinal not in pods:
                continue
            pod = pods[ordinal]
            if pod.metadata.labels.get(apps_v1.CONTROLLER_REVISION_HASH_LABEL) == revision:
                continue
            if len(victims) + unhealthy >= budget and _healthy(pod):
                break
            victims.append(pod)
        if victims:
            await self._delete(key, sts, victims)

    async def _create(
        self, key: Key, sts: apps_v1.StatefulSet, ordinal: int, revision: str
    ) -> None:
        pod = new_pod(sts, ordinal, revision)
        await self._create_claims(sts, ordinal)
        try:
            created = await self.api.create(pod)
        except errors.AlreadyExists:
            return  # the old one is still going
        except errors.ApiError as exc:
            what = f"create Pod {pod.metadata.name} in StatefulSet {sts.metadata.name}"
            self.events.event(sts, events.WARNING, "FailedCreate", f"{what} failed error: {exc}")
            raise
        self._note_written(key, [created])
        what = f"create Pod {pod.metadata.name} in StatefulSet {sts.metadata.name}"
        self.events.event(sts, events.NORMAL, "SuccessfulCreate", f"{what} successful")

    async def _create_claims(self, sts: apps_v1.StatefulSet, ordinal: int) -> None:
        """The pod's PersistentVolumeClaims, once the kind is served."""
        try:
            info = registry.by_plural("persistentvolumeclaims")
        except errors.NotFound:
            return
        for template in sts.spec.volume_claim_templates:
            name = claim_name(template.get("metadata", {}).get("name", ""), sts, ordinal)
            claim = codec.convert(
                {
                    **template,
                    "apiVersion": "v1",
                    "kind": "PersistentVolumeClaim",
                    "metadata": {
                        **template.get("metadata", {}),
                        "name": name,
                        "namespace": sts.metadata.namespace,
                        "labels": dict(sts.spec.selector.match_labels) if sts.spec.selector else {},
                    },
                },
                info.type,
            )
            try:
                await self.api.create(claim)
            except errors.AlreadyExists:
                continue

    async def _delete(self, key: Key, sts: apps_v1.StatefulSet, pods: list[core_v1.Pod]) -> None:
        async def delete(pod: core_v1.Pod) -> core_v1.Pod | None:
            meta = pod.metadata
            try:
                deleted = await self.api.delete(
                    core_v1.Pod, meta.name, namespace=meta.namespace, uid=meta.uid
                )
            except errors.NotFound:
                return None
            except errors.ApiError as exc:
                what = f"delete Pod {meta.name} in StatefulSet {sts.metadata.name}"
                self.events.event(
                    sts, events.WARNING, "FailedDelete", f"{what} failed error: {exc}"
                )
                raise
            what = f"delete Pod {meta.name} in StatefulSet {sts.metadata.name}"
            self.events.event(sts, events.NORMAL, "SuccessfulDelete", f"{what} successful")
            return deleted

        results = await asyncio.gather(*(delete(p) for p in pods), return_exceptions=True)
        self._note_written(key, [r for r in results if isinstance(r, core_v1.Pod)])
        failures = [r for r in results if isinstance(r, BaseException)]
        if failures:
            raise failures[0]

    def _note_written(self, key: Key, pods: list[core_v1.Pod]) -> None:
        versions = [int(p.metadata.resource_version) for p in pods]
        if versions:
            self._written[key] = max(self._written.get(key, 0), *versions)

    async def _update_status(
        self, sts: apps_v1.StatefulSet, pods: dict[int, core_v1.Pod], revision: str
    ) -> None:
        """`updateStatefulSetStatus`: counts of the set's pods; the current revision becomes
        the update revision once every pod runs it."""
        now = podutil.now()
        live = [p for p in pods.values() if p.metadata.deletion_timestamp is None]
        at_revision = [
            p
            for p in live
            if p.metadata.labels.get(apps_v1.CONTROLLER_REVISION_HASH_LABEL) == revision
        ]
        ready = [p for p in live if _healthy(p)]
        replicas = 1 if sts.spec.replicas is None else sts.spec.replicas
        current_revision = sts.status.current_revision or revision
        if len(at_revision) == replicas == len(live):
            current_revision = revision
        # The label holds the revision's name, as upstream's (`<set>-<hash>`).
        at_current = [
            p
            for p in live
            if p.metadata.labels.get(apps_v1.CONTROLLER_REVISION_HASH_LABEL) == current_revision
        ]
        status = apps_v1.StatefulSetStatus(
            observed_generation=sts.metadata.generation,
            replicas=len(live),
            ready_replicas=len(ready),
            current_replicas=len(at_current),
            updated_replicas=len(at_revision),
            current_revision=current_revision,
            update_revision=revision,
            collision_count=sts.status.collision_count,
            conditions=sts.status.conditions,
            available_replicas=sum(
                podutil.is_pod_available(p, sts.spec.min_ready_seconds, now) for p in ready
            ),
        )
        if status != sts.status:
            await self.api.patch(
                apps_v1.StatefulSet,
                sts.metadata.name,
                status_patch.merge_patch(status),
                namespace=sts.metadata.namespace,
                subresource="status",
            )
        if sts.spec.min_ready_seconds and status.ready_replicas > status.available_replicas:
            self.queue.add_after(key_of(sts), float(sts.spec.min_ready_seconds))
