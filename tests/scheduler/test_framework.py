"""The framework's rules at each extension point, and the FailedScheduling message."""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable, Sequence
from typing import ClassVar

import pytest

from drasim.common import codec
from drasim.common.api import core_v1
from drasim.common.quantity import parse_quantity
from drasim.scheduler import framework
from drasim.scheduler.framework import (
    Code,
    CycleState,
    Diagnosis,
    Framework,
    FrameworkError,
    NodeChangeSink,
    NodeInfo,
    PreFilterResult,
    Status,
    verdict_cache,
)
from drasim.scheduler.plugins import (
    node_affinity,
    node_name,
    node_resources_fit,
    node_unschedulable,
    taint_toleration,
)
from tests.scheduler.wrappers import NodeWrapper, make_node, make_pod

# --- fake plugins ------------------------------------------------------------------------


class Recorder:
    """Shared call log, so tests can assert the order across plugins."""

    def __init__(self) -> None:
        self.calls: list[str] = []


@dataclasses.dataclass
class FakePreFilter:
    name: ClassVar[str] = "FakePreFilter"
    log: Recorder
    status: Status | None = None
    result: PreFilterResult | None = None

    def pre_filter(
        self, state: CycleState, pod: core_v1.Pod, nodes: Sequence[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None]:
        self.log.calls.append(f"{self.name}.pre_filter")
        return self.result, self.status


def named(cls: type, plugin_name: str) -> type:
    """A subclass of a fake with another plugin name, to have several in one framework."""
    return type(plugin_name, (cls,), {"name": plugin_name})


@dataclasses.dataclass
class FakeFilter:
    """Rejects the nodes listed in `reject` with `status`."""

    name: ClassVar[str] = "FakeFilter"
    log: Recorder
    reject: dict[str, Status] = dataclasses.field(default_factory=dict)

    def filter(self, state: CycleState, pod: core_v1.Pod, node_info: NodeInfo) -> Status | None:
        self.log.calls.append(f"{self.name}.filter({node_info.name})")
        status = self.reject.get(node_info.name)
        return None if status is None else dataclasses.replace(status)


@dataclasses.dataclass
class FakePreFilterAndFilter(FakeFilter):
    """A plugin at both points, as upstream's PreFilter/Filter pairs."""

    name: ClassVar[str] = "FakePreFilterAndFilter"
    pre_filter_status: Status | None = None

    def pre_filter(
        self, state: CycleState, pod: core_v1.Pod, nodes: Sequence[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None]:
        self.log.calls.append(f"{self.name}.pre_filter")
        return None, self.pre_filter_status


@dataclasses.dataclass
class FakeReserve:
    name: ClassVar[str] = "FakeReserve"
    log: Recorder
    status: Status | None = None

    def reserve(self, state: CycleState, pod: core_v1.Pod, node_name: str) -> Status | None:
        self.log.calls.append(f"{self.name}.reserve")
        return self.status

    async def unreserve(self, state: CycleState, pod: core_v1.Pod, node_name: str) -> None:
        self.log.calls.append(f"{self.name}.unreserve")


@dataclasses.dataclass
class FakePostFilter:
    name: ClassVar[str] = "FakePostFilter"
    log: Recorder
    status: Status | None = None

    async def post_filter(
        self, state: CycleState, pod: core_v1.Pod, filtered_node_status_map: Diagnosis
    ) -> Status | None:
        self.log.calls.append(f"{self.name}.post_filter")
        return self.status


@dataclasses.dataclass
class FakeScore:
    """Scores each node from `scores`."""

    name: ClassVar[str] = "FakeScore"
    scores: dict[str, int]
    pre_score_status: Status | None = None

    def pre_score(
        self, state: CycleState, pod: core_v1.Pod, nodes: Sequence[NodeInfo]
    ) -> Status | None:
        return self.pre_score_status

    def score(self, state: CycleState, pod: core_v1.Pod, node_info: NodeInfo) -> int:
        return self.scores[node_info.name]


class FakeNormalizedScore(FakeScore):
    """Normalizes by doubling every score."""

    name: ClassVar[str] = "FakeNormalizedScore"

    def normalize_scores(
        self, state: CycleState, pod: core_v1.Pod, scores: list[framework.NodeScore]
    ) -> list[framework.NodeScore]:
        return [framework.NodeScore(s.name, s.score * 2) for s in scores]


@dataclasses.dataclass
class FakeBinding:
    """PreBind and Bind with fixed results."""

    name: ClassVar[str] = "FakeBinding"
    log: Recorder
    pre_bind_status: Status | None = None
    bind_status: Status | None = None

    async def pre_bind(self, state: CycleState, pod: core_v1.Pod, node_name: str) -> Status | None:
        self.log.calls.append(f"{self.name}.pre_bind")
        return self.pre_bind_status

    async def bind(self, state: CycleState, pod: core_v1.Pod, node_name: str) -> Status | None:
        self.log.calls.append(f"{self.name}.bind")
        return self.bind_status


def nodes(*names: str) -> list[NodeInfo]:
    return [NodeInfo(make_node(n).obj()) for n in names]


POD = make_pod().obj()


# --- plugin sorting ----------------------------------------------------------------------


def test_plugins_are_sorted_into_extension_points_with_isinstance() -> None:
    log = Recorder()
    fit = node_resources_fit.NodeResourcesFit()
    fwk = Framework([FakePreFilter(log), node_name.NodeName(), fit, FakeReserve(log)])
    assert [p.name for p in fwk.pre_filter_plugins] == ["FakePreFilter", "NodeResourcesFit"]
    assert [p.name for p in fwk.filter_plugins] == ["NodeName", "NodeResourcesFit"]
    assert fwk.pre_score_plugins == [fit] and fwk.score_plugins == [fit]
    assert [p.name for p in fwk.reserve_plugins] == ["FakeReserve"]
    assert [p.name for p in fwk.enqueue_extensions] == ["NodeName", "NodeResourcesFit"]
    assert fwk.post_filter_plugins == fwk.pre_bind_plugins == fwk.bind_plugins == []
    assert list(fwk.events_to_register()) == ["NodeName", "NodeResourcesFit"]


def test_plugin_names_must_be_unique() -> None:
    with pytest.raises(ValueError, match="unique"):
        Framework([node_name.NodeName(), node_name.NodeName()])


# --- PreFilter and Filter ----------------------------------------------------------------


def test_pre_filter_skip_skips_that_plugins_filter_only() -> None:
    log = Recorder()
    skipping = FakePreFilterAndFilter(log, pre_filter_status=Status.skip())
    other = FakeFilter(log)
    fwk = Framework([skipping, other])
    state = CycleState()
    feasible, diagnosis = fwk.find_nodes_that_fit(state, POD, nodes("a"))
    assert [n.name for n in feasible] == ["a"]
    assert state.skip_filter_plugins == {"FakePreFilterAndFilter"}
    assert log.calls == ["FakePreFilterAndFilter.pre_filter", "FakeFilter.filter(a)"]


@dataclasses.dataclass(frozen=True)
class PreFilterCase:
    name: str
    statuses: tuple[Status | None, ...]  # one per PreFilter plugin P0, P1, P2
    want_calls: tuple[str, ...]
    want_code: Code | None  # None: success
    want_message: str = ""


PRE_FILTER_CASES = [
    PreFilterCase("all succeed", (None, None, None), ("P0", "P1", "P2"), None),
    PreFilterCase(
        "Unschedulable: the rest still run, for preemption",
        (None, Status.unschedulable("no"), None),
        ("P0", "P1", "P2"),
        Code.UNSCHEDULABLE,
        "0/2 nodes are available: no.",
    ),
    PreFilterCase(
        "UnschedulableAndUnresolvable stops at once",
        (Status.unresolvable("never"), None, None),
        ("P0",),
        Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
        "0/2 nodes are available: never.",
    ),
]


@pytest.mark.parametrize("case", PRE_FILTER_CASES, ids=lambda c: c.name)
def test_pre_filter_statuses(case: PreFilterCase) -> None:
    log = Recorder()
    plugins = [named(FakePreFilter, f"P{i}")(log, status=s) for i, s in enumerate(case.statuses)]
    _, status, _ = Framework(plugins).run_pre_filter_plugins(CycleState(), POD, nodes("a", "b"))
    assert log.calls == [f"{p}.pre_filter" for p in case.want_calls]
    assert (None if status is None else status.code) == case.want_code
    if case.want_code is not None:
        assert status is not None
        assert status.plugin == f"P{[s is not None for s in case.statuses].index(True)}"
        _, diagnosis = Framework(plugins).find_nodes_that_fit(CycleState(), POD, nodes("a", "b"))
        assert diagnosis.message(2) == case.want_message
        assert diagnosis.get("a") is diagnosis.get("b")  # every node shares the status
        assert diagnosis.unschedulable_plugins == {status.plugin}


def test_pre_filter_error_aborts_the_attempt() -> None:
    fwk = Framework([FakePreFilter(Recorder(), status=Status.error("boom"))])
    with pytest.raises(FrameworkError, match='running PreFilter plugin "FakePreFilter": boom'):
        fwk.find_nodes_that_fit(CycleState(), POD, nodes("a"))


def test_pre_filter_result_narrows_the_nodes() -> None:
    log = Recorder()
    narrowing = FakePreFilter(log, result=PreFilterResult(frozenset({"b", "ghost"})))
    fwk = Framework([narrowing, FakeFilter(log)])
    feasible, diagnosis = fwk.find_nodes_that_fit(CycleState(), POD, nodes("a", "b", "c"))
    assert [n.name for n in feasible] == ["b"]
    assert log.calls == ["FakePreFilter.pre_filter", "FakeFilter.filter(b)"]
    assert diagnosis.get("a") == Status.unresolvable(
        "node(s) didn't satisfy plugin(s) [FakePreFilter]"
    )


@pytest.mark.parametrize(
    ("results", "want"),
    [
        (
            [frozenset({"a"}), frozenset({"b"})],
            "node(s) didn't satisfy plugin(s) [P0 P1] simultaneously",
        ),
        ([frozenset()], "node(s) didn't satisfy plugin P0"),
    ],
    ids=["disjoint results", "empty result"],
)
def test_pre_filter_results_without_common_nodes(results: list[frozenset[str]], want: str) -> None:
    plugins = [
        named(FakePreFilter, f"P{i}")(Recorder(), result=PreFilterResult(r))
        for i, r in enumerate(results)
    ]
    feasible, diagnosis = Framework(plugins).find_nodes_that_fit(CycleState(), POD, nodes("a"))
    assert feasible == []
    assert diagnosis.pre_filter_msg == want
    assert diagnosis.message(1) == f"0/1 nodes are available: {want}."


def test_first_rejecting_filter_rules_the_node_out() -> None:
    log = Recorder()
    first = named(FakeFilter, "First")(log, reject={"a": Status.unschedulable("first says no")})
    second = named(FakeFilter, "Second")(log, reject={"b": Status.unresolvable("second says no")})
    feasible, diagnosis = Framework([first, second]).find_nodes_that_fit(
        CycleState(), POD, nodes("a", "b", "c")
    )
    assert [n.name for n in feasible] == ["c"]
    assert log.calls == [
        "First.filter(a)",
        "First.filter(b)",
        "Second.filter(b)",
        "First.filter(c)",
        "Second.filter(c)",
    ]
    assert diagnosis.node_to_status == {
        "a": Status.unschedulable("first says no").with_plugin("First"),
        "b": Status.unresolvable("second says no").with_plugin("Second"),
    }
    assert diagnosis.unschedulable_plugins == {"First", "Second"}


def test_filter_error_aborts_the_attempt() -> None:
    fwk = Framework([FakeFilter(Recorder(), reject={"a": Status.error("broken")})])
    with pytest.raises(FrameworkError, match='running "FakeFilter" filter plugin: broken'):
        fwk.find_nodes_that_fit(CycleState(), POD, nodes("a"))


# --- the FailedScheduling message --------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class MessageCase:
    name: str
    node_reasons: dict[str, tuple[str, ...]]
    want: str
    num_all_nodes: int | None = None  # default: the nodes listed
    post_filter_msg: str = ""


MESSAGE_CASES = [
    MessageCase(
        "one reason",
        {"a": ("Insufficient cpu",), "b": ("Insufficient cpu",)},
        "0/2 nodes are available: 2 Insufficient cpu.",
    ),
    MessageCase(
        "sorted as strings, count first",
        {
            "a": ("Insufficient example.com/gpu",),
            "b": ("Insufficient example.com/gpu",),
            "c": ("Insufficient example.com/gpu",),
            "d": ("node(s) didn't match Pod's node affinity/selector",),
            "e": ("node(s) didn't match Pod's node affinity/selector",),
        },
        "0/5 nodes are available: 2 node(s) didn't match Pod's node affinity/selector, "
        "3 Insufficient example.com/gpu.",
    ),
    MessageCase(
        "10 sorts before 2",
        {**{f"n{i}": ("b",) for i in range(10)}, "x": ("a",), "y": ("a",)},
        "0/12 nodes are available: 10 b, 2 a.",
    ),
    MessageCase(
        "equal counts sort by reason",
        {"a": ("Insufficient memory", "Insufficient cpu")},
        "0/1 nodes are available: 1 Insufficient cpu, 1 Insufficient memory.",
    ),
    MessageCase(
        "nodes passing Filter are counted but not listed",
        {"a": ("Too many pods",)},
        "0/3 nodes are available: 1 Too many pods.",
        num_all_nodes=3,
    ),
    MessageCase(
        # As upstream's integration test `testExtendedResource`
        # (`test/integration/dra/extendedresource.go`): 1.37's DynamicResources PostFilter
        # gives no reason there.
        "gate off, as upstream's testExtendedResource",
        {f"n{i}": ("Insufficient example.com/gpu",) for i in range(8)},
        "0/8 nodes are available: 8 Insufficient example.com/gpu. "
        "preemption: 0/8 nodes are available: 8 Preemption is not helpful for scheduling.",
        post_filter_msg="preemption: 0/8 nodes are available: "
        "8 Preemption is not helpful for scheduling.",
    ),
]


@pytest.mark.parametrize("case", MESSAGE_CASES, ids=lambda c: c.name)
def test_failed_scheduling_message(case: MessageCase) -> None:
    diagnosis = Diagnosis(
        node_to_status={n: Status.unschedulable(*r) for n, r in case.node_reasons.items()},
        post_filter_msg=case.post_filter_msg,
    )
    num_all_nodes = case.num_all_nodes or len(case.node_reasons)
    assert diagnosis.message(num_all_nodes) == case.want
    assert str(framework.FitError(POD, num_all_nodes, diagnosis)) == case.want


def test_failed_scheduling_message_from_the_real_plugins() -> None:
    """Five nodes: three too small for the gpu, one in the wrong zone, one cordoned."""
    gpu = "example.com/gpu"
    infos = [
        *(NodeInfo(make_node(f"small-{i}").label("zone", "a").obj()) for i in range(3)),
        NodeInfo(make_node("far").label("zone", "b").capacity({gpu: "1"}).obj()),
        NodeInfo(make_node("cordoned").label("zone", "a").unschedulable().obj()),
    ]
    fwk = Framework(
        [
            node_unschedulable.NodeUnschedulable(),
            node_name.NodeName(),
            taint_toleration.TaintToleration(),
            node_affinity.NodeAffinity(),
            node_resources_fit.NodeResourcesFit(),
        ]
    )
    pod = make_pod().req({gpu: "1"}).node_selector({"zone": "a"}).obj()
    feasible, diagnosis = fwk.find_nodes_that_fit(CycleState(), pod, infos)
    assert feasible == []
    diagnosis.post_filter_msg = "preemption: not eligible due to preemptionPolicy=Never."
    assert diagnosis.message(len(infos)) == (
        "0/5 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, "
        "1 node(s) were unschedulable, 3 Insufficient example.com/gpu. "
        "preemption: not eligible due to preemptionPolicy=Never."
    )
    assert diagnosis.unschedulable_plugins == {
        "NodeAffinity",
        "NodeResourcesFit",
        "NodeUnschedulable",
    }


# --- PostFilter --------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class PostFilterCase:
    name: str
    statuses: tuple[Status | None, ...]  # one per PostFilter plugin P0, P1
    want_calls: tuple[str, ...]
    want: Status | None


POST_FILTER_CASES = [
    PostFilterCase(
        "reasons of all Unschedulable plugins, named after the first",
        (
            Status.unschedulable("no new claims to deallocate"),
            Status.unschedulable("preemption: x"),
        ),
        ("P0", "P1"),
        Status.unschedulable("no new claims to deallocate", "preemption: x").with_plugin("P0"),
    ),
    PostFilterCase("success stops", (None, Status.unschedulable("x")), ("P0",), None),
    PostFilterCase(
        "unresolvable stops",
        (Status.unresolvable("never"), None),
        ("P0",),
        Status.unresolvable("never").with_plugin("P0"),
    ),
]


@pytest.mark.parametrize("case", POST_FILTER_CASES, ids=lambda c: c.name)
async def test_post_filter(case: PostFilterCase) -> None:
    log = Recorder()
    plugins = [named(FakePostFilter, f"P{i}")(log, s) for i, s in enumerate(case.statuses)]
    status = await Framework(plugins).run_post_filter_plugins(CycleState(), POD, Diagnosis())
    assert log.calls == [f"{p}.post_filter" for p in case.want_calls]
    assert status == case.want


async def test_post_filter_error() -> None:
    fwk = Framework([FakePostFilter(Recorder(), Status.error("api down"))])
    status = await fwk.run_post_filter_plugins(CycleState(), POD, Diagnosis())
    assert status is not None
    assert (status.code, status.message(), status.plugin) == (
        Code.ERROR,
        "api down",
        "FakePostFilter",
    )


# --- Score -------------------------------------------------------------------------------


def test_scores_are_normalized_weighted_and_summed() -> None:
    plain = FakeScore({"a": 10, "b": 20})
    normalized = FakeNormalizedScore({"a": 30, "b": 5})
    fwk = Framework([plain, normalized], score_weights={"FakeNormalizedScore": 2})
    state = CycleState()
    assert fwk.run_pre_score_plugins(state, POD, nodes("a", "b")) is None
    scores = fwk.run_score_plugins(state, POD, nodes("a", "b"))
    assert [(s.name, s.total_score) for s in scores] == [("a", 130), ("b", 40)]
    assert scores[0].scores == [
        framework.PluginScore("FakeScore", 10),
        framework.PluginScore("FakeNormalizedScore", 120),
    ]
    assert fwk.total_scores(state, POD, nodes("a", "b")) == [130, 40]
    assert Framework([plain]).total_scores(state, POD, nodes("a", "b")) == [10, 20]


def test_pre_score_skip_skips_that_plugins_score() -> None:
    fwk = Framework([FakeScore({"a": 10}, pre_score_status=Status.skip())])
    state = CycleState()
    assert fwk.run_pre_score_plugins(state, POD, nodes("a")) is None
    assert [s.total_score for s in fwk.run_score_plugins(state, POD, nodes("a"))] == [0]
    assert fwk.total_scores(state, POD, nodes("a")) == [0]


def test_pre_score_failure_is_an_error() -> None:
    fwk = Framework([FakeScore({}, pre_score_status=Status.unschedulable("no"))])
    status = fwk.run_pre_score_plugins(CycleState(), POD, nodes("a"))
    assert status is not None and status.code == Code.ERROR
    assert status.message() == 'running PreScore plugin "FakeScore": no'


def test_score_out_of_range_is_an_error() -> None:
    fwk = Framework([FakeNormalizedScore({"a": 60})])
    with pytest.raises(FrameworkError, match="invalid score 120"):
        fwk.run_score_plugins(CycleState(), POD, nodes("a"))


# --- Reserve -----------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ReserveCase:
    name: str
    statuses: tuple[Status | None, ...]  # one per reserve plugin R0, R1, R2
    want_calls: tuple[str, ...]
    want_code: Code | None
    want_message: str = ""
    want_plugin: str = ""


RESERVE_CASES = [
    ReserveCase(
        "all reserve",
        (None, None, None),
        ("R0.reserve", "R1.reserve", "R2.reserve"),
        None,
    ),
    ReserveCase(
        "a rejection unreserves every plugin in reverse order",
        (None, Status.unschedulable("taken"), None),
        ("R0.reserve", "R1.reserve", "R2.unreserve", "R1.unreserve", "R0.unreserve"),
        Code.UNSCHEDULABLE,
        "taken",
        "R1",
    ),
    ReserveCase(
        "an error is wrapped and unreserves too",
        (Status.error("boom"), None, None),
        ("R0.reserve", "R2.unreserve", "R1.unreserve", "R0.unreserve"),
        Code.ERROR,
        'running Reserve plugin "R0": boom',
    ),
]


@pytest.mark.parametrize("case", RESERVE_CASES, ids=lambda c: c.name)
async def test_reserve(case: ReserveCase) -> None:
    log = Recorder()
    plugins = [named(FakeReserve, f"R{i}")(log, s) for i, s in enumerate(case.statuses)]
    status = await Framework(plugins).run_reserve_plugins_reserve(CycleState(), POD, "worker")
    assert tuple(log.calls) == case.want_calls
    if case.want_code is None:
        assert status is None
    else:
        assert status is not None
        assert (status.code, status.message(), status.plugin) == (
            case.want_code,
            case.want_message,
            case.want_plugin,
        )


async def test_unreserve_runs_in_reverse_order() -> None:
    log = Recorder()
    plugins = [named(FakeReserve, f"R{i}")(log) for i in range(3)]
    await Framework(plugins).run_reserve_plugins_unreserve(CycleState(), POD, "worker")
    assert log.calls == ["R2.unreserve", "R1.unreserve", "R0.unreserve"]


# --- PreBind and Bind --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "want"),
    [
        (None, None),
        (
            Status.unschedulable("claim gone"),
            Status.unschedulable("claim gone").with_plugin("FakeBinding"),
        ),
    ],
    ids=["success", "rejected"],
)
async def test_pre_bind(status: Status | None, want: Status | None) -> None:
    fwk = Framework([FakeBinding(Recorder(), pre_bind_status=status)])
    assert await fwk.run_pre_bind_plugins(CycleState(), POD, "worker") == want


async def test_pre_bind_error_is_wrapped() -> None:
    """A failed PreBind (e.g. the pod status patch) is an Error (upstream
    `handleBindingCycleError` then unreserves)."""
    fwk = Framework([FakeBinding(Recorder(), pre_bind_status=Status.error("patch error"))])
    status = await fwk.run_pre_bind_plugins(CycleState(), POD, "worker")
    assert status is not None and status.code == Code.ERROR
    assert status.message() == 'running PreBind plugin "FakeBinding": patch error'


async def test_bind_asks_binders_until_one_does_not_skip() -> None:
    log = Recorder()
    skipping = named(FakeBinding, "Skipping")(log, bind_status=Status.skip())
    binding = named(FakeBinding, "Binding")(log)
    never = named(FakeBinding, "Never")(log)
    fwk = Framework([skipping, binding, never])
    assert await fwk.run_bind_plugins(CycleState(), POD, "worker") is None
    assert log.calls == ["Skipping.bind", "Binding.bind"]


async def test_bind_without_binder_skips() -> None:
    status = await Framework([]).run_bind_plugins(CycleState(), POD, "worker")
    assert status is not None and status.code == Code.SKIP


async def test_bind_error_is_wrapped() -> None:
    fwk = Framework([FakeBinding(Recorder(), bind_status=Status.error("conflict"))])
    status = await fwk.run_bind_plugins(CycleState(), POD, "worker")
    assert status is not None and status.message() == 'running Bind plugin "FakeBinding": conflict'


# --- metrics hook ------------------------------------------------------------------------


async def test_plugin_durations_are_observed() -> None:
    observed: list[tuple[str, str, str]] = []

    def observe(point: framework.ExtensionPoint, plugin: str, code: str, seconds: float) -> None:
        assert seconds >= 0
        observed.append((point, plugin, code))

    log = Recorder()
    fwk = Framework(
        [
            FakeFilter(log, reject={"a": Status.unschedulable("no")}),
            FakeReserve(log),
            FakeBinding(log),
        ],
        observe_plugin_duration=observe,
    )
    unsampled = CycleState()
    fwk.find_nodes_that_fit(unsampled, POD, nodes("a", "b"))
    await fwk.run_reserve_plugins_reserve(unsampled, POD, "b")
    assert observed == []  # only sampled attempts are timed

    state = CycleState()
    state.record_plugin_metrics = True
    fwk.find_nodes_that_fit(state, POD, nodes("a", "b"))
    await fwk.run_reserve_plugins_reserve(state, POD, "b")
    await fwk.run_pre_bind_plugins(state, POD, "b")
    await fwk.run_bind_plugins(state, POD, "b")
    assert observed == [
        ("Filter", "FakeFilter", "Unschedulable"),
        ("Filter", "FakeFilter", "Success"),
        ("Reserve", "FakeReserve", "Success"),
        ("PreBind", "FakeBinding", "Success"),
        ("Bind", "FakeBinding", "Success"),
    ]


# --- Status, CycleState, NodeInfo, events ------------------------------------------------


def test_status_helpers() -> None:
    assert str(Code.UNSCHEDULABLE_AND_UNRESOLVABLE) == "UnschedulableAndUnresolvable"
    assert framework.is_success(None) and framework.is_success(Status(Code.SUCCESS))
    assert not framework.is_success(Status.skip()) and framework.is_skip(Status.skip())
    assert framework.is_rejected(Status(Code.PENDING)) and not framework.is_rejected(None)
    status = Status(Code.ERROR, ["more"], err=ValueError("first"))
    assert status.all_reasons() == ["first", "more"] and status.message() == "first, more"
    assert Status.error("text").message() == "text"
    assert Status.unresolvable("a", "b") == Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ["a", "b"])


