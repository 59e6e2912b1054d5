"""The `pods/eviction` subresource: delete a pod unless a PodDisruptionBudget forbids it.

Follows upstream's `pkg/registry/core/pod/storage/eviction.go` step by step, over the
apistore's own verbs (get, list, a status update of the budget with a resourceVersion
precondition, delete), so each step is one event in the log, as each is one write upstream:

1. A pod that is terminal (Succeeded, Failed), still Pending, or already being deleted is
   deleted without looking at budgets: its disruption has already happened. Running pods
   are deleted with a resourceVersion precondition, so one that turned ready meanwhile is
   not deleted past its budget.
2. Otherwise the budgets of the pod's namespace whose (non-empty) selector matches it are
   found: more than one is a 500, none lets the delete go ahead.
3. An unready pod may go without spending the budget when its policy is AlwaysAllow, or
   (IfHealthyBudget, the default) while the application is healthy (currentHealthy >=
   desiredHealthy > 0); it is then deleted with a resourceVersion precondition, and losing
   that race is a 429.
4. Else the budget must be current (observedGeneration) and allow a disruption (else 429
   TooManyRequests); disruptionsAllowed is decremented and the pod recorded in
   status.disruptedPods, retried on conflict with the budget re-read, and then the pod is
   deleted with the Eviction's deleteOptions.
"""

from __future__ import annotations

import contextlib
from typing import Any

import msgspec

from drasim.apistore import mutations
from drasim.apistore.core import ApiCore
from drasim.apistore.objectmeta import now_rfc3339
from drasim.apistore.request import Context
from drasim.common import codec, disruption, errors
from drasim.common.api import core_v1, policy_v1
from drasim.common.bus import messages

# Upstream `EvictionsRetry` takes 20 steps; a conflict here means another writer got in
# first, so the next attempt re-reads and goes again at once.
RETRIES = 20
# Upstream `MaxDisruptedPodSize`: evictions the controller has not confirmed yet, at most.
MAX_DISRUPTED_POD_SIZE = 2000

# The condition an evicted pod is marked with before it is deleted (upstream's).
DISRUPTION_TARGET = "DisruptionTarget"
EVICTION_BY_EVICTION_API = "EvictionByEvictionAPI"

VIOLATION_MESSAGE = "Cannot evict pod as it would violate the pod's disruption budget."
MULTIPLE_BUDGETS_MESSAGE = (
    "This pod has more than one PodDisruptionBudget, which the eviction subresource does not "
    "support."
)


class TooManyRequests(errors.TooManyRequests):
    """The 429 of a refused eviction: a `DisruptionBudget` cause and a retry-after hint."""

    def __init__(self, cause: str, *, retry_after_seconds: int) -> None:
        super().__init__(
            VIOLATION_MESSAGE,
            causes=[errors.StatusCause(reason=policy_v1.DISRUPTION_BUDGET_CAUSE, message=cause)],
        )
        self.retry_after_seconds = retry_after_seconds

    def to_status(self) -> errors.Status:
        status = super().to_status()
        status.details = errors.StatusDetails(
            causes=list(self.causes), retryAfterSeconds=self.retry_after_seconds
        )
        return status


class MultipleBudgets(errors.InternalError):
    """Upstream answers a bare `Status` (Failure, code 500, no reason) for this case."""

    reason = ""

    def __init__(self) -> None:
        super().__init__(MULTIPLE_BUDGETS_MESSAGE)


def still_processing(pdb_name: str) -> TooManyRequests:
    """Upstream `createTooManyRequestsError`: the budget's status is not current."""
    return TooManyRequests(
        f"The disruption budget {pdb_name} is still being processed by the server.",
        retry_after_seconds=10,
    )


def can_ignore_pdb(pod: core_v1.Pod) -> bool:
    """Pods whose disruption has already happened (or not yet begun) go without a budget."""
    return (
        pod.status.phase in ("Succeeded", "Failed", "Pending")
        or pod.metadata.deletion_timestamp is not None
    )


def should_enforce_resource_version(pod: core_v1.Pod) -> bool:
    """Only a pod that may still turn ready (so count against a budget) needs the guard."""
    return (
        pod.status.phase not in ("Succeeded", "Failed") and pod.metadata.deletion_timestamp is None
    )


def dry_run_of(eviction: policy_v1.Eviction, query: list[str]) -> policy_v1.DeleteOptions:
    """Upstream `propagateDryRun`: the query's dryRun goes into the Eviction's options;
    both given and different is a 400."""
    opts = eviction.delete_options or policy_v1.DeleteOptions()
    if not opts.dry_run:
        return msgspec.structs.replace(opts, dry_run=list(query))
    if query and list(query) != opts.dry_run:
        raise errors.BadRequest(
            f"Non-matching dry-run options in request and content: {query} and {opts.dry_run}"
        )
    return opts


