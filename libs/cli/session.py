"""A connected API client for one CLI command, found through the cluster's data directory."""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import AsyncIterator

from drasim.cli import cluster
from drasim.common import errors
from drasim.common.bus.client import Bus
from drasim.common.client import ApiClient


@contextlib.asynccontextmanager
async def connect(
    args: argparse.Namespace, *, actor: str = "drasim-cli"
) -> AsyncIterator[ApiClient]:
    config = cluster.resolve_config(args)
    if not config.nats_url:
        raise errors.ServiceUnavailable(
            f"no running cluster found in {config.data_dir} (start one with `drasim up`, "
            "or pass --nats-url / set DRASIM_NATS_URL)"
        )
    try:
        bus = await Bus.connect(
            config.nats_url, prefix=config.prefix, name=actor, credentials=config.nats_credentials
        )
    except Exception as exc:  # nats raises several unrelated types for "cannot connect"
        raise errors.ServiceUnavailable(f"cannot reach NATS at {config.nats_url}: {exc}") from exc
    try:
        yield ApiClient(bus, actor=actor)
    finally:
        await bus.close()