@dataclasses.dataclass
class Counter:
    value: int

    def clone(self) -> Counter:
        return Counter(self.value)


def test_cycle_state_clone_is_independent() -> None:
    state = CycleState()
    state.write("Plugin", Counter(1))
    state.skip_filter_plugins.add("Skipped")
    copy = state.clone()
    copy.read("Plugin").value = 2  # type: ignore[attr-defined]
    copy.skip_filter_plugins.add("Other")
    assert state.read("Plugin") == Counter(1)
    assert state.skip_filter_plugins == {"Skipped"}
    state.delete("Plugin")
    with pytest.raises(KeyError, match="'Plugin' not found"):
        state.read("Plugin")


def test_node_info_sums_requests_of_its_pods() -> None:
    info = NodeInfo(make_node().capacity({"cpu": "4", "pods": "10"}).obj())
    first = make_pod("first").req({"cpu": "1", "example.com/gpu": "2"}).obj()
    second = make_pod("second").obj()  # no requests
    generation = info.generation
    info.add_pod(first)
    info.add_pod(second)
    assert info.generation > generation
    # Integer vectors, cpu in millicores (upstream `framework.Resource`).
    assert info.requested == {"cpu": 1000, "example.com/gpu": 2}
    assert info.non_zero_requested["cpu"] == 1100
    assert info.non_zero_requested["memory"] == 400 * 1024**2  # 200Mi each
    assert info.allowed_pod_number == 10 and info.allocatable["cpu"] == parse_quantity("4")
    assert info.allocatable_resource == {"cpu": 4000, "pods": 10}

    snapshot = info.snapshot()
    info.remove_pod(make_pod("first").obj())  # matched by UID
    assert info.requested == {}
    assert [p.metadata.name for p in info.pods] == ["second"]
    assert [p.metadata.name for p in snapshot.pods] == ["first", "second"]
    with pytest.raises(KeyError):
        info.remove_pod(first)


