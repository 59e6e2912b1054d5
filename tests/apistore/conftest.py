"""An apistore running in this test's event loop, on the test's fresh database and prefix."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from drasim.apistore.server import ApiServer
from drasim.common.bus.client import Bus
from drasim.common.client import ApiClient


@pytest.fixture
async def server(fresh) -> AsyncIterator[ApiServer]:
    srv = await ApiServer.start(
        nats_url=fresh.nats_url, database_url=fresh.database_url, prefix=fresh.prefix
    )
    yield srv
    await srv.stop()


@pytest.fixture
async def bus(fresh) -> AsyncIterator[Bus]:
    b = await Bus.connect(fresh.nats_url, prefix=fresh.prefix, name="test")
    yield b
    await b.close()


@pytest.fixture
async def api(server, bus) -> ApiClient:
    return ApiClient(bus, actor="test")
