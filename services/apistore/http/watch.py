"""`?watch=1`: Kubernetes' chunked stream of JSON watch events, one per line.

The events come from the apistore's event stream (`watch.watch_raw`), whose sequence is
the resourceVersion, so a watch from resourceVersion R sees every later change once, in
order. Without R (or with "0") the watch first sends every current object as ADDED, as
Kubernetes does. A watch-list (`sendInitialEvents` with `resourceVersionMatch=NotOlderThan`,
KEP-3157, what client-go's reflectors send) says itself whether the current objects come
first, and with bookmarks allowed ends them with a BOOKMARK annotated
`k8s.io/initial-events-end`. A selector filters the stream; an object that stops matching
leaves with a DELETED event, as in Kubernetes. History the stream no longer holds ends the
watch with an ERROR event carrying a 410 Expired Status, on which clients relist.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import TypeAlias

import msgspec
from aiohttp import web

from drasim.apistore import list_options, strategies
from drasim.apistore.http import keys, negotiation, options, responses, tables
from drasim.apistore.prepare import uid_of
from drasim.common import errors, selection, watch
from drasim.common.api import registry
from drasim.common.bus import messages

log = logging.getLogger(__name__)

# The annotations of the BOOKMARK that ends a watch-list's initial events (upstream's
# `metav1.InitialEventsAnnotationKey`, `InitialEventsListBlueprintAnnotationKey`).
INITIAL_EVENTS_END = "k8s.io/initial-events-end"
INITIAL_EVENTS_LIST_BLUEPRINT = "k8s.io/initial-events-list-blueprint"

# Events buffered between the stream and a slow client before the stream waits.
_BUFFER = 1024

# What the stream hands the watch: an event with its resourceVersion, or how it ended.
_Item: TypeAlias = tuple[int, watch.WatchEvent] | errors.ApiError | None


class _Encoder:
    """Watch events in the representation the client accepts (JSON objects or Tables),
    in the version the watch's path names."""

    def __init__(self, request: web.Request, target: options.Target) -> None:
        self.info = target.info
        self.target = target
        self.table = negotiation.wants(request, negotiation.TABLE)
        self.include_object = options.include_object(request.query)
        self._headers = True  # a Table stream defines its columns in the first event only

    def event(self, type_: str, data: bytes) -> bytes:
        """An event of a stored object, in the version the watch asked for."""
        served = self.target.served
        if self.table:
            data = tables.table(
                self.info,
                [data],
                include_object=self.include_object,
                headers=self._headers,
                served=served,
            )
            self._headers = False
        elif served is not None:
            data = served.from_storage(data)
        return messages.encoder.encode(messages.WatchEvent(type=type_, object=msgspec.Raw(data)))

    def bookmark(self, resource_version: int, *, initial_events_end: bool = False) -> bytes:
        """A BOOKMARK; at the end of a watch-list's initial events it carries upstream's
        `k8s.io/initial-events-end` annotation and, base64, the empty list a client builds
        its list from (`k8s.io/initial-events-list-blueprint`): client-go's watch-list
        waits for exactly this event."""
        metadata: dict[str, object] = {"resourceVersion": str(resource_version)}
        if initial_events_end:
            blueprint = {
                "kind": f"{self.info.kind}List",
                "apiVersion": self.target.api_version,
                "metadata": {},
                "items": [],
            }
            metadata["annotations"] = {
                INITIAL_EVENTS_END: "true",
                INITIAL_EVENTS_LIST_BLUEPRINT: base64.b64encode(
                    msgspec.json.encode(blueprint)
                ).decode(),
            }
        kind, api_version = self.info.kind, self.target.api_version
        marker = {"kind": kind, "apiVersion": api_version, "metadata": metadata}
        return msgspec.json.encode({"type": "BOOKMARK", "object": marker})

    @staticmethod
    def error(err: errors.ApiError) -> bytes:
        status = msgspec.Raw(responses.status_body(err.to_status()))
        return msgspec.json.encode({"type": "ERROR", "object": status})


async def serve(
    request: web.Request, target: options.Target, opts: options.ListOptions
) -> web.StreamResponse:
    """Stream events until `timeoutSeconds`, the client leaves, or the server stops."""
    info = target.info
    namespace_term = f"metadata.namespace={target.namespace}" if target.namespace else ""
    fields = ",".join(term for term in (opts.field_selector, namespace_term) if term)
    chosen = selection.Selection(info.plural, opts.label_selector, fields)
    list_options.check_watch_options(
        opts.resource_version_match, opts.send_initial_events, opts.continue_token
    )
    start = _resource_version(opts.resource_version, info)
    encoder = _Encoder(request, target)
    # Without sendInitialEvents, a watch from "" or "0" begins with the objects as ADDED
    # events (the legacy behaviour); with it, the request says (a watch-list).
    send_initial = start is None if opts.send_initial_events is None else opts.send_initial_events
    initial: list[msgspec.Raw] = []
    if send_initial or start is None:
        listing = await _list(request, target, opts, send_initial)
        start = listing.resource_version
        if send_initial:
            initial = listing.items

    response = web.StreamResponse(headers={"Content-Type": negotiation.JSON})
    responses.add_warnings(response, target, ())
    response.enable_chunked_encoding()
    await response.prepare(request)
    task = asyncio.current_task()
    assert task is not None
    watches = request.app[keys.WATCHES]
    watches.add(task)
    try:
        async with asyncio.timeout(opts.timeout_seconds):
            await _stream(request, response, encoder, chosen, initial, start, opts)
    except TimeoutError:
        pass  # timeoutSeconds is up: the watch ends normally and the client re-watches
    finally:
        watches.discard(task)
    with contextlib.suppress(ConnectionError):
        await response.write_eof()
    return response


