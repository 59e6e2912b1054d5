"""Node-local checkpoint files, so a restarted kubelet process prepares nothing twice.

Upstream the kubelet (`dra_manager_state`, `kubelet_internal_checkpoint`) and each driver
keep such files on the node's disk. Here each node gets a directory under the kubelet's
`--state-dir`; without one the state lives in memory only, as on a node whose disk is
wiped by a restart.

A save returns once the state is on disk, because callers act on it next: upstream the
kubelet checkpoints a claim before calling its driver, so a crash never forgets a prepared
claim. The value is encoded before the save first yields (the file gets the state as it
was when `save` was awaited), and the file is written by a worker thread: on ext4
replacing a file by rename costs about a millisecond, during which the event loop, and so
every other node the process hosts, would otherwise wait.

Saves of one file are written one at a time, in the order they were made, and the file
always ends with the newest. Saves that queue behind a write coalesce: the next write takes
the newest bytes only, and every save those bytes cover returns once they are written.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Generic, TypeVar

import msgspec

__all__ = ["Checkpoint", "CheckpointError"]

T = TypeVar("T")

# The threads that write checkpoint files, for every Checkpoint of the process: their own
# pool rather than the loop's default executor, so that a burst of saves on a thousand
# nodes never queues ahead of the loop's other blocking calls (name resolution). Two are
# enough: ext4 serializes the replaces anyway (a thousand nodes saving at once took as
# long with 8 threads), and each thread takes the GIL from the event loop now and then
# (with 8, the loop's p99 lag during that burst was 4 times that with 2).
_WRITERS = ThreadPoolExecutor(max_workers=2, thread_name_prefix="checkpoint")


class CheckpointError(RuntimeError):
    """A checkpoint file exists but cannot be read; the message names the file."""


class Checkpoint(Generic[T]):
    """One msgspec value in one file, replaced atomically on every save."""

    def __init__(self, path: Path | None, type_: type[T], empty: Callable[[], T]) -> None:
        self.path = path
        self._type = type_
        self._empty = empty
        # Saves are numbered in the order they are made. `_pending` holds the bytes of the
        # newest (number `_saved`) until they are on disk; `_written` is the newest number
        # on disk, so an older save never overwrites a newer one.
        self._saved = 0
        self._written = 0
        self._pending: bytes | None = None
        # One write in flight per file: the event loop's saves take turns here, so that
        # they do not hold writer threads waiting on `_file_lock`.
        self._turn = asyncio.Lock()
        # ... and `_write` holds this: the write of a cancelled save goes on in its thread
        # while the next save's write may start in another.
        self._file_lock = threading.Lock()

    def load(self) -> T:
        if self.path is None:
            return self._empty()
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return self._empty()
        try:
            return msgspec.json.decode(data, type=self._type)
        except msgspec.DecodeError as exc:
            raise CheckpointError(f"{self.path}: {exc}") from exc

    async def save(self, value: T) -> None:
        """Save `value` as it is now; return once it, or a newer save, is on disk.

        A failed write raises its OSError; the file keeps the last state written, and the
        next save (or another save waiting here) writes again.
        """
        if self.path is None:
            return
        self._pending = msgspec.json.encode(value)
        self._saved += 1
        number = self._saved
        async with self._turn:
            if self._written >= number:
                return  # a write that took newer bytes while this save waited its turn
            data, newest = self._pending, self._saved
            assert data is not None  # kept until `_written` reaches `_saved`
            loop = asyncio.get_running_loop()
            await loop.run_in_executor(_WRITERS, self._write, data, newest)
            if self._written >= self._saved:
                self._pending = None  # no save is waiting for it

    def _write(self, data: bytes, number: int) -> None:
        """Replace the file with `data`, the bytes of save `number`, unless a newer save
        is already written. Runs in a writer thread."""
        assert self.path is not None
        with self._file_lock:
            if number <= self._written:
                return
            _replace(self.path, data)
            self._written = number


def _replace(path: Path, data: bytes) -> None:
    """Replace the file at `path` by one holding `data`: a reader (or a restarted process)
    sees the old file or the new, never part of one."""
    staging = path.with_suffix(".tmp")
    try:
        staging.write_bytes(data)
    except FileNotFoundError:  # the first save (no mkdir on every save), or it was removed
        path.parent.mkdir(parents=True, exist_ok=True)
        staging.write_bytes(data)
    os.replace(staging, path)
