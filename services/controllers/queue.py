"""The controllers' work queue: kopf's one worker per object, client-go's level triggering.

Informer handlers only `add` a key. A worker then reconciles that object from the *current*
informer caches, so a burst of events for one object coalesces into one run, runs for one
object never overlap and follow its events in order, and different objects run in parallel
(at most `concurrency` at once). A key added while its worker runs is run once more after it.
Idle workers exit (kopf's `queueing.py`). A failed run is retried with exponential backoff
per key (client-go's default controller rate limiter starts at 5 ms); a `Conflict` is
expected there (the cache was stale) and only logged at debug level.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

from drasim.common import errors

K = TypeVar("K", bound=Hashable)
log = logging.getLogger(__name__)

BASE_DELAY = 0.005
MAX_DELAY = 30.0


class WorkQueue(Generic[K]):
    """Keys waiting for `reconcile`, one worker task per key; nothing runs before `start`."""

    def __init__(
        self,
        name: str,
        reconcile: Callable[[K], Awaitable[None]],
        *,
        concurrency: int = 64,
        base_delay: float = BASE_DELAY,
        max_delay: float = MAX_DELAY,
    ) -> None:
        self.name = name
        self._reconcile = reconcile
        self._slots = asyncio.Semaphore(concurrency)
        self._base_delay = base_delay
        self._max_delay = max_delay
        self._dirty: set[K] = set()
        self._workers: dict[K, asyncio.Task[None]] = {}
        # Each pending wake-up: when it is due, and its handle. (The time is kept here:
        # uvloop answers a time already past with a plain Handle, which has no `when()`.)
        self._retries: dict[K, tuple[float, asyncio.Handle]] = {}
        self._failures: dict[K, int] = {}
        # Keys whose pending wake-up is a failure's retry (a success makes it moot), not a
        # wake-up the reconcile asked for (`add_after` from a sync: a deadline, a back-off).
        self._retrying: set[K] = set()
        self._running = False
        self._idle = asyncio.Event()
        self._idle.set()

    def add(self, key: K) -> None:
        """Reconcile `key` soon (once, however often it is added before its worker runs)."""
        self._dirty.add(key)
        self._idle.clear()
        if self._running and key not in self._workers:
            self._workers[key] = asyncio.create_task(self._work(key), name=f"{self.name}:{key}")

    def add_after(self, key: K, delay: float) -> None:
        """Reconcile `key` in `delay` seconds; an earlier pending wake-up wins."""
        loop = asyncio.get_running_loop()
        when = loop.time() + delay
        pending = self._retries.get(key)
        if pending is not None:
            if pending[0] <= when:
                return
            pending[1].cancel()
        self._retries[key] = (when, loop.call_at(when, self._wake, key))
        self._idle.clear()

    def start(self) -> None:
        self._running = True
        for key in list(self._dirty):
            self.add(key)

    async def stop(self) -> None:
        self._running = False
        for _, handle in self._retries.values():
            handle.cancel()
        self._retries.clear()
        workers = list(self._workers.values())
        for task in workers:
            task.cancel()
        await asyncio.gather(*workers, return_exceptions=True)

    async def join(self) -> None:
        """Wait until no key is queued, running or waiting for a retry."""
        await self._idle.wait()

    def _wake(self, key: K) -> None:
        self._retries.pop(key, None)
        self._retrying.discard(key)
        self.add(key)

    async def _work(self, key: K) -> None:
        try:
            while key in self._dirty:
                self._dirty.discard(key)
                async with self._slots:
                    await self._run_once(key)
        finally:
            self._workers.pop(key, None)
            if not (self._dirty or self._workers or self._retries):
                self._idle.set()

    async def _run_once(self, key: K) -> None:
        try:
            await self._reconcile(key)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            failures = self._failures.get(key, 0) + 1
            self._failures[key] = failures
            delay = min(self._base_delay * 2 ** (failures - 1), self._max_delay)
            level = logging.DEBUG if isinstance(exc, errors.Conflict) else logging.WARNING
            log.log(
                level,
                "%s %s: %r; retry %d in %.3fs",
                self.name,
                key,
                exc,
                failures,
                delay,
                exc_info=not isinstance(exc, errors.ApiError),  # a bug: show where
            )
            self.add_after(key, delay)
            if key in self._retries:
                self._retrying.add(key)
        else:
            self._failures.pop(key, None)
            if key in self._retrying:
                self._retrying.discard(key)
                with contextlib.suppress(KeyError):
                    self._retries.pop(key)[1].cancel()
