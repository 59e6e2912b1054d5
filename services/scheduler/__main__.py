"""`python -m drasim.scheduler`: the scheduler service process."""

from __future__ import annotations

import sys

from drasim.common import service
from drasim.common.bus.client import Bus
from drasim.common.client import ApiClient
from drasim.scheduler.server import Scheduler


def main(argv: list[str] | None = None) -> int:
    config, args = service.parse_args("scheduler", argv)
    if not config.nats_url:
        print("drasim-scheduler: --nats-url is required", file=sys.stderr)
        return 2

    async def serve() -> None:
        bus = await Bus.connect(config.nats_url, prefix=config.prefix, name="scheduler")
        scheduler = Scheduler(ApiClient(bus, actor="scheduler"))
        try:
            await scheduler.start()
            service.freeze_gc()  # the synced caches stay: the collector need not scan them
            await service.serve_until_signal(
                args,
                f"scheduler nats={config.nats_url} prefix={config.prefix}",
                registry=scheduler.metrics.registry,
            )
        finally:
            await scheduler.stop()
            await bus.close()

    return service.run("scheduler", serve, config.log_level)


if __name__ == "__main__":
    sys.exit(main())
