"""`python -m drasim.controllers`: the controller manager service process."""

from __future__ import annotations

import sys

from drasim.common import service
from drasim.common.bus.client import Bus
from drasim.controllers.server import ControllerManager


def main(argv: list[str] | None = None) -> int:
    config, args = service.parse_args("controllers", argv)
    if not config.nats_url:
        print("drasim-controllers: --nats-url is required", file=sys.stderr)
        return 2

    async def serve() -> None:
        bus = await Bus.connect(config.nats_url, prefix=config.prefix, name="controllers")
        manager = ControllerManager(bus)
        try:
            await manager.start()
            await service.serve_until_signal(
                args,
                f"controllers nats={config.nats_url} prefix={config.prefix}",
                registry=manager.metrics.registry,
            )
        finally:
            await manager.stop()
            await bus.close()

    return service.run("controllers", serve, config.log_level)


if __name__ == "__main__":
    sys.exit(main())