def test_pre_filter_result_merge() -> None:
    everything = PreFilterResult()
    ab, bc = PreFilterResult(frozenset("ab")), PreFilterResult(frozenset("bc"))
    assert everything.merge(None) is None and everything.merge(everything) is None
    assert everything.merge(ab) == ab and ab.merge(None) == ab
    assert ab.merge(bc) == PreFilterResult(frozenset("b"))


@pytest.mark.parametrize(
    ("resource", "action", "want"),
    [
        (framework.EventResource.NODE, framework.ActionType.ADD, "NodeAdd"),
        (
            framework.EventResource.NODE,
            framework.ActionType.UPDATE_NODE_TAINT,
            "NodeUpdateNodeTaint",
        ),
        (
            framework.EventResource.DEVICE_CLASS,
            framework.ActionType.UPDATE,
            "resource.k8s.io/DeviceClassUpdate",
        ),
        (framework.EventResource.POD, framework.ActionType.ALL, "PodAll"),
    ],
    ids=["add", "specific update", "update", "all"],
)
def test_cluster_event_label(
    resource: framework.EventResource, action: framework.ActionType, want: str
) -> None:
    assert framework.ClusterEvent(resource, action).label() == want


NODE_CHANGES = [
    ("heartbeat only", lambda n: n, []),
    ("labels", lambda n: n.label("zone", "a"), ["NodeUpdateNodeLabel"]),
    ("allocatable", lambda n: n.capacity({"cpu": "8"}), ["NodeUpdateNodeAllocatable"]),
    ("taint", lambda n: n.taint("gpu"), ["NodeUpdateNodeTaint"]),
    ("cordon", lambda n: n.unschedulable(), []),
]


