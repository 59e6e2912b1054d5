"""The write path's rules, as pure functions over one group-commit batch.

A `Batch` holds the rows the writer loaded for the batch plus what earlier requests in the
same batch wrote; each request either raises an `ApiError` and changes nothing, or appends
exactly one event. Garbage collection by ownerReferences runs at the end of the batch
(`Batch.collect_garbage`), so deleting a pod and the deletion of what it owns commit together.
Nothing here does I/O, so the rules are tested without servers.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec

from drasim.apistore import (
    admission,
    faults,
    limits,
    node_restriction,
    patches,
    rbac,
    rbac_escalation,
    strategy,
)
from drasim.apistore.store import EventRow, Key, ObjectRow
from drasim.common import codec, errors
from drasim.common.api import meta_v1, registry, scheduling_v1, validation
from drasim.common.bus import messages

# The second last formatted (the instant and its UTC offset) and its text.
_formatted: tuple[tuple[int, Any], str] = ((0, None), "")


def now_rfc3339(now: datetime | None = None) -> str:
    """Kubernetes timestamps: RFC 3339, UTC, whole seconds (formatted once a second: a
    batch stamps many objects within the same one)."""
    global _formatted
    now = now or datetime.now(UTC)
    second = (int(now.timestamp()), now.utcoffset())
    if _formatted[0] != second:
        _formatted = (second, now.strftime("%Y-%m-%dT%H:%M:%SZ"))
    return _formatted[1]


# Random hex digits for `new_uid`, drawn from the OS 4 KiB at a time (not 16 bytes a uid).
_random_hex = ""
_random_at = 0


def _forget_random_hex() -> None:
    global _random_hex, _random_at
    _random_hex, _random_at = "", 0


os.register_at_fork(after_in_child=_forget_random_hex)  # a child never repeats our uids


def new_uid() -> str:
    """A random (version 4) UUID as `str(uuid.uuid4())` writes it, from the same source
    (`os.urandom`), at a fifth of the cost."""
    global _random_hex, _random_at
    if _random_at >= len(_random_hex):
        _random_hex, _random_at = os.urandom(4096).hex(), 0
    h = _random_hex[_random_at : _random_at + 32]
    _random_at += 32
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{'89ab'[int(h[16], 16) & 3]}{h[17:20]}-{h[20:]}"


# Names need to be unlikely to collide, not unpredictable (upstream's `utilrand.String` is
# math/rand): a seeded PRNG, not `secrets`, which reads the OS per character.
_name_random = random.Random(os.urandom(16))


def generate_name(base: str) -> str:
    """`generateName` + 5 random characters from Kubernetes' alphabet (base cut to 58)."""
    suffix = "".join(
        _name_random.choices(strategy.GENERATE_NAME_ALPHABET, k=strategy.GENERATE_NAME_SUFFIX_LEN)
    )
    return base[: strategy.GENERATE_NAME_BASE_MAX] + suffix


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


def resource_info(resource: str) -> registry.ResourceInfo:
    try:
        return registry.by_plural(resource)
    except errors.NotFound:
        raise errors.NotFound(
            f"the server could not find the requested resource ({resource})"
        ) from None


def decode_object(info: registry.ResourceInfo, data: bytes, name: str = "") -> Any:
    """Decode a request body into the kind's type: malformed JSON is 400, wrong types 422."""
    try:
        return codec.decode(data, info.type)
    except msgspec.ValidationError as exc:
        errs = codec.decode_errors(exc, msgspec.json.decode(data))
        raise errors.invalid(info.kind, name, errs, group=info.group) from exc
    except msgspec.DecodeError as exc:
        raise errors.BadRequest(f"the body of the request was in an unknown format: {exc}") from exc


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
    """The part of a create's body `prepare_keys` reads, decoded instead of the whole object."""

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


def _owner_key(owner: _OwnerNames | meta_v1.OwnerReference, namespace: str) -> Key | None:
    """Where an ownerReference's object is stored; None for a kind drasim does not serve
    (its existence cannot be checked, so it counts as existing)."""
    try:
        info = registry.by_api_version_kind(owner.api_version, owner.kind)
    except errors.NotFound:
        return None
    return key_of(info, namespace if info.namespaced else "", owner.name)


