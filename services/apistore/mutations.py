"""The write path's rules, as pure functions over one group-commit batch.

A `Batch` holds the rows the writer loaded for the batch plus what earlier requests in the
same batch wrote; each request either raises an `ApiError` and changes nothing, or appends
exactly one event. Every write takes the same steps, and asks its kind's strategy
(`drasim.apistore.strategies`) at each where kinds differ. Garbage collection by
ownerReferences runs at the end of the batch (`Batch.collect_garbage`), so deleting a pod
and the deletion of what it owns commit together. Nothing here does I/O, so the rules are
tested without servers.
"""

from __future__ import annotations

from typing import Any

import msgspec

from drasim.apistore import (
    admission,
    faults,
    limits,
    node_restriction,
    objectmeta,
    patches,
    rbac,
    resourcequota,
)
from drasim.apistore.prepare import PreparedWrite, owner_key, uid_of
from drasim.apistore.request import (
    Context,
    decode_builtins,
    decode_object,
    key_of,
    request_namespace,
    resource_info,
    served_version,
)
from drasim.apistore.store import EventRow, Key, ObjectRow
from drasim.apistore.strategies import for_resource
from drasim.common import codec, errors, quota
from drasim.common import features as gates
from drasim.common.api import core_v1, defaults, registry, scheduling_v1
from drasim.common.api.validation import pod as pod_validation
from drasim.common.bus import messages
from drasim.common.featuregate import FeatureGate

__all__ = ["Batch", "set_pod_condition"]

PROPAGATION_POLICIES = ["Foreground", "Background", "Orphan"]
_RESOURCE_QUOTAS = registry.by_plural("resourcequotas")


