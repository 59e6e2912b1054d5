"""NodeUnschedulable: cordoned nodes take only pods tolerating the unschedulable taint."""

from __future__ import annotations

import pytest

from drasim.common.api import core_v1
from drasim.scheduler import framework
from drasim.scheduler.framework import QueueingHint, Status
from drasim.scheduler.plugins.node_unschedulable import (
    ERR_REASON_UNSCHEDULABLE,
    TAINT_NODE_UNSCHEDULABLE,
    NodeUnschedulable,
)
from tests.scheduler.wrappers import make_node, make_pod


@pytest.mark.parametrize(
    ("unschedulable", "pod", "want"),
    [
        (False, make_pod().obj(), None),
        (True, make_pod().obj(), Status.unresolvable(ERR_REASON_UNSCHEDULABLE)),
        (
            True,
            make_pod().toleration(TAINT_NODE_UNSCHEDULABLE, "Exists", effect="NoSchedule").obj(),
            None,
        ),
        (True, make_pod().toleration(operator="Exists").obj(), None),
        (
            True,
            make_pod().toleration(TAINT_NODE_UNSCHEDULABLE, "Exists", effect="NoExecute").obj(),
            Status.unresolvable(ERR_REASON_UNSCHEDULABLE),
        ),
    ],
    ids=[
        "schedulable node",
        "cordoned node",
        "tolerates the unschedulable taint",
        "tolerates everything",
        "toleration for another effect",
    ],
)
def test_filter(unschedulable: bool, pod: core_v1.Pod, want: Status | None) -> None:
    info = framework.NodeInfo(make_node().unschedulable(unschedulable).obj())
    assert NodeUnschedulable().filter(framework.CycleState(), pod, info) == want


@pytest.mark.parametrize(
    ("old", "new", "want"),
    [
        (None, False, QueueingHint.QUEUE),
        (None, True, QueueingHint.QUEUE_SKIP),
        (True, False, QueueingHint.QUEUE),
        (False, False, QueueingHint.QUEUE_SKIP),
        (False, True, QueueingHint.QUEUE_SKIP),
    ],
    ids=["schedulable node added", "cordoned node added", "uncordoned", "unchanged", "cordoned"],
)
def test_node_change_hint(old: bool | None, new: bool, want: QueueingHint) -> None:
    old_node = None if old is None else make_node().unschedulable(old).obj()
    new_node = make_node().unschedulable(new).obj()
    hint = NodeUnschedulable().is_schedulable_after_node_change(
        make_pod().obj(), old_node, new_node
    )
    assert hint == want


@pytest.mark.parametrize(
    ("updated", "want"),
    [
        (
            make_pod().toleration(TAINT_NODE_UNSCHEDULABLE, "Exists", effect="NoSchedule"),
            QueueingHint.QUEUE,
        ),
        (make_pod().toleration("other", "Exists"), QueueingHint.QUEUE_SKIP),
        (
            make_pod("other").toleration(TAINT_NODE_UNSCHEDULABLE, "Exists"),
            QueueingHint.QUEUE_SKIP,
        ),
    ],
    ids=["the pod now tolerates it", "an unrelated toleration", "another pod"],
)
def test_pod_toleration_hint(updated: object, want: QueueingHint) -> None:
    pod = make_pod().obj()
    new = updated.obj()  # type: ignore[attr-defined]
    assert NodeUnschedulable().is_schedulable_after_pod_toleration_change(pod, pod, new) == want
