"""`python -m drasim.controllers`: the controller manager service process."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from drasim.common import cluster_file, service
from drasim.controllers.server import RESOURCE_QUOTA_SYNC_PERIOD, ControllerManager


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--resource-quota-sync-period",
        type=float,
        default=RESOURCE_QUOTA_SYNC_PERIOD,
        metavar="SECONDS",
        help="how often every ResourceQuota's usage is recomputed from scratch "
        "(kube-controller-manager's flag; 0: only on changes)",
    )
    parser.add_argument(
        "--cluster",
        type=Path,
        help="cluster file whose `drivers:` the emulated DRA drivers' controller serves",
    )
    parser.add_argument(
        "--root-ca-file",
        type=Path,
        help="the cluster CA's certificate (PEM), which the root CA publisher puts in every "
        "namespace's ConfigMap kube-root-ca.crt (kube-controller-manager's flag)",
    )


def main(argv: list[str] | None = None) -> int:
    config, args = service.parse_args("controllers", argv, add=_add_arguments)
    drivers = cluster_file.load(args.cluster).drivers() if args.cluster else []
    return service.run_on_bus(
        "controllers",
        config,
        args,
        lambda bus: ControllerManager(
            bus,
            resource_quota_sync_period=args.resource_quota_sync_period,
            features=args.feature_gates,
            drivers=drivers,
            root_ca=args.root_ca_file.read_text() if args.root_ca_file else None,
        ),
        f"controllers nats={config.nats_url} prefix={config.prefix}",
    )


if __name__ == "__main__":
    sys.exit(main())
