"""Tracing, bearer-token authentication, and the one place errors become `metav1.Status`
answers."""

from __future__ import annotations

import logging

from aiohttp import web
from aiohttp.typedefs import Handler

from drasim.apistore import limits, spans
from drasim.apistore.http import authn, keys, responses
from drasim.common import errors, tracing

log = logging.getLogger(__name__)

# Reasons for refusals aiohttp makes itself (or handlers raise as aiohttp exceptions).
_REASONS = {
    405: "MethodNotAllowed",
    406: "NotAcceptable",
    415: "UnsupportedMediaType",
}


@web.middleware
async def trace(request: web.Request, handler: Handler) -> web.StreamResponse:
    """With tracing on, a SERVER span per request continuing its `traceparent` header,
    current while the handler runs (its writes store the span's traceparent)."""
    if not tracing.enabled():
        return await handler(request)
    span = spans.start_http_request(request)
    try:
        with tracing.use(span):
            response = await handler(request)
    except BaseException as exc:
        tracing.end(span, exc)
        raise
    spans.end_http_request(span, response.status)
    return response


@web.middleware
async def errors_to_status(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Every `ApiError`, aiohttp refusal or bug leaves as a `Status`; a refusal in a
    deprecated version says so too, as upstream's handlers warn before they run."""
    try:
        return await handler(request)
    except errors.ApiError as exc:
        response = responses.status_response(exc.to_status())
        target = request.get(keys.TARGET)
        if target is not None:
            responses.add_warnings(response, target, ())
        return response
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        if exc.status == 404:
            err = errors.NotFound("the server could not find the requested resource")
            return responses.status_response(err.to_status())
        if isinstance(exc, web.HTTPRequestEntityTooLarge):  # the body passed client_max_size
            err = limits.request_entity_too_large(request.client_max_size)
            return responses.status_response(err.to_status())
        reason = _REASONS.get(exc.status, "")
        status = errors.Status(message=exc.text or "", reason=reason, code=exc.status)
        return responses.status_response(status)
    except Exception as exc:
        log.exception("%s %s failed", request.method, request.path)
        return responses.status_response(
            errors.InternalError(f"{type(exc).__name__}: {exc}").to_status()
        )


@web.middleware
async def authenticate(request: web.Request, handler: Handler) -> web.StreamResponse:
    """401 unless `Authorization: Bearer <token>` names a user; 403 unless it may
    impersonate whom it asks to be, and unless that user may make the request (see
    `authn`). The user is then the request's actor."""
    policy = request.app[keys.CORE].rbac
    user = authn.authenticate(request, request.app[keys.TOKENS])
    user = authn.impersonate(request, user, policy)
    authn.authorize(request, user, policy)
    request[keys.USER] = user
    return await handler(request)
