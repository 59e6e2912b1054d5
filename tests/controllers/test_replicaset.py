"""Which pods a scale-down removes first, in upstream's `ActivePodsWithRanks` order."""

from __future__ import annotations

from typing import Any

import pytest

from drasim.common import codec
from drasim.common.api import core_v1
from drasim.controllers.replicaset import pods_to_delete


def pod(
    name: str,
    *,
    node: str = "",
    phase: str = "Running",
    ready_since: str | None = None,
    restarts: int = 0,
    created: str = "2026-07-01T12:00:00Z",
) -> core_v1.Pod:
    status: dict[str, Any] = {"phase": phase}
    if ready_since is not None:
        status["conditions"] = [
            {"type": "Ready", "status": "True", "lastTransitionTime": ready_since}
        ]
    if restarts:
        status["containerStatuses"] = [{"name": "c", "restartCount": restarts}]
    return codec.convert(
        {
            "metadata": {"name": name, "creationTimestamp": created},
            "spec": {"nodeName": node, "containers": [{"name": "c"}]},
            "status": status,
        },
        core_v1.Pod,
    )


READY = "2026-07-01T12:01:00Z"


@pytest.mark.parametrize(
    ("pods", "first"),
    [
        ([pod("bound", node="n1"), pod("unbound", phase="Pending")], "unbound"),
        ([pod("running", node="n1"), pod("pending", node="n1", phase="Pending")], "pending"),
        ([pod("ready", node="n1", ready_since=READY), pod("not-ready", node="n1")], "not-ready"),
        (
            [pod("alone", node="n1"), pod("crowded-a", node="n2"), pod("crowded-b", node="n2")],
            "crowded-a",
        ),
        (
            [
                pod("long-ready", node="n1", ready_since="2026-07-01T12:00:30Z"),
                pod("just-ready", node="n2", ready_since=READY),
            ],
            "just-ready",
        ),
        ([pod("calm", node="n1"), pod("restarting", node="n2", restarts=3)], "restarting"),
        (
            [pod("old", node="n1"), pod("new", node="n2", created="2026-07-01T13:00:00Z")],
            "new",
        ),
    ],
    ids=[
        "unscheduled-first",
        "pending-before-running",
        "not-ready-before-ready",
        "colocated-first",
        "ready-for-less-time-first",
        "more-restarts-first",
        "newer-first",
    ],
)
def test_scale_down_order(pods: list[core_v1.Pod], first: str) -> None:
    assert pods_to_delete(pods, 1)[0].metadata.name == first
