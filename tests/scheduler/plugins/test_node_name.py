"""NodeName: a pod with `spec.nodeName` fits only that node."""

from __future__ import annotations

import pytest

from drasim.scheduler import framework
from drasim.scheduler.framework import QueueingHint, Status
from drasim.scheduler.plugins.node_name import ERR_REASON, NodeName
from tests.scheduler.wrappers import make_node, make_pod


@pytest.mark.parametrize(
    ("node_name", "want"),
    [
        ("", None),
        ("worker", None),
        ("worker-2", Status.unresolvable(ERR_REASON)),
    ],
    ids=["no node name", "matching name", "other name"],
)
def test_filter(node_name: str, want: Status | None) -> None:
    pod = make_pod().node(node_name).obj()
    info = framework.NodeInfo(make_node("worker").obj())
    assert NodeName().filter(framework.CycleState(), pod, info) == want


@pytest.mark.parametrize(
    ("added", "want"),
    [("worker", QueueingHint.QUEUE), ("worker-2", QueueingHint.QUEUE_SKIP)],
    ids=["the named node", "another node"],
)
def test_node_added_hint(added: str, want: QueueingHint) -> None:
    pod = make_pod().node("worker").obj()
    assert NodeName().is_schedulable_after_node_add(pod, None, make_node(added).obj()) == want


def test_events_to_register() -> None:
    [event] = NodeName().events_to_register()
    assert event.event.label() == "NodeAdd"
