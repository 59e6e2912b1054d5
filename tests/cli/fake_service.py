"""A stand-in service for `drasim up` tests, run as `python -m fake_service`.

It uses the URLs it is given (counting its starts in Postgres, so a test can see that a
second `up` reuses the data), prints one line about itself, then `READY`. SIGTERM stops
it cleanly; SIGUSR1 makes it exit with code 3, as a crash would. With
`FAKE_SERVICE_FAIL_AT_START` set it exits with code 3 before it is ready.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from pathlib import Path

import asyncpg
import nats

CRASH_CODE = 3


async def serve(args: argparse.Namespace) -> int:
    if os.environ.get("FAKE_SERVICE_FAIL_AT_START"):
        print("cannot start: FAKE_SERVICE_FAIL_AT_START is set")
        return CRASH_CODE
    conn = await asyncpg.connect(args.database_url)
    await conn.execute("CREATE TABLE IF NOT EXISTS fake_service_starts (at timestamptz)")
    await conn.execute("INSERT INTO fake_service_starts VALUES (now())")
    starts = await conn.fetchval("SELECT count(*) FROM fake_service_starts")
    await conn.close()
    nc = await nats.connect(args.nats_url, **args.nats_auth)
    await nc.close()

    loop = asyncio.get_running_loop()
    exit_code: asyncio.Future[int] = loop.create_future()
    loop.add_signal_handler(signal.SIGTERM, exit_code.set_result, 0)
    loop.add_signal_handler(signal.SIGUSR1, exit_code.set_result, CRASH_CODE)
    print(f"pid={os.getpid()} starts={starts} prefix={args.prefix}")
    print("READY fake_service")
    return await exit_code


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nats-url", required=True)
    parser.add_argument("--nats-credentials")
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--prefix", required=True)
    args = parser.parse_args()
    args.nats_auth = {}
    if args.nats_credentials:
        user, _, password = Path(args.nats_credentials).read_text().strip().partition(":")
        args.nats_auth = {"user": user, "password": password}
    return asyncio.run(serve(args))


if __name__ == "__main__":
    sys.exit(main())
