"""Answers in the representation the client accepts: the object (or list) as JSON, or a
Table, in the version the request's path names; `Warning` headers for what was accepted but
dropped, and for a deprecated version."""

from __future__ import annotations

import json
from collections.abc import Iterable

import msgspec
from aiohttp import web

from drasim.apistore.http import negotiation, options, tables
from drasim.common import codec, errors
from drasim.common.bus import messages


class ObjectList(msgspec.Struct, kw_only=True, rename="camel"):
    """`<Kind>List`: the items exactly as stored, never re-encoded."""

    kind: str
    api_version: str
    metadata: tables.ListMeta
    items: list[msgspec.Raw]


def object_response(
    request: web.Request,
    target: options.Target,
    data: bytes,
    *,
    status: int = 200,
    warnings: Iterable[str] = (),
) -> web.Response:
    """One object, or a one-row Table when asked for (`kubectl get pod x`)."""
    if negotiation.wants(request, negotiation.TABLE):
        data = tables.table(
            target.info,
            [data],
            include_object=options.include_object(request.query),
            served=target.served,
        )
    elif target.served is not None:
        data = target.served.from_storage(data)
    response = web.Response(body=data, status=status, content_type=negotiation.JSON)
    add_warnings(response, target, warnings)
    return response


def add_warnings(
    response: web.StreamResponse, target: options.Target, texts: Iterable[str]
) -> None:
    """`Warning` headers: the deprecation of the version asked for (first, as upstream's
    handlers add it before the request runs), then `texts`."""
    if target.served is not None and (deprecated := target.served.deprecation_warning()):
        texts = [deprecated, *texts]
    for text in texts:
        # Kubernetes' warning format: code 299, no agent, the text as a quoted string.
        response.headers.add("Warning", f"299 - {json.dumps(text)}")


def list_response(
    request: web.Request, target: options.Target, result: messages.ListResult
) -> web.Response:
    info, served = target.info, target.served
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
            served=served,
        )
    else:
        items = result.items
        if served is not None:
            items = [msgspec.Raw(served.from_storage(bytes(item))) for item in items]
        body = codec.encode(
            ObjectList(
                kind=f"{info.kind}List",
                api_version=target.api_version,
                metadata=meta,
                items=items,
            )
        )
    response = web.Response(body=body, content_type=negotiation.JSON)
    add_warnings(response, target, ())
    return response


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
    """The Status with the HTTP code it names (errors, and successes with no object), and
    its retry-after hint as the `Retry-After` header, as upstream's `ErrorNegotiated`."""
    response = web.Response(
        body=status_body(status), status=status.code, content_type=negotiation.JSON
    )
    if status.details is not None and status.details.retryAfterSeconds > 0:
        response.headers["Retry-After"] = str(status.details.retryAfterSeconds)
    return response


def success(code: int) -> web.Response:
    """A `Status` of Success, what Kubernetes answers where no object comes back."""
    return status_response(errors.Status(status="Success", code=code))
