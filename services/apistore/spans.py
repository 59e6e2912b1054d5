"""The apistore's server spans: one per request, NATS or HTTP, continuing the caller's trace.

The span of a write is the parent of everything its event causes: the event stores the
span's `traceparent` and the outbox publishes it, so a watcher's work continues from this
request. Spans carry the Kubernetes verb, kind, namespace and name, and an error status for
answers of 400 and up.

With tracing off there is no span; a write that came without a `traceparent` gets a fresh
one (`tracing.mint`), so every event still names a trace `drasim events --trace-id` finds.
"""

from __future__ import annotations

import msgspec
from aiohttp import web
from opentelemetry.trace import Span

from drasim.common import errors, tracing
from drasim.common.api import registry
from drasim.common.bus import messages

__all__ = ["end_http_request", "end_request", "start_http_request", "start_request"]


class _Meta(msgspec.Struct):
    name: str = ""
    namespace: str = ""


class _ObjectView(msgspec.Struct):
    metadata: _Meta = msgspec.field(default_factory=_Meta)


_object_view = msgspec.json.Decoder(_ObjectView)

_HTTP_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


def _kind(resource: str) -> str:
    try:
        return registry.by_plural(resource).kind
    except errors.ApiError:
        return ""


def _set_target(
    s: Span, verb: str, resource: str, namespace: str, name: str, subresource: str
) -> None:
    s.set_attribute("drasim.verb", verb)
    s.set_attribute("drasim.resource", resource)
    s.set_attribute("drasim.kind", _kind(resource))
    if namespace:
        s.set_attribute("drasim.namespace", namespace)
    if name:
        s.set_attribute("drasim.name", name)
    if subresource:
        s.set_attribute("drasim.subresource", subresource)


def _span_name(verb: str, resource: str, subresource: str) -> str:
    return f"{verb} {resource}/{subresource}" if subresource else f"{verb} {resource}"


# --- NATS --------------------------------------------------------------------------------


def start_request(
    req: messages.Request, traceparent: str, *, actor: str, write: bool
) -> tuple[Span | None, str]:
    """The SERVER span of one NATS request (None with tracing off) and the `traceparent`
    the request's event stores: the span's, else the caller's, else (a write) a new one."""
    if not tracing.enabled():
        return None, traceparent or (tracing.mint() if write else "")
    verb = type(req).__struct_config__.tag
    subresource = getattr(req, "subresource", "")
    s = tracing.start_span(
        _span_name(str(verb), req.resource, subresource),
        traceparent=traceparent,
        kind=tracing.SpanKind.SERVER,
    )
    if s.is_recording():
        _set_target(
            s, str(verb), req.resource, req.namespace, getattr(req, "name", ""), subresource
        )
        if actor:
            s.set_attribute("drasim.actor", actor)
    return s, tracing.traceparent_of(s) or traceparent


def end_request(
    s: Span | None,
    req: messages.Request,
    *,
    body: bytes | None = None,
    error: BaseException | None = None,
) -> None:
    """End a request's span: the answer's status code, the created object's name."""
    if s is None:
        return
    if s.is_recording():
        if error is not None:
            code = error.code if isinstance(error, errors.ApiError) else 500
            s.set_attribute("drasim.status_code", code)
            tracing.fail(s, f"{code}: {error}")
        else:
            s.set_attribute("drasim.status_code", 200)
            if isinstance(req, messages.Create) and body:
                try:
                    meta = _object_view.decode(body).metadata
                except msgspec.DecodeError:
                    pass
                else:
                    s.set_attribute("drasim.name", meta.name)
                    if meta.namespace:
                        s.set_attribute("drasim.namespace", meta.namespace)
    s.end()


# --- HTTP --------------------------------------------------------------------------------


def start_http_request(request: web.Request) -> Span:
    """The SERVER span of one HTTP request, continuing its `traceparent` header."""
    from drasim.apistore.http import options  # the HTTP package imports this module

    traceparent = request.headers.get(tracing.TRACEPARENT, "")
    try:
        target = options.target(request)
    except (errors.ApiError, KeyError):
        target = None
    if target is None:
        name = f"{request.method} {request.path}"
    else:
        verb = _HTTP_VERBS.get(request.method, "get")
        if request.method == "GET" and not target.name:
            verb = "watch" if request.query.get("watch") in ("1", "true", "True") else "list"
        elif request.method == "DELETE" and not target.name:
            verb = "deletecollection"
        name = _span_name(verb, target.info.plural, target.subresource)
    s = tracing.start_span(name, traceparent=traceparent, kind=tracing.SpanKind.SERVER)
    if s.is_recording():
        s.set_attribute("http.request.method", request.method)
        s.set_attribute("url.path", request.path)
        if target is not None:
            _set_target(
                s,
                name.split(" ", 1)[0],
                target.info.plural,
                target.namespace,
                target.name,
                target.subresource,
            )
        agent = request.headers.get("User-Agent")
        if agent:
            s.set_attribute("user_agent.original", agent)
    return s


def end_http_request(s: Span, status: int) -> None:
    if s.is_recording():
        s.set_attribute("http.response.status_code", status)
        if status >= 400:
            tracing.fail(s, f"HTTP {status}")
    s.end()