def _forbidden(pdb: policy_v1.PodDisruptionBudget, why: str) -> errors.Forbidden:
    return errors.forbidden("poddisruptionbudgets", pdb.metadata.name, why, group="policy")


def check_and_decrement(
    pdb: policy_v1.PodDisruptionBudget, pod_name: str, now: str, *, dry_run: bool
) -> policy_v1.PodDisruptionBudget | None:
    """Upstream `checkAndDecrement`: the budget with one disruption spent and the pod
    recorded as disrupted, or an error; None for a dry run (nothing to write)."""
    status = pdb.status
    if status.observed_generation < pdb.metadata.generation:
        raise still_processing(pdb.metadata.name)
    if status.disruptions_allowed < 0:
        raise _forbidden(pdb, "pdb disruptions allowed is negative")
    if len(status.disrupted_pods or {}) > MAX_DISRUPTED_POD_SIZE:
        raise _forbidden(
            pdb, "DisruptedPods map too big - too many evictions not confirmed by PDB controller"
        )
    if status.disruptions_allowed == 0:
        raise TooManyRequests(
            f"The disruption budget {pdb.metadata.name} needs {status.desired_healthy} healthy "
            f"pods and has {status.current_healthy} currently",
            retry_after_seconds=0,
        )
    status.disruptions_allowed -= 1
    if status.disruptions_allowed == 0:
        disruption.update_disruption_allowed_condition(status, now)
    if dry_run:
        return None
    status.disrupted_pods = {**(status.disrupted_pods or {}), pod_name: now}
    return pdb


async def evict(
    core: ApiCore,
    *,
    namespace: str,
    name: str,
    eviction: policy_v1.Eviction,
    dry_run: list[str],
    ctx: Context,
) -> None:
    """Evict pod `namespace/name` as `eviction` asks; raises the `ApiError` of a refusal."""
    if eviction.metadata.name != name:
        raise errors.BadRequest("name in URL does not match name in Eviction object")
    opts = dry_run_of(eviction, dry_run)
    rv_unset = opts.preconditions is None or opts.preconditions.resource_version is None

    # 1. Pods whose budget does not matter: deleted, retrying conflicts (unless the caller
    # gave its own resourceVersion precondition).
    pod: core_v1.Pod | None = None
    for attempt in range(RETRIES):
        pod = await _get(core, "pods", namespace, name, core_v1.Pod, ctx)
        if not can_ignore_pdb(pod):
            break
        enforce = should_enforce_resource_version(pod) and rv_unset
        try:
            await _delete(
                core,
                namespace,
                name,
                opts,
                ctx,
                rv=pod.metadata.resource_version if enforce else None,
            )
            return
        except errors.Conflict:
            if not rv_unset or attempt == RETRIES - 1:
                raise
    assert pod is not None

    # 2. The budget that covers the pod.
    pdbs = [
        pdb for pdb in await _list_budgets(core, namespace, ctx) if disruption.selects(pdb, pod)
    ]
    if len(pdbs) > 1:
        raise MultipleBudgets()
    guard_rv = False
    if pdbs:
        pdb = pdbs[0]
        policy = pdb.spec.unhealthy_pod_eviction_policy or policy_v1.IF_HEALTHY_BUDGET
        healthy_app = 0 < pdb.status.desired_healthy <= pdb.status.current_healthy
        if not disruption.is_pod_ready(pod) and (policy == policy_v1.ALWAYS_ALLOW or healthy_app):
            # 3. An unready pod does not count as healthy: it goes without spending the
            # budget, as long as it does not turn ready meanwhile.
            guard_rv = True
        else:
            # 4. Spend one disruption of the budget.
            await _spend(core, pdb, name, opts, ctx)

    try:
        await _delete(
            core, namespace, name, opts, ctx, rv=pod.metadata.resource_version if guard_rv else None
        )
    except errors.Conflict:
        if guard_rv and rv_unset:
            raise still_processing(pdbs[0].metadata.name) from None
        raise


async def _spend(
    core: ApiCore,
    pdb: policy_v1.PodDisruptionBudget,
    pod_name: str,
    opts: policy_v1.DeleteOptions,
    ctx: Context,
) -> None:
    """`checkAndDecrement` under retry: a conflicting write re-reads the budget."""
    namespace, pdb_name = pdb.metadata.namespace, pdb.metadata.name
    for attempt in range(RETRIES):
        if attempt:
            pdb = await _get(
                core,
                "poddisruptionbudgets",
                namespace,
                pdb_name,
                policy_v1.PodDisruptionBudget,
                ctx,
            )
        spent = check_and_decrement(pdb, pod_name, now_rfc3339(ctx.now), dry_run=bool(opts.dry_run))
        if spent is None:
            return
        try:
            await _update_status(core, "poddisruptionbudgets", spent, ctx)
            return
        except errors.Conflict:
            continue
    raise errors.Timeout(f'couldn\'t update PodDisruptionBudget "{pdb_name}" due to conflicts')


