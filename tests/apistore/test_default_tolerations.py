"""The DefaultTolerationSeconds admission (upstream
`plugin/pkg/admission/defaulttolerationseconds`): a pod tolerates an unready node for
five minutes unless it says otherwise."""

from __future__ import annotations

import pytest

from drasim.apistore import admission
from drasim.common.api import core_v1
from tests.scheduler.wrappers import make_pod

NOT_READY = core_v1.Toleration(
    key="node.kubernetes.io/not-ready",
    operator="Exists",
    effect="NoExecute",
    toleration_seconds=300,
)
UNREACHABLE = core_v1.Toleration(
    key="node.kubernetes.io/unreachable",
    operator="Exists",
    effect="NoExecute",
    toleration_seconds=300,
)


@pytest.mark.parametrize(
    ("given", "added"),
    [
        ([], [NOT_READY, UNREACHABLE]),
        # Tolerating every taint (empty key and effect) tolerates both.
        ([core_v1.Toleration(operator="Exists")], []),
        # A NoSchedule toleration of not-ready does not tolerate its NoExecute taint.
        (
            [core_v1.Toleration(key="node.kubernetes.io/not-ready", effect="NoSchedule")],
            [NOT_READY, UNREACHABLE],
        ),
        # The pod's own seconds stand.
        (
            [
                core_v1.Toleration(
                    key="node.kubernetes.io/unreachable",
                    operator="Exists",
                    effect="NoExecute",
                    toleration_seconds=10,
                )
            ],
            [NOT_READY],
        ),
    ],
    ids=["none", "all-taints", "other-effect", "own-seconds"],
)
def test_default_tolerations(given: list[core_v1.Toleration], added: list[core_v1.Toleration]):
    pod = make_pod("p").obj()
    pod.spec.tolerations = list(given)
    admission.add_default_tolerations(pod)
    assert pod.spec.tolerations == [*given, *added]
    admission.add_default_tolerations(pod)  # a second pass (an update) adds nothing
    assert pod.spec.tolerations == [*given, *added]
