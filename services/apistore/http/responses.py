"""Answers in the representation the client accepts: the object (or list) as JSON, or a
Table; `Warning` headers for what was accepted but dropped."""

from __future__ import annotations

import json
from collections.abc import Iterable

import msgspec
from aiohttp import web

from drasim.apistore.http import negotiation, options, tables
from drasim.common import codec, errors
from drasim.common.api import registry
from drasim.common.bus import messages


class ObjectList(msgspec.Struct, kw_only=True, rename="camel"):
    """`<Kind>List`: the items exactly as stored, never re-encoded."""

    kind: str
    api_version: str
    metadata: tables.ListMeta
    items: list[msgspec.Raw]


def object_response(
    request: web.Request,
    info: registry.ResourceInfo,
    data: bytes,
    *,
    status: int = 200,
    warnings: Iterable[str] = (),
) -> web.Response:
    """One object, or a one-row Table when asked for (`kubectl get pod x`)."""
    if negotiation.wants(request, negotiation.TABLE):
        data = tables.table(info, [data], include_object=options.include_object(request.query))
    response = web.Response(body=data, status=status, content_type=negotiation.JSON)
    for text in warnings:
        # Kubernetes' warning format: code 299, no agent, the text as a quoted string.
        response.headers.add("Warning", f"299 - {json.dumps(text)}")
    return response


def list_response(
    request: web.Request, info: registry.ResourceInfo, result: messages.ListResult
) -> web.Response:
    meta = tables.ListMeta(
        resource_version=str(result.resource_version),
        continue_=result.continue_token,
        remaining_item_count=result.remaining or None,
    )
    if negotiation.wants(request, negotiation.TABLE):
        body = tables.table(
            info,
            [bytes(item) for item in result.items],
            metadata=meta,
            include_object=options.include_object(request.query),
        )
    else:
        body = codec.encode(
            ObjectList(
                kind=f"{info.kind}List",
                api_version=info.api_version,
                metadata=meta,
                items=result.items,
            )
        )
    return web.Response(body=body, content_type=negotiation.JSON)


def status_body(status: errors.Status) -> bytes:
    """A `metav1.Status` as clients decode it: `errors.Status` leaves its defaults off the
    wire, but client-go reads a body as a Status only when `kind` says so, and upstream
    always writes the code (500 too)."""
    return msgspec.json.encode(
        {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": status.status,
            **msgspec.to_builtins(status),
            "code": status.code,
        }
    )


def status_response(status: errors.Status) -> web.Response:
    """The Status with the HTTP code it names (errors, and successes with no object)."""
    return web.Response(body=status_body(status), status=status.code, content_type=negotiation.JSON)


def success(code: int) -> web.Response:
    """A `Status` of Success, what Kubernetes answers where no object comes back."""
    return status_response(errors.Status(status="Success", code=code))
