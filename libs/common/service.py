"""What every service process shares: its command line, logging, the READY line, signals.

`drasim up` runs each service as `python -m drasim.<service> --nats-url ... --database-url ...`
and waits for the line starting with `READY` that `serve` prints once the service is serving.
SIGTERM and SIGINT stop the service gracefully.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import sys
from collections.abc import Awaitable, Callable

from drasim.common.config import Config, ConfigError


def parse_args(
    name: str,
    argv: list[str] | None = None,
    add: Callable[[argparse.ArgumentParser], None] | None = None,
) -> tuple[Config, argparse.Namespace]:
    parser = argparse.ArgumentParser(prog=f"drasim-{name}")
    parser.add_argument("--nats-url")
    parser.add_argument("--database-url")
    parser.add_argument("--prefix")
    parser.add_argument("--log-level")
    if add is not None:
        add(parser)
    args = parser.parse_args(argv)
    try:
        config = Config.from_env(
            nats_url=args.nats_url,
            database_url=args.database_url,
            prefix=args.prefix,
            log_level=args.log_level,
        )
    except ConfigError as exc:
        parser.error(str(exc))
    return config, args


def setup_logging(name: str, level: str) -> None:
    logging.basicConfig(
        level=level,
        format=f"%(asctime)s {name} %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )


def announce_ready(detail: str) -> None:
    """The line `drasim up` waits for."""
    print(f"READY {detail}", flush=True)


async def wait_for_signal() -> None:
    """Return on SIGTERM or SIGINT."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)


def run(name: str, main: Callable[[], Awaitable[None]], level: str = "INFO") -> int:
    """Run a service's main coroutine until it returns; exit code 0 on a clean stop."""
    setup_logging(name, level)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main())
    return 0
