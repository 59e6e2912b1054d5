"""One scheduling attempt's Filter and Score as `schedule_one.schedule_pod` runs them, and
what it decided (`Outcome`), for comparing a framework that reuses verdicts with one that
does not (`verdict_history`, `test_verdict_reuse`); `count_calls` counts what each ran."""

from __future__ import annotations

import collections
import dataclasses
import random
from collections.abc import Callable
from typing import Any

from drasim.common.api import core_v1
from drasim.scheduler import framework
from drasim.scheduler.framework import CycleState, Framework, NodeInfo
from drasim.scheduler.plugins import names


@dataclasses.dataclass
class Outcome:
    """What an attempt decided: all of it must be the same with and without reuse."""

    feasible: frozenset[str] = frozenset()
    # node -> (code, reasons, plugin) of the rejected nodes
    rejected: dict[str, tuple[str, tuple[str, ...], str]] = dataclasses.field(default_factory=dict)
    message: str = ""
    unschedulable_plugins: frozenset[str] = frozenset()
    # node -> (total, per plugin), when more than one node is feasible
    scores: dict[str, tuple[int, tuple[tuple[str, int], ...]]] = dataclasses.field(
        default_factory=dict
    )
    error: str = ""
    evaluated: int = 0


def attempt(
    fwk: Framework,
    state: CycleState,
    pod: core_v1.Pod,
    nodes: list[NodeInfo],
    calls: collections.Counter[str] | None = None,
    *,
    name_every_rejection: bool = False,
) -> tuple[Outcome, list[NodeInfo]]:
    """Filter and, with a choice to make, Score, as `schedule_one.schedule_pod` does. The
    reusing framework picks its host as the scheduler does (`Framework.pick_host`, from
    kept scores where they answer): one of the best. Every node's scores are then taken
    afresh for the comparison, not counted in `calls`."""
    try:
        feasible, diagnosis = fwk.find_nodes_that_fit(
            state, pod, nodes, name_every_rejection=name_every_rejection
        )
        scores = {}
        if len(feasible) > 1:
            picked = None
            if fwk.verdict_cache.enabled:
                picked = fwk.pick_host(state, pod, feasible, random.Random(len(feasible)))
            before = calls["score"] if calls is not None else 0
            status = fwk.run_pre_score_plugins(state, pod, feasible)
            assert framework.is_success(status), status
            scores = {
                s.name: (s.total_score, tuple((p.name, p.score) for p in s.scores))
                for s in fwk.run_score_plugins(state, pod, feasible)
            }
            if calls is not None and picked is not None:
                calls["score"] = before
            if picked is not None:
                assert scores[picked][0] == max(total for total, _ in scores.values())
    except framework.FrameworkError as err:
        return Outcome(error=str(err)), []
    rejected = {
        name: (str(status.code), tuple(status.all_reasons()), status.plugin)
        for name, status in diagnosis.node_to_status.items()
    }
    outcome = Outcome(
        feasible=frozenset(n.name for n in feasible),
        rejected=rejected,
        message=diagnosis.message(len(nodes)),
        unschedulable_plugins=frozenset(diagnosis.unschedulable_plugins),
        scores=scores,
        evaluated=diagnosis.evaluated_nodes,
    )
    return outcome, feasible


def count_calls(fwk: Framework) -> collections.Counter[str]:
    """Count the framework's Filter calls per node and NodeResourcesFit's Score calls (a
    wrapper on each plugin instance: the frameworks read `pl.filter` at every attempt)."""
    calls: collections.Counter[str] = collections.Counter()

    def counted(key: str, call: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any) -> Any:
            calls[key] += 1
            return call(*args)

        return wrapper

    # The first Filter plugin of the profile runs for every node not reused.
    first = fwk.filter_plugins[0]
    setattr(first, "filter", counted("filter", first.filter))  # noqa: B010
    for pl in fwk.score_plugins:
        if pl.name == names.NODE_RESOURCES_FIT:
            setattr(pl, "score", counted("score", pl.score))  # noqa: B010
    # Picks of a host from kept positions' scores.
    best_kept_node = fwk.verdict_cache.best_kept_node

    def counted_pick(*args: Any) -> Any:
        host = best_kept_node(*args)
        calls["kept picks"] += host is not None
        return host

    setattr(fwk.verdict_cache, "best_kept_node", counted_pick)  # noqa: B010
    return calls
