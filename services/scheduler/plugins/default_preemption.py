"""DefaultPreemption: a pod that fits nowhere may evict pods of lower priority.

Upstream's PostFilter plugin, run after DynamicResources': for every node whose Filter
verdict preemption might change (Unschedulable, not UnschedulableAndUnresolvable), remove
the node's pods of lower priority in a copy of it and run Filter again; if the pod then fits,
give back as many of them as still leave it fitting (those whose eviction would break a
PodDisruptionBudget first, then the rest, most important first). Of the nodes that work,
the one whose victims matter least wins (fewest budget violations, then the lowest highest
victim priority, the lowest priority sum, the fewest victims, the latest started). Its
victims get the DisruptionTarget condition and are deleted, with a Preempted event each, and
the pod is nominated to the node (`status.nominatedNodeName`); it is scheduled when the
victims are gone.

While the victims terminate, other pods' Filter counts the nominated pod on its node when
it is at least as important as they are (`queue.Nominator`, `CycleState.nominated_pods`),
so the room stays its; nominations of pods of lower priority to that node are cleared.
As upstream, removing a victim in the copy frees what NodeResourcesFit counts (cpu, memory,
device-plugin resources) but not devices DynamicResources allocated to it: DynamicResources
has no PreFilter extensions, so preemption never helps a pod that waits for DRA devices.
"""

from __future__ import annotations

import dataclasses
import logging
import random
from collections.abc import Callable
from typing import TYPE_CHECKING

from drasim.common import codec, errors, events, labels, tables
from drasim.common.api import core_v1, policy_v1, scheduling_v1
from drasim.common.client import ApiClient
from drasim.scheduler import framework
from drasim.scheduler.framework.node_info import NodeInfo
from drasim.scheduler.plugins import names

if TYPE_CHECKING:
    from drasim.scheduler.framework import CycleState, Diagnosis, Status

log = logging.getLogger(__name__)

NOT_HELPFUL = "Preemption is not helpful for scheduling"
TERMINATING_ON_NOMINATED = "not eligible due to a terminating pod on the nominated node."
NO_VICTIMS = "No preemption victims found for incoming pod"
# Upstream's defaults: dry runs stop once this share of the nodes (at least this many)
# gave a candidate.
MIN_CANDIDATE_NODES_PERCENTAGE = 10
MIN_CANDIDATE_NODES_ABSOLUTE = 100
_MAX_INT32 = 2**31 - 1


def priority_of(pod: core_v1.Pod) -> int:
    """A pod's priority (0 when the admission never set one: pods made before it)."""
    return pod.spec.priority if pod.spec.priority is not None else 0


@dataclasses.dataclass(slots=True)
class Candidate:
    """A node where evicting `victims` lets the pod fit."""

    node: str
    victims: list[core_v1.Pod]
    pdb_violations: int


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ClusterViews:
    """What DefaultPreemption reads besides the API, and whom it tells: the nodes as the
    attempt's snapshot has them, the PodDisruptionBudgets, the pods nominated to a node,
    where victims' Preempted events go, and the metrics hook (victims, or None when no
    node was found)."""

    nodes: Callable[[], list[NodeInfo]] = list
    budgets: Callable[[], list[policy_v1.PodDisruptionBudget]] = list
    nominated_on: Callable[[str], list[core_v1.Pod]] = lambda node: []
    recorder: events.EventRecorder | None = None
    observe: Callable[[int | None], None] = lambda victims: None


