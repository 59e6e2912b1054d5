"""TTL-after-finished controller: a finished Job with `ttlSecondsAfterFinished` is deleted
that many seconds after it finished (upstream `pkg/controller/ttlafterfinished`), its pods
with it (propagation `Background`). A Job whose TTL or finish changes is looked at again;
the deletion is preconditioned on the Job's uid and resourceVersion, so a Job changed
meanwhile is checked anew rather than deleted blindly."""

from __future__ import annotations

import logging

from drasim.common import errors
from drasim.common.api import batch_v1
from drasim.common.client import ApiClient
from drasim.common.informer import Informer, Key, key_of
from drasim.controllers import jobutil, podutil
from drasim.controllers.queue import WorkQueue

__all__ = ["TTLAfterFinishedController"]

log = logging.getLogger(__name__)


class TTLAfterFinishedController:
    def __init__(self, api: ApiClient, *, jobs: Informer[batch_v1.Job]) -> None:
        self.api = api
        self.jobs = jobs
        self.queue: WorkQueue[Key] = WorkQueue("ttl-after-finished", self.sync)
        jobs.add_handlers(on_add=self._enqueue, on_update=lambda _old, new: self._enqueue(new))

    def _enqueue(self, job: batch_v1.Job) -> None:
        if job.spec.ttl_seconds_after_finished is not None and jobutil.is_finished(job):
            self.queue.add(key_of(job))

    async def sync(self, key: Key) -> None:
        namespace, name = key
        job = self.jobs.get(name, namespace)
        if job is None or job.metadata.deletion_timestamp is not None:
            return
        ttl = job.spec.ttl_seconds_after_finished
        finished = jobutil.finish_time(job)
        if ttl is None or finished is None:
            return
        left = finished.timestamp() + ttl - podutil.now().timestamp()
        if left > 0:
            self.queue.add_after(key, left)
            return
        try:
            await self.api.delete(
                batch_v1.Job,
                name,
                namespace=namespace,
                uid=job.metadata.uid,
                resource_version=job.metadata.resource_version,
                propagation_policy="Background",
            )
        except (errors.NotFound, errors.Conflict):
            return  # gone, or changed: its update event brings it back