@pytest.mark.parametrize(("name", "change", "want"), NODE_CHANGES, ids=[c[0] for c in NODE_CHANGES])
def test_node_scheduling_properties_change(
    name: str, change: Callable[[NodeWrapper], NodeWrapper], want: list[str]
) -> None:
    old = make_node().capacity({"cpu": "4"}).obj()
    new = change(make_node().capacity({"cpu": "4"})).obj()
    events = framework.node_scheduling_properties_change(new, old)
    assert [e.label() for e in events] == want


def test_uncordon_is_a_taint_change() -> None:
    cordoned, schedulable = make_node().unschedulable().obj(), make_node().obj()
    events = framework.node_scheduling_properties_change(schedulable, cordoned)
    assert [e.label() for e in events] == ["NodeUpdateNodeTaint"]


def test_pod_scheduling_properties_change() -> None:
    old = make_pod().req({"cpu": "2"}).node("worker").obj()
    new = make_pod().req({"cpu": "1"}).node("worker").toleration("gpu", "Exists").obj()
    new.metadata.labels = {"app": "x"}
    new.status.extended_resource_claim_status = core_v1.PodExtendedResourceClaimStatus(
        resource_claim_name="my-pod-extended-resources-abcde"
    )
    events = framework.pod_scheduling_properties_change(new, old)
    assert [e.label() for e in events] == [
        "PodUpdatePodLabel",
        "PodUpdatePodScaleDown",
        "PodUpdatePodToleration",
        "PodUpdatePodGeneratedResourceClaim",
    ]
    assert framework.pod_scheduling_properties_change(old, old) == []