class DefaultPreemption:
    name = names.DEFAULT_PREEMPTION

    def __init__(
        self,
        api: ApiClient,
        views: ClusterViews,
        *,
        run_filter_plugins: Callable[[CycleState, core_v1.Pod, NodeInfo], Status | None],
        rng: random.Random | None = None,
    ) -> None:
        self.api = api
        self.views = views
        # The profile's Filter, run again on copies of nodes (upstream's handle
        # `RunFilterPluginsWithNominatedPods`).
        self.run_filter_plugins = run_filter_plugins
        self._rng = rng or random.Random()

    async def post_filter(
        self, state: CycleState, pod: core_v1.Pod, diagnosis: Diagnosis
    ) -> Status | None:
        nodes = self.views.nodes()
        eligible, why = self._eligible(pod, diagnosis, nodes)
        if not eligible:
            self.views.observe(None)
            return framework.Status.unschedulable(f"preemption: {why}")
        candidates, statuses = self._find_candidates(state, pod, diagnosis, nodes)
        if not candidates:
            self.views.observe(None)
            state.nominated_node_name = ""  # a nomination from before no longer holds
            fit = framework.Diagnosis(
                node_to_status=statuses,
                absent_nodes_status=framework.Status.unresolvable(NOT_HELPFUL),
            )
            return framework.Status.unschedulable(f"preemption: {fit.message(len(nodes))}")
        best = _pick_one(candidates)
        self.views.observe(len(best.victims))
        await self._prepare(pod, best)
        state.nominated_node_name = best.node
        return None

    # -- who may preempt ---------------------------------------------------------------
    def _eligible(
        self, pod: core_v1.Pod, diagnosis: Diagnosis, nodes: list[NodeInfo]
    ) -> tuple[bool, str]:
        """Upstream `PodEligibleToPreemptOthers`."""
        if pod.spec.preemption_policy == scheduling_v1.NEVER:
            return False, "not eligible due to preemptionPolicy=Never."
        nominated = pod.status.nominated_node_name
        if nominated:
            status = diagnosis.get(nominated)
            if status.code != framework.Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                mine = priority_of(pod)
                for info in nodes:
                    if info.name != nominated:
                        continue
                    for other in info.pods:
                        if other.metadata.deletion_timestamp and priority_of(other) < mine:
                            return False, TERMINATING_ON_NOMINATED
        return True, ""

    # -- dry runs ------------------------------------------------------------------------
    def _find_candidates(
        self, state: CycleState, pod: core_v1.Pod, diagnosis: Diagnosis, nodes: list[NodeInfo]
    ) -> tuple[list[Candidate], dict[str, Status]]:
        statuses: dict[str, Status] = {}
        potential = []
        for info in nodes:
            if diagnosis.get(info.name).code == framework.Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                statuses[info.name] = framework.Status.unresolvable(NOT_HELPFUL)
            else:
                potential.append(info)
        if not potential:
            return [], statuses
        wanted = max(
            len(potential) * MIN_CANDIDATE_NODES_PERCENTAGE // 100, MIN_CANDIDATE_NODES_ABSOLUTE
        )
        budgets = self.views.budgets()
        offset = self._rng.randrange(len(potential))
        candidates: list[Candidate] = []
        for i in range(len(potential)):
            info = potential[(offset + i) % len(potential)]
            found, status = self._select_victims(state, pod, info, budgets)
            if found is None:
                assert status is not None
                statuses[info.name] = status
                continue
            candidates.append(found)
            violating = sum(1 for c in candidates if c.pdb_violations)
            if len(candidates) - violating > 0 and len(candidates) >= wanted:
                break
        return candidates, statuses

    def _select_victims(
        self,
        state: CycleState,
        pod: core_v1.Pod,
        node: NodeInfo,
        budgets: list[policy_v1.PodDisruptionBudget],
    ) -> tuple[Candidate | None, Status | None]:
        """Upstream `SelectVictimsOnNode`, on a copy of the node."""
        mine = priority_of(pod)
        lower = [p for p in node.pods if priority_of(p) < mine]
        if not lower:
            return None, framework.Status.unresolvable(NO_VICTIMS)
        info = node.snapshot()
        trial = state.clone()
        for victim in lower:
            info.remove_pod(victim)
        status = self.run_filter_plugins(trial, pod, info)
        if not framework.is_success(status):
            assert status is not None
            return None, status
        lower.sort(key=_importance)
        violating, others = _split_by_budget(lower, budgets)
        victims: list[core_v1.Pod] = []
        violations = 0
        for group, counts in ((violating, True), (others, False)):
            for candidate in group:
                info.add_pod(candidate)
                if framework.is_success(self.run_filter_plugins(trial, pod, info)):
                    continue  # reprieved
                info.remove_pod(candidate)
                victims.append(candidate)
                violations += counts
        return Candidate(node.name, victims, violations), None

    # -- acting --------------------------------------------------------------------------
    async def _prepare(self, pod: core_v1.Pod, candidate: Candidate) -> None:
        """Mark each victim DisruptionTarget and delete it, as upstream's `prepareCandidate`."""
        now = tables.format_time()
        for victim in candidate.victims:
            condition = core_v1.PodCondition(
                type="DisruptionTarget",
                status="True",
                reason="PreemptionByScheduler",
                message="default-scheduler: preempting to accommodate a higher priority pod",
                last_transition_time=now,
            )
            conditions = [c for c in victim.status.conditions if c.type != "DisruptionTarget"]
            try:
                await self.api.patch(
                    core_v1.Pod,
                    victim.metadata.name,
                    {"status": {"conditions": codec.to_builtins([*conditions, condition])}},
                    namespace=victim.metadata.namespace,
                    subresource="status",
                )
                await self.api.delete(
                    core_v1.Pod, victim.metadata.name, namespace=victim.metadata.namespace
                )
            except errors.NotFound:
                continue  # gone already: what preemption wanted
            if self.views.recorder is not None:
                try:
                    await self.views.recorder.record(
                        events.reference(victim),
                        "Normal",
                        "Preempted",
                        f"Preempted by pod {pod.metadata.uid} on node {candidate.node}",
                        action="Preempting",
                    )
                except errors.ApiError as err:
                    log.error("error recording Preempted for %s: %s", victim.metadata.name, err)
        # Pods of lower priority nominated to the node lose their nomination: the room is
        # this pod's now (they try again from scratch).
        mine = priority_of(pod)
        for other in self.views.nominated_on(candidate.node):
            if priority_of(other) >= mine or other.metadata.uid == pod.metadata.uid:
                continue
            try:
                await self.api.patch(
                    core_v1.Pod,
                    other.metadata.name,
                    {"status": {"nominatedNodeName": None}},
                    namespace=other.metadata.namespace,
                    subresource="status",
                )
            except errors.NotFound:
                continue


