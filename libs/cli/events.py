"""`drasim events`: the event log itself (every accepted write), optionally followed live."""

from __future__ import annotations

import argparse
import asyncio
import contextlib

from drasim.cli import session
from drasim.common.api import registry
from drasim.common.bus import messages
from drasim.common.client import ApiClient
from drasim.common.watch import watch_raw

PAGE = 1000
HEADER = "  ".join(
    (f"{'RV':>8}", f"{'TIME':<20}", f"{'TYPE':<8}", f"{'RESOURCE':<22}", f"{'OBJECT':<40}",
     f"{'ACTOR':<18}", "TRACE")
)  # fmt: skip


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("events", help="print the event log (every accepted write)")
    p.add_argument(
        "--since", type=int, default=0, metavar="RV", help="only events after this resourceVersion"
    )
    p.add_argument("--kind", default="", help="only this resource type (pods, resourceclaims…)")
    p.add_argument("--name", default="", help="only objects with this name")
    p.add_argument("-n", "--namespace", default="")
    p.add_argument("--actor", default="", help="only writes by this actor (system:kube-scheduler…)")
    p.add_argument("--trace-id", default="", help="only writes made under this trace")
    p.add_argument("-f", "--follow", action="store_true", help="keep printing new events")
    p.add_argument("-o", "--output", choices=["", "json"], default="")
    p.set_defaults(func=run)


def format_event(ev: messages.LoggedEvent, output: str) -> str:
    if output == "json":  # one JSON document a line (the object as stored)
        return messages.encoder.encode(ev).decode()
    obj = f"{ev.namespace}/{ev.name}" if ev.namespace else ev.name
    trace = ev.traceparent.split("-")[1] if ev.traceparent.count("-") >= 3 else "-"
    return (
        f"{ev.seq:>8}  {ev.time}  {ev.type:<8}  {ev.resource:<22}  {obj:<40}  "
        f"{ev.actor or '-':<18}  {trace}"
    )


async def print_log(api: ApiClient, args: argparse.Namespace) -> None:
    resource = registry.resolve(args.kind).plural if args.kind else ""
    after = args.since
    if args.output != "json":
        print(HEADER)
    while True:
        data = await api.request(
            messages.EventLog(
                resource=resource,
                namespace=args.namespace,
                name=args.name,
                after=after,
                actor=args.actor,
                trace_id=args.trace_id,
                limit=PAGE,
            )
        )
        page = messages.event_log_decoder.decode(data)
        for ev in page.events:
            print(format_event(ev, args.output), flush=True)
        if not page.continue_after:  # pages end on PAGE or on the bus's payload limit
            after = max(after, page.last_seq)
            break
        after = page.continue_after
    if not args.follow:
        return
    async for seq, _ in watch_raw(api.bus, resource or None, resource_version=after):
        data = await api.request(
            messages.EventLog(
                resource=resource,
                namespace=args.namespace,
                name=args.name,
                after=seq - 1,
                until=seq,
                actor=args.actor,
                trace_id=args.trace_id,
                limit=1,
            )
        )
        for logged in messages.event_log_decoder.decode(data).events:
            print(format_event(logged, args.output), flush=True)


def run(args: argparse.Namespace) -> int:
    async def go() -> None:
        async with session.connect(args) as api:
            await print_log(api, args)

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(go())
    return 0
