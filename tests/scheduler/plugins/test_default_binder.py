"""DefaultBinder: a binding whose outcome is unknown is sent again until an answer settles
it; every other failure fails the binding cycle at once."""

from __future__ import annotations

from typing import Any

import pytest

from drasim.common import errors
from drasim.common.api import core_v1
from drasim.scheduler import framework
from drasim.scheduler.plugins.default_binder import DefaultBinder
from tests.scheduler.wrappers import make_pod

ASSIGNED_HERE = errors.Conflict('Operation cannot be fulfilled on pods/binding "p": pod p is '
                                'already assigned to node "worker"')  # fmt: skip
ASSIGNED_ELSEWHERE = errors.Conflict('Operation cannot be fulfilled on pods/binding "p": pod p '
                                     'is already assigned to node "other"')  # fmt: skip
LOST = errors.Timeout("the connection to NATS broke before the apistore answered")
NO_APISTORE = errors.ServiceUnavailable("no apistore is serving")
NO_POSTGRES = errors.InternalError("connection refused")


class FakeApi:
    """Answers each `bind` with the next outcome: None binds, an error is raised."""

    def __init__(self, outcomes: list[errors.ApiError | None]) -> None:
        self.outcomes = list(outcomes)
        self.sends = 0

    async def bind(self, pod: core_v1.Pod, node_name: str) -> None:
        self.sends += 1
        outcome = self.outcomes.pop(0)
        if outcome is not None:
            raise outcome


def binder(api: Any, outcome_timeout: float = 60.0) -> DefaultBinder:
    return DefaultBinder(api, outcome_timeout=outcome_timeout, backoff=(0.0, 0.0))


@pytest.mark.parametrize(
    ("outcomes", "want_error", "want_sends"),
    [
        ([None], None, 1),
        ([ASSIGNED_HERE], None, 1),
        ([ASSIGNED_ELSEWHERE], ASSIGNED_ELSEWHERE, 1),
        ([NO_APISTORE], NO_APISTORE, 1),
        ([NO_POSTGRES], NO_POSTGRES, 1),
        ([LOST, None], None, 2),
        ([LOST, ASSIGNED_HERE], None, 2),
        ([LOST, NO_APISTORE, LOST, NO_POSTGRES, ASSIGNED_HERE], None, 5),
        ([LOST, ASSIGNED_ELSEWHERE], ASSIGNED_ELSEWHERE, 2),
        ([LOST, errors.NotFound('pods "p" not found')], errors.NotFound, 2),
    ],
    ids=[
        "bound",
        "bound before",
        "bound elsewhere",
        "no apistore: not sent",
        "no database: not bound",
        "answer lost, then bound",
        "answer lost, then found bound",
        "answer lost through outages, then found bound",
        "answer lost, then found bound elsewhere",
        "answer lost, then the pod is gone",
    ],
)
async def test_bind(outcomes: list, want_error: Any, want_sends: int) -> None:
    api = FakeApi(outcomes)
    status = await binder(api).bind(framework.CycleState(), make_pod("p").obj(), "worker")
    assert api.sends == want_sends
    if want_error is None:
        assert status is None
    else:
        assert status is not None and status.code == framework.Code.ERROR
        kind = want_error if isinstance(want_error, type) else type(want_error)
        assert isinstance(status.err, kind)


async def test_an_outcome_nothing_settles_fails_after_the_timeout() -> None:
    api = FakeApi([LOST] * 1000)
    status = await binder(api, outcome_timeout=0.0).bind(
        framework.CycleState(), make_pod("p").obj(), "worker"
    )
    assert status is not None and isinstance(status.err, errors.Timeout)
    assert api.sends == 1