# --- percentageOfNodesToScore ------------------------------------------------------------


@pytest.mark.parametrize(
    ("num_all_nodes", "percentage", "expected"),
    [
        (50, 0, 50),  # a small cluster: every node
        (99, 0, 99),
        (100, 0, 100),  # 50 % - 0 % of 100 → 50, raised to the minimum of 100
        (500, 0, 230),  # 50 % - 4 % = 46 %
        (5000, 0, 500),  # 50 % - 40 % = 10 %
        (10000, 0, 500),  # 50 % - 80 % < 5 % → 5 %
        (1000, 30, 300),
        (1000, 5, 100),
    ],
)
def test_num_feasible_nodes_to_find(num_all_nodes: int, percentage: int, expected: int) -> None:
    fwk = Framework([], percentage_of_nodes_to_score=percentage)
    assert fwk.num_feasible_nodes_to_find(num_all_nodes) == expected


def test_filtering_stops_at_enough_feasible_nodes_and_rotates() -> None:
    log = Recorder()
    fwk = Framework([FakeFilter(log, reject={"n-3": Status.unschedulable("no")})])
    all_nodes = nodes(*(f"n-{i}" for i in range(500)))
    feasible, diagnosis = fwk.find_nodes_that_fit(CycleState(), POD, all_nodes)
    # 230 feasible of 231 checked (n-3 rejected); the rest are not looked at.
    assert [n.name for n in feasible] == [f"n-{i}" for i in range(231) if i != 3]
    assert set(diagnosis.node_to_status) == {"n-3"}
    # The next attempt starts after the last node checked, wrapping around.
    feasible, _ = fwk.find_nodes_that_fit(CycleState(), POD, all_nodes)
    assert feasible[0].name == "n-231"
    assert [n.name for n in feasible][-1] == "n-460"
    feasible, _ = fwk.find_nodes_that_fit(CycleState(), POD, all_nodes)
    assert [n.name for n in feasible][:2] == ["n-461", "n-462"]
    assert feasible[-1].name == "n-191"  # 39 after n-461, then n-0 … n-191 without n-3


