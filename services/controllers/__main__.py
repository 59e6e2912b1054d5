"""`python -m drasim.controllers`: the controller manager service process."""

from __future__ import annotations

import sys

from drasim.common import service
from drasim.controllers.server import ControllerManager


def main(argv: list[str] | None = None) -> int:
    config, args = service.parse_args("controllers", argv)
    return service.run_on_bus(
        "controllers",
        config,
        args,
        ControllerManager,
        f"controllers nats={config.nats_url} prefix={config.prefix}",
    )


if __name__ == "__main__":
    sys.exit(main())
