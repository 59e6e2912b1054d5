"""`python -m drasim.scheduler`: the scheduler service process."""

from __future__ import annotations

import sys

from drasim.common import nats_auth, service
from drasim.common.client import ApiClient
from drasim.scheduler.server import Scheduler


def main(argv: list[str] | None = None) -> int:
    config, args = service.parse_args("scheduler", argv)
    return service.run_on_bus(
        "scheduler",
        config,
        args,
        lambda bus: Scheduler(
            ApiClient(bus, actor=nats_auth.KUBE_SCHEDULER), features=args.feature_gates
        ),
        f"scheduler nats={config.nats_url} prefix={config.prefix}",
        freeze=True,  # the synced caches stay: the collector need not scan them
    )


if __name__ == "__main__":
    sys.exit(main())
