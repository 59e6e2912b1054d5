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
from drasim.common.embedded.postgres import SERVER_SETTINGS


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
        nc = await nats.connect(bus.admin_url)
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
        nc = await nats.connect(bus.admin_url)
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


async def test_postgres_runs_with_the_event_logs_settings(tmp_path: Path) -> None:
    with EmbeddedPostgres(tmp_path) as db:
        conn = await asyncpg.connect(db.url)
        try:
            shown = {name: await conn.fetchval(f"SHOW {name}") for name in SERVER_SETTINGS}
        finally:
            await conn.close()
    assert shown == {"shared_buffers": "1GB", "max_wal_size": "4GB", "checkpoint_timeout": "15min"}


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


def _without_password(url: str) -> str:
    """The URL with its password file left out."""
    return url.split("&passfile=")[0]


async def test_postgres_refuses_clients_without_the_password(tmp_path: Path) -> None:
    with EmbeddedPostgres(tmp_path) as db:
        for url in (
            _without_password(db.url),
            _without_password(db.admin_url),
            f"postgresql://postgres@127.0.0.1:{db.port}/drasim",  # TCP
        ):
            with pytest.raises(asyncpg.InvalidPasswordError):
                await asyncpg.connect(url)
        for secret in ("postgres.pgpass", "postgres-admin.pgpass", "postgres.log"):
            assert (tmp_path / secret).stat().st_mode & 0o077 == 0, secret


async def test_the_service_role_owns_its_database_and_nothing_more(tmp_path: Path) -> None:
    with EmbeddedPostgres(tmp_path) as db:
        conn = await asyncpg.connect(db.url)
        try:
            assert await conn.fetchval("SELECT current_user") == "drasim"
            assert not await conn.fetchval("SELECT rolsuper FROM pg_roles WHERE rolname = 'drasim'")
            await conn.execute("CREATE TABLE t (x int)")  # its own schema: yes
            with pytest.raises(asyncpg.InsufficientPrivilegeError):
                await conn.execute("COPY t FROM PROGRAM 'id'")
            with pytest.raises(asyncpg.InsufficientPrivilegeError):
                await conn.execute("CREATE DATABASE other")
        finally:
            await conn.close()


async def test_a_data_dir_made_with_trust_auth_gets_passwords(tmp_path: Path) -> None:
    """A cluster from before passwords: its rows stay, and its doors close."""
    with EmbeddedPostgres(tmp_path) as db:
        conn = await asyncpg.connect(db.admin_url)
        await conn.execute("CREATE TABLE pods (name text PRIMARY KEY)")  # owned by postgres
        await conn.execute("INSERT INTO pods VALUES ('gpu-pod')")
        await conn.close()
    (tmp_path / "postgres-admin.pgpass").unlink()
    (tmp_path / "postgres" / "pg_hba.conf").write_text("local all all trust\n")

    with EmbeddedPostgres(tmp_path) as db:
        with pytest.raises(asyncpg.InvalidPasswordError):
            await asyncpg.connect(_without_password(db.admin_url))
        conn = await asyncpg.connect(db.url)
        assert await conn.fetchval("SELECT name FROM pods") == "gpu-pod"
        await conn.execute("INSERT INTO pods VALUES ('second')")  # the role owns it now
        await conn.close()