def _importance(pod: core_v1.Pod) -> tuple[int, str]:
    """Most important first (upstream `MoreImportantPod`): higher priority, then started
    earlier (a pod that never started counts as starting now)."""
    return (-priority_of(pod), pod.status.start_time or "9999")


def _split_by_budget(
    pods: list[core_v1.Pod], budgets: list[policy_v1.PodDisruptionBudget]
) -> tuple[list[core_v1.Pod], list[core_v1.Pod]]:
    """Upstream `filterPodsWithPDBViolation`: pods whose eviction, in this order, would take
    a matching budget below zero, and the others (order kept)."""
    allowed = [b.status.disruptions_allowed for b in budgets]
    selectors = [labels.from_label_selector(b.spec.selector) for b in budgets]
    violating, others = [], []
    for pod in pods:
        breaks = False
        for i, budget in enumerate(budgets):
            if budget.metadata.namespace != pod.metadata.namespace:
                continue  # a budget covers the pods of its own namespace
            if budget.spec.selector is None or selectors[i].empty():
                continue  # an empty selector matches nothing here, as upstream
            if not selectors[i].matches(pod.metadata.labels):
                continue
            if pod.metadata.name in (budget.status.disrupted_pods or {}):
                continue  # already counted by the budget
            allowed[i] -= 1
            breaks = breaks or allowed[i] < 0
        (violating if breaks else others).append(pod)
    return violating, others


def _pick_one(candidates: list[Candidate]) -> Candidate:
    """Upstream `pickOneNodeForPreemption`, its criteria in order."""

    def rank(c: Candidate) -> tuple[int, int, int, int, str]:
        if not c.victims:
            return (c.pdb_violations, -_MAX_INT32 - 1, 0, 0, "")
        highest = max(priority_of(v) for v in c.victims)
        total = sum(priority_of(v) + _MAX_INT32 + 1 for v in c.victims)
        earliest = min((v.status.start_time or "") for v in c.victims
                       if priority_of(v) == highest)  # fmt: skip
        # The latest start wins: invert the timestamp's order for `min`.
        later_first = "".join(chr(0x10FFFF - ord(ch)) for ch in earliest)
        return (c.pdb_violations, highest, total, len(c.victims), later_first)

    return min(candidates, key=rank)
