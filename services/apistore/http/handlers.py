"""Thin handlers: decode the request, call the core, encode the answer.

One entry point per HTTP method picks the Kubernetes verb from the path (collection or
object, subresource) and the query (`watch`); each verb is one small function. Errors are
raised as `ApiError`s and become `Status` answers in the middleware.
"""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec
from aiohttp import web

from drasim.apistore import eviction, patches
from drasim.apistore.core import ApiCore
from drasim.apistore.http import (
    discovery,
    fields,
    keys,
    logs,
    negotiation,
    options,
    responses,
    scale,
    watch,
)
from drasim.common import codec, errors
from drasim.common.api import core_v1, policy_v1
from drasim.common.bus import messages


def _core(request: web.Request) -> ApiCore:
    return request.app[keys.CORE]


async def _call(request: web.Request, req: messages.Request) -> bytes:
    return await _core(request).handle(req, options.context(request))


def _not_allowed(target: options.Target, method: str) -> errors.MethodNotAllowed:
    what = f"{target.info.plural}/{target.subresource}" if target.subresource else "collection"
    return errors.MethodNotAllowed(f"{method} is not supported on {what}")


# -- entry points -------------------------------------------------------------------------


async def get(request: web.Request) -> web.StreamResponse:
    target = options.target(request)
    negotiation.check_acceptable(request)
    if not target.name:
        list_options = options.ListOptions.from_query(request.query)
        if options.flag(request.query, "watch"):
            return await watch.serve(request, target, list_options)
        return await list_objects(request, target, list_options)
    if target.subresource in ("binding", "eviction"):
        raise _not_allowed(target, "GET")
    if target.subresource == "scale":
        return await get_scale(request, target)
    if target.subresource == "log":
        return await pod_log(request, target)
    return await get_object(request, target)


async def post(request: web.Request) -> web.Response:
    target = options.target(request)
    negotiation.check_acceptable(request)
    options.validate_write_options(request.query, "CreateOptions")
    if not target.name:
        return await create(request, target)
    if target.subresource == "binding":
        return await bind(request, target)
    if target.subresource == "eviction":
        return await evict(request, target)
    raise _not_allowed(target, "POST")


async def put(request: web.Request) -> web.Response:
    target = options.target(request)
    if not target.name or target.subresource in ("binding", "log", "eviction"):
        raise _not_allowed(target, "PUT")
    negotiation.check_acceptable(request)
    options.validate_write_options(request.query, "UpdateOptions")
    body = await negotiation.read_body(request)
    if target.subresource == "scale":
        return await update_scale(request, target, body)
    return await update(request, target, body)


async def patch(request: web.Request) -> web.Response:
    target = options.target(request)
    if not target.name or target.subresource in ("binding", "log", "eviction"):
        raise _not_allowed(target, "PATCH")
    media_type = negotiation.content_type(request)
    patch_type = negotiation.PATCH_TYPES.get(media_type)
    if patch_type is None:
        raise web.HTTPUnsupportedMediaType(
            text=f"the body of the request was in an unknown format: {media_type}; "
            f"accepted: {', '.join(negotiation.PATCH_TYPES)}"
        )
    negotiation.check_acceptable(request)
    options.validate_write_options(request.query, "PatchOptions", apply=patch_type == "apply")
    body = await negotiation.read_body(request)
    if target.subresource == "scale":
        return await patch_scale(request, target, patch_type, body)
    return await patch_object(request, target, patch_type, body)


async def delete(request: web.Request) -> web.Response:
    target = options.target(request)
    negotiation.check_acceptable(request)
    delete_options = options.delete_options(
        await request.read(), request.query, negotiation.content_type(request)
    )
    if not target.name:
        if "deletecollection" not in discovery.verbs(target.info):
            raise errors.MethodNotAllowed(
                "the server does not allow this method on the requested resource"
            )
        return await delete_collection(request, target, delete_options)
    if target.subresource:
        raise _not_allowed(target, "DELETE")
    return await delete_object(request, target, delete_options)


# -- verbs ------------------------------------------------------------------------------


async def get_object(request: web.Request, target: options.Target) -> web.Response:
    data = await _call(
        request,
        messages.Get(resource=target.info.plural, namespace=target.namespace, name=target.name),
    )
    return responses.object_response(request, target, data)


async def list_objects(
    request: web.Request, target: options.Target, opts: options.ListOptions
) -> web.Response:
    data = await _call(
        request,
        messages.List(
            resource=target.info.plural,
            namespace=target.namespace,
            label_selector=opts.label_selector,
            field_selector=opts.field_selector,
            limit=opts.limit,
            continue_token=opts.continue_token,
            resource_version=opts.resource_version,
            resource_version_match=opts.resource_version_match,
            send_initial_events=opts.send_initial_events,
        ),
    )
    return responses.list_response(request, target, messages.list_result_decoder.decode(data))


