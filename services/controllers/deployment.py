"""Deployment controller: one ReplicaSet per pod template (upstream pkg/controller/deployment).

The ReplicaSet for the current template is `<deployment>-<pod-template-hash>`; the hash is
also its `pod-template-hash` label, added to its selector and its pod template, so its pods
carry it too. It is owned by the Deployment (controller ownerReference) and numbered by the
`deployment.kubernetes.io/revision` annotation. A template change rolls out a new
ReplicaSet with the Deployment's strategy, as upstream does:

- `RollingUpdate` (the default; maxSurge and maxUnavailable default to 25%): the new set
  grows while all sets together stay within `replicas + maxSurge`, old sets shrink while at
  least `replicas - maxUnavailable` pods stay available (`rolling.go`);
- `Recreate`: old sets go to 0, and the new set grows once none of their pods is left
  running (`recreate.go`).

Old ReplicaSets beyond `revisionHistoryLimit` (default 10) are deleted once the rollout is
complete. Status (replicas, updatedReplicas, readyReplicas, availableReplicas,
unavailableReplicas, observedGeneration, Available and Progressing conditions) is written
through the status subresource. Not done: pausing, progress deadlines, proportional
scaling of several live ReplicaSets when `replicas` changes mid-rollout (the rolling
algorithm still converges), adoption of orphaned ReplicaSets.

Events on the Deployment, as upstream records them: `ScalingReplicaSet` for every size a
ReplicaSet is given ("Scaled up replica set web-5f9dc4ccb6 from 0 to 3", "Scaled down
replica set web-58586fd955 from 3 to 2"), and the Warning `ReplicaSetCreateError` when the
new ReplicaSet cannot be created (`sync.go`).
"""

from __future__ import annotations

import logging

import msgspec

from drasim.common import errors
from drasim.common.api import apps_v1, core_v1, meta_v1
from drasim.common.client import ApiClient
from drasim.common.informer import Informer, Key, key_of
from drasim.controllers import deploymentutil, events, owners, podutil, status_patch
from drasim.controllers.queue import WorkQueue
from drasim.controllers.replicaset import replicas

log = logging.getLogger(__name__)

COMPONENT = "deployment-controller"
"""The controller's name in its Events' `source` (upstream's)."""

# Event reasons (upstream's; `deploymentutil.FailedRSCreateReason` for the Warning).
SCALING_REPLICA_SET = "ScalingReplicaSet"
FAILED_RS_CREATE = "ReplicaSetCreateError"


