"""The one place that imports `nats`: a connection with its JetStream context and prefix."""

from __future__ import annotations

import nats
from nats.aio.client import Client as NATS
from nats.js import JetStreamContext


class Bus:
    """A NATS connection that reconnects forever, plus the cluster's subject prefix."""

    def __init__(self, nc: NATS, prefix: str) -> None:
        self.nc = nc
        self.js: JetStreamContext = nc.jetstream()
        self.prefix = prefix

    @classmethod
    async def connect(cls, url: str, *, prefix: str, name: str = "drasim") -> Bus:
        nc = await nats.connect(
            url,
            name=name,
            allow_reconnect=True,
            max_reconnect_attempts=-1,
            reconnect_time_wait=0.25,
            connect_timeout=5,
            pending_size=64 * 1024 * 1024,
        )
        return cls(nc, prefix)

    async def close(self) -> None:
        if not self.nc.is_closed:
            await self.nc.drain()
