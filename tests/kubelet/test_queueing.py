"""Per-(kind, uid) work queues: one worker each, in order, newest value wins, retries on
`TemporaryError`, idle workers exit (style "For drasim" 11)."""

from __future__ import annotations

import asyncio

from drasim.drivers.errors import TemporaryError
from drasim.kubelet.queueing import Key, WorkQueues


def workers() -> list[asyncio.Task[object]]:
    return [t for t in asyncio.all_tasks() if t.get_name().startswith("worker-")]


async def test_objects_in_parallel_each_in_order_newest_value_wins_idle_workers_exit() -> None:
    seen: list[tuple[str, str]] = []
    a_blocked, b_done, a_done, release = (asyncio.Event() for _ in range(4))

    async def handle(key: Key, value: str) -> None:
        seen.append((key[1], value))
        if value == "a1":
            a_blocked.set()
            await release.wait()
        {"b1": b_done, "a3": a_done}.get(value, asyncio.Event()).set()

    queues: WorkQueues[str] = WorkQueues(handle, idle_timeout=0.01)
    queues.put(("pods", "a"), "a1")
    queues.put(("pods", "b"), "b1")
    await a_blocked.wait()
    await b_done.wait()  # b is not held up by a
    queues.put(("pods", "a"), "a2")
    queues.put(("pods", "a"), "a3")
    assert len(queues) == 2
    release.set()
    await a_done.wait()

    assert seen == [("a", "a1"), ("b", "b1"), ("a", "a3")]  # a2 was superseded by a3
    await asyncio.gather(*workers())
    assert len(queues) == 0


async def test_a_temporary_error_retries_the_same_value() -> None:
    calls: list[str] = []
    done = asyncio.Event()

    async def handle(key: Key, value: str) -> None:
        calls.append(value)
        if len(calls) == 1:
            raise TemporaryError("not yet", delay=0.01)
        done.set()

    queues: WorkQueues[str] = WorkQueues(handle, idle_timeout=0.01)
    queues.put(("pods", "a"), "v1")
    await done.wait()
    assert calls == ["v1", "v1"]
    await queues.stop()
