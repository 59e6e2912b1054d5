"""Checkpoint files: saves written off the event loop, in order, atomically, newest last."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from pathlib import Path
from typing import Any

import msgspec
import pytest

from drasim.drivers import checkpoint
from drasim.drivers.checkpoint import Checkpoint


class State(msgspec.Struct):
    n: int = 0


Writes = list[int]  # the `n` of each value written, in order


def make(path: Path | None) -> Checkpoint[State]:
    return Checkpoint(path, State, State)


def on_disk(path: Path) -> int:
    """The `n` a restarted process would load."""
    return make(path).load().n


def written_value(frame: bytes) -> int:
    decoded = checkpoint._decode_frame(frame)
    assert decoded is not None
    return msgspec.json.decode(decoded[1], type=State).n


def names(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


@pytest.fixture
def writes(monkeypatch: pytest.MonkeyPatch) -> Writes:
    """Record each write (in the writer thread), then do it."""
    written: Writes = []
    overwrite = checkpoint._overwrite

    def recording(path: Path, frame: bytes) -> None:
        written.append(written_value(frame))
        overwrite(path, frame)

    monkeypatch.setattr(checkpoint, "_overwrite", recording)
    return written


def slow_writes(monkeypatch: pytest.MonkeyPatch, seconds: float) -> threading.Event:
    """Make every write take `seconds` in its thread; the event is set once one started."""
    started = threading.Event()
    overwrite = checkpoint._overwrite

    def slow(path: Path, frame: bytes) -> None:
        started.set()
        time.sleep(seconds)
        overwrite(path, frame)

    monkeypatch.setattr(checkpoint, "_overwrite", slow)
    return started


async def test_a_save_is_on_disk_when_it_returns_in_the_two_files_in_turn(
    tmp_path: Path,
) -> None:
    path = tmp_path / "node" / "plugins" / "state.json"  # directories made on first save
    ck = make(path)
    assert ck.load() == State()
    await ck.save(State(n=1))
    assert on_disk(path) == 1
    await ck.save(State(n=2))
    assert on_disk(path) == 2
    assert names(path.parent) == ["state.json", "state.json.1"]
    # A node's state is the owner's alone.
    for own in (path, path.parent / "state.json.1", path.parent):
        assert own.stat().st_mode & 0o077 == 0, own
    assert written_value(path.read_bytes()) == 1
    assert written_value((path.parent / "state.json.1").read_bytes()) == 2
    # A restarted process numbers its saves after the newest and writes over the older.
    again = make(path)
    assert again.load() == State(n=2)
    await again.save(State(n=3))
    assert written_value(path.read_bytes()) == 3 and on_disk(path) == 3


async def test_a_write_cut_short_leaves_the_save_before_it(tmp_path: Path) -> None:
    """A crash in the middle of a write leaves part of a frame over the older file (the
    rest of its old bytes after it): a load takes the other, whole file."""
    path = tmp_path / "state.json"
    ck = make(path)
    for n in (1, 2, 3):  # 1 and 3 in state.json, 2 in state.json.1
        await ck.save(State(n=n))
    whole = path.read_bytes()
    longer = msgspec.json.encode(State(n=4444444)) + b"\n9 00000000\n"
    for cut in range(1, len(whole)):
        torn = longer[:cut] + whole[cut:]
        path.write_bytes(torn)
        assert on_disk(path) == (3 if torn == whole else 2), cut  # (same first bytes)
    path.write_bytes(b"")  # created, nothing written
    assert on_disk(path) == 2
    (path.parent / "state.json.1").write_bytes(b"{")
    with pytest.raises(checkpoint.CheckpointError, match="state.json"):
        make(path).load()


async def test_a_file_of_the_value_alone_loads_as_the_oldest_save(tmp_path: Path) -> None:
    """Files written before numbered files hold the value alone."""
    path = tmp_path / "state.json"
    path.write_bytes(msgspec.json.encode(State(n=7)))
    ck = make(path)
    assert ck.load() == State(n=7)
    await ck.save(State(n=8))
    assert on_disk(path) == 8
    assert written_value(path.read_bytes()) == 7  # the next write goes to the other file


async def test_a_save_writes_the_value_as_it_was_when_saved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "state.json"
    ck = make(path)
    started = slow_writes(monkeypatch, 0.05)
    value = State(n=1)
    saving = asyncio.ensure_future(ck.save(value))
    await asyncio.to_thread(started.wait)
    value.n = 2  # changed while the write is in flight: the file gets what was saved
    await saving
    assert on_disk(path) == 1


async def test_concurrent_saves_leave_the_newest_and_each_returns_once_covered(
    tmp_path: Path, writes: Writes
) -> None:
    path = tmp_path / "state.json"
    ck = make(path)
    order: list[int] = []  # the values in the order they were saved
    seen: dict[int, int] = {}  # value → what the file held when its save returned

    async def save(n: int) -> None:
        order.append(n)
        await ck.save(State(n=n))
        seen[n] = on_disk(path)

    await asyncio.gather(*(save(n) for n in range(1, 21)))
    assert on_disk(path) == 20
    assert all(found >= n for n, found in seen.items()), seen
    # The first save's write was in flight while the 19 others queued: they coalesced into
    # one write of the newest value.
    assert writes == [1, 20]

    # Saves from several tasks, interleaved with other work: written in the order saved.
    order.clear()
    writes.clear()

    async def saver(start: int) -> None:
        for n in range(start, 200, 4):
            await asyncio.sleep(0.001 * (n % 3))
            await save(n)

    await asyncio.gather(*(saver(start) for start in range(100, 104)))
    position = {n: i for i, n in enumerate(order)}
    assert [position[n] for n in writes] == sorted(position[n] for n in writes)
    assert on_disk(path) == order[-1]
    assert all(position[seen[n]] >= position[n] for n in order)


async def test_path_none_keeps_the_state_in_memory_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, writes: Writes
) -> None:
    monkeypatch.chdir(tmp_path)
    ck = make(None)
    await ck.save(State(n=1))
    await ck.save(State(n=2))
    assert ck.load() == State()
    assert writes == []
    assert names(tmp_path) == []


async def test_a_failed_write_raises_and_a_later_save_succeeds(tmp_path: Path) -> None:
    in_the_way = tmp_path / "node"
    in_the_way.write_text("a file where the node's directory goes")
    path = in_the_way / "plugins" / "state.json"
    ck = make(path)

    async def save(n: int) -> None:
        await ck.save(State(n=n))

    with pytest.raises(OSError):
        await save(1)
    with pytest.raises(OSError):  # again, while the file is in the way
        await save(2)
    in_the_way.unlink()
    await save(3)
    assert on_disk(path) == 3


async def test_a_failed_write_fails_its_save_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Saves queued behind a failed write write again, and return once written."""
    path = tmp_path / "state.json"
    ck = make(path)
    await ck.save(State(n=1))
    overwrite = checkpoint._overwrite
    failures = iter([OSError(28, "No space left on device")])

    def failing_once(path: Path, frame: bytes) -> None:
        time.sleep(0.01)  # so that the other saves queue behind it
        failure = next(failures, None)
        if failure is not None:
            raise failure
        overwrite(path, frame)

    monkeypatch.setattr(checkpoint, "_overwrite", failing_once)
    results = await asyncio.gather(
        *(ck.save(State(n=n)) for n in (2, 3, 4)), return_exceptions=True
    )
    assert isinstance(results[0], OSError) and results[1:] == [None, None]
    assert on_disk(path) == 4


