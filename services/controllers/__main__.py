"""`python -m drasim.controllers`: the controller manager service process."""

from __future__ import annotations

import sys

from drasim.common import metrics, service
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
            async with metrics.serving(
                args.metrics_port, host=args.metrics_host, registry=manager.metrics.registry
            ) as endpoint:
                service.announce_ready(
                    f"controllers nats={config.nats_url} prefix={config.prefix}"
                    + metrics.ready_detail(endpoint)
                )
                await service.wait_for_signal()
        finally:
            await manager.stop()
            await bus.close()

    return service.run("controllers", serve, config.log_level)


if __name__ == "__main__":
    sys.exit(main())
