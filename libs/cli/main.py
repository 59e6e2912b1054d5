"""`drasim`, the command line: one module per subcommand, listed in `COMMANDS`.

Each module's `add_parser(subparsers)` registers its subcommand and sets `func`, which
takes the parsed arguments and returns the exit code.
"""

from __future__ import annotations

import argparse
import sys

from drasim.cli import (
    apply,
    bench,
    cluster,
    delete,
    demo,
    describe,
    events,
    get,
    kubeconfig,
    loadtest,
    node,
    replay,
    secrets,
    up,
)
from drasim.common.config import ConfigError
from drasim.common.embedded import EmbeddedServerError
from drasim.common.errors import ApiError

COMMANDS = (
    up,
    apply,
    get,
    describe,
    delete,
    events,
    replay,
    node,
    demo,
    bench,
    loadtest,
    kubeconfig,
    secrets,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="drasim", description="Emulated Kubernetes control plane for DRA extended resources."
    )
    cluster.add_cluster_options(parser)
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        command.add_parser(subparsers)
    # Global options also work after the subcommand (`drasim up --data-dir x`).
    for subparser in dict.fromkeys(subparsers.choices.values()):
        cluster.add_cluster_options(subparser, suppress=True)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except ApiError as err:
        # kubectl's wording, for people who read both.
        print(f"Error from server ({err.reason}): {err.message}", file=sys.stderr)
    except (ConfigError, EmbeddedServerError) as err:
        print(f"drasim: {err}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
