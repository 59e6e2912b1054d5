"""`python -m drasim.scheduler`: the scheduler service process."""

from __future__ import annotations

import argparse
import sys

from drasim.common import nats_auth, service
from drasim.common.client import ApiClient
from drasim.scheduler.plugins import names
from drasim.scheduler.plugins.dynamic_resources.plugin import DynamicResourcesArgs
from drasim.scheduler.server import Scheduler


def _add_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--dra-binding-timeout",
        type=float,
        default=DynamicResourcesArgs().binding_timeout,
        metavar="SECONDS",
        help="how long PreBind waits for devices' binding conditions (DynamicResourcesArgs "
        "bindingTimeout; default %(default)s)",
    )


def main(argv: list[str] | None = None) -> int:
    config, args = service.parse_args("scheduler", argv, _add_flags)
    plugin_args = {names.DYNAMIC_RESOURCES: DynamicResourcesArgs(args.dra_binding_timeout)}
    return service.run_on_bus(
        "scheduler",
        config,
        args,
        lambda bus: Scheduler(
            ApiClient(bus, actor=nats_auth.KUBE_SCHEDULER),
            features=args.feature_gates,
            plugin_args=plugin_args,
        ),
        f"scheduler nats={config.nats_url} prefix={config.prefix}",
    )


if __name__ == "__main__":
    sys.exit(main())