class Batch:
    """One group-commit batch: loaded rows, the batch's own writes, and its events."""

    def __init__(
        self,
        loaded: dict[Key, bytes] | dict[Key, bytes | None],
        *,
        first_seq: int,
        fault_plan: faults.FaultPlan | None = None,
        priority_classes: admission.PriorityClasses | None = None,
        policy: rbac.Policy | None = None,
        quotas: resourcequota.QuotaIndex | None = None,
        max_object_bytes: int = limits.MAX_OBJECT_BYTES,
        features: FeatureGate = gates.DEFAULT,
    ) -> None:
        self._rows: dict[Key, bytes | None] = dict(loaded)
        self.features = features  # the cluster's gates: what strategies drop while off
        # The quota admission: its index, and the quotas of each namespace the batch holds
        # (all of a namespace's, read with the batch, see `ApiCore`).
        self._quota_index = quotas
        self._quota_names: dict[str, set[str]] = {}
        for key, data in self._rows.items():
            if key[0] == "resourcequotas" and data is not None:
                self._quota_names.setdefault(key[1], set()).add(key[2])
        self.policy = policy or rbac.Policy()  # the roles and bindings as committed
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
        # What removed objects held and their removal releases (a Service's IPAddress).
        self._released: list[Key] = []

    @property
    def last_seq(self) -> int:
        """The seq of the batch's last event (the one before its first if it has none)."""
        return self._next_seq - 1

    # -- reading -----------------------------------------------------------------------
    def has(self, key: Key) -> bool:
        return self._rows.get(key) is not None

    def current(self, info: registry.ResourceInfo, key: Key) -> Any:
        """A private, mutable copy of the object's current state, or NotFound.

        Defaulted as a request body is, as upstream defaults what it reads from etcd: an
        object stored before drasim defaulted its kind compares with a defaulted update as
        the same object, so the update does not read as a change of immutable fields.
        """
        data = self._rows.get(key)
        if data is None:
            raise errors.not_found(info.plural, key[2], group=info.group)
        obj = codec.decode(data, info.type)
        defaults.apply(obj)
        return obj

    def add_rows(self, rows: dict[Key, bytes]) -> None:
        for key, data in rows.items():
            self._rows.setdefault(key, data)

    # What admission reads of the batch (`strategies.Admission`).
    def priority_class(self, name: str) -> scheduling_v1.PriorityClass | None:
        """A class as this batch sees it: written by the batch, else as committed."""
        key = ("priorityclasses", "", name)
        if key in self._rows:
            data = self._rows[key]
            return None if data is None else codec.decode(data, scheduling_v1.PriorityClass)
        return self._priority_classes.get(name)

    def default_priority_class(self) -> scheduling_v1.PriorityClass | None:
        return self._priority_classes.default()

    # What the quota admission reads of the batch (`resourcequota.BatchView`).
    def quotas(self, namespace: str) -> list[core_v1.ResourceQuota]:
        names = sorted(self._quota_names.get(namespace, ()))
        return [
            codec.decode(self._rows[("resourcequotas", namespace, n)], core_v1.ResourceQuota)
            for n in names
        ]

    def namespace(self, name: str) -> core_v1.Namespace | None:
        """A namespace as the batch read it (a create's, or one its strategy reads)."""
        data = self._rows.get(("namespaces", "", name))
        return None if data is None else codec.decode(data, core_v1.Namespace)

    def pod(self, namespace: str, name: str) -> core_v1.Pod | None:
        data = self._rows.get(("pods", namespace, name))
        return None if data is None else codec.decode(data, core_v1.Pod)

    def _charge_quotas(
        self,
        operation: str,
        info: registry.ResourceInfo,
        obj: Any,
        old: Any,
        ctx: Context,
    ) -> list[core_v1.ResourceQuota]:
        """The quotas the write would charge (written once the object is); raises the
        quota admission's 403."""
        if self._quota_index is None or not info.namespaced:
            return []
        extended_resources = self.features.enabled(gates.DRA_EXTENDED_RESOURCE)
        return resourcequota.admit(
            self,
            self._quota_index,
            operation,
            info,
            obj,
            old,
            ctx.now,
            extended_resources=extended_resources,
        )

    def _write_quotas(self, charged: list[core_v1.ResourceQuota], ctx: Context) -> None:
        quota_ctx = Context(actor=resourcequota.ACTOR, traceparent=ctx.traceparent, now=ctx.now)
        for rq in charged:
            self._emit("MODIFIED", _RESOURCE_QUOTAS, rq, quota_ctx)

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
        if event_type == "DELETED":
            self._released += for_resource(info.plural).released_keys(obj)
        self._rows[key] = None if event_type == "DELETED" else data
        if info.plural == "resourcequotas":
            names = self._quota_names.setdefault(key[1], set())
            (names.discard if event_type == "DELETED" else names.add)(key[2])
        self._owners[seq] = [o.uid for o in obj.metadata.owner_references or ()]
        self.events.append(
            EventRow(
                seq=seq,
                type=event_type,
                resource=info.plural,
                namespace=key[1],
                name=key[2],
                uid=obj.metadata.uid or "",
                node_name=for_resource(info.plural).node_name(obj),
                object=data,
                actor=ctx.actor,
                traceparent=ctx.traceparent,
            )
        )
        return data

    def _check_fault(self, resource: str, verb: str, subresource: str = "") -> None:
        if self._faults is not None:
            self._faults.check(resource, verb, subresource)

    def apply(
        self, req: messages.Request, ctx: Context, prepared: PreparedWrite | None = None
    ) -> bytes:
        """Apply one write request; returns the resulting object's JSON. `prepared` is
        what `prepare.prepare` found for it (the names a `generateName` create may take)."""
        if isinstance(req, messages.Create):
            return self.create(req, ctx, prepared)
        if isinstance(req, messages.Update):
            return self.update(req, ctx)
        if isinstance(req, messages.Patch):
            return self.patch(req, ctx)
        if isinstance(req, messages.Delete):
            return self.delete(req, ctx)
        if isinstance(req, messages.Bind):
            return self.bind(req, ctx)
        raise errors.BadRequest(f"not a write: {type(req).__name__}")

    def create(
        self, req: messages.Create, ctx: Context, prepared: PreparedWrite | None = None
    ) -> bytes:
        info = resource_info(req.resource)
        strategy = for_resource(info.plural)
        self._check_fault(info.plural, "create")
        obj = decode_object(info, req.object, version=req.version)
        _check_type_meta(info, obj)
        meta = obj.metadata
        meta.namespace = request_namespace(info, req.namespace, meta.namespace)
        # Upstream's policy-based RBAC storage checks before the name is generated.
        strategy.guard_create(obj, ctx, self)
        if not meta.name and meta.generate_name:
            # The first candidate no object holds; a batch applied twice (see `ApiCore`)
            # sees the same rows and so picks the same name.
            candidates = (prepared and prepared.generated_names) or [
                objectmeta.generate_name(meta.generate_name)
            ]
            meta.name = next(
                (c for c in candidates if not self.has(key_of(info, meta.namespace, c))),
                candidates[0],
            )
        # Upstream fills the uid before admission and PrepareForCreate (a Job's generated
        # selector names it), and both run before validation.
        meta.uid = objectmeta.new_uid()
        node_restriction.admit_create(ctx.actor, info, obj)
        strategy.admit_create(obj, self)
        strategy.drop_disabled_fields(obj, None, self.features)
        errs = strategy.validate(obj) + strategy.validate_in_namespace(obj, None, "", self)
        if errs:
            raise errors.invalid(info.kind, meta.name or "", errs, group=info.group)
        key = key_of(info, meta.namespace, meta.name)
        if info.namespaced and not self.has(("namespaces", "", key[1])):
            raise errors.not_found("namespaces", key[1])
        meta.creation_timestamp = objectmeta.now_rfc3339(ctx.now)
        meta.deletion_timestamp = None
        meta.deletion_grace_period_seconds = None
        strategy.prepare_for_create(obj)
        held = strategy.allocate(obj, self.has, prepared.allocations if prepared else [])
        # Quota admits before storage refuses a name already taken, as upstream's.
        charged = self._charge_quotas(quota.CREATE, info, obj, None, ctx)
        if self.has(key):
            raise errors.already_exists(info.plural, meta.name, group=info.group)
        created = self._emit("ADDED", info, obj, ctx, dry_run=req.dry_run)
        if not req.dry_run:
            self._write_quotas(charged, ctx)
            for allocated in held:
                self._store_allocated(allocated, ctx)
        if not req.dry_run and self._all_owners_absent(obj):
            # Made for an owner deleted meanwhile (a controller acting on a stale cache):
            # Kubernetes' garbage collector deletes such dependents; drasim does it here,
            # as it collects the dependents of an owner deleted before them.
            self._delete_dependent(key, ctx)
        return created

    def _store_allocated(self, obj: Any, ctx: Context) -> None:
        """Create what a create took from a shared pool (an IPAddress), as the API server."""
        obj.metadata.uid = objectmeta.new_uid()
        obj.metadata.creation_timestamp = objectmeta.now_rfc3339(ctx.now)
        self._emit("ADDED", registry.by_type(type(obj)), obj, _api_server(ctx))

    def _all_owners_absent(self, obj: Any) -> bool:
        """Whether the object has ownerReferences and none names an existing object (by
        uid: an owner deleted and made again under its name is another object)."""
        owners = obj.metadata.owner_references
        if not owners:
            return False
        for owner in owners:
            key = owner_key(owner, obj.metadata.namespace or "")
            if key is None:
                return False
            data = self._rows.get(key)
            if data is not None and uid_of(data) == owner.uid:
                return False
        return True

    def update(self, req: messages.Update, ctx: Context) -> bytes:
        info = resource_info(req.resource)
        self._check_fault(info.plural, "update", req.subresource)
        obj = decode_object(info, req.object, req.name, req.version)
        namespace = req.namespace or obj.metadata.namespace or "default"
        return self._update(
            info, namespace, req.name, obj, req.subresource, req.dry_run, ctx, verb="update"
        )

    def patch(self, req: messages.Patch, ctx: Context) -> bytes:
        info = resource_info(req.resource)
        namespace = req.namespace or "default"
        old = self.current(info, key_of(info, namespace, req.name))
        try:
            patch = msgspec.json.decode(req.patch)
        except msgspec.DecodeError as exc:
            raise errors.BadRequest(f"invalid patch: {exc}") from exc
        # The patch applies to the object in the version the request names.
        served = served_version(info, req.version)
        current = codec.to_builtins(old)
        if served is not None:
            current = served.conversion.from_storage(info.kind, current)
        merged = patches.apply(req.patch_type, current, patch)
        # The patched object is decoded as a body is.
        obj = decode_builtins(info, merged, req.name, served)
        self._check_fault(info.plural, "patch", req.subresource)
        return self._update(
            info, namespace, req.name, obj, req.subresource, req.dry_run, ctx, verb="patch"
        )

    def _update(
        self,
        info: registry.ResourceInfo,
        namespace: str,
        name: str,
        obj: Any,
        subresource: str,
        dry_run: bool,
        ctx: Context,
        *,
        verb: str,
    ) -> bytes:
        """An update or patch (`verb`) of the main resource or its status, with `obj` the
        object as the client wants it: the steps both take once the object is decoded."""
        strategy = for_resource(info.plural)
        _check_type_meta(info, obj)
        if obj.metadata.name and obj.metadata.name != name:
            raise errors.BadRequest(
                f"the name of the object ({obj.metadata.name}) does not match the name on the "
                f"URL ({name})"
            )
        key = key_of(info, namespace, name)
        old = self.current(info, key)
        rv = obj.metadata.resource_version
        if rv and rv != old.metadata.resource_version:
            raise errors.conflict(
                info.plural,
                name,
                "the object has been modified; please apply your changes to the latest "
                "version and try again",
                group=info.group,
            )
        if obj.metadata.uid and obj.metadata.uid != old.metadata.uid:
            raise errors.precondition_failed(
                "UID", obj.metadata.uid, old.metadata.uid, info.plural, name, group=info.group
            )
        if subresource == "status":
            new = self.current(info, key)  # a second copy: `old` stays the comparison base
            new.status = obj.status
            strategy.drop_disabled_status_fields(new, old, self.features)
        elif subresource:
            raise errors.NotFound(f"subresource {subresource!r} not found for {info.plural}")
        else:
            new = obj
            objectmeta.keep_system_fields(new, old)
            if old.metadata.deletion_timestamp:
                added = set(new.metadata.finalizers or ()) - set(old.metadata.finalizers or ())
                if added:
                    detail = "no new finalizers can be added if the object is being deleted"
                    errs = [errors.field_forbidden("metadata.finalizers", detail)]
                    raise errors.invalid(info.kind, name, errs, group=info.group)
            strategy.prepare_for_update(new, old)
            strategy.drop_disabled_fields(new, old, self.features)
            strategy.guard_update(new, old, name, ctx, self)
        node_restriction.admit_update(ctx.actor, info, old, new, subresource)
        if subresource == "status":
            errs = strategy.authorize_status_update(new, old, verb, ctx, self)
            errs += strategy.validate_status_update(new, old)
        else:
            errs = strategy.validate_update(new, old)
        errs += strategy.validate_in_namespace(new, old, subresource, self)
        if errs:
            raise errors.invalid(info.kind, name, errs, group=info.group)
        strategy.admit_update(new, self)
        new.metadata.resource_version = old.metadata.resource_version
        # A no-op writes no event, as in Kubernetes (which compares the objects as stored;
        # msgspec structs compare field by field, maps regardless of key order).
        if new == old:
            return codec.encode(old)
        charged = [] if subresource else self._charge_quotas(quota.UPDATE, info, new, old, ctx)
        if (
            new.metadata.deletion_timestamp
            and not new.metadata.finalizers
            and not strategy.stays_while_terminating(new)
        ):
            self._removed[new.metadata.uid] = "Background"
            return self._emit("DELETED", info, new, ctx, dry_run=dry_run)
        updated = self._emit("MODIFIED", info, new, ctx, dry_run=dry_run)
        if not dry_run:
            self._write_quotas(charged, ctx)
        return updated

    def delete(self, req: messages.Delete, ctx: Context) -> bytes:
        info = resource_info(req.resource)
        strategy = for_resource(info.plural)
        self._check_fault(info.plural, "delete")
        key = key_of(info, req.namespace or "default", req.name)
        obj = self.current(info, key)
        node_restriction.admit_delete(ctx.actor, info, obj)
        strategy.before_delete(obj)
        meta = obj.metadata
        if req.precondition_uid and req.precondition_uid != meta.uid:
            raise errors.precondition_failed(
                "UID", req.precondition_uid, meta.uid, info.plural, req.name, group=info.group
            )
        wanted_rv = req.precondition_resource_version
        if wanted_rv and wanted_rv != meta.resource_version:
            raise errors.precondition_failed(
                "ResourceVersion",
                wanted_rv,
                meta.resource_version,
                info.plural,
                req.name,
                group=info.group,
            )
        policy = req.propagation_policy or "Background"
        if policy not in PROPAGATION_POLICIES:
            errs = [errors.field_not_supported("propagationPolicy", policy, PROPAGATION_POLICIES)]
            raise errors.invalid(info.kind, req.name, errs)
        grace = strategy.grace_period(obj, req.grace_period_seconds)
        if meta.deletion_timestamp:
            # Already terminating: only a shorter grace period (the kubelet's final 0) moves on.
            if grace == 0 and not meta.finalizers:
                self._removed[meta.uid] = policy
                return self._emit("DELETED", info, obj, ctx, dry_run=req.dry_run)
            if grace is not None and grace < (meta.deletion_grace_period_seconds or 0):
                meta.deletion_grace_period_seconds = grace
                meta.deletion_timestamp = objectmeta.now_rfc3339(objectmeta.after(ctx.now, grace))
                return self._emit("MODIFIED", info, obj, ctx, dry_run=req.dry_run)
            return codec.encode(obj)
        if policy == "Orphan" and not req.dry_run:
            # Kubernetes parks this in an `orphan` finalizer that its garbage collector
            # handles at once; drasim drops the dependents' ownerReferences in this batch.
            self._removed[meta.uid] = "Orphan"
        if grace or meta.finalizers:
            # Background and Foreground both collect dependents once the owner is gone.
            meta.deletion_timestamp = objectmeta.now_rfc3339(objectmeta.after(ctx.now, grace or 0))
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
            raise errors.precondition_failed("UID", req.uid, pod.metadata.uid, "pods", req.name)
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
        if errs := pod_validation.validate_binding_target(req.node_name):
            raise errors.invalid("Binding", req.name, errs)
        pod.spec.node_name = req.node_name
        # The nomination preemption made is spent (upstream's ClearingNominatedNodeName-
        # AfterBinding, on by default since 1.35).
        pod.status.nominated_node_name = ""
        set_pod_condition(pod, "PodScheduled", "True", objectmeta.now_rfc3339(ctx.now))
        return self._emit("MODIFIED", info, pod, ctx)

    # -- garbage collection -------------------------------------------------------------
    def pending_gc(self) -> list[str]:
        return list(self._removed)

    def pending_releases(self) -> list[Key]:
        """What removed objects release, to be read for `collect_garbage`."""
        return list(self._released)

    def collect_garbage(self, dependents: dict[Key, bytes], ctx: Context) -> None:
        """Delete (or orphan) what the objects removed in this batch owned.

        `dependents` are rows that name a removed uid in their ownerReferences; rows already
        changed in this batch win over the loaded ones. Deleting a dependent may remove it
        at once, which the caller feeds back here until nothing is left.
        """
        removed, self._removed = self._removed, {}
        released, self._released = self._released, []
        self.add_rows(dependents)
        self._collecting = True
        try:
            self._collect(removed, ctx)
            for key in released:
                if self.has(key):
                    info = resource_info(key[0])
                    self._emit("DELETED", info, self.current(info, key), _api_server(ctx))
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
                self._emit("MODIFIED", info, obj, _garbage_collector(ctx))
            elif not obj.metadata.deletion_timestamp:
                self._delete_dependent(key, ctx)

    def _delete_dependent(self, key: Key, ctx: Context) -> None:
        """Delete, as the garbage collector, an object whose owners are gone."""
        resource, namespace, name = key
        delete = messages.Delete(
            resource=resource, namespace=namespace, name=name, propagation_policy="Background"
        )
        self.delete(delete, _garbage_collector(ctx))

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


