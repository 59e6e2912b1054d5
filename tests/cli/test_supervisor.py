"""The supervisor's bookkeeping of its own: back-off and the records of what it started."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import psutil

from drasim.cli import supervisor


def _sleeper() -> subprocess.Popen[bytes]:
    """A process in a session of its own that would outlive its parent, as services do."""
    return subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True
    )


def test_orphans_recorded_by_an_earlier_up_are_stopped(tmp_path: Path) -> None:
    orphan = _sleeper()
    try:
        supervisor.ProcessRecords(tmp_path).add("scheduler", orphan.pid)
        assert supervisor.ProcessRecords(tmp_path).stop_orphans() == [orphan.pid]
        orphan.wait(timeout=10)  # reaped by the supervisor's wait already, or now
        assert not psutil.pid_exists(orphan.pid)
        assert not (tmp_path / supervisor.PIDS_FILE).exists()
    finally:
        orphan.kill()


def test_a_reused_pid_is_left_alone(tmp_path: Path) -> None:
    """The pid of a record is someone else's now when the start time differs."""
    stranger = _sleeper()
    try:
        record = supervisor._Record(stranger.pid, psutil.Process(stranger.pid).create_time() - 5)
        (tmp_path / supervisor.PIDS_FILE).write_bytes(supervisor.msgspec.json.encode([record]))
        assert supervisor.ProcessRecords(tmp_path).stop_orphans() == []
        assert stranger.poll() is None
    finally:
        stranger.kill()
        stranger.wait()


def test_backoff_doubles_to_its_cap_and_starts_over_after_a_long_run() -> None:
    backoff = supervisor._Backoff()
    delays = [backoff.next(ran_for=0.5) for _ in range(7)]
    assert delays == [1, 2, 4, 8, 16, 30, 30]
    assert backoff.next(ran_for=supervisor.BACKOFF_RESET) == 1
    assert backoff.restarts == 8
