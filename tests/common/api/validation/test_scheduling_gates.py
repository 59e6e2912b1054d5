"""Validation of `spec.schedulingGates` (upstream `validateSchedulingGates`,
`validateOnlyDeletedSchedulingGates` and the gated pod's mutable node selector)."""

from __future__ import annotations

import msgspec

from drasim.common.api import core_v1, validation
from tests.scheduler.wrappers import make_pod


def gated(*gates: str, **changes: object) -> core_v1.Pod:
    pod = make_pod("p").scheduling_gates(*gates).obj()
    return msgspec.structs.replace(pod, spec=msgspec.structs.replace(pod.spec, **changes))


def messages(new: core_v1.Pod, old: core_v1.Pod | None = None) -> list[str]:
    return [str(e) for e in validation.validate(new, old=old)]


def test_gates_are_qualified_names_and_unique() -> None:
    assert messages(gated("example.com/a", "b")) == []
    assert messages(gated("a", "a")) == ['spec.schedulingGates[1]: Duplicate value: "a"']
    [invalid] = messages(gated("not a name"))
    assert invalid.startswith('spec.schedulingGates[0]: Invalid value: "not a name": name part')


def test_a_gated_pod_cannot_be_created_bound() -> None:
    assert messages(gated("a", node_name="worker")) == [
        "spec.nodeName: Forbidden: cannot be set until all schedulingGates have been cleared"
    ]


def test_gates_may_be_removed_but_not_added() -> None:
    old = gated("a", "b")
    assert messages(gated("b"), old) == []
    assert messages(gated(), old) == []
    assert messages(gated("a", "b", "c"), old) == [
        "spec.schedulingGates[2].name: Forbidden: only deletion is allowed, "
        "but found new scheduling gate 'c'"
    ]
    assert messages(gated("c"), gated()) == [
        "spec.schedulingGates[0].name: Forbidden: only deletion is allowed, "
        "but found new scheduling gate 'c'"
    ]


def test_a_gated_pod_may_add_node_selectors_only() -> None:
    old = gated("a", node_selector={"zone": "a"})
    assert messages(gated("a", node_selector={"zone": "a", "gpu": "yes"}), old) == []
    [mutated] = messages(gated("a", node_selector={"zone": "b"}), old)
    assert mutated.endswith(
        "only additions to spec.nodeSelector are allowed (no mutations or deletions)"
    )
    # Once the gates are gone the node selector is fixed again.
    [fixed] = messages(
        gated(node_selector={"zone": "a", "gpu": "yes"}), gated(node_selector={"zone": "a"})
    )
    assert fixed.startswith("spec: Forbidden: pod updates may not change fields other than")
