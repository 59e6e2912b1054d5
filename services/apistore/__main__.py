"""`python -m drasim.apistore`: the apistore service process."""

from __future__ import annotations

import sys

from drasim.apistore.server import ApiServer
from drasim.common import service


def main(argv: list[str] | None = None) -> int:
    config, _ = service.parse_args("apistore", argv)
    if not config.nats_url or not config.database_url:
        print("drasim-apistore: --nats-url and --database-url are required", file=sys.stderr)
        return 2

    async def serve() -> None:
        server = await ApiServer.start(
            nats_url=config.nats_url, database_url=config.database_url, prefix=config.prefix
        )
        service.announce_ready(f"apistore nats={config.nats_url} prefix={config.prefix}")
        try:
            await service.wait_for_signal()
        finally:
            await server.stop()

    return service.run("apistore", serve, config.log_level)


if __name__ == "__main__":
    sys.exit(main())
