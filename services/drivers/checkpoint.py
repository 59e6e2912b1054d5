"""Node-local checkpoint files, so a restarted kubelet process prepares nothing twice.

Upstream the kubelet (`dra_manager_state`, `kubelet_internal_checkpoint`) and each driver
keep such files on the node's disk. Here each node gets a directory under the kubelet's
`--state-dir`; without one the state lives in memory only, as on a node whose disk is
wiped by a restart.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Generic, TypeVar

import msgspec

__all__ = ["Checkpoint", "CheckpointError"]

T = TypeVar("T")


class CheckpointError(RuntimeError):
    """A checkpoint file exists but cannot be read; the message names the file."""


class Checkpoint(Generic[T]):
    """One msgspec value in one file, replaced atomically on every save."""

    def __init__(self, path: Path | None, type_: type[T], empty: Callable[[], T]) -> None:
        self.path = path
        self._type = type_
        self._empty = empty

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

    def save(self, value: T) -> None:
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        staging = self.path.with_suffix(".tmp")
        staging.write_bytes(msgspec.json.encode(value))
        os.replace(staging, self.path)
