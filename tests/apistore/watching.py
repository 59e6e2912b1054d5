"""What the apistore's watch tests share."""

from __future__ import annotations

import asyncio

from drasim.common import watch
from drasim.common.api import core_v1
from drasim.common.client import ApiClient


async def collect(api: ApiClient, rv: int, count: int, timeout: float = 30.0) -> list:
    """The first `count` pod events after `rv`."""
    got = []

    async def run() -> None:
        async for event in watch.watch_resource(api.bus, core_v1.Pod, resource_version=rv):
            got.append(event)
            if len(got) == count:
                return

    await asyncio.wait_for(run(), timeout)
    return got