async def test_the_event_loop_runs_while_a_save_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "state.json"
    ck = make(path)
    started = slow_writes(monkeypatch, 0.5)
    saving = asyncio.ensure_future(ck.save(State(n=1)))
    ticks = 0
    while not started.is_set() or ticks < 10:
        await asyncio.sleep(0.005)
        ticks += 1
    # Ten ticks of this coroutine while the write sleeps in its thread.
    assert not saving.done()
    assert not path.exists()
    await saving
    assert on_disk(path) == 1


async def test_a_cancelled_save_never_overwrites_a_newer_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cancelled save's write goes on in its thread; the next one waits for it."""
    path = tmp_path / "state.json"
    ck = make(path)
    started = slow_writes(monkeypatch, 0.1)
    saving = asyncio.ensure_future(ck.save(State(n=1)))
    await asyncio.to_thread(started.wait)
    saving.cancel()
    with pytest.raises(asyncio.CancelledError):
        await saving
    await ck.save(State(n=2))
    assert on_disk(path) == 2


class HeldWrites(concurrent.futures.Executor):
    """Writes held until the test runs them, in any order (a thread pool's threads may
    take the file's lock in either order)."""

    def __init__(self) -> None:
        self.held: list[tuple[Any, tuple[Any, ...], concurrent.futures.Future[Any]]] = []
        self._submitted = asyncio.Event()  # (the loop's thread submits)

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> concurrent.futures.Future[Any]:
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self.held.append((fn, args, future))
        self._submitted.set()
        return future

    async def until_held(self, count: int) -> None:
        while len(self.held) < count:
            self._submitted.clear()
            await self._submitted.wait()

    def start(self, i: int) -> None:
        assert self.held[i][2].set_running_or_notify_cancel()  # as a thread that took it

    def finish(self, i: int) -> None:
        fn, args, future = self.held[i]
        if not future.running():
            self.start(i)
        future.set_result(fn(*args))


async def test_an_older_write_that_runs_late_is_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, writes: Writes
) -> None:
    """A cancelled save's write that already started goes on; the next save's write may
    take the file's lock first: the older one then writes nothing."""
    path = tmp_path / "state.json"
    ck = make(path)
    pool = HeldWrites()
    monkeypatch.setattr(checkpoint, "_WRITERS", pool)
    first = asyncio.ensure_future(ck.save(State(n=1)))
    await pool.until_held(1)
    pool.start(0)
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    second = asyncio.ensure_future(ck.save(State(n=2)))
    await pool.until_held(2)
    pool.finish(1)
    await second
    pool.finish(0)  # the first save's write, late
    assert on_disk(path) == 2
    assert writes == [2]
