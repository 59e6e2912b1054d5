"""The ResourceQuota admission (upstream `k8s.io/apiserver/pkg/admission/plugin/resourcequota`,
`controller.go`).

A create (or an update that changes what quota counts) of a namespaced object is charged
its usage in every quota of its namespace that limits something it uses, and refused with
403 when that would take a quota past its `status.hard`:
`pods "p" is forbidden: exceeded quota: q, requested: pods=1, used: pods=2, limited: pods=2`.
A quota whose status does not yet say what is used (its controller has not seen it yet)
refuses what it would limit: `status unknown for quota: q, resources: pods`.

Upstream charges the quota with a status update guarded by the quota's resourceVersion and
retries on conflict, so two writes racing for the last unit cannot both pass. drasim does
the same inside the group-commit batch: the quota rows are read with the batch, the charge
is an event of the same transaction as the object's, and each request of the batch sees
the quotas as the requests before it left them. So usage never misses an acknowledged
write, and a refused one charges nothing.

`QuotaIndex` plays upstream's listers: which quotas each namespace has (their rows are
then read with the batch), the DeviceClass mapping the claim evaluator needs, and the
special claims each pod controls. The apistore fills it at start, follows every batch it
commits and reloads the quotas and classes now and then for what other replicas wrote.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any, Protocol

import msgspec

from drasim.apistore.store import EventRow, Key
from drasim.common import codec, errors, quota
from drasim.common.api import core_v1, meta_v1, registry, resource_v1
from drasim.common.quota import claims, generic, resources
from drasim.common.quota.generic import Evaluator

__all__ = ["BatchView", "QuotaIndex", "admit", "check_request", "refusal"]

# Who writes the charge into a quota's status (upstream's loopback client).
ACTOR = "system:apiserver"


class _Meta(msgspec.Struct, rename="camel"):
    name: str = ""
    namespace: str = ""
    creation_timestamp: str | None = None
    annotations: dict[str, str] | None = None
    owner_references: list[meta_v1.OwnerReference] | None = None


class _MetaView(msgspec.Struct):
    """What the index reads of a quota or a claim."""

    metadata: _Meta = msgspec.field(default_factory=_Meta)


class _Listed(msgspec.Struct, rename="camel"):
    resource_version: int = 0
    items: list[msgspec.Raw] = []


_meta_decoder = msgspec.json.Decoder(_MetaView)


class QuotaIndex:
    """The quotas of each namespace, DeviceClasses as an extended-resource mapping, and
    the special claims each pod controls, as committed."""

    def __init__(self, new_class_cache: Callable[[], Any]) -> None:
        self._new_class_cache = new_class_cache
        self.classes = new_class_cache()
        self._class_objects: dict[str, resource_v1.DeviceClass] = {}
        self._quotas: dict[str, set[str]] = {}
        self.special_claims = claims.SpecialClaims()
        self._observed = {"resourcequotas": 0, "deviceclasses": 0}

    # -- filling -------------------------------------------------------------------------
    def replace(self, resource: str, listed: bytes) -> None:
        """Take a list of every quota, class or claim, unless a write this index took is
        newer than the list (the next reload brings both)."""
        answer = msgspec.json.decode(listed, type=_Listed)
        if self._observed.get(resource, 0) > answer.resource_version:
            return
        if resource == "resourcequotas":
            self._quotas = {}
            for raw in answer.items:
                meta = _meta_decoder.decode(raw).metadata
                self._quotas.setdefault(meta.namespace, set()).add(meta.name)
        elif resource == "deviceclasses":
            classes = [codec.decode(raw, resource_v1.DeviceClass) for raw in answer.items]
            classes.sort(key=lambda c: (c.metadata.creation_timestamp or "", c.metadata.name))
            self.classes = self._new_class_cache()
            self._class_objects = {}
            for cls in classes:
                self._observe_class("ADDED", cls)
        elif resource == "resourceclaims":
            self.special_claims = claims.SpecialClaims()
            for raw in answer.items:
                self.special_claims.observe(_meta_decoder.decode(raw).metadata)

    def observe(self, events: Iterable[EventRow]) -> None:
        """Follow a committed batch's writes."""
        for ev in events:
            if ev.resource == "resourcequotas":
                self._observed[ev.resource] = ev.seq
                names = self._quotas.setdefault(ev.namespace, set())
                if ev.type == "DELETED":
                    names.discard(ev.name)
                else:
                    names.add(ev.name)
            elif ev.resource == "deviceclasses":
                self._observed[ev.resource] = ev.seq
                self._observe_class(ev.type, codec.decode(ev.object, resource_v1.DeviceClass))
            elif ev.resource == "resourceclaims":
                meta = _meta_decoder.decode(ev.object).metadata
                self.special_claims.observe(meta, deleted=ev.type == "DELETED")

    def _observe_class(self, event_type: str, cls: resource_v1.DeviceClass) -> None:
        name = cls.metadata.name
        old = self._class_objects.pop(name, None)
        if event_type == "DELETED":
            if old is not None:
                self.classes.on_delete(old)
            return
        self._class_objects[name] = cls
        if old is None:
            self.classes.on_add(cls)
        else:
            self.classes.on_update(old, cls)

    # -- reading -------------------------------------------------------------------------
    def keys(self, namespace: str) -> list[Key]:
        """The rows of the namespace's quotas."""
        return [("resourcequotas", namespace, name) for name in self._quotas.get(namespace, ())]


