"""TaintToleration: NoSchedule/NoExecute taints keep off pods that do not tolerate them."""

from __future__ import annotations

import pytest

from drasim.common.api import core_v1
from drasim.scheduler import framework
from drasim.scheduler.framework import QueueingHint, Status
from drasim.scheduler.plugins.taint_toleration import TaintToleration
from tests.scheduler.wrappers import NodeWrapper, PodWrapper, make_node, make_pod


def untolerated(key: str, value: str) -> Status:
    return Status.unresolvable(f"node(s) had untolerated taint {{{key}: {value}}}")


FILTER_CASES = [
    ("no taints", make_node(), make_pod(), None),
    (
        "NoSchedule untolerated",
        make_node().taint("gpu", "true"),
        make_pod(),
        untolerated("gpu", "true"),
    ),
    (
        "NoExecute untolerated",
        make_node().taint("gpu", "", "NoExecute"),
        make_pod(),
        untolerated("gpu", ""),
    ),
    (
        "PreferNoSchedule only affects scoring",
        make_node().taint("gpu", "true", "PreferNoSchedule"),
        make_pod(),
        None,
    ),
    (
        "Equal with the same value",
        make_node().taint("gpu", "true"),
        make_pod().toleration("gpu", "Equal", "true", "NoSchedule"),
        None,
    ),
    (
        "empty operator means Equal",
        make_node().taint("gpu", "true"),
        make_pod().toleration("gpu", "", "true"),
        None,
    ),
    (
        "Equal with another value",
        make_node().taint("gpu", "true"),
        make_pod().toleration("gpu", "Equal", "false"),
        untolerated("gpu", "true"),
    ),
    (
        "Exists ignores the value",
        make_node().taint("gpu", "true"),
        make_pod().toleration("gpu", "Exists"),
        None,
    ),
    (
        "empty key with Exists tolerates every taint",
        make_node().taint("a", "1").taint("b", "2", "NoExecute"),
        make_pod().toleration(operator="Exists"),
        None,
    ),
    (
        "effect must match when set",
        make_node().taint("gpu", "true", "NoExecute"),
        make_pod().toleration("gpu", "Exists", effect="NoSchedule"),
        untolerated("gpu", "true"),
    ),
    (
        "the first untolerated taint is reported",
        make_node().taint("a", "1").taint("b", "2"),
        make_pod().toleration("a", "Exists"),
        untolerated("b", "2"),
    ),
]


@pytest.mark.parametrize(
    ("node", "pod", "want"),
    [case[1:] for case in FILTER_CASES],
    ids=[case[0] for case in FILTER_CASES],
)
def test_filter(node: NodeWrapper, pod: PodWrapper, want: Status | None) -> None:
    info = framework.NodeInfo(node.obj())
    assert TaintToleration().filter(framework.CycleState(), pod.obj(), info) == want


@pytest.mark.parametrize(
    ("old", "new", "want"),
    [
        (None, make_node(), QueueingHint.QUEUE),
        (None, make_node().taint("gpu"), QueueingHint.QUEUE_SKIP),
        (make_node().taint("gpu"), make_node(), QueueingHint.QUEUE),
        (make_node(), make_node().taint("gpu"), QueueingHint.QUEUE_SKIP),
        (make_node().taint("gpu"), make_node().taint("other"), QueueingHint.QUEUE_SKIP),
    ],
    ids=[
        "untainted node added",
        "tainted node added",
        "taint removed",
        "taint added",
        "taint swapped",
    ],
)
def test_node_change_hint(old: NodeWrapper | None, new: NodeWrapper, want: QueueingHint) -> None:
    old_node = None if old is None else old.obj()
    hint = TaintToleration().is_schedulable_after_node_change(make_pod().obj(), old_node, new.obj())
    assert hint == want


@pytest.mark.parametrize(
    ("updated", "want"),
    [(make_pod().obj(), QueueingHint.QUEUE), (make_pod("other").obj(), QueueingHint.QUEUE_SKIP)],
    ids=["the rejected pod", "another pod"],
)
def test_pod_toleration_hint(updated: core_v1.Pod, want: QueueingHint) -> None:
    pod = make_pod().obj()
    assert TaintToleration().is_schedulable_after_pod_toleration_change(pod, pod, updated) == want
