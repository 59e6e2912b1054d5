"""Node-local checkpoint files, so a restarted kubelet process prepares nothing twice.

Upstream the kubelet (`dra_manager_state`, `kubelet_internal_checkpoint`) and each driver
keep such files on the node's disk. Here each node gets a directory under the kubelet's
`--state-dir`; without one the state lives in memory only, as on a node whose disk is
wiped by a restart.

A save returns once the state is on disk, because callers act on it next: upstream the
kubelet checkpoints a claim before calling its driver, so a crash never forgets a prepared
claim. The value is encoded before the save first yields (the file gets the state as it
was when `save` was awaited), and the file is written by a worker thread, so that the event
loop, and every other node the process hosts, never waits on the disk.

A checkpoint is two files, `NAME` and `NAME.1`, written in turn in place: each holds the
encoded value, a newline, and a line with the save's number and the value's CRC-32. A
load takes the newest whole one, so a write cut short by a crash leaves the save before
it. (Replacing one file by rename, the usual way, makes ext4 write the new file out at
once, in kernel time on every save, and a kubelet that hosts many nodes saves several
times per pod; an overwrite in place costs a small fraction of that.) A file of the older
format (the value alone) loads as save number 0.

Saves of one file are written one at a time, in the order they were made, and the file
always ends with the newest. Saves that queue behind a write coalesce: the next write takes
the newest bytes only, and every save those bytes cover returns once they are written.
"""

from __future__ import annotations

import asyncio
import os
import threading
import zlib
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
# enough: a write is short, and each thread takes the GIL from the event loop now and then,
# so more threads lag the loop more during a burst of saves without writing faster.
_WRITERS = ThreadPoolExecutor(max_workers=2, thread_name_prefix="checkpoint")


class CheckpointError(RuntimeError):
    """A checkpoint file exists but cannot be read; the message names the file."""


class Checkpoint(Generic[T]):
    """One msgspec value in a pair of files, the newer of which holds the last save."""

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
        # The two files, the one the next write goes to, and the number of the newest
        # save found on disk (saves of this process are numbered after it); None until
        # `load` or the first write reads the files.
        self._files = () if path is None else (path, path.with_name(path.name + ".1"))
        self._next_file = 0
        self._base: int | None = None

    def load(self) -> T:
        if self.path is None:
            return self._empty()
        newest = self._read_files()
        if newest is None:
            return self._empty()
        try:
            return msgspec.json.decode(newest, type=self._type)
        except msgspec.DecodeError as exc:
            raise CheckpointError(f"{self.path}: {exc}") from exc

    def _read_files(self) -> bytes | None:
        """The newest whole value on disk (None if there is none), and where the numbering
        and the next write go on. Raises CheckpointError if files exist but none is whole."""
        found: list[tuple[int, int, bytes]] = []  # (number, file index, value)
        exists = False
        for index, file in enumerate(self._files):
            try:
                frame = file.read_bytes()
            except FileNotFoundError:
                continue
            exists = True
            decoded = _decode_frame(frame)
            if decoded is not None:
                found.append((decoded[0], index, decoded[1]))
        if not found:
            if exists:
                raise CheckpointError(f"{self.path}: no whole checkpoint in {self.path} or .1")
            self._base, self._next_file = 0, 0
            return None
        number, index, value = max(found)
        self._base, self._next_file = number, 1 - index
        return value

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
            if self._base is None:
                self._read_files()
            assert self._base is not None
            frame = data + b"\n%d %08x\n" % (self._base + number, zlib.crc32(data))
            _overwrite(self._files[self._next_file], frame)
            self._next_file = 1 - self._next_file  # (not after a failed write: it retries)
            self._written = number


def _decode_frame(frame: bytes) -> tuple[int, bytes] | None:
    """(save number, value) of a whole file, None for a torn one; a file of the value alone
    (the format before numbered files) is save 0. What follows the number line is left
    from a longer earlier write cut short before its truncation, and ignored."""
    end = frame.find(b"\n")
    if end < 0:
        return (0, frame) if frame.startswith(b"{") and frame.endswith(b"}") else None
    value = frame[:end]
    line_end = frame.find(b"\n", end + 1)
    if line_end < 0:
        return None
    try:
        number_text, crc_text = frame[end + 1 : line_end].split(b" ")
        number, crc = int(number_text), int(crc_text, 16)
    except ValueError:
        return None
    return (number, value) if zlib.crc32(value) == crc else None


def _overwrite(path: Path, frame: bytes) -> None:
    """Write `frame` over the file at `path` in place (no rename, no truncation to zero:
    either would make ext4 write the data out at once). A node's state is its own: the
    files and their directories are the owner's alone."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    except FileNotFoundError:  # the first save (no mkdir on every save), or it was removed
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        done = 0
        while done < len(frame):
            done += os.pwrite(fd, frame[done:], done)
        os.ftruncate(fd, len(frame))
    finally:
        os.close(fd)