async def _update_status(core: ApiCore, resource: str, obj: Any, ctx: Context) -> bytes:
    """Write `obj`'s status (a Conflict when it changed since it was read)."""
    meta = obj.metadata
    return await core.handle(
        messages.Update(
            resource=resource,
            namespace=meta.namespace,
            name=meta.name,
            object=msgspec.Raw(codec.encode(obj)),
            subresource="status",
        ),
        ctx,
    )


async def _get(
    core: ApiCore, resource: str, namespace: str, name: str, type_: Any, ctx: Context
) -> Any:
    data = await core.handle(messages.Get(resource=resource, namespace=namespace, name=name), ctx)
    return codec.decode(data, type_)


async def _list_budgets(
    core: ApiCore, namespace: str, ctx: Context
) -> list[policy_v1.PodDisruptionBudget]:
    data = await core.handle(
        messages.List(resource="poddisruptionbudgets", namespace=namespace), ctx
    )
    listing = messages.list_result_decoder.decode(data)
    return [codec.decode(item, policy_v1.PodDisruptionBudget) for item in listing.items]


async def _delete(
    core: ApiCore,
    namespace: str,
    name: str,
    opts: policy_v1.DeleteOptions,
    ctx: Context,
    *,
    rv: str | None,
) -> None:
    """Delete the pod with the Eviction's deleteOptions (`rv`: a resourceVersion
    precondition of our own, where the caller gave none), after marking it with the
    `DisruptionTarget` condition (upstream `addConditionAndDeletePod`)."""
    preconditions = opts.preconditions or policy_v1.Preconditions()
    policy = opts.propagation_policy or ""
    if not policy and opts.orphan_dependents is not None:
        policy = "Orphan" if opts.orphan_dependents else "Background"
    for value in opts.dry_run:
        if value != "All":
            raise errors.BadRequest(f'invalid dry run value "{value}": only "All" is supported')
    rv = rv or preconditions.resource_version
    if not opts.dry_run:
        marked = await _mark_disruption_target(core, namespace, name, preconditions.uid, rv, ctx)
        if rv:  # the precondition holds the version our own write made
            rv = marked.metadata.resource_version
    await core.handle(
        messages.Delete(
            resource="pods",
            namespace=namespace,
            name=name,
            grace_period_seconds=opts.grace_period_seconds,
            propagation_policy=policy,
            precondition_uid=preconditions.uid or "",
            precondition_resource_version=rv or "",
            dry_run=bool(opts.dry_run),
        ),
        ctx,
    )


async def _mark_disruption_target(
    core: ApiCore, namespace: str, name: str, uid: str | None, rv: str | None, ctx: Context
) -> core_v1.Pod:
    """Add `DisruptionTarget` (EvictionByEvictionAPI) to the pod's conditions, so that who
    watches it learns why it goes; the Eviction's preconditions are checked first. A write
    that lost to another (the kubelet's status) is made again on the pod as it is then,
    unless a resourceVersion precondition holds the pod to the version it had."""
    for _ in range(0 if rv else RETRIES - 1):
        with contextlib.suppress(errors.Conflict):
            return await _add_disruption_target(core, namespace, name, uid, rv, ctx)
    return await _add_disruption_target(core, namespace, name, uid, rv, ctx)


async def _add_disruption_target(
    core: ApiCore, namespace: str, name: str, uid: str | None, rv: str | None, ctx: Context
) -> core_v1.Pod:
    pod = await _get(core, "pods", namespace, name, core_v1.Pod, ctx)
    if uid and uid != pod.metadata.uid:
        raise errors.conflict(
            "pods",
            name,
            f"the UID in the precondition ({uid}) does not match the UID in record "
            f"({pod.metadata.uid}). The object might have been deleted and then recreated",
        )
    if rv and rv != pod.metadata.resource_version:
        raise errors.conflict(
            "pods",
            name,
            f"the ResourceVersion in the precondition ({rv}) does not match the "
            f"ResourceVersion in record ({pod.metadata.resource_version}). The object might "
            "have been modified",
        )
    mutations.set_pod_condition(
        pod,
        DISRUPTION_TARGET,
        "True",
        now_rfc3339(ctx.now),
        reason=EVICTION_BY_EVICTION_API,
        message="Eviction API: evicting",
    )
    return codec.decode(await _update_status(core, "pods", pod, ctx), core_v1.Pod)