class DeploymentController:
    """Rolls each Deployment's template out as ReplicaSets and reports its status."""

    def __init__(
        self,
        api: ApiClient,
        *,
        deployments: Informer[apps_v1.Deployment],
        replica_sets: Informer[apps_v1.ReplicaSet],
        pods: Informer[core_v1.Pod],
        concurrency: int = 16,
        pods_by_owner: owners.PodOwnerIndex | None = None,
    ) -> None:
        self.api = api
        self.events = events.EventRecorder(api, component=COMPONENT)
        self.deployments = deployments
        self.replica_sets = replica_sets
        self.pods = pods
        self.queue: WorkQueue[Key] = WorkQueue("deployment", self.sync, concurrency=concurrency)
        self._replica_sets_by_owner = owners.OwnerIndex(kind="Deployment", api_version="apps/v1")
        self._replica_sets_by_owner.attach(replica_sets)
        self._pods_by_owner = pods_by_owner or owners.attached_pod_index(pods)
        # The resourceVersion of this controller's last ReplicaSet write per Deployment:
        # until the ReplicaSet cache has seen it, a sync would act on stale sets (see the
        # ReplicaSet controller's note on expectations).
        self._written: dict[Key, int] = {}
        deployments.add_handlers(
            on_add=self._enqueue,
            on_update=lambda _old, new: self._enqueue(new),
            on_delete=self._on_delete,
        )
        replica_sets.add_handlers(
            on_add=self._enqueue_owner,
            on_update=self._on_replica_set_update,
            on_delete=self._enqueue_owner,
        )
        pods.add_handlers(on_delete=self._on_pod_delete)

    def _enqueue(self, deployment: apps_v1.Deployment) -> None:
        self.queue.add(key_of(deployment))

    def _on_delete(self, deployment: apps_v1.Deployment) -> None:
        self.events.forget(deployment.metadata.uid)
        self._enqueue(deployment)

    def _enqueue_owner(self, rs: apps_v1.ReplicaSet) -> None:
        ref = owners.controller_ref(rs, kind="Deployment", api_version="apps/v1")
        if ref is not None:
            self.queue.add((rs.metadata.namespace, ref.name))

    def _on_replica_set_update(self, old: apps_v1.ReplicaSet, new: apps_v1.ReplicaSet) -> None:
        self._enqueue_owner(new)
        if old.metadata.controller_ref() != new.metadata.controller_ref():
            self._enqueue_owner(old)

    def _on_pod_delete(self, pod: core_v1.Pod) -> None:
        """A Recreate rollout waits for the old pods to be gone (upstream `deletePod`)."""
        ref = owners.controller_ref(pod, kind="ReplicaSet", api_version="apps/v1")
        rs = self.replica_sets.get(ref.name, pod.metadata.namespace) if ref else None
        if rs is None:
            return
        owner = owners.controller_ref(rs, kind="Deployment", api_version="apps/v1")
        deployment = self.deployments.get(owner.name, rs.metadata.namespace) if owner else None
        if (
            deployment is not None
            and deploymentutil.strategy(deployment) == deploymentutil.RECREATE
        ):
            self._enqueue(deployment)

    # -- sync --------------------------------------------------------------------------
    async def sync(self, key: Key) -> None:
        namespace, name = key
        deployment = self.deployments.get(name, namespace)
        if deployment is None:
            self._written.pop(key, None)
            return
        if self.replica_sets.resource_version < self._written.get(key, 0):
            return
        owned = (
            self.replica_sets.cache.get(k)
            for k in self._replica_sets_by_owner.keys(deployment.metadata.uid)
        )
        all_sets = sorted(
            (rs for rs in owned if rs is not None),
            key=lambda rs: (rs.metadata.creation_timestamp or "", rs.metadata.name),
        )
        # Upstream `FindNewReplicaSet`: the oldest set whose template is the Deployment's.
        template = deployment.spec.template
        current = [
            rs for rs in all_sets if deploymentutil.equal_ignore_hash(rs.spec.template, template)
        ]
        new_rs = current[0] if current else None
        old_sets = [rs for rs in all_sets if rs is not new_rs]
        if deployment.metadata.deletion_timestamp is not None:
            await self._sync_status(deployment, new_rs, old_sets)
            return
        new_revision = max((deploymentutil.revision(rs) for rs in old_sets), default=0) + 1
        if new_rs is not None:
            new_rs = await self._sync_new_replica_set(key, deployment, new_rs, new_revision)
        if deploymentutil.strategy(deployment) == deploymentutil.RECREATE:
            new_rs, old_sets = await self._rollout_recreate(
                key, deployment, new_rs, old_sets, new_revision
            )
        else:
            new_rs, old_sets = await self._rollout_rolling(
                key, deployment, new_rs, old_sets, new_revision
            )
        await self._sync_revision(deployment, new_rs)
        status = await self._sync_status(deployment, new_rs, old_sets)
        if deploymentutil.deployment_complete(deployment, status):
            await self._clean_up(key, deployment, old_sets)

    async def _rollout_rolling(
        self,
        key: Key,
        deployment: apps_v1.Deployment,
        new_rs: apps_v1.ReplicaSet | None,
        old_sets: list[apps_v1.ReplicaSet],
        new_revision: int,
    ) -> tuple[apps_v1.ReplicaSet, list[apps_v1.ReplicaSet]]:
        """Upstream `rolloutRolling`: grow the new set within the surge, then shrink old ones."""
        desired = replicas(deployment.spec)
        surge, _ = deploymentutil.resolve_fenceposts(deployment)
        current = replicas(new_rs.spec) if new_rs is not None else 0
        if current >= desired:
            target = desired
        else:
            # Upstream `NewRSNewReplicas`: all sets together stay within desired + maxSurge.
            room = desired + surge - current - sum(replicas(rs.spec) for rs in old_sets)
            target = current + max(min(room, desired - current), 0)
        if new_rs is None:
            new_rs = await self._create_new_replica_set(key, deployment, target, new_revision)
        elif target != current:
            new_rs = await self._scale(key, deployment, new_rs, target)
        return new_rs, await self._scale_down_old_rolling(key, deployment, new_rs, old_sets)

    async def _scale_down_old_rolling(
        self,
        key: Key,
        deployment: apps_v1.Deployment,
        new_rs: apps_v1.ReplicaSet,
        old_sets: list[apps_v1.ReplicaSet],
    ) -> list[apps_v1.ReplicaSet]:
        """Upstream `reconcileOldReplicaSets`: unhealthy old pods first, then healthy ones
        while at least `replicas - maxUnavailable` pods stay available."""
        old_total = sum(replicas(rs.spec) for rs in old_sets)
        if old_total == 0:
            return old_sets
        min_available = replicas(deployment.spec) - deploymentutil.max_unavailable(deployment)
        new_unavailable = replicas(new_rs.spec) - new_rs.status.available_replicas
        max_scaled_down = old_total + replicas(new_rs.spec) - min_available - new_unavailable
        if max_scaled_down <= 0:
            return old_sets
        old_sets = list(old_sets)
        # Clean up unhealthy replicas first, otherwise they block the rollout forever.
        cleaned = 0
        for i, rs in enumerate(old_sets):
            if cleaned >= max_scaled_down:
                break
            count, available = replicas(rs.spec), rs.status.available_replicas
            if count == 0 or count == available:
                continue
            down = min(max_scaled_down - cleaned, count - available)
            old_sets[i] = await self._scale(key, deployment, rs, count - down)
            cleaned += down
        available = sum(rs.status.available_replicas for rs in [*old_sets, new_rs])
        if available <= min_available:
            return old_sets
        wanted, scaled = available - min_available, 0
        for i, rs in enumerate(old_sets):
            if scaled >= wanted:
                break
            count = replicas(rs.spec)
            if count == 0:
                continue
            down = min(count, wanted - scaled)
            old_sets[i] = await self._scale(key, deployment, rs, count - down)
            scaled += down
        return old_sets

    async def _rollout_recreate(
        self,
        key: Key,
        deployment: apps_v1.Deployment,
        new_rs: apps_v1.ReplicaSet | None,
        old_sets: list[apps_v1.ReplicaSet],
        new_revision: int,
    ) -> tuple[apps_v1.ReplicaSet | None, list[apps_v1.ReplicaSet]]:
        """Upstream `rolloutRecreate`: old sets to 0, wait for their pods, then the new set."""
        if any(replicas(rs.spec) > 0 for rs in old_sets):
            return new_rs, [await self._scale(key, deployment, rs, 0) for rs in old_sets]
        if self._old_pods_running(old_sets):
            return new_rs, old_sets
        desired = replicas(deployment.spec)
        if new_rs is None:
            new_rs = await self._create_new_replica_set(key, deployment, desired, new_revision)
        elif replicas(new_rs.spec) != desired:
            new_rs = await self._scale(key, deployment, new_rs, desired)
        return new_rs, old_sets

    def _old_pods_running(self, old_sets: list[apps_v1.ReplicaSet]) -> bool:
        """Upstream `oldPodsRunning`: a pod of an old set that has not ended, even if it is
        terminating, still holds its devices."""
        if any(rs.status.replicas > 0 for rs in old_sets):
            return True
        for rs in old_sets:
            for pod_key in self._pods_by_owner.keys(rs.metadata.uid):
                pod = self.pods.cache.get(pod_key)
                if pod is not None and not podutil.is_pod_terminal(pod):
                    return True
        return False

    # -- writes ------------------------------------------------------------------------
    async def _create_new_replica_set(
        self, key: Key, deployment: apps_v1.Deployment, count: int, new_revision: int
    ) -> apps_v1.ReplicaSet:
        template = deployment.spec.template
        selector = deployment.spec.selector or meta_v1.LabelSelector()
        template_hash = deploymentutil.pod_template_hash(
            template, deployment.status.collision_count
        )
        rs_template = msgspec.structs.replace(
            template,
            metadata=msgspec.structs.replace(
                template.metadata,
                labels=deploymentutil.with_hash_label(template.metadata.labels, template_hash),
            ),
        )
        rs = apps_v1.ReplicaSet(
            metadata=meta_v1.ObjectMeta(
                name=f"{deployment.metadata.name}-{template_hash}",
                namespace=deployment.metadata.namespace,
                labels=rs_template.metadata.labels,
                annotations={deploymentutil.REVISION_ANNOTATION: str(new_revision)},
                owner_references=[owners.new_controller_ref(deployment)],
            ),
            spec=apps_v1.ReplicaSetSpec(
                replicas=count,
                min_ready_seconds=deployment.spec.min_ready_seconds,
                selector=meta_v1.LabelSelector(
                    match_labels=deploymentutil.with_hash_label(
                        selector.match_labels, template_hash
                    ),
                    match_expressions=selector.match_expressions,
                ),
                template=rs_template,
            ),
        )
        try:
            created = await self.api.create(rs)
        except errors.AlreadyExists:
            existing = await self.api.get(
                apps_v1.ReplicaSet, rs.metadata.name, namespace=rs.metadata.namespace
            )
            ref = owners.controller_ref(existing, kind="Deployment", api_version="apps/v1")
            if (
                ref is not None
                and ref.uid == deployment.metadata.uid
                and deploymentutil.equal_ignore_hash(existing.spec.template, template)
            ):
                return existing  # ours, created before the cache caught up
            # A hash collision: count it, so that the next hash differs (upstream). The
            # status write requeues the Deployment.
            collisions = (deployment.status.collision_count or 0) + 1
            log.info(
                "deployment %s/%s: ReplicaSet %s exists with another template; "
                "collisionCount is now %d",
                deployment.metadata.namespace,
                deployment.metadata.name,
                rs.metadata.name,
                collisions,
            )
            await self.api.patch(
                apps_v1.Deployment,
                deployment.metadata.name,
                {"status": {"collisionCount": collisions}},
                namespace=deployment.metadata.namespace,
                subresource="status",
            )
            raise
        except errors.ApiError as exc:
            self.events.event(
                deployment,
                events.WARNING,
                FAILED_RS_CREATE,
                f'Failed to create new replica set "{rs.metadata.name}": {exc}',
            )
            raise
        self._note_written(key, created)
        if count > 0:
            self.events.event(
                deployment,
                events.NORMAL,
                SCALING_REPLICA_SET,
                f"Scaled up replica set {created.metadata.name} from 0 to {count}",
            )
        return created

    async def _sync_new_replica_set(
        self,
        key: Key,
        deployment: apps_v1.Deployment,
        rs: apps_v1.ReplicaSet,
        new_revision: int,
    ) -> apps_v1.ReplicaSet:
        """An existing new set takes the newest revision (a rollback brings an old template
        back) and the Deployment's minReadySeconds."""
        patch: dict[str, dict[str, object]] = {}
        if deploymentutil.revision(rs) < new_revision:
            patch["metadata"] = {
                "annotations": {deploymentutil.REVISION_ANNOTATION: str(new_revision)}
            }
        if rs.spec.min_ready_seconds != deployment.spec.min_ready_seconds:
            patch["spec"] = {"minReadySeconds": deployment.spec.min_ready_seconds}
        if not patch:
            return rs
        updated = await self.api.patch(
            apps_v1.ReplicaSet, rs.metadata.name, patch, namespace=rs.metadata.namespace
        )
        self._note_written(key, updated)
        return updated

    async def _scale(
        self, key: Key, deployment: apps_v1.Deployment, rs: apps_v1.ReplicaSet, count: int
    ) -> apps_v1.ReplicaSet:
        """Upstream `scaleReplicaSet`: a new size, and its `ScalingReplicaSet` Event."""
        current = replicas(rs.spec)
        if current == count:
            return rs
        scaled = await self.api.patch(
            apps_v1.ReplicaSet,
            rs.metadata.name,
            {"spec": {"replicas": count}},
            namespace=rs.metadata.namespace,
        )
        self._note_written(key, scaled)
        direction = "up" if count > current else "down"
        self.events.event(
            deployment,
            events.NORMAL,
            SCALING_REPLICA_SET,
            f"Scaled {direction} replica set {rs.metadata.name} from {current} to {count}",
        )
        return scaled

    def _note_written(self, key: Key, rs: apps_v1.ReplicaSet) -> None:
        self._written[key] = max(self._written.get(key, 0), int(rs.metadata.resource_version))

    async def _sync_revision(
        self, deployment: apps_v1.Deployment, new_rs: apps_v1.ReplicaSet | None
    ) -> None:
        """The Deployment carries its new ReplicaSet's revision (`kubectl rollout history`)."""
        if new_rs is None:
            return
        value = new_rs.metadata.annotations.get(deploymentutil.REVISION_ANNOTATION, "")
        if (
            value
            and deployment.metadata.annotations.get(deploymentutil.REVISION_ANNOTATION) != value
        ):
            await self.api.patch(
                apps_v1.Deployment,
                deployment.metadata.name,
                {"metadata": {"annotations": {deploymentutil.REVISION_ANNOTATION: value}}},
                namespace=deployment.metadata.namespace,
            )

    async def _sync_status(
        self,
        deployment: apps_v1.Deployment,
        new_rs: apps_v1.ReplicaSet | None,
        old_sets: list[apps_v1.ReplicaSet],
    ) -> apps_v1.DeploymentStatus:
        all_sets = old_sets if new_rs is None else [*old_sets, new_rs]
        status = deploymentutil.calculate_status(deployment, new_rs, all_sets)
        if status != deployment.status:
            await self.api.patch(
                apps_v1.Deployment,
                deployment.metadata.name,
                status_patch.merge_patch(status),
                namespace=deployment.metadata.namespace,
                subresource="status",
            )
        return status

    async def _clean_up(
        self, key: Key, deployment: apps_v1.Deployment, old_sets: list[apps_v1.ReplicaSet]
    ) -> None:
        """Upstream `cleanupDeployment`: delete the oldest idle sets beyond the history limit."""
        limit = deployment.spec.revision_history_limit
        limit = deploymentutil.DEFAULT_REVISION_HISTORY_LIMIT if limit is None else limit
        alive = [rs for rs in old_sets if rs.metadata.deletion_timestamp is None]
        excess = len(alive) - limit
        if excess <= 0:
            return
        for rs in sorted(
            alive,
            key=lambda rs: (deploymentutil.revision(rs), rs.metadata.creation_timestamp or ""),
        )[:excess]:
            if (
                rs.status.replicas
                or replicas(rs.spec)
                or rs.metadata.generation > rs.status.observed_generation
            ):
                continue
            try:
                gone = await self.api.delete(
                    apps_v1.ReplicaSet,
                    rs.metadata.name,
                    namespace=rs.metadata.namespace,
                    uid=rs.metadata.uid,
                )
            except errors.NotFound:
                continue
            self._note_written(key, gone)