def prepare_keys(req: messages.Request) -> list[Key]:
    """The rows a request reads; fills in generated names so they can be checked too."""
    if isinstance(req, messages.Get | messages.List | messages.EventLog):
        return []
    info = resource_info(req.resource)
    if isinstance(req, messages.Create):
        meta = _names_of(info, req.object)
        ns = request_namespace(info, req.namespace, meta.namespace)
        name = meta.name
        if not name and meta.generate_name:
            # Several candidates, all read with the batch: the first one free is taken, so
            # a collision of the 5 random characters retries here, as the apiserver does.
            candidates = [generate_name(meta.generate_name) for _ in range(GENERATE_NAME_TRIES)]
            _GENERATED[id(req)] = candidates
            keys = [key_of(info, ns, candidate) for candidate in candidates]
        else:
            keys = [key_of(info, ns, name)] if name else []
        if ns:
            keys.append(("namespaces", "", ns))
        for owner in meta.owner_references or ():  # read for `Batch._all_owners_absent`
            owner_key = _owner_key(owner, ns)
            if owner_key is not None:
                keys.append(owner_key)
        return keys
    return [key_of(info, req.namespace or "default", req.name)]


# Names chosen for `generateName` creates between `prepare_keys` and `apply` (by request id).
_GENERATED: dict[int, list[str]] = {}
GENERATE_NAME_TRIES = 4


def forget_generated_name(req: messages.Request) -> None:
    """Drop a request's generated name once its batch is done (committed or not), so that
    a later request reusing the object's id never picks it up."""
    _GENERATED.pop(id(req), None)


