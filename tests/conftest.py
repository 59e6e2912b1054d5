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

import pytest

from drasim.apistore.server import ApiServer
from drasim.cli import launch
from drasim.common.bus.client import Bus
from drasim.common.client import ApiClient
from drasim.common.config import Config

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
        servers = stack.enter_context(
            launch.infrastructure(
                data_dir, nats_url=config.nats_url, database_url=config.database_url
            )
        )
        # The suite connects as the embedded NATS' admin: tests act as whom they please.
        yield Infra(
            nats_url=servers.admin_nats_url,
            database_url=servers.database_url,
            admin_url=servers.admin_database_url,
        )


@pytest.fixture
def fresh(infra: Infra) -> Iterator[Fresh]:
    name = f"t{uuid.uuid4().hex[:16]}"
    database_url = _run(
        launch.create_database(infra.admin_url, owner_url=infra.database_url, name=name)
    )
    try:
        yield Fresh(nats_url=infra.nats_url, database_url=database_url, prefix=name)
    finally:
        _run(launch.drop_database(infra.admin_url, database_url))
        _run(launch.delete_event_stream(infra.nats_url, name))


def _run(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run on a new loop in another thread, leaving this thread's event loop alone."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


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
