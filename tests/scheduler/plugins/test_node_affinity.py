"""NodeAffinity: `nodeSelector` and required node affinity (`matchExpressions`,
`matchFields metadata.name`), PreFilter narrowing and the node hint."""

from __future__ import annotations

from typing import Any

import pytest

from drasim.scheduler import framework
from drasim.scheduler.framework import PreFilterResult, QueueingHint, Status
from drasim.scheduler.plugins.node_affinity import (
    ERR_REASON_CONFLICT,
    ERR_REASON_POD,
    NodeAffinity,
)
from tests.scheduler.wrappers import PodWrapper, make_node, make_pod

REJECTED = Status.unresolvable(ERR_REASON_POD)


def expr(key: str, operator: str, *values: str) -> dict[str, Any]:
    return {"matchExpressions": [{"key": key, "operator": operator, "values": list(values)}]}


def name_in(*names: str) -> dict[str, Any]:
    return {"matchFields": [{"key": "metadata.name", "operator": "In", "values": list(names)}]}


# The node: `worker`, labels zone=a, gpus=4 (and kubernetes.io/hostname=worker).
FILTER_CASES = [
    ("no constraints", make_pod(), None),
    ("nodeSelector matches", make_pod().node_selector({"zone": "a"}), None),
    ("nodeSelector value differs", make_pod().node_selector({"zone": "b"}), REJECTED),
    ("nodeSelector key missing", make_pod().node_selector({"rack": "1"}), REJECTED),
    ("In", make_pod().node_affinity(expr("zone", "In", "a", "b")), None),
    ("In, no value matches", make_pod().node_affinity(expr("zone", "In", "b")), REJECTED),
    ("NotIn", make_pod().node_affinity(expr("zone", "NotIn", "b")), None),
    ("NotIn, value listed", make_pod().node_affinity(expr("zone", "NotIn", "a")), REJECTED),
    ("NotIn, label missing", make_pod().node_affinity(expr("rack", "NotIn", "1")), None),
    ("Exists", make_pod().node_affinity(expr("zone", "Exists")), None),
    ("DoesNotExist", make_pod().node_affinity(expr("zone", "DoesNotExist")), REJECTED),
    ("Gt", make_pod().node_affinity(expr("gpus", "Gt", "3")), None),
    ("Gt, equal", make_pod().node_affinity(expr("gpus", "Gt", "4")), REJECTED),
    ("Lt", make_pod().node_affinity(expr("gpus", "Lt", "5")), None),
    ("Gt on a non-integer label", make_pod().node_affinity(expr("zone", "Gt", "1")), REJECTED),
    (
        "Gt with two values is invalid",
        make_pod().node_affinity(expr("gpus", "Gt", "1", "2")),
        REJECTED,
    ),
    (
        "terms are ORed",
        make_pod().node_affinity(expr("zone", "In", "b"), expr("gpus", "Exists")),
        None,
    ),
    (
        "requirements in a term are ANDed",
        make_pod().node_affinity(
            {
                "matchExpressions": [
                    {"key": "zone", "operator": "In", "values": ["a"]},
                    {"key": "gpus", "operator": "In", "values": ["8"]},
                ]
            }
        ),
        REJECTED,
    ),
    ("an empty term matches nothing", make_pod().node_affinity({}), REJECTED),
    ("no terms match nothing", make_pod().node_affinity(), REJECTED),
    ("matchFields metadata.name In", make_pod().node_affinity(name_in("worker")), None),
    ("matchFields other name", make_pod().node_affinity(name_in("worker-2")), REJECTED),
    (
        "matchFields NotIn",
        make_pod().node_affinity(
            {"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["worker"]}]}
        ),
        REJECTED,
    ),
    (
        "nodeSelector and affinity must both match",
        make_pod().node_selector({"zone": "b"}).node_affinity(expr("zone", "Exists")),
        REJECTED,
    ),
]


@pytest.mark.parametrize(
    ("pod", "want"), [case[1:] for case in FILTER_CASES], ids=[case[0] for case in FILTER_CASES]
)
def test_filter(pod: PodWrapper, want: Status | None) -> None:
    node = make_node("worker").label("zone", "a").label("gpus", "4").obj()
    info = framework.NodeInfo(node)
    assert NodeAffinity().filter(framework.CycleState(), pod.obj(), info) == want


PRE_FILTER_CASES = [
    ("no constraints: skip", make_pod(), None, Status.skip()),
    ("nodeSelector only", make_pod().node_selector({"zone": "a"}), None, None),
    ("labels only", make_pod().node_affinity(expr("zone", "Exists")), None, None),
    (
        "node names",
        make_pod().node_affinity(name_in("a", "b")),
        PreFilterResult(frozenset({"a", "b"})),
        None,
    ),
    (
        "node names of ORed terms are united",
        make_pod().node_affinity(name_in("a"), name_in("b")),
        PreFilterResult(frozenset({"a", "b"})),
        None,
    ),
    (
        "a term without names allows all nodes",
        make_pod().node_affinity(name_in("a"), expr("z", "Exists")),
        None,
        None,
    ),
    (
        "names within a term are intersected",
        make_pod().node_affinity(
            {
                "matchFields": [
                    {"key": "metadata.name", "operator": "In", "values": ["a", "b"]},
                    {"key": "metadata.name", "operator": "In", "values": ["b", "c"]},
                ]
            }
        ),
        PreFilterResult(frozenset({"b"})),
        None,
    ),
    (
        "conflicting names",
        make_pod().node_affinity(
            {
                "matchFields": [
                    {"key": "metadata.name", "operator": "In", "values": ["a"]},
                    {"key": "metadata.name", "operator": "In", "values": ["b"]},
                ]
            }
        ),
        None,
        Status.unresolvable(ERR_REASON_CONFLICT),
    ),
]


@pytest.mark.parametrize(
    ("pod", "want_result", "want_status"),
    [case[1:] for case in PRE_FILTER_CASES],
    ids=[case[0] for case in PRE_FILTER_CASES],
)
def test_pre_filter(
    pod: PodWrapper, want_result: PreFilterResult | None, want_status: Status | None
) -> None:
    assert NodeAffinity().pre_filter(framework.CycleState(), pod.obj(), []) == (
        want_result,
        want_status,
    )


@pytest.mark.parametrize(
    ("old_zone", "new_zone", "want"),
    [
        (None, "a", QueueingHint.QUEUE),
        (None, "b", QueueingHint.QUEUE_SKIP),
        ("b", "a", QueueingHint.QUEUE),
        ("a", "a", QueueingHint.QUEUE_SKIP),
        ("a", "b", QueueingHint.QUEUE_SKIP),
    ],
    ids=[
        "matching node added",
        "other node added",
        "now matches",
        "still matches",
        "no longer matches",
    ],
)
def test_node_change_hint(old_zone: str | None, new_zone: str, want: QueueingHint) -> None:
    pod = make_pod().node_selector({"zone": "a"}).obj()
    old = None if old_zone is None else make_node().label("zone", old_zone).obj()
    new = make_node().label("zone", new_zone).obj()
    assert NodeAffinity().is_schedulable_after_node_change(pod, old, new) == want