class Batch:
    """One group-commit batch: loaded rows, the batch's own writes, and its events."""

    def __init__(
        self,
        loaded: dict[Key, bytes] | dict[Key, bytes | None],
        *,
        first_seq: int,
        fault_plan: faults.FaultPlan | None = None,
        load_dependents: Callable[[list[str]], dict[Key, bytes]] | None = None,
        priority_classes: admission.PriorityClasses | None = None,
        policy: rbac.Policy | None = None,
        max_object_bytes: int = limits.MAX_OBJECT_BYTES,
    ) -> None:
        self._rows: dict[Key, bytes | None] = dict(loaded)
        self._policy = policy or rbac.Policy()  # the roles and bindings as committed
        self._max_object_bytes = max_object_bytes
        # While collecting garbage, writes are not refused for their size: they only drop
        # ownerReferences or stamp a deletion, and a refusal would fail the whole batch.
        self._collecting = False
        self._priority_classes = priority_classes or admission.PriorityClasses()
        self._next_seq = first_seq
        self._faults = fault_plan
        self.events: list[EventRow] = []
        # ownerReferences uids of each event's object, recorded when it is written.
        self._owners: dict[int, list[str]] = {}
        # Removed objects whose dependents the garbage collector must visit: uid -> policy.
        self._removed: dict[str, str] = {}
        self._load_dependents = load_dependents

    @property
    def last_seq(self) -> int:
        """The seq of the batch's last event (the one before its first if it has none)."""
        return self._next_seq - 1

    # -- reading -----------------------------------------------------------------------
    def has(self, key: Key) -> bool:
        return self._rows.get(key) is not None

    def current(self, info: registry.ResourceInfo, key: Key) -> Any:
        """A private, mutable copy of the object's current state, or NotFound."""
        data = self._rows.get(key)
        if data is None:
            raise errors.NotFound(
                f'{info.plural}{"." + info.group if info.group else ""} "{key[2]}" not found',
                kind=info.plural,
                name=key[2],
                group=info.group,
            )
        return codec.decode(data, info.type)

    def add_rows(self, rows: dict[Key, bytes]) -> None:
        for key, data in rows.items():
            self._rows.setdefault(key, data)

    # -- writing -----------------------------------------------------------------------
    def _emit(
        self,
        event_type: str,
        info: registry.ResourceInfo,
        obj: Any,
        ctx: Context,
        *,
        dry_run: bool = False,
    ) -> bytes:
        if dry_run:  # nothing is stored: the object keeps the resourceVersion it had
            return codec.encode(obj)
        seq = self._next_seq
        obj.metadata.resource_version = str(seq)
        data = codec.encode(obj)
        # etcd's limit on what one put stores (a removal stores nothing); see `limits`.
        if len(data) > self._max_object_bytes and event_type != "DELETED" and not self._collecting:
            raise limits.object_too_large()
        self._next_seq += 1
        key = key_of(info, obj.metadata.namespace or "", obj.metadata.name)
        self._rows[key] = None if event_type == "DELETED" else data
        self._owners[seq] = [o.uid for o in obj.metadata.owner_references or ()]
        self.events.append(
            EventRow(
                seq=seq,
                type=event_type,
                resource=info.plural,
                namespace=key[1],
                name=key[2],
                uid=obj.metadata.uid or "",
                node_name=strategy.node_of(info.plural, obj),
                object=data,
                actor=ctx.actor,
                traceparent=ctx.traceparent,
            )
        )
        return data

    def _check_fault(self, resource: str, verb: str, subresource: str = "") -> None:
        if self._faults is not None:
            self._faults.check(resource, verb, subresource)

    def apply(self, req: messages.Request, ctx: Context) -> bytes:
        """Apply one write request; returns the resulting object's JSON."""
        if isinstance(req, messages.Create):
            return self.create(req, ctx)
        if isinstance(req, messages.Update):
            return self.update(req, ctx)
        if isinstance(req, messages.Patch):
            return self.patch(req, ctx)
        if isinstance(req, messages.Delete):
            return self.delete(req, ctx)
        if isinstance(req, messages.Bind):
            return self.bind(req, ctx)
        raise errors.BadRequest(f"not a write: {type(req).__name__}")

    def create(self, req: messages.Create, ctx: Context) -> bytes:
        info = resource_info(req.resource)
        self._check_fault(info.plural, "create")
        obj = decode_object(info, req.object)
        _check_type_meta(info, obj)
        meta = obj.metadata
        meta.namespace = request_namespace(info, req.namespace, meta.namespace)
        # Upstream's policy-based RBAC storage checks before the name is generated.
        rbac_escalation.admit_create(self._policy, ctx.actor, ctx.groups, info, obj)
        if not meta.name and meta.generate_name:
            # The first candidate no object holds; a batch applied twice (see `ApiCore`)
            # sees the same rows and so picks the same name.
            candidates = _GENERATED.get(id(req)) or [generate_name(meta.generate_name)]
            meta.name = next(
                (c for c in candidates if not self.has(key_of(info, meta.namespace, c))),
                candidates[0],
            )
        node_restriction.admit_create(ctx.actor, info, obj)
        self._admit(info, obj)
        errs = validation.validate(obj)
        if errs:
            raise errors.invalid(info.kind, meta.name or "", errs, group=info.group)
        key = key_of(info, meta.namespace, meta.name)
        if info.namespaced and not self.has(("namespaces", "", key[1])):
            raise errors.NotFound(
                f'namespaces "{key[1]}" not found', kind="namespaces", name=key[1]
            )
        if self.has(key):
            raise errors.AlreadyExists(
                f'{_qualified(info)} "{meta.name}" already exists',
                kind=info.plural,
                name=meta.name,
                group=info.group,
            )
        meta.uid = new_uid()
        meta.creation_timestamp = now_rfc3339(ctx.now)
        meta.deletion_timestamp = None
        meta.deletion_grace_period_seconds = None
        if info.plural in strategy.GENERATION:
            meta.generation = 1
        strategy.reset_status_on_create(info.plural, obj)
        created = self._emit("ADDED", info, obj, ctx, dry_run=req.dry_run)
        if not req.dry_run and self._all_owners_absent(obj):
            # Made for an owner deleted meanwhile (a controller acting on a stale cache):
            # Kubernetes' garbage collector deletes such dependents; drasim does it here,
            # as it collects the dependents of an owner deleted before them.
            self.delete(
                messages.Delete(
                    resource=info.plural,
                    namespace=key[1],
                    name=key[2],
                    propagation_policy="Background",
                ),
                Context(actor="garbage-collector", traceparent=ctx.traceparent, now=ctx.now),
            )
        return created

    def _admit(self, info: registry.ResourceInfo, obj: Any) -> None:
        """Admission of a create (the Priority plugin's part, see `admission`)."""
        if info.plural == "pods":
            admission.admit_pod(obj, self._priority_class, self._priority_classes.default())
        elif info.plural == "priorityclasses":
            admission.default_priority_class(obj)
            admission.admit_priority_class(obj, self._priority_classes.default())

    def _priority_class(self, name: str) -> Any:
        """A class as this batch sees it: written by the batch, else as committed."""
        key = ("priorityclasses", "", name)
        if key in self._rows:
            data = self._rows[key]
            return None if data is None else codec.decode(data, scheduling_v1.PriorityClass)
        return self._priority_classes.get(name)

    def _all_owners_absent(self, obj: Any) -> bool:
        """Whether the object has ownerReferences and none names an existing object (by
        uid: an owner deleted and made again under its name is another object)."""
        owners = obj.metadata.owner_references
        if not owners:
            return False
        for owner in owners:
            owner_key = _owner_key(owner, obj.metadata.namespace or "")
            if owner_key is None:
                return False
            data = self._rows.get(owner_key)
            if data is not None and uid_of(data) == owner.uid:
                return False
        return True

    def update(self, req: messages.Update, ctx: Context, *, patched: Any = None) -> bytes:
        info = resource_info(req.resource)
        verb = "patch" if patched is not None else "update"
        self._check_fault(info.plural, verb, req.subresource)
        obj = patched if patched is not None else decode_object(info, req.object, req.name)
        _check_type_meta(info, obj)
        key = key_of(info, req.namespace or obj.metadata.namespace or "default", req.name)
        if obj.metadata.name and obj.metadata.name != req.name:
            raise errors.BadRequest(
                f"the name of the object ({obj.metadata.name}) does not match the name on the "
                f"URL ({req.name})"
            )
        old = self.current(info, key)
        rv = obj.metadata.resource_version
        if rv and rv != old.metadata.resource_version:
            raise errors.Conflict(
                f'Operation cannot be fulfilled on {_qualified(info)} "{req.name}": the object '
                "has been modified; please apply your changes to the latest version and try "
                "again",
                kind=info.plural,
                name=req.name,
                group=info.group,
            )
        if obj.metadata.uid and obj.metadata.uid != old.metadata.uid:
            raise errors.Conflict(
                f"Precondition failed: UID in precondition: {obj.metadata.uid}, UID in object "
                f"meta: {old.metadata.uid}",
                kind=info.plural,
                name=req.name,
                group=info.group,
            )
        if req.subresource == "status":
            new = self.current(info, key)  # a second copy: `old` stays the comparison base
            new.status = obj.status
        elif req.subresource:
            raise errors.NotFound(f"subresource {req.subresource!r} not found for {info.plural}")
        else:
            new = obj
            _keep_system_metadata(new, old)
            if info.plural == "pods":
                admission.keep_pod_priority(new, old)
            if info.plural in strategy.STATUS_SUBRESOURCE and hasattr(old, "status"):
                new.status = old.status
            if old.metadata.deletion_timestamp:
                added = set(new.metadata.finalizers or ()) - set(old.metadata.finalizers or ())
                if added:
                    raise errors.invalid(
                        info.kind,
                        req.name,
                        [
                            errors.FieldError(
                                "FieldValueForbidden",
                                "metadata.finalizers",
                                "Forbidden: no new finalizers can be added if the object is being "
                                "deleted",
                            )
                        ],
                        group=info.group,
                    )
            if info.plural in strategy.GENERATION and _spec_changed(old, new):
                new.metadata.generation = (old.metadata.generation or 0) + 1
            rbac_escalation.admit_update(
                self._policy, ctx.actor, ctx.groups, info, old, new, req.name
            )
        node_restriction.admit_update(ctx.actor, info, old, new, req.subresource)
        if req.subresource == "status":
            errs = validation.validate_status(new, old=old)
        else:
            errs = validation.validate(new, old=old)
        if errs:
            raise errors.invalid(info.kind, req.name, errs, group=info.group)
        if info.plural == "priorityclasses":
            admission.admit_priority_class(new, self._priority_classes.default())
        new.metadata.resource_version = old.metadata.resource_version
        # A no-op writes no event, as in Kubernetes (which compares the objects as stored;
        # msgspec structs compare field by field, maps regardless of key order).
        if new == old:
            return codec.encode(old)
        if (
            new.metadata.deletion_timestamp
            and not new.metadata.finalizers
            and not (_terminating_pod(info, new))
        ):
            self._removed[new.metadata.uid] = "Background"
            return self._emit("DELETED", info, new, ctx, dry_run=req.dry_run)
        return self._emit("MODIFIED", info, new, ctx, dry_run=req.dry_run)

    def patch(self, req: messages.Patch, ctx: Context) -> bytes:
        info = resource_info(req.resource)
        key = key_of(info, req.namespace or "default", req.name)
        old = self.current(info, key)
        try:
            patch = msgspec.json.decode(req.patch)
        except msgspec.DecodeError as exc:
            raise errors.BadRequest(f"invalid patch: {exc}") from exc
        merged = patches.apply(req.patch_type, codec.to_builtins(old), patch)
        try:
            obj = codec.convert(merged, info.type)
        except msgspec.ValidationError as exc:
            raise errors.invalid(
                info.kind, req.name, codec.decode_errors(exc, merged), group=info.group
            ) from exc
        update = messages.Update(
            resource=req.resource,
            namespace=key[1],
            name=req.name,
            object=msgspec.Raw(b"{}"),
            subresource=req.subresource,
            dry_run=req.dry_run,
        )
        return self.update(update, ctx, patched=obj)

    def delete(self, req: messages.Delete, ctx: Context) -> bytes:
        info = resource_info(req.resource)
        self._check_fault(info.plural, "delete")
        key = key_of(info, req.namespace or "default", req.name)
        obj = self.current(info, key)
        node_restriction.admit_delete(ctx.actor, info, obj)
        if info.plural == "priorityclasses":
            admission.admit_priority_class_deletion(obj)
        meta = obj.metadata
        if req.precondition_uid and req.precondition_uid != meta.uid:
            raise errors.Conflict(
                f"Precondition failed: UID in precondition: {req.precondition_uid}, UID in "
                f"object meta: {meta.uid}",
                kind=info.plural,
                name=req.name,
                group=info.group,
            )
        if (
            req.precondition_resource_version
            and req.precondition_resource_version != meta.resource_version
        ):
            raise errors.Conflict(
                f"Precondition failed: ResourceVersion in precondition: "
                f"{req.precondition_resource_version}, ResourceVersion in object meta: "
                f"{meta.resource_version}",
                kind=info.plural,
                name=req.name,
                group=info.group,
            )
        policy = req.propagation_policy or "Background"
        if policy not in ("Background", "Foreground", "Orphan"):
            raise errors.invalid(
                info.kind,
                req.name,
                [
                    errors.FieldError(
                        "FieldValueNotSupported",
                        "propagationPolicy",
                        f'Unsupported value: "{policy}": supported values: "Foreground", '
                        '"Background", "Orphan"',
                    )
                ],
            )
        grace = _grace_period(info, obj, req.grace_period_seconds)
        if meta.deletion_timestamp:
            # Already terminating: only a shorter grace period (the kubelet's final 0) moves on.
            if grace == 0 and not meta.finalizers:
                self._removed[meta.uid] = policy
                return self._emit("DELETED", info, obj, ctx, dry_run=req.dry_run)
            if grace is not None and grace < (meta.deletion_grace_period_seconds or 0):
                meta.deletion_grace_period_seconds = grace
                meta.deletion_timestamp = now_rfc3339(_after(ctx.now, grace))
                return self._emit("MODIFIED", info, obj, ctx, dry_run=req.dry_run)
            return codec.encode(obj)
        if policy == "Orphan" and not req.dry_run:
            # Kubernetes parks this in an `orphan` finalizer that its garbage collector
            # handles at once; drasim drops the dependents' ownerReferences in this batch.
            self._removed[meta.uid] = "Orphan"
        if grace or meta.finalizers:
            # Background and Foreground both collect dependents once the owner is gone.
            meta.deletion_timestamp = now_rfc3339(_after(ctx.now, grace or 0))
            meta.deletion_grace_period_seconds = grace or 0
            return self._emit("MODIFIED", info, obj, ctx, dry_run=req.dry_run)
        if not req.dry_run:
            self._removed[meta.uid] = policy
        return self._emit("DELETED", info, obj, ctx, dry_run=req.dry_run)

    def bind(self, req: messages.Bind, ctx: Context) -> bytes:
        info = resource_info("pods")
        self._check_fault("pods", "bind")
        key = key_of(info, req.namespace or "default", req.name)
        node_restriction.admit_binding(ctx.actor, info, req.name)
        pod = self.current(info, key)
        if req.uid and req.uid != pod.metadata.uid:
            raise errors.Conflict(
                f"Precondition failed: UID in precondition: {req.uid}, UID in object meta: "
                f"{pod.metadata.uid}",
                kind="pods",
                name=req.name,
            )
        if pod.metadata.deletion_timestamp:
            raise errors.Conflict(
                f"pod {req.name} is being deleted, cannot be assigned to a host",
                kind="pods",
                name=req.name,
            )
        if pod.spec.node_name:
            raise errors.Conflict(
                f'pod {req.name} is already assigned to node "{pod.spec.node_name}"',
                kind="pods",
                name=req.name,
            )
        if errs := validation.validate_binding_target(req.node_name):
            raise errors.invalid("Binding", req.name, errs)
        pod.spec.node_name = req.node_name
        # The nomination preemption made is spent (upstream's ClearingNominatedNodeName-
        # AfterBinding, on by default since 1.35).
        pod.status.nominated_node_name = ""
        set_pod_condition(pod, "PodScheduled", "True", now_rfc3339(ctx.now))
        return self._emit("MODIFIED", info, pod, ctx)

    # -- garbage collection -------------------------------------------------------------
    def pending_gc(self) -> list[str]:
        return list(self._removed)

    def collect_garbage(self, dependents: dict[Key, bytes], ctx: Context) -> None:
        """Delete (or orphan) what the objects removed in this batch owned.

        `dependents` are rows that name a removed uid in their ownerReferences; rows already
        changed in this batch win over the loaded ones. Deleting a dependent may remove it
        at once, which the caller feeds back here until nothing is left.
        """
        removed, self._removed = self._removed, {}
        self.add_rows(dependents)
        self._collecting = True
        try:
            self._collect(removed, ctx)
        finally:
            self._collecting = False

    def _collect(self, removed: dict[str, str], ctx: Context) -> None:
        for key in sorted(k for k, v in self._rows.items() if v is not None):
            data = self._rows[key]
            if data is None:
                continue
            info = resource_info(key[0])
            obj = codec.decode(data, info.type)
            owners = obj.metadata.owner_references or []
            gone = [o for o in owners if o.uid in removed]
            if not gone:
                continue
            if any(removed[o.uid] == "Orphan" for o in gone):
                obj.metadata.owner_references = [o for o in owners if o.uid not in removed]
                self._emit(
                    "MODIFIED",
                    info,
                    obj,
                    Context(actor="garbage-collector", traceparent=ctx.traceparent, now=ctx.now),
                )
                continue
            if obj.metadata.deletion_timestamp:
                continue
            gc_ctx = Context(actor="garbage-collector", traceparent=ctx.traceparent, now=ctx.now)
            self.delete(
                messages.Delete(
                    resource=key[0], namespace=key[1], name=key[2], propagation_policy="Background"
                ),
                gc_ctx,
            )

    def projection(self) -> tuple[list[ObjectRow], list[Key]]:
        """Final state of every key the batch wrote: rows to upsert and keys to delete."""
        last: dict[Key, EventRow] = {}
        for ev in self.events:
            last[(ev.resource, ev.namespace, ev.name)] = ev
        upserts, deletes = [], []
        for key, ev in last.items():
            if ev.type == "DELETED":
                deletes.append(key)
                continue
            owners = self._owners[ev.seq]
            upserts.append(
                ObjectRow(key[0], key[1], key[2], ev.uid, ev.seq, ev.node_name, owners, ev.object)
            )
        return upserts, deletes


