"""Content negotiation: which representation a client accepts, and reading request bodies.

Kubernetes clients name alternative representations by media-type parameters, e.g. kubectl
asks for `application/json;as=Table;v=v1;g=meta.k8s.io` first and plain JSON as fallback.
Answers are JSON (or a Table, or aggregated discovery); protobuf is never offered, but
read in the request bodies kubectl sends only that way (see `protobuf`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec
import yaml
from aiohttp import web

from drasim.apistore.http import protobuf
from drasim.common import codec, errors
from drasim.common.bus import messages

JSON = "application/json"
APPLY_PATCH = "application/apply-patch+yaml"
PATCH_TYPES: dict[str, messages.PatchType] = {
    "application/merge-patch+json": "merge",
    "application/json-patch+json": "json",
    "application/strategic-merge-patch+json": "strategic",
    APPLY_PATCH: "apply",
}
_YAML_TYPES = frozenset({"application/yaml", APPLY_PATCH})
_BODY_TYPES = frozenset({JSON, protobuf.MEDIA_TYPE, *_YAML_TYPES, *PATCH_TYPES})


@dataclass(frozen=True, slots=True)
class Representation:
    """A representation named by `as`, `g` and `v` media-type parameters."""

    as_: str
    group: str
    version: str

    @property
    def content_type(self) -> str:
        return f"{JSON};g={self.group};v={self.version};as={self.as_}"


TABLE = Representation("Table", "meta.k8s.io", "v1")
AGGREGATED_DISCOVERY = Representation("APIGroupDiscoveryList", "apidiscovery.k8s.io", "v2")


def wants(request: web.Request, representation: Representation) -> bool:
    """Whether the first entry of Accept this server can answer asks for `representation`."""
    for entry in request.headers.get("Accept", "").split(","):
        mime, *raw_params = (part.strip() for part in entry.split(";"))
        if mime not in (JSON, "*/*", "application/*"):
            continue  # protobuf, YAML... are not offered
        params = dict(p.partition("=")[::2] for p in raw_params)
        if "as" not in params:
            return False
        if (params["as"], params.get("g"), params.get("v")) == (
            representation.as_,
            representation.group,
            representation.version,
        ):
            return True
    return False


# What upstream offers for API objects, in its order; drasim answers each of them in JSON
# (client-go decodes by the answer's Content-Type, so a client asking YAML or protobuf first
# still reads it).
OFFERED = (JSON, "application/yaml", protobuf.MEDIA_TYPE)
_ACCEPTABLE = frozenset({*OFFERED, "*/*", "application/*"})


def check_acceptable(request: web.Request) -> None:
    """406 Not Acceptable unless the Accept header (if any) allows one of `OFFERED`, as
    upstream's `NegotiateOutputMediaType` refuses before a handler does any work."""
    header = request.headers.get("Accept", "")
    if not header.strip():
        return
    for entry in header.split(","):
        mime, *raw_params = (part.strip() for part in entry.split(";"))
        params = dict(p.partition("=")[::2] for p in raw_params)
        if mime.lower() in _ACCEPTABLE and not _refused(params.get("q")):
            return
    raise web.HTTPNotAcceptable(
        text=f"only the following media types are accepted: {', '.join(OFFERED)}"
    )


def _refused(quality: str | None) -> bool:
    """`q=0` marks a media type as not acceptable (RFC 9110 §12.4.2)."""
    try:
        return quality is not None and float(quality) == 0
    except ValueError:
        return False


def content_type(request: web.Request) -> str:
    """The body's media type; JSON when the client names none, as Kubernetes assumes."""
    return request.content_type if "Content-Type" in request.headers else JSON


async def read_body(request: web.Request) -> Any:
    """The body as builtins: JSON, or YAML for `application/yaml` and apply patches."""
    media_type = content_type(request)
    if media_type not in _BODY_TYPES:
        raise web.HTTPUnsupportedMediaType(
            text=f"the body of the request was in an unknown format: {media_type}"
        )
    data = await request.read()
    if not data.strip():
        raise errors.BadRequest("the request has no body")
    if media_type == protobuf.MEDIA_TYPE:
        return protobuf.decode_body(data)
    try:
        return codec.load_json(data)
    except (msgspec.DecodeError, codec.DecodeLimitError) as exc:
        # YAML bodies go on to the YAML decoder, which has the same limits.
        if media_type not in _YAML_TYPES:
            raise errors.BadRequest(f"the body of the request was not valid JSON: {exc}") from exc
    try:
        documents = codec.load_yaml_documents(data.decode())
    except (UnicodeDecodeError, yaml.YAMLError, codec.DecodeLimitError) as exc:
        raise errors.BadRequest(f"the body of the request was not valid YAML: {exc}") from exc
    if len(documents) != 1:
        raise errors.BadRequest("the body of the request must hold exactly one YAML document")
    return documents[0]
