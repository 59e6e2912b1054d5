"""What the writer learns of a queued write before its batch: the rows it reads.

The writer reads every row a batch's requests need in one statement, so it asks each
request for its keys first, from as little of the body as it can: a create's names
(`metadata.name`, `generateName`, namespace, ownerReferences) are read through a small view
instead of the whole object. A `generateName` create draws its candidate names here, and
they travel with the request in its `PreparedWrite`: the batch takes the first one free.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import msgspec

from drasim.apistore import objectmeta, strategies
from drasim.apistore.request import decode_object, key_of, request_namespace, resource_info
from drasim.apistore.store import Key
from drasim.common import errors
from drasim.common.api import meta_v1, registry
from drasim.common.bus import messages

__all__ = ["PreparedWrite", "owner_key", "prepare", "uid_of"]


@dataclass(slots=True)
class PreparedWrite:
    """A write's rows to read, and for a `generateName` create the names it may take
    (each of them among the keys)."""

    keys: list[Key]
    generated_names: list[str] = field(default_factory=list)
    # Rows of what a create may take from a shared pool (cluster IPs), among the keys.
    allocations: list[Key] = field(default_factory=list)
    namespace: str = ""  # a create's namespace ('' for a cluster-scoped kind)


class _OwnerNames(msgspec.Struct, rename="camel"):
    api_version: str = ""
    kind: str = ""
    name: str = ""
    uid: str = ""


class _MetaNames(msgspec.Struct, rename="camel"):
    name: str = ""
    generate_name: str = ""
    namespace: str = ""
    owner_references: list[_OwnerNames] | None = None


class _NamesView(msgspec.Struct):
    """The part of a create's body `prepare` reads, decoded instead of the whole object."""

    metadata: _MetaNames = msgspec.field(default_factory=_MetaNames)


_names_decoder = msgspec.json.Decoder(_NamesView)


class _Uid(msgspec.Struct):
    uid: str = ""


class _UidView(msgspec.Struct):
    metadata: _Uid = msgspec.field(default_factory=_Uid)


_uid_decoder = msgspec.json.Decoder(_UidView)


def uid_of(data: bytes | msgspec.Raw) -> str:
    """An object's uid, read without decoding the whole object."""
    return _uid_decoder.decode(data).metadata.uid


def _names_of(info: registry.ResourceInfo, data: bytes) -> _MetaNames:
    """namespace, name and generateName of a create's body.

    Anything the small view cannot read (malformed JSON, nulls, wrong types) goes through
    the full decode, which raises the request's 400 or 422, or reads it as `create` will.
    """
    try:
        return _names_decoder.decode(data).metadata
    except (msgspec.DecodeError, msgspec.ValidationError):
        meta = decode_object(info, data).metadata
        owners = [
            _OwnerNames(o.api_version, o.kind, o.name, o.uid) for o in meta.owner_references or ()
        ]
        return _MetaNames(meta.name, meta.generate_name, meta.namespace, owners)


def owner_key(owner: _OwnerNames | meta_v1.OwnerReference, namespace: str) -> Key | None:
    """Where an ownerReference's object is stored; None for a kind drasim does not serve
    (its existence cannot be checked, so it counts as existing)."""
    try:
        info = registry.by_api_version_kind(owner.api_version, owner.kind)
    except errors.NotFound:
        return None
    return key_of(info, namespace if info.namespaced else "", owner.name)


def prepare(req: messages.Request) -> PreparedWrite:
    """The rows a request reads; a `generateName` create's candidate names among them."""
    if isinstance(req, messages.Get | messages.List | messages.EventLog):
        return PreparedWrite([])
    info = resource_info(req.resource)
    if not isinstance(req, messages.Create):
        namespace = req.namespace or "default"
        keys = [key_of(info, namespace, req.name)]
        if info.namespaced and strategies.for_resource(info.plural).reads_namespace:
            keys.append(("namespaces", "", namespace))
        return PreparedWrite(keys)
    meta = _names_of(info, req.object)
    ns = request_namespace(info, req.namespace, meta.namespace)
    prepared = PreparedWrite([], namespace=ns)
    if not meta.name and meta.generate_name:
        # Several candidates, all read with the batch (see `objectmeta.GENERATE_NAME_TRIES`).
        prepared.generated_names = [
            objectmeta.generate_name(meta.generate_name)
            for _ in range(objectmeta.GENERATE_NAME_TRIES)
        ]
        prepared.keys = [key_of(info, ns, name) for name in prepared.generated_names]
    elif meta.name:
        prepared.keys = [key_of(info, ns, meta.name)]
    if ns:
        prepared.keys.append(("namespaces", "", ns))
    prepared.allocations = strategies.for_resource(info.plural).allocation_candidates(req.object)
    prepared.keys += prepared.allocations
    for owner in meta.owner_references or ():  # read for `Batch._all_owners_absent`
        key = owner_key(owner, ns)
        if key is not None:
            prepared.keys.append(key)
    return prepared
