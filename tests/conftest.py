"""Infrastructure for integration tests: one NATS and one Postgres per session, and a
private database and subject prefix per test.

`DRASIM_NATS_URL` / `DRASIM_DATABASE_URL` point the suite at existing servers; otherwise
embedded ones start on first use. The fixtures are synchronous so that tests may use any
event loop scope; their async clean-up runs on a private loop in a worker thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
import uuid
from collections.abc import AsyncIterator, Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

import asyncpg
import nats
import pytest

from drasim.apistore.server import ApiServer
from drasim.common.bus.client import Bus
from drasim.common.client import ApiClient
from drasim.common.config import Config, with_database
from drasim.common.embedded import EmbeddedNats, EmbeddedPostgres

T = TypeVar("T")


@dataclass(frozen=True)
class Infra:
    """The session's servers. `admin_url` may make databases; `database_url` is what the
    services connect as (the embedded Postgres' own role; a given URL serves as both)."""

    nats_url: str
    database_url: str
    admin_url: str


@dataclass(frozen=True)
class Fresh:
    """One test's share of the servers: its own database, and a prefix no other test uses
    for subjects and stream names."""

    nats_url: str
    database_url: str
    prefix: str


@pytest.fixture(scope="session")
def infra() -> Iterator[Infra]:
    config = Config.from_env()
    with contextlib.ExitStack() as stack:
        # Not under pytest's own temporary root: every pytest session run as root makes that
        # root private again (mode 0700), and Postgres, which runs as an unprivileged
        # account then, would lose its data directory to a second session started meanwhile.
        data_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="drasim-tests-")))
        # The suite connects as the embedded NATS' admin: tests act as whom they please.
        nats_url = config.nats_url or stack.enter_context(EmbeddedNats(data_dir)).admin_url
        if config.database_url:
            database_url = admin_url = config.database_url
        else:
            pg = stack.enter_context(EmbeddedPostgres(data_dir))
            database_url, admin_url = pg.url, pg.admin_url
        yield Infra(nats_url=nats_url, database_url=database_url, admin_url=admin_url)


@pytest.fixture
def fresh(infra: Infra) -> Iterator[Fresh]:
    name = f"t{uuid.uuid4().hex[:16]}"
    owner = urlsplit(infra.database_url).username
    _run(_execute(infra.admin_url, f'CREATE DATABASE "{name}" OWNER "{owner}"'))
    try:
        yield Fresh(
            nats_url=infra.nats_url,
            database_url=with_database(infra.database_url, name),
            prefix=name,
        )
    finally:
        # FORCE: a test that leaked a connection must not break the next one.
        _run(_execute(infra.admin_url, f'DROP DATABASE "{name}" WITH (FORCE)'))
        _run(_delete_streams(infra.nats_url, name))


def _run(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run on a new loop in another thread, leaving this thread's event loop alone."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


async def _execute(database_url: str, statement: str) -> None:
    conn = await asyncpg.connect(database_url)
    try:
        await conn.execute(statement)
    finally:
        await conn.close()


async def _delete_streams(nats_url: str, prefix: str) -> None:
    """Drop the test's streams (KV buckets and object stores are streams too), which
    matters on a shared NATS that outlives the session."""
    nc = await nats.connect(nats_url)
    try:
        js = nc.jetstream()
        for stream in await js.streams_info():
            if prefix in stream.config.name:
                await js.delete_stream(stream.config.name)
    finally:
        await nc.close()


@pytest.fixture
async def server(fresh: Fresh) -> AsyncIterator[ApiServer]:
    """An apistore running in this test's event loop, on the test's database and prefix."""
    srv = await ApiServer.start(
        nats_url=fresh.nats_url, database_url=fresh.database_url, prefix=fresh.prefix
    )
    yield srv
    await srv.stop()


@pytest.fixture
async def bus(fresh: Fresh) -> AsyncIterator[Bus]:
    b = await Bus.connect(fresh.nats_url, prefix=fresh.prefix, name="test")
    yield b
    await b.close()


@pytest.fixture
async def api(server: ApiServer, bus: Bus) -> ApiClient:
    return ApiClient(bus, actor="test")
