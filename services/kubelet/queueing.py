"""One work queue per (kind, uid), each drained by its own worker (kopf's `queueing.py`).

Events of one object are handled in order, different objects in parallel, and a process
hosting a thousand nodes holds workers only for objects with work in flight: a worker
idle for `idle_timeout` exits. Handling is level-triggered: a worker that falls behind
skips to the newest value of its key. A handler raising `TemporaryError` is called again
with the same value after the error's delay, unless a newer value arrives first.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

from drasim.drivers.errors import TemporaryError

__all__ = ["Key", "WorkQueues"]

log = logging.getLogger(__name__)

Key = tuple[str, str]  # (kind, uid), e.g. ("pods", "8f0c…") or ("nodes", "gpu-node-0")
V = TypeVar("V")

MAX_BACKOFF = 30.0


class WorkQueues(Generic[V]):
    def __init__(
        self,
        handler: Callable[[Key, V], Awaitable[None]],
        *,
        idle_timeout: float = 5.0,
    ) -> None:
        self._handler = handler
        self._idle_timeout = idle_timeout
        self._queues: dict[Key, asyncio.Queue[V]] = {}
        self._workers: dict[Key, asyncio.Task[None]] = {}

    def put(self, key: Key, value: V) -> None:
        queue = self._queues.get(key)
        if queue is None:
            queue = self._queues[key] = asyncio.Queue()
            self._workers[key] = asyncio.get_running_loop().create_task(
                self._work(key, queue), name=f"worker-{key[0]}/{key[1]}"
            )
        queue.put_nowait(value)

    def __len__(self) -> int:
        """Workers alive now."""
        return len(self._workers)

    async def stop(self) -> None:
        workers = list(self._workers.values())
        for worker in workers:
            worker.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
        self._queues.clear()
        self._workers.clear()

    async def _work(self, key: Key, queue: asyncio.Queue[V]) -> None:
        retry_in: float | None = None  # the last value failed; call again after this long
        failures = 0
        value: V | None = None
        while True:
            try:
                async with asyncio.timeout(self._idle_timeout if retry_in is None else retry_in):
                    value = await queue.get()
            except TimeoutError:
                if retry_in is None:
                    # No await between the check and the removal, so `put` cannot slip
                    # a value into a queue whose worker is gone.
                    if queue.empty():
                        del self._queues[key], self._workers[key]
                        return
                    continue
            while not queue.empty():
                value = queue.get_nowait()
            try:
                await self._handler(key, value)  # type: ignore[arg-type]
                retry_in, failures = None, 0
            except TemporaryError as exc:
                failures += 1
                retry_in = min(exc.delay * 2 ** min(failures - 1, 5), MAX_BACKOFF)
                log.info("%s %s: %s; retrying in %.1fs", key[0], key[1], exc, retry_in)
            except Exception:
                failures += 1
                retry_in = min(0.5 * 2 ** min(failures - 1, 6), MAX_BACKOFF)
                log.exception("%s %s: handler failed; retrying in %.1fs", *key, retry_in)