def _qualified(info: registry.ResourceInfo) -> str:
    return f"{info.plural}.{info.group}" if info.group else info.plural


def _check_type_meta(info: registry.ResourceInfo, obj: Any) -> None:
    api_version = getattr(obj, "api_version", None)
    kind = getattr(obj, "kind", None)
    if kind and kind != info.kind:
        raise errors.BadRequest(f"the kind {kind!r} does not match the resource {info.plural!r}")
    if api_version and api_version != info.api_version:
        raise errors.BadRequest(
            f"the apiVersion {api_version!r} does not match {info.api_version!r} of {info.plural}"
        )


def _keep_system_metadata(new: Any, old: Any) -> None:
    """Fields a client may not change on update keep their stored values."""
    for name in (
        "uid",
        "creation_timestamp",
        "deletion_timestamp",
        "deletion_grace_period_seconds",
        "generation",
        "namespace",
        "name",
        "generate_name",
    ):
        setattr(new.metadata, name, getattr(old.metadata, name))


def _spec_changed(old: Any, new: Any) -> bool:
    """Compared as the objects (see the no-op check in `Batch.update`)."""
    return getattr(old, "spec", None) != getattr(new, "spec", None)


def _terminating_pod(info: registry.ResourceInfo, obj: Any) -> bool:
    """A bound pod stays until its kubelet confirms with a grace-period-0 delete."""
    return (
        info.plural == "pods"
        and bool(obj.spec.node_name)
        and (obj.metadata.deletion_grace_period_seconds or 0) > 0
    )


