"""A write's request as the write path reads it: who asks (`Context`), which resource, and
which row: the resource's registry entry, the object decoded from the body, its key and
namespace (upstream `k8s.io/apiserver/pkg/endpoints/request` and the handlers' decoding).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import msgspec

from drasim.apistore.store import Key
from drasim.common import codec, errors
from drasim.common.api import defaults, registry

__all__ = [
    "Context",
    "decode_builtins",
    "decode_object",
    "key_of",
    "request_namespace",
    "resource_info",
    "served_version",
]


@dataclass(slots=True)
class Context:
    """Who asked, under which trace, and when (the same for one request). `groups` are an
    HTTP user's or a NATS identity's that RBAC governs (`nats_authz`), whose RBAC writes
    are checked for escalation (`rbac_escalation`); None for the other actors on NATS
    (nodes, admins) and the apistore's own writes."""

    actor: str = ""
    traceparent: str = ""
    now: datetime = field(default_factory=lambda: datetime.now(UTC))
    groups: tuple[str, ...] | None = None
    # The user's extras (a service account token's node name), for the checks that read them.
    extra: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


def resource_info(resource: str) -> registry.ResourceInfo:
    try:
        return registry.by_plural(resource)
    except errors.NotFound:
        raise errors.NotFound(
            f"the server could not find the requested resource ({resource})"
        ) from None


def served_version(info: registry.ResourceInfo, version: str) -> registry.ServedVersion | None:
    """The version a write names, None for the stored one (or none named); 404 for one the
    kind is not served in."""
    if not version or version == info.version:
        return None
    served = info.served(version)
    if served is None:
        raise errors.NotFound(f"the server could not find the requested resource ({version})")
    return served


def decode_object(
    info: registry.ResourceInfo, data: bytes, name: str = "", version: str = ""
) -> Any:
    """Decode a request body into the kind's type, with the kind's defaults filled in (as
    upstream's decoder does): malformed JSON is 400, wrong types 422. A body in another
    served `version` is converted to the stored one first (`decode_builtins`)."""
    served = served_version(info, version)
    try:
        if served is not None:
            return decode_builtins(info, msgspec.json.decode(data), name, served)
        obj = codec.decode(data, info.type)
    except msgspec.ValidationError as exc:
        errs = codec.decode_errors(exc, msgspec.json.decode(data))
        raise errors.invalid(info.kind, name, errs, group=info.group) from exc
    except msgspec.DecodeError as exc:
        raise errors.BadRequest(f"the body of the request was in an unknown format: {exc}") from exc
    defaults.apply(obj)
    return obj


def decode_builtins(
    info: registry.ResourceInfo,
    body: Any,
    name: str = "",
    served: registry.ServedVersion | None = None,
) -> Any:
    """An object as builtins (a body, or a patched object) in the kind's type, defaulted.

    In another served version, the body is first read as that version's type, so that its
    type errors name its own fields, then converted to the stored version, whose defaults
    and validation apply (upstream converts to its internal version, shaped as v1, and
    validates that: error paths are v1's, `spec.devices.requests[0].exactly.count`)."""
    if served is not None:
        sent = body.get("apiVersion") if isinstance(body, dict) else None
        if sent and sent != served.api_version:
            raise errors.BadRequest(
                f"the API version in the data ({sent}) does not match the expected API "
                f"version ({served.api_version})"
            )
        _convert(info, body, name, served.type)
        body = served.to_storage(body)
    obj = _convert(info, body, name, info.type)
    defaults.apply(obj)
    return obj


def _convert(info: registry.ResourceInfo, body: Any, name: str, type_: type) -> Any:
    try:
        return codec.convert(body, type_)
    except msgspec.ValidationError as exc:
        errs = codec.decode_errors(exc, body)
        raise errors.invalid(info.kind, name, errs, group=info.group) from exc


def key_of(info: registry.ResourceInfo, namespace: str, name: str) -> Key:
    return (info.plural, namespace if info.namespaced else "", name)


def request_namespace(info: registry.ResourceInfo, req_ns: str, obj_ns: str | None) -> str:
    """The namespace a write goes to; body and request must agree, as in Kubernetes."""
    if not info.namespaced:
        return ""
    if req_ns and obj_ns and req_ns != obj_ns:
        raise errors.BadRequest(
            "the namespace of the provided object does not match the namespace sent on the request"
        )
    return obj_ns or req_ns or "default"
