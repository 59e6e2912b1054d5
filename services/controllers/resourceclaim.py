"""ResourceClaim controller (upstream `pkg/controller/resourceclaim/controller.go`).

One queue, two kinds of work:

- a **pod** gets a ResourceClaim for each `spec.resourceClaims` entry that names a
  ResourceClaimTemplate: generateName `<pod>-<claim>-`, the template's labels and
  annotations plus `resource.kubernetes.io/pod-claim-name: <claim>`, a controller
  ownerReference to the pod and the template's spec. Their names are recorded in
  `pod.status.resourceClaimStatuses`. A pod bound without the scheduler gets its allocated
  claims reserved.
- a **claim** loses the `reservedFor` entries of pods that are gone, replaced or done. Once
  nobody uses it, a claim carrying the delete-protection finalizer is deallocated
  (allocation cleared through the status) and the finalizer removed; a claim whose
  controlling pod is done or was replaced (UID differs) is deleted. A claim whose pod is
  gone is left to the garbage collector, which deletes it through the ownerReference.
  A special claim that its bound pod's status does not name is released and deleted
  too (`is_superseded`; upstream leaves it until the pod ends).

Claims are synced when their pod is done (Succeeded/Failed), deleted before it was
scheduled, or removed, including the scheduler's special claim named in
`status.extendedResourceClaimStatus` (upstream `enqueuePod`). A running pod never enqueues
its claims, since they are in use (upstream `podNeedsClaims`; `testEventHandlers` in
`controller_test.go`).

A pod whose claim cannot be made (its template is missing, the create is refused) gets a
Warning Event `FailedResourceClaimCreation` "PodResourceClaim NAME: ERROR", as upstream's
`syncPod` records it; the pod is retried with backoff meanwhile.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from typing import Any, Literal

import msgspec

from drasim.common import codec, errors, resourceclaim_metrics, tracing
from drasim.common.api import core_v1, meta_v1, resource_v1
from drasim.common.client import ApiClient
from drasim.common.informer import Informer, Key, event_traceparent, key_of
from drasim.controllers import claimutil, events, owners, podutil
from drasim.controllers.metrics import ResourceClaimGauge
from drasim.controllers.queue import WorkQueue

log = logging.getLogger(__name__)

COMPONENT = "resource_claim"
"""The controller's name in its Events' `source` (upstream's)."""
FAILED_RESOURCE_CLAIM_CREATION = "FailedResourceClaimCreation"

POD = "pod"
CLAIM = "claim"
WorkKey = tuple[Literal["pod", "claim"], str, str]  # (kind, namespace, name)

# Upstream `maxUIDCacheEntries`: how many removed pods are remembered as surely gone.
MAX_UID_CACHE_ENTRIES = 500
# Generated names have at most 63 characters: the base, a hyphen and 5 random characters.
MAX_GENERATE_NAME_BASE = 57


class UIDCache:
    """The UIDs of the last `size` removed pods: their reservations can go without asking
    the API server whether the pod still exists (upstream `uidCache`)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._uids: OrderedDict[str, None] = OrderedDict()

    def add(self, uid: str) -> None:
        self._uids[uid] = None
        self._uids.move_to_end(uid)
        while len(self._uids) > self.size:
            self._uids.popitem(last=False)

    def __contains__(self, uid: str) -> bool:
        return uid in self._uids


def is_pod_done(pod: core_v1.Pod) -> bool:
    """Upstream `isPodDone`: none of its containers runs or ever will."""
    return podutil.is_pod_terminal(pod) or (
        pod.metadata.deletion_timestamp is not None and not pod.spec.node_name
    )


def is_superseded(claim: resource_v1.ResourceClaim, pod: core_v1.Pod) -> bool:
    """A special claim of `pod` that the pod, bound, does not name: left over from a
    binding attempt whose create answer was lost (the next attempt, not finding it yet in
    its cache, made another), or from one that bound the pod to a device-plugin node.

    The scheduler names the claim in the status before it binds, and never changes the
    status of a bound pod, so a bound pod's status is final and any other claim is
    unused. Upstream leaves such a claim until its pod ends (its quota then counts the
    pod's oldest special claim only, kubernetes#135434); drasim releases and deletes it,
    so that each pod on a DRA node has exactly one special claim.
    """
    if not pod.spec.node_name or not claimutil.is_extended_resource_claim(claim):
        return False
    if not claimutil.is_for_pod(pod, claim):
        return False
    status = pod.status.extended_resource_claim_status
    return status is None or status.resource_claim_name != claim.metadata.name


def pod_needs_claims(pod: core_v1.Pod, *, deleted: bool) -> bool:
    """Upstream `podNeedsClaims`: false once the pod is removed, has ended, or was deleted
    before being scheduled. A bound pod that is terminating still runs."""
    return not deleted and not is_pod_done(pod)


def claim_from_template(
    pod: core_v1.Pod,
    pod_claim: core_v1.PodResourceClaim,
    template: resource_v1.ResourceClaimTemplate,
) -> resource_v1.ResourceClaim:
    """The claim the template makes for this pod claim, to be named by the API server."""
    generate_name = f"{pod.metadata.name}-{pod_claim.name}-"
    if len(generate_name) > MAX_GENERATE_NAME_BASE:
        # Cut both names in proportion: the API server would cut the end, and with a long
        # pod name nothing of the pod claim's name would be left (upstream does the same).
        total = len(generate_name)
        pod_name, claim = pod.metadata.name, pod_claim.name
        generate_name = (
            pod_name[: len(pod_name) * MAX_GENERATE_NAME_BASE // total]
            + "-"
            + claim[: len(claim) * MAX_GENERATE_NAME_BASE // total]
        )
    meta = template.spec.metadata
    return resource_v1.ResourceClaim(
        metadata=meta_v1.ObjectMeta(
            generate_name=generate_name,
            namespace=pod.metadata.namespace,
            labels=dict(meta.labels),
            annotations={**meta.annotations, resource_v1.POD_CLAIM_NAME_ANNOTATION: pod_claim.name},
            owner_references=[resource_v1.pod_controller_ref(pod)],
        ),
        spec=template.spec.spec,
    )


class ResourceClaimController:
    """Creates template claims for pods and releases claims whose pods are done."""

    def __init__(
        self,
        api: ApiClient,
        *,
        pods: Informer[core_v1.Pod],
        claims: Informer[resource_v1.ResourceClaim],
        templates: Informer[resource_v1.ResourceClaimTemplate],
        concurrency: int = 64,
    ) -> None:
        self.api = api
        self.events = events.EventRecorder(api, component=COMPONENT)
        self.pods = pods
        self.claims = claims
        self.templates = templates
        self.gauge = ResourceClaimGauge(claims)  # counted from the cache when read
        self.creates = resourceclaim_metrics.new_creates_counter()
        self.queue: WorkQueue[WorkKey] = WorkQueue(
            "resourceclaim", self.sync, concurrency=concurrency
        )
        self._deleted_pods = UIDCache(MAX_UID_CACHE_ENTRIES)
        # Upstream `claimPodOwnerIndex`: claims by the UID of the pod that controls them.
        self._claims_by_pod = owners.OwnerIndex(kind="Pod", api_version="v1")
        self._claims_by_pod.attach(claims)
        # Upstream `podResourceClaimIndex`: pods by the claims their spec names (directly,
        # or made from a template and recorded in the status).
        self._pods_by_claim: dict[Key, set[Key]] = {}
        # Upstream's mutation cache: claims created for a pod (by pod UID, then name) that
        # the claim cache has not shown yet. Without it, a retry after a failed pod status
        # patch would create a second claim for the same pod claim.
        self._created: dict[str, dict[str, resource_v1.ResourceClaim]] = {}
        # The trace of the event that last queued each key: its sync continues it.
        self._traceparents: dict[WorkKey, str] = {}
        pods.add_handlers(
            on_add=self._on_pod_add, on_update=self._on_pod_update, on_delete=self._on_pod_delete
        )
        claims.add_handlers(
            on_add=self._on_claim_add,
            on_update=self._on_claim_update,
            on_delete=self._on_claim_delete,
        )

    # -- events ------------------------------------------------------------------------
    def _on_pod_add(self, pod: core_v1.Pod) -> None:
        self._index_pod(None, pod)
        self.enqueue_pod(pod, deleted=False)

    def _on_pod_update(self, old: core_v1.Pod, new: core_v1.Pod) -> None:
        self._index_pod(old, new)
        self.enqueue_pod(new, deleted=False)

    def _on_pod_delete(self, pod: core_v1.Pod) -> None:
        self._index_pod(pod, None)
        self._created.pop(pod.metadata.uid, None)
        self.events.forget(pod.metadata.uid)
        self.enqueue_pod(pod, deleted=True)

    def enqueue_pod(self, pod: core_v1.Pod, *, deleted: bool) -> None:
        """Upstream `enqueuePod`: queue the pod's claims once it no longer needs them, and
        the pod itself when it has claims to make or reserve."""
        namespace = pod.metadata.namespace
        if pod.spec.node_name and not deleted:
            for claim_namespace, name in self._claims_by_pod.keys(pod.metadata.uid):
                claim = self.claims.get(name, claim_namespace)
                if claim is not None and is_superseded(claim, pod):
                    self._enqueue((CLAIM, claim_namespace, name))
        extended = pod.status.extended_resource_claim_status
        if not pod.spec.resource_claims and extended is None:
            return
        if deleted:
            self._deleted_pods.add(pod.metadata.uid)
        if not pod_needs_claims(pod, deleted=deleted):
            for pod_claim in pod.spec.resource_claims:
                ref = claimutil.claim_name(pod, pod_claim)
                if ref is not None and ref.name is not None:
                    self._enqueue((CLAIM, namespace, ref.name))
            # Upstream `enqueuePod`: the special claim follows the pod's claims (never while
            # it runs).
            if extended is not None and extended.resource_claim_name:
                self._enqueue((CLAIM, namespace, extended.resource_claim_name))
        if not deleted and self._pod_needs_work(pod):
            self._enqueue((POD, namespace, pod.metadata.name))

    def _pod_needs_work(self, pod: core_v1.Pod) -> bool:
        """Upstream `podNeedsWork`: a template claim to make, or an allocated claim to
        reserve for a pod that is bound already.

        A pod that is done needs neither: its claims are only released and deleted.
        Upstream asks this of a done pod's claims too, so deleting a done pod's template
        claim makes it again until an event race ends that (kubernetes#141274 reports the
        same for reservations); drasim, whose events come without such gaps, would make
        and delete claims for as long as the pod object stays."""
        if pod.metadata.deletion_timestamp is not None or is_pod_done(pod):
            return False
        for pod_claim in pod.spec.resource_claims:
            ref = claimutil.claim_name(pod, pod_claim)
            if ref is None:
                return True  # made from a template, not made yet
            if ref.name is None:
                return False  # no claim needed
            claim = self.claims.get(ref.name, pod.metadata.namespace)
            if claim is None:
                # Gone: a template claim is made again; a user's claim is the user's.
                return pod_claim.resource_claim_template_name is not None
            if ref.must_check_owner and not claimutil.is_for_pod(pod, claim):
                return False  # cannot proceed until that other claim is deleted
            if not pod.spec.node_name:
                continue
            if (
                claim.status.allocation is not None
                and not claimutil.is_reserved_for_pod(pod, claim)
                and claimutil.can_be_reserved(claim)
            ):
                return True
        return False

    def _index_pod(self, old: core_v1.Pod | None, new: core_v1.Pod | None) -> None:
        for pod, present in ((old, False), (new, True)):
            if pod is None:
                continue
            pod_key = key_of(pod)
            for pod_claim in pod.spec.resource_claims:
                ref = claimutil.claim_name(pod, pod_claim)
                if ref is None or ref.name is None:
                    continue
                claim_key = (pod.metadata.namespace, ref.name)
                if present:
                    self._pods_by_claim.setdefault(claim_key, set()).add(pod_key)
                elif keys := self._pods_by_claim.get(claim_key):
                    keys.discard(pod_key)
                    if not keys:
                        del self._pods_by_claim[claim_key]

    def _on_claim_add(self, claim: resource_v1.ResourceClaim) -> None:
        self._forget_created(claim)
        self._enqueue_claim(claim)

    def _on_claim_update(
        self, old: resource_v1.ResourceClaim, new: resource_v1.ResourceClaim
    ) -> None:
        self._enqueue_claim(new)

    def _on_claim_delete(self, claim: resource_v1.ResourceClaim) -> None:
        """A deleted template claim is made again while its pod may still run."""
        self._forget_created(claim)
        self._enqueue_users(claim)

    def _enqueue_claim(self, claim: resource_v1.ResourceClaim) -> None:
        """New and changed claims are checked for stale reservations (e.g. at start-up)."""
        self._enqueue((CLAIM, claim.metadata.namespace, claim.metadata.name))
        self._enqueue_users(claim)

    def _enqueue_users(self, claim: resource_v1.ResourceClaim) -> None:
        for pod_key in self._pods_by_claim.get(key_of(claim), ()):
            pod = self.pods.cache.get(pod_key)
            if pod is not None:
                self.enqueue_pod(pod, deleted=False)

    def _forget_created(self, claim: resource_v1.ResourceClaim) -> None:
        _, pod_uid = claimutil.owning_pod(claim)
        created = self._created.get(pod_uid)
        if created is not None:
            created.pop(claim.metadata.name, None)
            if not created:
                del self._created[pod_uid]

    def _enqueue(self, key: WorkKey) -> None:
        """Queue `key`; from an informer handler, its sync continues the event's trace."""
        traceparent = event_traceparent()
        if traceparent:
            self._traceparents[key] = traceparent
        self.queue.add(key)

    # -- sync --------------------------------------------------------------------------
    async def sync(self, key: WorkKey) -> None:
        kind, namespace, name = key
        traceparent = self._traceparents.pop(key, "")
        try:
            with tracing.continued(traceparent):
                if kind == POD:
                    await self.sync_pod(namespace, name)
                else:
                    await self.sync_claim(namespace, name)
        except Exception:
            if traceparent:  # the retry continues the same trace
                self._traceparents.setdefault(key, traceparent)
            raise

    async def sync_pod(self, namespace: str, name: str) -> None:
        pod = self.pods.get(name, namespace)
        if pod is None or pod.metadata.deletion_timestamp is not None or is_pod_done(pod):
            return
        made: dict[str, str] = {}
        for pod_claim in pod.spec.resource_claims:
            try:
                claim = await self._handle_claim(pod, pod_claim)
            except Exception as exc:
                message = f"PodResourceClaim {pod_claim.name}: {_error_text(exc)}"
                self.events.event(pod, events.WARNING, FAILED_RESOURCE_CLAIM_CREATION, message)
                raise
            if claim is not None:
                made[pod_claim.name] = claim.metadata.name
        if made:
            statuses = [s for s in pod.status.resource_claim_statuses if s.name not in made]
            statuses += [
                core_v1.PodResourceClaimStatus(name=claim, resource_claim_name=claim_name)
                for claim, claim_name in made.items()
            ]
            try:
                await self.api.patch(
                    core_v1.Pod,
                    name,
                    {"status": {"resourceClaimStatuses": codec.to_builtins(statuses)}},
                    namespace=namespace,
                    subresource="status",
                )
            except errors.NotFound:
                return  # the pod went meanwhile: the claims made for it go with it (owner)
        if pod.spec.node_name:
            await self._reserve_for_bound_pod(pod)

    async def _handle_claim(
        self, pod: core_v1.Pod, pod_claim: core_v1.PodResourceClaim
    ) -> resource_v1.ResourceClaim | None:
        """The claim to record in the pod status for this pod claim (made now, or made
        before and not recorded), or None when nothing is to be recorded."""
        ref = claimutil.claim_name(pod, pod_claim)
        if ref is not None:
            if ref.name is None:
                return None
            claim = self.claims.get(ref.name, pod.metadata.namespace)
            if claim is not None:
                if not ref.must_check_owner or claimutil.is_for_pod(pod, claim):
                    return None
                log.error(
                    "pod %s/%s: claim %s made for it is no longer owned by it; making a new one",
                    pod.metadata.namespace,
                    pod.metadata.name,
                    ref.name,
                )
        template_name = pod_claim.resource_claim_template_name
        if template_name is None:
            return None
        # Made before the pod status could be patched (a crash, a failed patch)?
        claim = self._find_pod_resource_claim(pod, pod_claim)
        if claim is not None:
            return claim
        template = self.templates.get(template_name, pod.metadata.namespace)
        if template is None:
            raise errors.NotFound(
                f'resource claim template "{template_name}": '
                f'resourceclaimtemplate.resource.k8s.io "{template_name}" not found',
                kind="resourceclaimtemplates",
                name=template_name,
                group="resource.k8s.io",
            )
        with tracing.span(
            "create claim from template",
            attributes={
                "k8s.namespace.name": pod.metadata.namespace,
                "k8s.pod.name": pod.metadata.name,
                "drasim.pod_claim": pod_claim.name,
                "drasim.template": template_name,
            },
        ) as span:
            claim = await resourceclaim_metrics.create_counted(
                self.api, claim_from_template(pod, pod_claim, template), self.creates
            )
            span.set_attribute("drasim.claim", claim.metadata.name)
        if self.claims.get(claim.metadata.name, claim.metadata.namespace) is None:
            self._created.setdefault(pod.metadata.uid, {})[claim.metadata.name] = claim
        return claim

    def _find_pod_resource_claim(
        self, pod: core_v1.Pod, pod_claim: core_v1.PodResourceClaim
    ) -> resource_v1.ResourceClaim | None:
        """Upstream `findPodResourceClaim`: a claim owned by the pod and annotated with the
        pod claim's name; if there are several, the others go with the pod."""
        cached = (self.claims.cache.get(k) for k in self._claims_by_pod.keys(pod.metadata.uid))
        created = self._created.get(pod.metadata.uid, {}).values()
        for claim in (*cached, *created):
            if (
                claim is not None
                and claimutil.is_for_pod(pod, claim)
                and claim.metadata.annotations.get(resource_v1.POD_CLAIM_NAME_ANNOTATION)
                == pod_claim.name
            ):
                return claim
        return None

    async def _reserve_for_bound_pod(self, pod: core_v1.Pod) -> None:
        """A pod bound by someone other than the scheduler (`spec.nodeName` set at create)
        gets its allocated claims reserved here."""
        for pod_claim in pod.spec.resource_claims:
            ref = claimutil.claim_name(pod, pod_claim)
            if ref is None or ref.name is None:
                continue
            claim = self.claims.get(ref.name, pod.metadata.namespace)
            if claim is None:
                return
            if ref.must_check_owner and not claimutil.is_for_pod(pod, claim):
                raise errors.Conflict(
                    f"ResourceClaim {pod.metadata.namespace}/{ref.name} was not created for "
                    f"pod {pod.metadata.namespace}/{pod.metadata.name} (pod is not owner)"
                )
            if (
                claim.status.allocation is not None
                and not claimutil.is_reserved_for_pod(pod, claim)
                and claimutil.can_be_reserved(claim)
            ):
                consumer = resource_v1.ResourceClaimConsumerReference(
                    resource="pods", name=pod.metadata.name, uid=pod.metadata.uid
                )
                await self.api.update_status(
                    msgspec.structs.replace(
                        claim,
                        status=msgspec.structs.replace(
                            claim.status, reserved_for=[*claim.status.reserved_for, consumer]
                        ),
                    )
                )

    async def sync_claim(self, namespace: str, name: str) -> None:
        claim = self.claims.get(name, namespace)
        if claim is None:
            return
        try:
            await self._sync_claim(namespace, name, claim)
        except errors.NotFound:
            # Deleted since the informer's copy (its garbage collection raced this sync):
            # nothing is left to release, and the informer's DELETED event follows.
            log.debug("resourceclaim %s/%s is gone; nothing to release", namespace, name)

    async def _sync_claim(
        self, namespace: str, name: str, claim: resource_v1.ResourceClaim
    ) -> None:
        reserved = claim.status.reserved_for
        valid = [ref for ref in reserved if await self._keep_reservation(claim, ref)]
        protected = resource_v1.DELETE_PROTECTION_FINALIZER in claim.metadata.finalizers
        if len(valid) < len(reserved):
            # A claim nobody uses any more is deallocated, so that its devices are free for
            # others and a later consumer is not tied to this one's node. Only on the
            # transition from used to unused: a driver may allocate without reserving.
            allocation = None if not valid and protected else claim.status.allocation
            with _releasing(claim, deallocate=allocation is None):
                updated = await self.api.update_status(
                    msgspec.structs.replace(
                        claim,
                        status=msgspec.structs.replace(
                            claim.status, reserved_for=valid, allocation=allocation
                        ),
                    )
                )
                if protected and updated.status.allocation is None:
                    await self._remove_finalizer(updated)
        elif protected and claim.metadata.deletion_timestamp is not None and not valid:
            # Deleted while allocated but unused: deallocate, then let it go.
            with _releasing(claim, deallocate=True):
                if claim.status.allocation is not None:
                    claim = await self.api.update_status(
                        msgspec.structs.replace(
                            claim, status=msgspec.structs.replace(claim.status, allocation=None)
                        )
                    )
                await self._remove_finalizer(claim)
        if not valid:
            await self._delete_if_pod_done(namespace, name, claim)

    async def _keep_reservation(
        self, claim: resource_v1.ResourceClaim, ref: resource_v1.ResourceClaimConsumerReference
    ) -> bool:
        """Whether a `reservedFor` entry still stands: its pod exists, is that pod, and may
        still run. A pod missing from the cache may just not have arrived yet, so only the
        API server can say it is gone."""
        if ref.api_group or ref.resource != "pods":
            raise errors.BadRequest(f"unsupported ReservedFor entry: {ref}")
        if ref.uid in self._deleted_pods:
            return False
        pod = self.pods.get(ref.name, claim.metadata.namespace)
        if pod is None:
            try:
                pod = await self.api.get(core_v1.Pod, ref.name, namespace=claim.metadata.namespace)
            except errors.NotFound:
                return False
            return pod.metadata.uid == ref.uid and not is_superseded(claim, pod)
        return (
            pod.metadata.uid == ref.uid and not is_pod_done(pod) and not is_superseded(claim, pod)
        )

    async def _remove_finalizer(self, claim: resource_v1.ResourceClaim) -> None:
        finalizers = [
            f for f in claim.metadata.finalizers if f != resource_v1.DELETE_PROTECTION_FINALIZER
        ]
        await self.api.update(
            msgspec.structs.replace(
                claim, metadata=msgspec.structs.replace(claim.metadata, finalizers=finalizers)
            )
        )

    async def _delete_if_pod_done(
        self, namespace: str, name: str, claim: resource_v1.ResourceClaim
    ) -> None:
        """An unused claim made for a pod that will not run (again), or a superseded special
        claim, goes now, rather than when the pod object is removed."""
        pod_name, pod_uid = claimutil.owning_pod(claim)
        if not pod_name:
            return
        pod = self.pods.get(pod_name, namespace)
        if pod is None:
            return  # maybe not in the cache yet: the garbage collector handles a gone pod
        if pod.metadata.uid != pod_uid or is_pod_done(pod) or is_superseded(claim, pod):
            try:
                with tracing.span("delete claim", attributes=_claim_attributes(claim)):
                    await self.api.delete(
                        resource_v1.ResourceClaim,
                        name,
                        namespace=namespace,
                        uid=claim.metadata.uid,
                    )
            except errors.NotFound:
                return


def _error_text(exc: Exception) -> str:
    return str(exc) or type(exc).__name__


def _claim_attributes(claim: resource_v1.ResourceClaim) -> dict[str, str | bool]:
    pod_name, _ = claimutil.owning_pod(claim)
    return {
        "k8s.namespace.name": claim.metadata.namespace,
        "drasim.claim": claim.metadata.name,
        "drasim.special_claim": claimutil.is_extended_resource_claim(claim),
        "k8s.pod.name": pod_name,
    }


def _releasing(claim: resource_v1.ResourceClaim, *, deallocate: bool) -> Any:
    """The span of releasing a claim: its reservations dropped, deallocated if unused (the
    special claim's cleanup once its pod is done, upstream `syncClaim`)."""
    attributes: dict[str, str | bool] = {
        **_claim_attributes(claim),
        "drasim.deallocate": deallocate,
    }
    return tracing.span("release claim", attributes=attributes)