# The last second a Kubernetes timestamp (RFC 3339, year 9999 at most) can name.
_LAST_TIME = datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC)


def _after(now: datetime, seconds: int) -> datetime:
    """`seconds` after `now`, or the last time there is: a grace period is any int64, and
    most of them end past the calendar (upstream's duration arithmetic would wrap)."""
    try:
        return now + timedelta(seconds=seconds)
    except OverflowError:
        return _LAST_TIME


def _grace_period(info: registry.ResourceInfo, obj: Any, asked: int | None) -> int | None:
    """Pods bound to a node terminate gracefully; everything else goes at once."""
    if info.plural != "pods":
        return 0 if asked is None else asked
    if not obj.spec.node_name or obj.status.phase in ("Succeeded", "Failed"):
        return 0
    if asked is not None:
        return max(asked, 0)
    default = obj.spec.termination_grace_period_seconds
    return 30 if default is None else default


def set_pod_condition(
    pod: Any, type_: str, status: str, now: str, reason: str = "", message: str = ""
) -> None:
    """Set a condition of `pod.status`, its transition time moving only when its status
    changes (upstream `UpdatePodCondition`)."""
    from drasim.common.api import core_v1

    conditions = list(pod.status.conditions)
    for cond in conditions:
        if cond.type == type_:
            if cond.status != status:
                cond.last_transition_time = now
            cond.status, cond.reason, cond.message = status, reason, message
            break
    else:
        conditions.append(
            core_v1.PodCondition(
                type=type_, status=status, last_transition_time=now, reason=reason, message=message
            )
        )
    pod.status.conditions = conditions
