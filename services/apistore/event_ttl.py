"""Events expire an hour after their last write, as kube-apiserver's `--event-ttl` makes
them (etcd leases there; a periodic sweep here).

Without it a long-running cluster keeps every Event it ever recorded: `kubectl get events`
grows without end and a load test's store with it. An Event is deleted through the write
path like any other object, so watchers see it go (a DELETED event), and only if it was not
written again since the sweep read it (a resourceVersion precondition): a recorder that just
raised its count keeps it for another TTL.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from datetime import UTC, datetime, timedelta

from drasim.apistore.core import ApiCore
from drasim.apistore.request import Context
from drasim.common import errors
from drasim.common.bus import messages

log = logging.getLogger(__name__)

DEFAULT_EVENT_TTL = 3600.0  # seconds, as kube-apiserver's default
# Expired Events deleted per round (one group commit's worth of deletes).
SWEEP_BATCH = 500


class EventTtl:
    """Deletes Events last written more than `ttl` seconds ago, every `interval` seconds
    (a tenth of the TTL, at most a minute)."""

    def __init__(self, core: ApiCore, ttl: float, *, interval: float | None = None) -> None:
        self.core = core
        self.ttl = ttl
        self.interval = interval if interval is not None else min(60.0, max(ttl / 10, 1.0))
        self._ctx = Context(actor="event-ttl")

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            try:
                await self.sweep()
            except errors.ApiError as exc:  # the database is away: try again next time
                log.warning("event TTL sweep failed: %s", exc)

    async def sweep(self, *, now: datetime | None = None) -> int:
        """Delete the Events last written before `now - ttl`; answers how many went."""
        before = (now or datetime.now(UTC)) - timedelta(seconds=self.ttl)
        deleted = 0
        while True:
            expired = await self.core.store.select_written_before(
                "events", before, limit=SWEEP_BATCH
            )
            results = await asyncio.gather(
                *(self._delete(ns, name, rv) for ns, name, rv in expired)
            )
            deleted += sum(results)
            # A full round may have left more; one whose deletes all lost to newer writes
            # would find the same rows again.
            if len(expired) < SWEEP_BATCH or not any(results):
                return deleted

    async def _delete(self, namespace: str, name: str, resource_version: int) -> bool:
        req = messages.Delete(
            resource="events",
            namespace=namespace,
            name=name,
            precondition_resource_version=str(resource_version),
        )
        with contextlib.suppress(errors.NotFound, errors.Conflict):
            await self.core.handle(req, self._ctx)
            return True
        return False