_GO_JSON_TYPES = {list: "array", str: "string", int: "number", float: "number", bool: "bool"}


def _check_object(target: options.Target, body: Any) -> None:
    """A create or update body must be a JSON object; else 400 with the error upstream's
    decoder gives when it looks for the body's kind (drasim's decode errors are 422s with
    field paths, and a body that is not an object has no field to name)."""
    if isinstance(body, dict):
        return
    kind = target.info.kind
    if body is None:
        raise errors.BadRequest("Object 'Kind' is missing in 'null'")
    into = (
        'struct { APIVersion string "json:\\"apiVersion,omitempty\\""; '
        'Kind string "json:\\"kind,omitempty\\"" }'
    )
    raise errors.BadRequest(
        f'{kind} in version "{target.version}" cannot be handled as a {kind}: '
        f"couldn't get version/kind; json parse error: json: cannot unmarshal "
        f"{_GO_JSON_TYPES.get(type(body), 'value')} into Go value of type {into}"
    )


def _checked(request: web.Request, target: options.Target, body: Any) -> list[str]:
    """Check an object body's type meta, and its unknown fields as the request's
    `fieldValidation` says: the warnings to answer with."""
    _check_object(target, body)
    return fields.check(target, body, options.field_validation(request.query))


async def create(request: web.Request, target: options.Target) -> web.Response:
    body = await negotiation.read_body(request)
    warnings = _checked(request, target, body)
    data = await _call(
        request,
        messages.Create(
            resource=target.info.plural,
            namespace=target.namespace,
            object=msgspec.Raw(msgspec.json.encode(body)),
            dry_run=options.dry_run(request.query.getall("dryRun", [])),
            version=target.version,
        ),
    )
    return responses.object_response(request, target, data, status=201, warnings=warnings)


async def update(request: web.Request, target: options.Target, body: Any) -> web.Response:
    warnings = _checked(request, target, body)
    data = await _call(
        request,
        messages.Update(
            resource=target.info.plural,
            namespace=target.namespace,
            name=target.name,
            object=msgspec.Raw(msgspec.json.encode(body)),
            subresource=target.subresource,
            dry_run=options.dry_run(request.query.getall("dryRun", [])),
            version=target.version,
        ),
    )
    return responses.object_response(request, target, data, warnings=warnings)


async def patch_object(
    request: web.Request, target: options.Target, patch_type: messages.PatchType, body: Any
) -> web.Response:
    warnings: list[str] = []
    if patch_type != "json":  # a JSON patch's values sit at paths, not in an object's shape
        mode = options.field_validation(request.query)
        warnings = fields.check(target, body, mode, patch=patch_type != "apply")
    dry_run = options.dry_run(request.query.getall("dryRun", []))
    encoded = msgspec.Raw(msgspec.json.encode(body))
    try:
        data = await _call(
            request,
            messages.Patch(
                resource=target.info.plural,
                namespace=target.namespace,
                name=target.name,
                patch=encoded,
                patch_type=patch_type,
                subresource=target.subresource,
                dry_run=dry_run,
                field_manager=request.query.get("fieldManager", ""),
                force=options.flag(request.query, "force"),
                version=target.version,
            ),
        )
    except errors.NotFound:
        if patch_type != "apply" or target.subresource:
            raise
        # Server-side apply creates the object its configuration describes.
        data = await _call(
            request,
            messages.Create(
                resource=target.info.plural,
                namespace=target.namespace,
                object=encoded,
                dry_run=dry_run,
                version=target.version,
            ),
        )
        return responses.object_response(request, target, data, status=201, warnings=warnings)
    return responses.object_response(request, target, data, warnings=warnings)


class _DeletionMeta(msgspec.Struct, rename="camel"):
    deletion_timestamp: str | None = None


class _Terminating(msgspec.Struct):
    """What a delete answer tells about the object: gone, or still terminating."""

    metadata: _DeletionMeta = msgspec.field(default_factory=_DeletionMeta)


_terminating_decoder = msgspec.json.Decoder(_Terminating)


async def delete_object(
    request: web.Request, target: options.Target, opts: options.DeleteOptions
) -> web.Response:
    data = await _call(request, _delete_request(target, target.namespace, target.name, opts))
    # 202 Accepted while the object lingers (graceful deletion, finalizers), as Kubernetes.
    pending = _terminating_decoder.decode(data).metadata.deletion_timestamp is not None
    return responses.object_response(request, target, data, status=202 if pending else 200)


