"""ResourceQuota controller (upstream pkg/controller/resourcequota,
`resource_quota_controller.go` and `resource_quota_monitor.go`).

Keeps each quota's `status.hard` equal to its `spec.hard` and `status.used` equal to what
its namespace uses of every name an evaluator measures (`drasim.common.quota`), computed
from scratch: when the quota is made or its `spec.hard` changes, when an object it counts
goes (a delete, or a pod that stops counting: a terminal phase, a change of its
Terminating scope), at start-up (every quota is listed, so every one is recomputed) and on
a full resync every `resync_period` seconds (upstream's `--resource-quota-sync-period`,
5 minutes). The apistore's admission charges creates as they happen, so the controller
mostly gives back what deleted and finished objects used.

Objects are read from informers: the controller manager's shared ones where it has them,
and for the other kinds a quota counts (`count/leases.coordination.k8s.io`, ...) an
informer started the first time a quota needs it, as upstream's monitors watch every
quotable kind. The status is written with the quota's resourceVersion; a conflict (the
admission charged it meanwhile) is retried from the queue. With the DRAExtendedResource
gate off (`extended_resources`), claims are counted by their devices only, as the
apistore's admission then charges them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from drasim.common import codec, errors, quota
from drasim.common.api import core_v1, registry, resource_v1
from drasim.common.client import ApiClient
from drasim.common.informer import Informer, Key, key_of
from drasim.common.quota import claims, generic, pods, resources
from drasim.controllers.queue import WorkQueue

log = logging.getLogger(__name__)

# Upstream's default `--resource-quota-sync-period`.
RESYNC_PERIOD = 300.0

InformerFactory = Callable[[type[Any]], Informer[Any]]


def pod_stops_counting(old: core_v1.Pod, new: core_v1.Pod, now: datetime) -> bool:
    """Whether a pod update changes what quota charges it (upstream's `DefaultUpdateFilter`):
    its Terminating scope changed, or it stopped being charged (a terminal phase)."""
    if pods.is_terminating(old) != pods.is_terminating(new):
        return True
    return pods.is_charged(old, now) and not pods.is_charged(new, now)


def new_status(
    rq: core_v1.ResourceQuota, usage: resources.ResourceList
) -> core_v1.ResourceQuotaStatus:
    """`status.hard` as the spec says, `status.used` the fresh usage over what was used
    before, both kept to the names of `spec.hard` (`syncResourceQuota`)."""
    hard = dict(rq.spec.hard)
    used = resources.mask({**rq.status.used, **usage}, hard)
    return core_v1.ResourceQuotaStatus(hard=hard, used=used)


class ResourceQuotaController:
    """Keeps every ResourceQuota's status current."""

    def __init__(
        self,
        api: ApiClient,
        *,
        quotas: Informer[core_v1.ResourceQuota],
        device_classes: Informer[resource_v1.DeviceClass],
        informers: dict[str, Informer[Any]],
        new_informer: InformerFactory,
        resync_period: float = RESYNC_PERIOD,
        concurrency: int = 5,
        extended_resources: bool = True,
    ) -> None:
        self.api = api
        self.quotas = quotas
        self.queue: WorkQueue[Key] = WorkQueue("resourcequota", self.sync, concurrency=concurrency)
        self.resync_period = resync_period
        self._informers = dict(informers)  # by plural: the shared ones, then those it starts
        self._started: list[Informer[Any]] = []
        self._new_informer = new_informer
        self._resync: asyncio.Task[None] | None = None
        self.classes = quota.extended_resource_cache()
        self.special_claims = claims.SpecialClaims()
        pods_informer = self._informers["pods"]
        self.evaluators = quota.evaluators(
            classes=self.classes,
            pod_of=lambda ns, name: pods_informer.get(name, ns),
            owned_claims=self.special_claims.owned,
            clock=lambda: datetime.now(UTC),
            extended_resources=extended_resources,
        )
        self._by_resource = {e.resource: e for e in self.evaluators}
        quotas.add_handlers(
            on_add=self._enqueue,
            on_update=self._on_quota_update,
            on_delete=self._enqueue,
        )
        device_classes.add_handlers(
            on_add=self.classes.on_add,
            on_update=self.classes.on_update,
            on_delete=self.classes.on_delete,
        )
        pods_informer.add_handlers(on_update=self._on_pod_update)
        self._informers["resourceclaims"].add_handlers(
            on_add=lambda claim: self.special_claims.observe(claim.metadata),
            on_update=lambda _old, new: self.special_claims.observe(new.metadata),
        )
        for plural, informer in self._informers.items():
            self._watch_deletes(plural, informer)

    # -- events ----------------------------------------------------------------------------
    def _enqueue(self, rq: core_v1.ResourceQuota) -> None:
        self.queue.add(key_of(rq))

    def _on_quota_update(self, old: core_v1.ResourceQuota, new: core_v1.ResourceQuota) -> None:
        """Only a change of what it limits: status updates are this controller's and the
        admission's own (a full recalculation on every one would be a namespace's worth of
        work per write)."""
        if not resources.equals(old.spec.hard, new.spec.hard):
            self._enqueue(new)

    def _on_pod_update(self, old: core_v1.Pod, new: core_v1.Pod) -> None:
        if pod_stops_counting(old, new, datetime.now(UTC)):
            self.replenish("pods", new.metadata.namespace or "")

    def _watch_deletes(self, plural: str, informer: Informer[Any]) -> None:
        def on_delete(obj: Any) -> None:
            if plural == "resourceclaims":
                self.special_claims.observe(obj.metadata, deleted=True)
            self.replenish(plural, obj.metadata.namespace or "")

        informer.add_handlers(on_delete=on_delete)

    def replenish(self, plural: str, namespace: str) -> None:
        """Something of `plural` in `namespace` stopped counting: recompute the namespace's
        quotas that track it (`replenishQuota`)."""
        evaluator = self._by_resource.get(plural)
        if evaluator is None:
            return
        for rq in self.quotas.list():
            if rq.metadata.namespace == namespace and evaluator.matching_resources(rq.status.hard):
                self._enqueue(rq)

    # -- running ---------------------------------------------------------------------------
    def start(self) -> None:
        """The queue, and the periodic full resync."""
        self.queue.start()
        if self.resync_period > 0:
            self._resync = asyncio.create_task(self._resync_forever(), name="resourcequota-resync")

    async def stop(self) -> None:
        if self._resync is not None:
            self._resync.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._resync
        await self.queue.stop()
        for informer in self._started:
            await informer.stop()

    async def _resync_forever(self) -> None:
        while True:
            await asyncio.sleep(self.resync_period)
            for rq in self.quotas.list():
                self._enqueue(rq)

    async def _informer(self, plural: str) -> Informer[Any]:
        """The informer of `plural`, started the first time a quota counts that kind."""
        informer = self._informers.get(plural)
        if informer is None:
            informer = self._new_informer(registry.by_plural(plural).type)
            self._informers[plural] = informer
            self._watch_deletes(plural, informer)
            self._started.append(informer)
            informer.start()
        await informer.wait_synced()
        return informer

    # -- syncing ---------------------------------------------------------------------------
    async def sync(self, key: Key) -> None:
        namespace, name = key
        rq = self.quotas.get(name, namespace)
        if rq is None:
            return
        objects: dict[str, list[Any]] = {}
        for evaluator in self.evaluators:
            if evaluator.matching_resources(rq.spec.hard):
                informer = await self._informer(evaluator.resource)
                objects[evaluator.resource] = [
                    o for o in informer.list() if o.metadata.namespace == namespace
                ]
        usage = generic.calculate_usage(rq, self.evaluators, lambda e: objects[e.resource])
        status = new_status(rq, usage)
        if status == rq.status:
            return
        updated = codec.clone(rq)
        updated.status = status
        with contextlib.suppress(errors.NotFound):
            await self.api.update_status(updated)
