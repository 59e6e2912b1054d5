"""The work queue: one object's runs in order and never overlapping, objects in parallel,
bursts coalesced, failures retried with backoff."""

from __future__ import annotations

import asyncio

from drasim.common import errors
from drasim.controllers.queue import WorkQueue


async def test_a_burst_for_one_key_runs_at_most_once_more_and_never_overlaps() -> None:
    running: set[str] = set()
    runs: list[str] = []
    entered, release = asyncio.Event(), asyncio.Event()

    async def reconcile(key: str) -> None:
        assert key not in running
        running.add(key)
        runs.append(key)
        entered.set()
        await release.wait()
        running.discard(key)

    queue: WorkQueue[str] = WorkQueue("test", reconcile)
    queue.start()
    queue.add("a")
    await entered.wait()
    for _ in range(10):
        queue.add("a")  # arrives during the run: one more run after it
    release.set()
    await asyncio.wait_for(queue.join(), 5)
    assert runs == ["a", "a"]
    await queue.stop()


async def test_different_keys_run_in_parallel_up_to_the_concurrency() -> None:
    started: list[str] = []
    all_started = asyncio.Event()

    async def reconcile(key: str) -> None:
        started.append(key)
        if len(started) == 3:
            all_started.set()
        await all_started.wait()  # only returns if all three run at once

    queue: WorkQueue[str] = WorkQueue("test", reconcile, concurrency=3)
    for key in "abc":
        queue.add(key)
    assert started == []  # nothing runs before start
    queue.start()
    await asyncio.wait_for(queue.join(), 5)
    assert sorted(started) == ["a", "b", "c"]
    await queue.stop()


async def test_failures_are_retried_with_growing_delays_until_success() -> None:
    loop = asyncio.get_running_loop()
    times: list[float] = []

    async def reconcile(key: str) -> None:
        times.append(loop.time())
        if len(times) < 4:
            raise errors.Conflict("stale cache") if len(times) % 2 else RuntimeError("bug")

    queue: WorkQueue[str] = WorkQueue("test", reconcile, base_delay=0.01)
    queue.start()
    queue.add("a")
    await asyncio.wait_for(queue.join(), 5)  # join waits for pending retries too
    assert len(times) == 4
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    assert gaps[0] >= 0.01 and gaps[1] >= 0.02 and gaps[2] >= 0.04
    await queue.stop()


async def test_stop_cancels_running_work_and_pending_retries() -> None:
    started = asyncio.Event()

    async def reconcile(key: str) -> None:
        if key == "slow":
            started.set()
            await asyncio.Event().wait()
        raise RuntimeError("always")

    queue: WorkQueue[str] = WorkQueue("test", reconcile, base_delay=10)
    queue.start()
    queue.add("slow")
    queue.add("failing")
    await started.wait()
    await asyncio.wait_for(queue.stop(), 5)


def test_a_wake_up_already_due_on_uvloop_is_kept_and_an_earlier_one_wins() -> None:
    """On uvloop (what the services run on) a time already past gives a plain Handle,
    with no `when()`: a later `add_after` for the key crashed the key's worker."""
    import uvloop

    async def scenario() -> list[str]:
        runs: list[str] = []
        done = asyncio.Event()

        async def reconcile(key: str) -> None:
            runs.append(key)
            done.set()

        queue: WorkQueue[str] = WorkQueue("test", reconcile)
        queue.start()
        queue.add_after("a", -1.0)  # already due
        queue.add_after("a", 5.0)  # a later one: the due one wins
        await asyncio.wait_for(done.wait(), 5)
        await asyncio.wait_for(queue.join(), 5)
        await queue.stop()
        return runs

    assert uvloop.run(scenario()) == ["a"]
