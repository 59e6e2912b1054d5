"""Which run plan each container gets: its own annotations, the pod's, the cluster file's
podDefaults, and the defaults (run until deleted; init containers complete at once)."""

from __future__ import annotations

from drasim.common import codec, container_runs
from drasim.common.cluster_file import PodDefault
from drasim.common.container_runs import RunPlan
from tests.builders import make_pod

DEFAULTS = [
    codec.convert(
        {"namespace": "batch", "selector": {"matchLabels": {"kind": "short"}}, "runFor": "1s"},
        PodDefault,
    ),
    codec.convert({"namespace": "batch", "runFor": "1m", "exitCode": 3}, PodDefault),
]


def test_without_annotations() -> None:
    pod = make_pod("p").init_container("setup").init_container("proxy", sidecar=True).obj()
    assert container_runs.plans(pod) == {
        "setup": RunPlan(0.0, 0),
        "proxy": RunPlan(None, 0),
        "con0": RunPlan(None, 0),
    }


def test_pod_wide_and_per_container_annotations() -> None:
    pod = (
        make_pod("p")
        .init_container("setup")
        .container("a")
        .container("b")
        .annotations({
            "drasim.io/run-for": "1m30s",
            "drasim.io/exit-code": "2",
            "run-for.drasim.io/setup": "5s",
            "exit-code.drasim.io/b": "0",
        })
        .obj()
    )  # fmt: skip
    assert container_runs.plans(pod) == {
        "setup": RunPlan(5.0, 0),
        "a": RunPlan(90.0, 2),
        "b": RunPlan(90.0, 0),
    }


def test_the_first_matching_default_fills_what_the_pod_does_not_say() -> None:
    short = make_pod("s", "batch").labels(kind="short").obj()
    other = make_pod("o", "batch").obj()
    elsewhere = make_pod("e").obj()
    own = make_pod("own", "batch").annotations({"drasim.io/exit-code": "0"}).obj()
    assert container_runs.plans(short, DEFAULTS)["con0"] == RunPlan(1.0, 0)
    assert container_runs.plans(other, DEFAULTS)["con0"] == RunPlan(60.0, 3)
    assert container_runs.plans(elsewhere, DEFAULTS)["con0"] == RunPlan(None, 0)
    assert container_runs.plans(own, DEFAULTS)["con0"] == RunPlan(60.0, 0)


def test_unreadable_values_are_named_and_ignored() -> None:
    annotations = {
        "drasim.io/run-for": "30",
        "exit-code.drasim.io/app": "256",
        "drasim.io/exit-code": "x",
        "other.io/run-for": "nonsense",
    }
    assert container_runs.validate_annotations(annotations) == [
        ("drasim.io/run-for", "30", 'time: missing unit in duration "30"'),
        ("exit-code.drasim.io/app", "256", "must be between 0 and 255, inclusive"),
        ("drasim.io/exit-code", "x", "must be an integer exit code"),
    ]
    pod = make_pod("p").annotations(annotations).obj()
    assert container_runs.plans(pod)["con0"] == RunPlan(None, 0)
