"""Embedded NATS and Postgres: they serve clients, keep data across restarts and leave no
process behind, even after a run that was killed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterable
from pathlib import Path

import asyncpg
import nats
import psutil
import pytest

from drasim.common.config import database_name
from drasim.common.embedded import EmbeddedNats, EmbeddedPostgres, EmbeddedServerError


def alive(pids: Iterable[int]) -> list[int]:
    """The pids still running (a zombie has exited; only its parent's reaping is left)."""
    running = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                running.append(pid)
        except psutil.NoSuchProcess:
            pass
    return running


def process_tree(pid: int | None) -> list[int]:
    assert pid is not None
    process = psutil.Process(pid)
    return [pid, *(child.pid for child in process.children(recursive=True))]


async def test_restart_on_the_same_dir_keeps_rows_and_stream_messages(tmp_path: Path) -> None:
    with EmbeddedNats(tmp_path) as bus, EmbeddedPostgres(tmp_path) as db:
        assert database_name(db.url) == "drasim"
        conn = await asyncpg.connect(db.url)
        await conn.execute("CREATE TABLE pods (name text PRIMARY KEY)")
        await conn.execute("INSERT INTO pods VALUES ('gpu-pod')")
        await conn.close()
        nc = await nats.connect(bus.url)
        js = nc.jetstream()
        await js.add_stream(name="EVENTS", subjects=["events.>"])
        await js.publish("events.pod", b"created")
        await nc.close()
        pids = process_tree(bus.pid) + process_tree(db.pid)
    assert alive(pids) == []

    with EmbeddedNats(tmp_path) as bus, EmbeddedPostgres(tmp_path) as db:
        conn = await asyncpg.connect(db.url)
        assert await conn.fetchval("SELECT name FROM pods") == "gpu-pod"
        await conn.close()
        nc = await nats.connect(bus.url)
        message = await nc.jetstream().get_msg("EVENTS", 1)
        assert message.data == b"created"
        await nc.close()
        pids = process_tree(bus.pid) + process_tree(db.pid)
    assert alive(pids) == []


def test_a_second_server_on_the_same_dir_is_refused(tmp_path: Path) -> None:
    with EmbeddedNats(tmp_path), pytest.raises(EmbeddedServerError, match="in use"):
        EmbeddedNats(tmp_path).start()


def test_start_stops_servers_orphaned_by_a_killed_run(tmp_path: Path) -> None:
    # The servers run in their own session, so killing their parent orphans them.
    parent = subprocess.Popen(
        [sys.executable, "-c", _START_AND_SLEEP, str(tmp_path)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert parent.stdout is not None
    orphans = [int(pid) for pid in parent.stdout.readline().split()]
    parent.kill()
    parent.wait()
    assert len(alive(orphans)) == 2

    with EmbeddedNats(tmp_path) as bus, EmbeddedPostgres(tmp_path) as db:
        assert alive(orphans) == []
        pids = process_tree(bus.pid) + process_tree(db.pid)
    assert alive(pids) == []


async def test_postgres_starts_over_a_stale_postmaster_pid(tmp_path: Path) -> None:
    with EmbeddedPostgres(tmp_path) as db:
        conn = await asyncpg.connect(db.url)
        await conn.execute("CREATE TABLE nodes (name text)")
        await conn.execute("INSERT INTO nodes VALUES ('node-1')")
        await conn.close()
        assert db.pid is not None
        os.killpg(db.pid, signal.SIGKILL)  # as a crash would, postmaster.pid stays
    assert (tmp_path / "postgres" / "postmaster.pid").exists()

    with EmbeddedPostgres(tmp_path) as db:
        conn = await asyncpg.connect(db.url)
        assert await conn.fetchval("SELECT name FROM nodes") == "node-1"
        await conn.close()


_START_AND_SLEEP = textwrap.dedent(
    """
    import sys, time
    from drasim.common.embedded import EmbeddedNats, EmbeddedPostgres

    bus = EmbeddedNats(sys.argv[1]).start()
    db = EmbeddedPostgres(sys.argv[1]).start()
    print(bus.pid, db.pid, flush=True)
    time.sleep(600)
    """
)