async def _stream(
    request: web.Request,
    response: web.StreamResponse,
    encoder: _Encoder,
    chosen: selection.Selection,
    initial: list[msgspec.Raw],
    start: int,
    opts: options.ListOptions,
) -> None:
    info = encoder.info
    # Objects this watch has shown as matching; the key to DELETED events for objects that
    # stop matching a selector (complete only when the watch began with a list).
    shown: set[str] = set()
    for existing in initial:
        shown.add(uid_of(existing))
        await response.write(encoder.event("ADDED", bytes(existing)) + b"\n")
    if opts.send_initial_events and opts.allow_watch_bookmarks:
        await response.write(encoder.bookmark(start, initial_events_end=True) + b"\n")
    # Kinds whose event subjects carry a node's name: a node's watch reads only its events.
    node_field = strategies.for_resource(info.plural).node_field
    node = chosen.equals(node_field) if node_field else None
    queue: asyncio.Queue[_Item] = asyncio.Queue(_BUFFER)
    events = watch.watch_raw(request.app[keys.BUS], info.plural, resource_version=start, node=node)
    pump = asyncio.create_task(_pump(events, queue), name=f"http-watch-{info.plural}")
    interval = request.app[keys.BOOKMARK_INTERVAL] if opts.allow_watch_bookmarks else None
    last = start
    try:
        while True:
            try:
                item = await asyncio.wait_for(queue.get(), timeout=interval)
            except TimeoutError:
                await response.write(encoder.bookmark(last) + b"\n")
                continue
            if item is None:
                return  # the stream ended (the server is stopping): the client re-watches
            if isinstance(item, errors.ApiError):
                await response.write(encoder.error(item) + b"\n")
                return
            last, event = item
            type_ = _visible_as(event, chosen, shown)
            if type_ is not None:
                await response.write(encoder.event(type_, bytes(event.object)) + b"\n")
    finally:
        pump.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await pump


async def _list(
    request: web.Request,
    target: options.Target,
    opts: options.ListOptions,
    items: bool,
) -> messages.ListResult:
    """The state a watch starts from: its objects (`items`) or, for a watch from now on,
    only the resourceVersion (a list of one). A watch-list's resourceVersion is "not older
    than" (one past the log's end waits, then 504, as a list's)."""
    # ("" is a consistent read of the most recent state, and a list refuses a match
    # without a resourceVersion.)
    watch_list = opts.send_initial_events is not None and opts.resource_version != ""
    answer = await request.app[keys.CORE].handle(
        messages.List(
            resource=target.info.plural,
            namespace=target.namespace,
            label_selector=opts.label_selector,
            field_selector=opts.field_selector,
            limit=0 if items else 1,
            resource_version=opts.resource_version if watch_list else "",
            resource_version_match=list_options.NOT_OLDER_THAN if watch_list else "",
        ),
        options.context(request),
    )
    return messages.list_result_decoder.decode(answer)


async def _pump(
    events: AsyncIterator[tuple[int, watch.WatchEvent]], queue: asyncio.Queue[_Item]
) -> None:
    """Move events from the stream into the queue, then what ended it: an error (410
    Expired; anything unforeseen as a 500, so the client reads an ERROR event and re-watches
    instead of waiting on a stream that died) or None."""
    try:
        async for item in events:
            await queue.put(item)
    except errors.ApiError as exc:
        await queue.put(exc)
    except Exception as exc:
        log.exception("watch stream failed")
        await queue.put(errors.InternalError(f"the watch stream failed: {exc}"))
    else:
        await queue.put(None)


def _visible_as(
    event: watch.WatchEvent, chosen: selection.Selection, shown: set[str]
) -> str | None:
    """The event type this watch sends for a stream event, or None to skip it."""
    data = bytes(event.object)
    if chosen.everything():
        return event.type
    uid = uid_of(data)
    if chosen.matches(data):
        if event.type == "DELETED":
            shown.discard(uid)
        else:
            shown.add(uid)
        return event.type
    if uid in shown:
        shown.discard(uid)
        return "DELETED"
    return None


def _resource_version(value: str, info: registry.ResourceInfo) -> int | None:
    """The resourceVersion to watch from; None (empty or "0") means "list first". Parsed as
    a list's (`list_options.parse_resource_version`): a bad one is refused before the stream
    starts; one past every possible event watches from the last possible one, so nothing
    comes, as a watch from a future revision waits upstream."""
    return list_options.parse_resource_version(value, info)