async def delete_collection(
    request: web.Request, target: options.Target, opts: options.DeleteOptions
) -> web.Response:
    """Delete every object the selectors match; the answer lists them as deleted."""
    list_options = options.ListOptions.from_query(request.query)
    listing = messages.list_result_decoder.decode(
        await _call(
            request,
            messages.List(
                resource=target.info.plural,
                namespace=target.namespace,
                label_selector=list_options.label_selector,
                field_selector=list_options.field_selector,
            ),
        )
    )
    names = [codec.decode(item, target.info.type).metadata for item in listing.items]
    results = await asyncio.gather(
        *(_call(request, _delete_request(target, m.namespace, m.name, opts)) for m in names),
        return_exceptions=True,
    )
    deleted = []
    for result in results:
        if isinstance(result, errors.NotFound):
            continue  # gone meanwhile: deleted all the same
        if isinstance(result, BaseException):
            raise result
        deleted.append(msgspec.Raw(result))
    listing = msgspec.structs.replace(listing, items=deleted, continue_token="", remaining=0)
    return responses.list_response(request, target, listing)


def _delete_request(
    target: options.Target, namespace: str, name: str, opts: options.DeleteOptions
) -> messages.Delete:
    preconditions = opts.preconditions or options.Preconditions()
    return messages.Delete(
        resource=target.info.plural,
        namespace=namespace,
        name=name,
        grace_period_seconds=opts.grace_period_seconds,
        propagation_policy=opts.policy(),
        precondition_uid=preconditions.uid or "",
        precondition_resource_version=preconditions.resource_version or "",
        dry_run=options.dry_run(opts.dry_run),
    )


# -- subresources -----------------------------------------------------------------------


async def pod_log(request: web.Request, target: options.Target) -> web.StreamResponse:
    """pods/log, as text (see `logs`); with `follow`, streamed until the pod ends (at once
    for a container that has exited)."""
    data = await _call(
        request,
        messages.Get(resource="pods", namespace=target.namespace, name=target.name),
    )
    pod = codec.decode(data, core_v1.Pod)
    log = logs.read_log(
        pod,
        request.query.get("container", ""),
        options.integer(request.query, "tailLines"),
        previous=options.flag(request.query, "previous"),
    )
    if options.flag(request.query, "follow") and not log.ended:
        return await logs.follow(request, pod, log.text)
    return web.Response(text=log.text, content_type="text/plain")


async def bind(request: web.Request, target: options.Target) -> web.Response:
    """pods/binding: what a scheduler posts to put a pod on a node."""
    body = await negotiation.read_body(request)
    try:
        binding = codec.convert(body, core_v1.Binding)
    except msgspec.ValidationError as exc:
        raise errors.invalid("Binding", target.name, codec.decode_errors(exc, body)) from exc
    await _call(
        request,
        messages.Bind(
            resource="pods",
            namespace=target.namespace,
            name=target.name,
            node_name=binding.target.name,
            uid=binding.metadata.uid,
        ),
    )
    return responses.success(201)


async def evict(request: web.Request, target: options.Target) -> web.Response:
    """pods/eviction: what `kubectl drain` posts to delete a pod within its budget."""
    body = await negotiation.read_body(request)
    try:
        evicting = codec.convert(body, policy_v1.Eviction)
    except msgspec.ValidationError as exc:
        raise errors.invalid(
            "Eviction", target.name, codec.decode_errors(exc, body), group="policy"
        ) from exc
    await eviction.evict(
        _core(request),
        namespace=target.namespace,
        name=target.name,
        eviction=evicting,
        dry_run=request.query.getall("dryRun", []),
        ctx=options.context(request),
    )
    return responses.success(201)


async def _scale_of(request: web.Request, target: options.Target) -> dict[str, Any]:
    data = await _call(
        request,
        messages.Get(resource=target.info.plural, namespace=target.namespace, name=target.name),
    )
    return scale.to_scale(codec.decode(data, target.info.type))


async def get_scale(request: web.Request, target: options.Target) -> web.Response:
    return web.json_response(await _scale_of(request, target))


async def update_scale(request: web.Request, target: options.Target, body: Any) -> web.Response:
    """Write the Scale's replicas into the parent's spec (a merge patch of the parent)."""
    data = await _call(
        request,
        messages.Patch(
            resource=target.info.plural,
            namespace=target.namespace,
            name=target.name,
            patch=msgspec.Raw(msgspec.json.encode(scale.replicas_patch(target.name, body))),
            dry_run=options.dry_run(request.query.getall("dryRun", [])),
        ),
    )
    return web.json_response(scale.to_scale(codec.decode(data, target.info.type)))


async def patch_scale(
    request: web.Request, target: options.Target, patch_type: messages.PatchType, body: Any
) -> web.Response:
    """`kubectl scale`: the patch applies to the current Scale, whose replicas then go to
    the parent. Only a resourceVersion the patch itself sets is a precondition."""
    current = await _scale_of(request, target)
    del current["metadata"]["resourceVersion"]
    return await update_scale(request, target, patches.apply(patch_type, current, body))
