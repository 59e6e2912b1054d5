"""DefaultPreemption's choices, without servers: which pods of a node become victims (the
fewest, most important given back first, budget-breaking ones given back before others),
which node wins, and the messages when preemption cannot help."""

from __future__ import annotations

from typing import Any

from drasim.common import codec
from drasim.common.api import core_v1, policy_v1
from drasim.scheduler import framework
from drasim.scheduler.framework.node_info import NodeInfo
from drasim.scheduler.plugins.default_preemption import (
    Candidate,
    ClusterViews,
    DefaultPreemption,
    _pick_one,
)
from drasim.scheduler.plugins.node_resources_fit import NodeResourcesFit
from drasim.scheduler.queue import Nominator
from tests.scheduler.wrappers import make_node, make_pod


class RecordingApi:
    """The calls DefaultPreemption makes to the API, recorded."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    async def patch(self, type_: Any, name: str, patch: Any, **kwargs: Any) -> None:
        self.calls.append(("patch", name))

    async def delete(self, type_: Any, name: str, **kwargs: Any) -> None:
        self.calls.append(("delete", name))


def pod(name: str, priority: int, cpu: str, *, node: str = "n1", **labels: str) -> core_v1.Pod:
    p = make_pod(name).req({"cpu": cpu}).node(node).obj()
    p.spec.priority = priority
    p.metadata.labels = labels
    return p


def budget(allowed: int, **selector: str) -> policy_v1.PodDisruptionBudget:
    return codec.convert(
        {
            "metadata": {"name": "b", "namespace": "default"},
            "spec": {"selector": {"matchLabels": selector}},
            "status": {"disruptionsAllowed": allowed},
        },
        policy_v1.PodDisruptionBudget,
    )


def setup(
    nodes: list[NodeInfo], budgets: list[policy_v1.PodDisruptionBudget] = ()
) -> tuple[DefaultPreemption, framework.Framework, RecordingApi]:
    api = RecordingApi()
    views = ClusterViews(nodes=lambda: nodes, budgets=lambda: list(budgets))
    fwk = with_preemption(api, views)
    return preemption_of(fwk), fwk, api


def with_preemption(api: RecordingApi, views: ClusterViews) -> framework.Framework:
    """NodeResourcesFit and DefaultPreemption, which runs the framework's Filter."""
    return framework.Framework(
        [NodeResourcesFit()],
        factories=[
            lambda fwk: DefaultPreemption(
                api,  # type: ignore[arg-type]
                views,
                run_filter_plugins=fwk.run_filter_plugins,
            )
        ],
    )


def preemption_of(fwk: framework.Framework) -> DefaultPreemption:
    plugin = fwk.plugins[-1]
    assert isinstance(plugin, DefaultPreemption)
    return plugin


async def attempt(
    fwk: framework.Framework, preemptor: core_v1.Pod, nodes: list[NodeInfo]
) -> tuple[framework.Status | None, framework.CycleState]:
    """PreFilter and Filter over `nodes`, then PostFilter as the scheduling cycle runs it."""
    state = framework.CycleState()
    fwk.run_pre_filter_plugins(state, preemptor, nodes)
    diagnosis = framework.Diagnosis()
    for info in nodes:
        status = fwk.run_filter_plugins(state, preemptor, info)
        if status is not None:
            diagnosis.node_to_status[info.name] = status
    return await fwk.run_post_filter_plugins(state, preemptor, diagnosis), state


def node(name: str, cpu: str, *pods: core_v1.Pod) -> NodeInfo:
    return NodeInfo(make_node(name).capacity({"cpu": cpu, "pods": "110"}).obj(), pods)


async def test_the_fewest_lowest_victims_are_taken_and_the_rest_given_back() -> None:
    n1 = node("n1", "4", pod("a", 5, "1"), pod("b", 1, "1"), pod("c", 3, "1"), pod("d", 9, "1"))
    plugin, fwk, api = setup([n1])
    status, state = await attempt(fwk, make_pod("p").req({"cpu": "2"}).obj(), [n1])
    # Priority 0 for the preemptor would find no victim: give it 7.
    assert status is not None and "No preemption victims found" in status.message()

    urgent = make_pod("u").req({"cpu": "2"}).obj()
    urgent.spec.priority = 7
    status, state = await attempt(fwk, urgent, [n1])
    assert status is None and state.nominated_node_name == "n1"
    # All three lower pods out, then given back most important first: a (5) fits again,
    # c (3) and b (1) do not.
    assert api.calls == [("patch", "c"), ("delete", "c"), ("patch", "b"), ("delete", "b")]