def _garbage_collector(ctx: Context) -> Context:
    """The garbage collector's writes, under the trace and time of the request behind them."""
    return Context(actor="garbage-collector", traceparent=ctx.traceparent, now=ctx.now)


def _api_server(ctx: Context) -> Context:
    """The API server's own writes (its allocators'), under the request's trace and time."""
    return Context(actor="system:apiserver", traceparent=ctx.traceparent, now=ctx.now)


def _check_type_meta(info: registry.ResourceInfo, obj: Any) -> None:
    api_version = getattr(obj, "api_version", None)
    kind = getattr(obj, "kind", None)
    if kind and kind != info.kind:
        raise errors.BadRequest(f"the kind {kind!r} does not match the resource {info.plural!r}")
    if api_version and api_version != info.api_version:
        if any(api_version == v.api_version for v in info.versions):
            # Another version of this kind: upstream decodes it, then refuses it here.
            raise errors.BadRequest(
                f"the API version in the data ({api_version}) does not match the expected "
                f"API version ({info.api_version})"
            )
        raise errors.BadRequest(
            f"the apiVersion {api_version!r} does not match {info.api_version!r} of {info.plural}"
        )


def set_pod_condition(
    pod: core_v1.Pod, type_: str, status: str, now: str, reason: str = "", message: str = ""
) -> None:
    """Set a condition of `pod.status`, its transition time moving only when its status
    changes (upstream `UpdatePodCondition`)."""
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