# --- reused Filter verdicts --------------------------------------------------------------


@dataclasses.dataclass
class ReusableFilter(FakeFilter):
    """A filter whose verdict depends on the pod's spec, the NodeInfo and `external`,
    whose changes it reports to the sink of `watch_filter_inputs` (as DynamicResources
    does for devices taken and freed); with `veto` it signs no pod."""

    name: ClassVar[str] = "ReusableFilter"
    external: dict[str, int] = dataclasses.field(default_factory=dict)
    veto: bool = False
    sinks: list[NodeChangeSink] = dataclasses.field(default_factory=list)

    def pre_filter(
        self, state: CycleState, pod: core_v1.Pod, nodes: Sequence[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None]:
        return None, None

    def sign_pod(self, state: CycleState, pod: core_v1.Pod) -> bytes | None:
        return None if self.veto else codec.encode(pod.spec)

    def watch_filter_inputs(self, sink: NodeChangeSink) -> None:
        self.sinks.append(sink)

    def change(self, node_name: str | None) -> None:
        """Change `external` for one node (None: for all) and report it."""
        for sink in self.sinks:
            if node_name is None:
                sink.all_changed()
            else:
                sink.node_changed(node_name)


def filtered(log: Recorder) -> list[str]:
    calls = [c for c in log.calls if ".filter(" in c]
    log.calls.clear()
    return calls


def test_verdicts_are_reused_until_the_node_or_a_reported_input_changes() -> None:
    log = Recorder()
    plugin = ReusableFilter(log, reject={"b": Status.unschedulable("no")})
    fwk = Framework([plugin])
    all_nodes = nodes("a", "b", "c")
    feasible, diagnosis = fwk.find_nodes_that_fit(CycleState(), POD, all_nodes)
    assert [n.name for n in feasible] == ["a", "c"] and filtered(log) == [
        "ReusableFilter.filter(a)",
        "ReusableFilter.filter(b)",
        "ReusableFilter.filter(c)",
    ]

    # Another pod with the same spec: no plugin call, the same answer and diagnosis.
    same_spec = make_pod("other-name").obj()
    same_spec.spec = POD.spec
    state = CycleState()
    feasible, again = fwk.find_nodes_that_fit(state, same_spec, all_nodes)
    assert [n.name for n in feasible] == ["a", "c"] and filtered(log) == []
    assert again.message(3) == diagnosis.message(3)
    kept = verdict_cache.attempt_verdicts(state)
    assert kept is not None and kept.reused == {"a", "c"}

    # A pod added to node a (new generation) and a reported change of c: both again.
    all_nodes[0].add_pod(make_pod("p").req({"cpu": "1"}).obj())
    plugin.change("c")
    fwk.find_nodes_that_fit(CycleState(), POD, all_nodes)
    assert sorted(filtered(log)) == ["ReusableFilter.filter(a)", "ReusableFilter.filter(c)"]

    # A change of every node: all again.
    plugin.change(None)
    fwk.find_nodes_that_fit(CycleState(), POD, all_nodes)
    assert len(filtered(log)) == 3

    # A pod with another spec has verdicts of its own.
    fwk.find_nodes_that_fit(CycleState(), make_pod("x").req({"cpu": "2"}).obj(), all_nodes)
    assert len(filtered(log)) == 3


def test_verdicts_older_than_the_change_log_are_all_dropped() -> None:
    log = Recorder()
    plugin = ReusableFilter(log)
    fwk = Framework([plugin])
    fwk.verdict_cache.MAX_LOG = 2
    all_nodes = nodes("a", "b", "c")
    fwk.find_nodes_that_fit(CycleState(), POD, all_nodes)
    filtered(log)
    plugin.change("a")
    fwk.find_nodes_that_fit(CycleState(), POD, all_nodes)
    assert filtered(log) == ["ReusableFilter.filter(a)"]

    for name in ("b", "c", "b"):  # the log starts over: "b" is no longer in it
        plugin.change(name)
    fwk.find_nodes_that_fit(CycleState(), POD, all_nodes)
    assert len(filtered(log)) == 3


def test_verdicts_are_not_reused_when_a_plugin_cannot_or_does_not_sign_the_pod() -> None:
    log = Recorder()
    fwk = Framework([ReusableFilter(log), FakeFilter(log)])  # FakeFilter declares nothing
    for _ in range(2):
        fwk.find_nodes_that_fit(CycleState(), POD, nodes("a"))
    assert len(filtered(log)) == 4

    vetoing = Framework([ReusableFilter(log, veto=True)])
    all_nodes = nodes("a")
    for _ in range(2):
        vetoing.find_nodes_that_fit(CycleState(), POD, all_nodes)
    assert len(filtered(log)) == 2


def test_a_reused_verdict_is_confirmed_on_the_chosen_node() -> None:
    log = Recorder()
    plugin = ReusableFilter(log)
    fwk = Framework([plugin])
    all_nodes = nodes("a")
    fwk.find_nodes_that_fit(CycleState(), POD, all_nodes)
    state = CycleState()
    [chosen], _ = fwk.find_nodes_that_fit(state, POD, all_nodes)
    filtered(log)
    fwk.verdict_cache.confirm(state, POD, chosen)
    assert filtered(log) == ["ReusableFilter.filter(a)"]

    # A change nobody reported: the confirmation fails and every verdict goes.
    plugin.reject["a"] = Status.unschedulable("no")
    with pytest.raises(FrameworkError, match="stale"):
        fwk.verdict_cache.confirm(state, POD, chosen)
    feasible, _ = fwk.find_nodes_that_fit(CycleState(), POD, all_nodes)
    assert feasible == [] and filtered(log) == ["ReusableFilter.filter(a)"] * 2


@dataclasses.dataclass
class ReusableScore(FakeScore):
    """Counts its calls; signs every pod, so its scores may be kept."""

    name: ClassVar[str] = "ReusableScore"
    calls: list[str] = dataclasses.field(default_factory=list)

    def sign_pod(self, state: CycleState, pod: core_v1.Pod) -> str:
        return ""

    def score(self, state: CycleState, pod: core_v1.Pod, node_info: NodeInfo) -> int:
        self.calls.append(node_info.name)
        return self.scores[node_info.name]


def test_scores_are_reused_with_the_filter_verdicts() -> None:
    scorer = ReusableScore({"a": 10, "b": 20})
    fwk = Framework([ReusableFilter(Recorder()), scorer])
    all_nodes = nodes("a", "b")

    def attempt() -> list[tuple[str, int]]:
        """The totals the host was picked from (those kept for the spec)."""
        state = CycleState()
        feasible, _ = fwk.find_nodes_that_fit(state, POD, all_nodes)
        fwk.pick_host(state, POD, feasible, random.Random(0))
        kept = verdict_cache.attempt_verdicts(state)
        assert kept is not None
        return [(node, total) for node, (_, total) in sorted(kept.verdicts.totals.items())]

    assert attempt() == [("a", 10), ("b", 20)] and scorer.calls == ["a", "b"]
    scorer.scores["a"] = 99  # unseen: nothing reported changed
    assert attempt() == [("a", 10), ("b", 20)] and scorer.calls == ["a", "b"]
    all_nodes[0].add_pod(make_pod("p").obj())  # node a changed: scored again
    assert attempt() == [("a", 99), ("b", 20)] and scorer.calls == ["a", "b", "a"]


@dataclasses.dataclass
class LabelScore(ReusableScore):
    """Scores by the pod's `tier` label, which no Filter plugin reads: signs it."""

    name: ClassVar[str] = "LabelScore"

    def sign_pod(self, state: CycleState, pod: core_v1.Pod) -> str:
        return pod.metadata.labels.get("tier", "")

    def score(self, state: CycleState, pod: core_v1.Pod, node_info: NodeInfo) -> int:
        self.calls.append(node_info.name)
        return self.scores[node_info.name] * (2 if pod.metadata.labels.get("tier") else 1)


def test_a_score_plugin_that_keeps_scores_signs_the_pod_too() -> None:
    """Pods alike for every Filter plugin but not for a Score plugin whose scores are
    kept do not share those scores."""
    scorer = LabelScore({"a": 10, "b": 20})
    fwk = Framework([ReusableFilter(Recorder()), scorer])
    all_nodes = nodes("a", "b")
    tiered = make_pod("tiered").obj()
    tiered.spec = POD.spec
    tiered.metadata.labels = {"tier": "gold"}

    def totals(pod: core_v1.Pod) -> list[tuple[str, int]]:
        state = CycleState()
        feasible, _ = fwk.find_nodes_that_fit(state, pod, all_nodes)
        fwk.pick_host(state, pod, feasible, random.Random(0))
        kept = verdict_cache.attempt_verdicts(state)
        assert kept is not None
        return [(node, total) for node, (_, total) in sorted(kept.verdicts.totals.items())]

    assert totals(POD) == [("a", 10), ("b", 20)]
    assert totals(tiered) == [("a", 20), ("b", 40)] and scorer.calls == ["a", "b"] * 2
    assert totals(POD) == [("a", 10), ("b", 20)] and scorer.calls == ["a", "b"] * 2