async def test_pods_a_budget_protects_are_given_back_first() -> None:
    n1 = node("n1", "2", pod("guarded", 1, "1", app="db"), pod("free", 5, "1"))
    plugin, fwk, api = setup([n1], [budget(0, app="db")])
    # The preemptor's namespace does not matter: the budget covers its own namespace's pods.
    urgent = make_pod("u", namespace="other").req({"cpu": "1"}).obj()
    urgent.spec.priority = 10
    status, _ = await attempt(fwk, urgent, [n1])
    assert status is None
    # Without the budget the lower `guarded` would go; with it, `free` does.
    assert api.calls == [("patch", "free"), ("delete", "free")]


async def test_nodes_preemption_cannot_help_are_named() -> None:
    small = node("small", "1")  # the pod asks more than it has: unresolvable
    full = node("full", "2", pod("x", 50, "2", node="full"))
    _, fwk, api = setup([small, full])
    urgent = make_pod("u").req({"cpu": "2"}).obj()
    urgent.spec.priority = 10
    status, state = await attempt(fwk, urgent, [small, full])
    assert status is not None and status.code == framework.Code.UNSCHEDULABLE
    assert status.message() == (
        "preemption: 0/2 nodes are available: 1 No preemption victims found for incoming pod, "
        "1 Preemption is not helpful for scheduling."
    )
    assert state.nominated_node_name == "" and api.calls == []


def test_the_node_whose_victims_matter_least_wins() -> None:
    low, high = pod("l", 1, "1"), pod("h", 9, "1")
    assert _pick_one([Candidate("a", [high], 0), Candidate("b", [low], 0)]).node == "b"
    assert _pick_one([Candidate("a", [low], 1), Candidate("b", [high], 0)]).node == "b"
    assert _pick_one([Candidate("a", [low, low], 0), Candidate("b", [low], 0)]).node == "b"


def test_room_kept_for_a_nominated_pod_of_at_least_the_same_priority() -> None:
    n1 = node("n1", "2")
    fwk = framework.Framework([NodeResourcesFit()])
    nominator = Nominator()
    preemptor = make_pod("preemptor").uid("u-pre").req({"cpu": "2"}).obj()
    preemptor.spec.priority = 10
    nominator.set(preemptor, "n1")

    def fits(priority: int) -> bool:
        pod = make_pod(f"p{priority}").uid(f"u{priority}").req({"cpu": "1"}).obj()
        pod.spec.priority = priority
        state = framework.CycleState()
        state.nominated_pods = nominator.for_pod(pod)
        feasible, _ = fwk.find_nodes_that_fit(state, pod, [n1])
        return bool(feasible)

    assert not fits(5) and not fits(10)  # the room is the preemptor's
    assert fits(20)  # a more important pod does not wait for it
    assert nominator.for_pod(preemptor) == {}  # a pod never waits for itself
    nominator.follow(make_pod("preemptor").uid("u-pre").node("n1").obj())  # bound
    assert not nominator and fits(5)


async def test_lower_nominations_to_the_chosen_node_are_cleared() -> None:
    n1 = node("n1", "1", pod("victim", 1, "1"))
    waiting = make_pod("waiting").uid("u-w").req({"cpu": "1"}).obj()
    waiting.spec.priority = 5
    api = RecordingApi()
    views = ClusterViews(
        nodes=lambda: [n1], nominated_on=lambda name: [waiting] if name == "n1" else []
    )
    fwk = with_preemption(api, views)
    urgent = make_pod("u").req({"cpu": "1"}).obj()
    urgent.spec.priority = 10
    status, state = await attempt(fwk, urgent, [n1])
    assert status is None and state.nominated_node_name == "n1"
    assert api.calls == [("patch", "victim"), ("delete", "victim"), ("patch", "waiting")]


async def test_dry_runs_count_the_pods_nominated_to_the_node() -> None:
    # Evicting `victim` would make room, but a nominated pod as important as `urgent`
    # already has that room: preemption cannot help on n1.
    n1 = node("n1", "1", pod("victim", 1, "1"))
    first = make_pod("first").uid("u-first").req({"cpu": "1"}).obj()
    first.spec.priority = 10
    plugin, fwk, api = setup([n1])
    urgent = make_pod("u").req({"cpu": "1"}).obj()
    urgent.spec.priority = 10
    state = framework.CycleState()
    state.nominated_pods = {"n1": [first]}
    fwk.run_pre_filter_plugins(state, urgent, [n1])
    diagnosis = framework.Diagnosis()
    diagnosis.node_to_status["n1"] = fwk.run_filter_plugins(state, urgent, n1)
    status = await fwk.run_post_filter_plugins(state, urgent, diagnosis)
    assert status is not None and "Insufficient cpu" in status.message()
    assert api.calls == []
