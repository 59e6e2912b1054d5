"""`drasim delete KIND NAME... [-n NS] [--grace-period N] [--cascade background|orphan]`."""

from __future__ import annotations

import argparse
import asyncio

from drasim.cli import session
from drasim.common.api import registry

_CASCADE = {"background": "Background", "orphan": "Orphan", "foreground": "Foreground"}


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("delete", help="delete objects")
    p.add_argument("kind")
    p.add_argument("names", nargs="+", metavar="NAME")
    p.add_argument("-n", "--namespace", default="")
    p.add_argument("--grace-period", type=int, default=None)
    p.add_argument("--cascade", choices=sorted(_CASCADE), default="background")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    info = registry.resolve(args.kind)
    namespace = (args.namespace or "default") if info.namespaced else ""

    async def go() -> None:
        async with session.connect(args) as api:
            for name in args.names:
                await api.delete(
                    info.type,
                    name,
                    namespace=namespace,
                    grace_period_seconds=args.grace_period,
                    propagation_policy=_CASCADE[args.cascade],
                )
                print(f'{info.kind_and_group} "{name}" deleted')

    asyncio.run(go())
    return 0