def refusal(resource: str, name: str, group: str) -> Callable[[str], errors.ApiError]:
    """How the admission refuses a write (upstream `admission.NewForbidden`)."""
    return lambda why: errors.forbidden(resource, name, why, group=group)


def _has_usage_stats(quota: core_v1.ResourceQuota, names: Iterable[str]) -> bool:
    """Whether the status says what is used of each of these limited names."""
    wanted = set(names)
    return all(n in quota.status.used for n in quota.status.hard if n in wanted)


def check_request(
    quotas: list[core_v1.ResourceQuota],
    evaluator: Evaluator,
    operation: str,
    obj: Any,
    old: Any,
    *,
    refuse: Callable[[str], errors.ApiError],
) -> list[core_v1.ResourceQuota]:
    """The quotas as they would be once the write is charged (`CheckRequest`): the same
    objects where nothing changes, copies where `status.used` grows. Raises what `refuse`
    makes of the reason when the write does not fit."""
    if not evaluator.handles(operation, obj, old):
        return quotas
    interesting = []
    for i, rq in enumerate(quotas):
        if not generic.matches(evaluator, rq, obj):
            continue
        limited = evaluator.matching_resources(rq.status.hard)
        if (complaint := evaluator.constraints(limited, obj)) is not None:
            raise refuse(f"failed quota: {rq.metadata.name}: {complaint}")
        if not _has_usage_stats(rq, limited):
            raise refuse(
                f"status unknown for quota: {rq.metadata.name}, "
                f"resources: {','.join(sorted(limited))}"
            )
        interesting.append(i)
    if not interesting:
        return quotas

    usage = evaluator.usage(obj)
    if negative := resources.is_negative(usage):
        raise refuse(f"quota usage is negative for resource(s): {','.join(sorted(negative))}")
    deltas = dict.fromkeys(interesting, usage)
    if operation == generic.UPDATE:
        # Charged what the update adds, for the quotas that counted the object before.
        delta = resources.subtract_non_negative(usage, evaluator.usage(old))
        for i in interesting:
            if generic.matches(evaluator, quotas[i], old):
                deltas[i] = delta

    result = list(quotas)
    for i in interesting:
        rq = quotas[i]
        hard = rq.status.hard
        requested = resources.remove_zeros(resources.mask(deltas[i], hard))
        if not requested:
            continue
        used = resources.add(rq.status.used, requested)
        fits, exceeded = resources.less_than_or_equal(resources.mask(used, requested), hard)
        if not fits:
            raise refuse(
                f"exceeded quota: {rq.metadata.name}, "
                f"requested: {resources.pretty_print(resources.mask(requested, exceeded))}, "
                f"used: {resources.pretty_print(resources.mask(rq.status.used, exceeded))}, "
                f"limited: {resources.pretty_print(resources.mask(hard, exceeded))}"
            )
        charged = codec.clone(rq)
        charged.status.used = used
        result[i] = charged
    return result


class BatchView(Protocol):
    """What the admission reads of the batch a write runs in: the namespace's quotas and
    its pods as the requests before this one left them."""

    def quotas(self, namespace: str) -> list[core_v1.ResourceQuota]: ...

    def pod(self, namespace: str, name: str) -> core_v1.Pod | None: ...


def admit(
    batch: BatchView,
    index: QuotaIndex,
    operation: str,
    info: registry.ResourceInfo,
    obj: Any,
    old: Any,
    now: datetime,
    *,
    extended_resources: bool = True,
) -> list[core_v1.ResourceQuota]:
    """Charge a write of the main resource to the quotas of its namespace: the quotas
    whose usage grows, to be written with the object; raises the 403 when it does not fit.
    `extended_resources`: the DRAExtendedResource gate."""
    quotas = batch.quotas(obj.metadata.namespace or "")
    if not quotas:
        return []
    evaluator = quota.evaluator_for(
        info.plural,
        classes=index.classes,
        pod_of=batch.pod,
        owned_claims=index.special_claims.owned,
        clock=lambda: now,
        extended_resources=extended_resources,
    )
    if evaluator is None:
        return []
    refuse = refusal(info.plural, obj.metadata.name, info.group)
    charged = check_request(quotas, evaluator, operation, obj, old, refuse=refuse)
    return [new for new, was in zip(charged, quotas, strict=True) if new is not was]
