"""`drasim replay`: the cluster as it was at a resourceVersion or a time, from the log alone.

drasim replay --to 1200                      # summary of the state at RV 1200
drasim replay --to 2026-11-29T19:00:00Z get pods -o wide
drasim replay --to 1200 describe pod web-0
drasim replay --verify                       # fold the whole log, compare with live state
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections import Counter
from datetime import datetime
from typing import Any, TypeVar

from drasim.cli import describe, get, session
from drasim.common import codec, errors, replay, selection
from drasim.common.api import registry
from drasim.common.api.meta_v1 import KubeObject
from drasim.common.bus import messages
from drasim.common.client import ApiClient

T = TypeVar("T", bound=KubeObject)
PAGE = 5000


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "replay", help="rebuild past cluster state from the event log (or verify the projection)"
    )
    p.add_argument(
        "--to",
        default="",
        metavar="RV|TIME",
        help="a resourceVersion, or an RFC 3339 time (default: the whole log)",
    )
    p.add_argument(
        "--verify",
        action="store_true",
        help="fold the whole log and compare it with the live projection",
    )
    p.add_argument(
        "command",
        nargs=argparse.REMAINDER,
        help="optional: get KIND [NAME] [options] | describe KIND NAME [-n NS]",
    )
    p.set_defaults(func=run)


def _limit(text: str) -> tuple[int, datetime | None]:
    """`--to` as (resourceVersion, time): one of them bounds the fold."""
    if not text:
        return 0, None
    if text.isdigit():
        return int(text), None
    try:
        return 0, datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise errors.BadRequest(
            f"--to: {text!r} is neither a resourceVersion nor an RFC 3339 time"
        ) from None


async def read_log(
    api: ApiClient,
    *,
    until: int = 0,
    until_time: datetime | None = None,
    view: replay.ClusterView | None = None,
) -> replay.ClusterView:
    """Fold the log page by page (into `view`, from where it stands), stopping at `until`
    (RV) or `until_time`. Pages end on `PAGE` events or on the bus's payload limit."""
    view = view or replay.ClusterView()
    after = view.resource_version
    while True:
        data = await api.request(messages.EventLog(after=after, until=until, limit=PAGE))
        page = messages.event_log_decoder.decode(data)
        _check_kept(page, until, until_time)
        if 0 < view.resource_version < page.compacted:
            raise errors.Expired(
                f"the fold at resourceVersion {view.resource_version} cannot carry on: the "
                f"event log is compacted up to resourceVersion {page.compacted}"
            )
        for event in page.events:
            if (
                until_time is not None
                and datetime.fromisoformat(event.time.replace("Z", "+00:00")) > until_time
            ):
                return view
            view.apply(event)
        if not page.continue_after:
            return view
        after = page.continue_after


def _check_kept(page: messages.EventLogResult, until: int, until_time: datetime | None) -> None:
    """Refuse a fold to a point the log no longer holds: one before its compaction
    (docs/apistore.md#retention-and-compaction), as upstream refuses a resourceVersion
    that etcd compacted."""
    if not page.compacted:
        return
    kept = (
        f"the event log is compacted up to resourceVersion {page.compacted} "
        f"({page.compacted_at or 'time unknown'}); replay to that or later"
    )
    if until and until < page.compacted:
        raise errors.Expired(f"The resourceVersion for the provided replay is too old: {kept}")
    if until_time is not None and page.compacted_at:
        compacted_at = datetime.fromisoformat(page.compacted_at.replace("Z", "+00:00"))
        if until_time < compacted_at:
            raise errors.Expired(f"The time for the provided replay is too old: {kept}")


class ReplayClient:
    """The read side of `ApiClient` over a folded view, so get/describe work on the past."""

    def __init__(self, view: replay.ClusterView) -> None:
        self.view = view

    async def get(self, type_: type[T], name: str, *, namespace: str = "") -> T:
        info = registry.by_type(type_)
        data = self.view.objects.get((info.plural, namespace if info.namespaced else "", name))
        if data is None:
            raise errors.NotFound(
                f'{info.plural} "{name}" not found (at resourceVersion '
                f"{self.view.resource_version})"
            )
        return codec.decode(data, type_)

    async def list(
        self,
        type_: type[T],
        *,
        namespace: str = "",
        label_selector: str = "",
        field_selector: str = "",
    ) -> tuple[list[T], int]:
        info = registry.by_type(type_)
        chosen = selection.Selection(info.plural, label_selector, field_selector)
        items = [
            codec.decode(data, type_)
            for _, data in sorted(self.view.of(info.plural, namespace).items())
            if chosen.matches(data)
        ]
        return items, self.view.resource_version


async def verify(api: ApiClient, view: replay.ClusterView | None = None) -> str | None:
    """Fold the log up to each list's resourceVersion and compare with that list (one
    fold, carried on from list to list: each list is at or after the one before). With
    `view`, the fold carries on from where that view stands and leaves it there, so
    verifying again and again (benchmarks/chaos.py) folds each event once, unless the log
    was compacted past the view meanwhile: then it folds afresh."""
    view = replay.ClusterView() if view is None else view
    for info in registry.RESOURCES:
        items, rv = await api.list(info.type)
        try:
            view = await read_log(api, until=rv, view=view)
        except errors.Expired:  # compacted past the view: fold the log afresh
            view.objects.clear()
            view.resource_version = 0
            view = await read_log(api, until=rv, view=view)
        live = {
            (info.plural, o.metadata.namespace, o.metadata.name): codec.encode(o) for o in items
        }
        problem = replay.first_difference(info.plural, view.of(info.plural), live)
        if problem is not None:
            return f"at resourceVersion {rv}: {problem}"
    return None


def _summary(view: replay.ClusterView) -> str:
    counts = Counter(key[0] for key in view.objects)
    lines = [f"cluster state at resourceVersion {view.resource_version}:"]
    lines += [f"  {resource:<24}{count}" for resource, count in sorted(counts.items())]
    return "\n".join(lines)


async def _show(args: argparse.Namespace, view: replay.ClusterView) -> str:
    client: Any = ReplayClient(view)
    sub = argparse.ArgumentParser(prog="drasim replay --to ...")
    commands = sub.add_subparsers(dest="verb", required=True)
    get.add_parser(commands)
    describe.add_parser(commands)
    inner = sub.parse_args(args.command)
    info = registry.resolve(inner.kind)
    if inner.verb == "describe":
        namespace = (inner.namespace or "default") if info.namespaced else ""
        return await describe.describe(client, info, inner.name, namespace)
    namespace = (
        "" if inner.all_namespaces or not info.namespaced else (inner.namespace or "default")
    )
    if inner.name:
        objs = [await client.get(info.type, inner.name, namespace=namespace)]
    else:
        objs, _ = await client.list(
            info.type,
            namespace=namespace,
            label_selector=inner.selector,
            field_selector=inner.field_selector,
        )
    return get.format_objects(
        info, objs, inner.output, all_namespaces=inner.all_namespaces, single=bool(inner.name)
    ) or get.no_resources_found(info, inner)


def run(args: argparse.Namespace) -> int:
    until, until_time = _limit(args.to)

    async def go() -> int:
        async with session.connect(args) as api:
            if args.verify:
                problem = await verify(api)
                if problem is not None:
                    print(f"replay --verify: MISMATCH {problem}", file=sys.stderr)
                    return 1
                print("replay --verify: the fold of the event log equals the projection")
                return 0
            view = await read_log(api, until=until, until_time=until_time)
            print(await _show(args, view) if args.command else _summary(view))
            return 0

    return asyncio.run(go())
