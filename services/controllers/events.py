"""The Events a controller records about the objects it manages (upstream: each controller's
`record.EventRecorder`, e.g. "Scaled up replica set web-5f9dc4ccb6 from 0 to 3").

Upstream's recorder hands an event to its broadcaster and returns; a goroutine writes it
later. Here each event is written by a task of its own, so a sync never waits for (or
fails because of) an Event: a slow-start batch of pod creations stays as concurrent as it
was. A refused write is logged at warning level. Occurrences are counted as
`drasim.common.events` counts them (one Event with `count=N` for a repeated message).

The tasks run outside the sync's trace: an Event is not part of the work that caused it,
and upstream's broadcaster does not trace its writes either.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging

from drasim.common import events as common_events
from drasim.common.api import core_v1
from drasim.common.api.meta_v1 import KubeObject
from drasim.common.client import ApiClient

__all__ = ["NORMAL", "WARNING", "EventRecorder"]

log = logging.getLogger(__name__)

NORMAL = "Normal"
WARNING = "Warning"

# At stop, how long Events already handed over may still take to be written.
STOP_GRACE_SECONDS = 2.0


class EventRecorder:
    """One controller's recorder; `component` is its name in `source` ("From" in
    `kubectl describe`)."""

    def __init__(self, api: ApiClient, *, component: str) -> None:
        self.component = component
        self.recorder = common_events.EventRecorder(
            api, component=component, spam_filter=common_events.SpamFilter()
        )
        self._pending: set[asyncio.Task[None]] = set()

    def event(self, obj: KubeObject, event_type: str, reason: str, message: str) -> None:
        """Record an Event about `obj` in the background; returns at once."""
        involved = common_events.reference(obj)
        task = asyncio.get_running_loop().create_task(
            self._record(involved, event_type, reason, message),
            name=f"event:{self.component}:{reason}:{involved.namespace}/{involved.name}",
            context=contextvars.Context(),  # outside the caller's trace
        )
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    def forget(self, uid: str) -> None:
        """The object with this UID is gone: its Events need no counting any more."""
        self.recorder.forget(uid)

    async def flush(self) -> None:
        """Wait until every Event handed over so far is written (or refused)."""
        while self._pending:
            await asyncio.gather(*self._pending, return_exceptions=True)

    async def stop(self, grace: float = STOP_GRACE_SECONDS) -> None:
        """Give the pending writes `grace` seconds, then cancel what is left."""
        if not self._pending:
            return
        _, late = await asyncio.wait(set(self._pending), timeout=grace)
        for task in late:
            task.cancel()
        await asyncio.gather(*late, return_exceptions=True)

    async def _record(
        self, involved: core_v1.ObjectReference, event_type: str, reason: str, message: str
    ) -> None:
        try:
            await self.recorder.record(involved, event_type, reason, message)
        except Exception as exc:  # an Event is never worth more than a log line
            log.warning(
                "%s: recording event %s about %s %s/%s failed: %r",
                self.component,
                reason,
                involved.kind,
                involved.namespace,
                involved.name,
                exc,
            )
