"""The workload configuration: every workload loads, and its templates render."""

from __future__ import annotations

import json

import pytest

from drasim.cli.bench import templates, workloads


def test_every_workload_loads_and_renders():
    loaded = workloads.load_workloads(workloads.CONFIG / workloads.CONFIG_FILE)
    assert {
        "ExtendedResource/fast": None,
        "ExtendedResource_25Classes/5000pods_500nodes": 197,
        "ExtendedResource_50Classes/5000pods_500nodes": 195,
        "ImplicitExtendedResource_25Classes/5000pods_500nodes": 130,
        "SchedulingWithResourceClaimTemplate/5000pods_500nodes": 40,
        "SchedulingWithExtendedResource/5000pods_5000nodes": 180,
    }.items() <= {name: w.threshold for name, w in loaded.items()}.items()
    for w in loaded.values():
        assert w.measured_namespace == "test"
        for op in w.ops:
            for key in ("nodeTemplatePath", "templatePath", "podTemplatePath"):
                if key in op:
                    json.loads(templates.Template(w.base / op[key]).render(7))
    assert loaded["SchedulingWithResourceClaimTemplate/fast"].needs_controllers
    assert not loaded["ExtendedResource/fast"].needs_controllers


@pytest.mark.parametrize(
    ("template", "index", "want"),
    [
        ("pod-with-extended-resource-mod25.yaml", 57, "example.com/gpu-7"),
        ("pod-with-extended-resource-mod50.yaml", 57, "example.com/gpu-7"),
        (
            "pod-with-implicit-extended-resource-mod25.yaml",
            26,
            "deviceclass.resource.kubernetes.io/test-class-1",
        ),
        ("pod-with-device-plugin-resource.yaml", 4999, "foo.com/bar-4999"),
    ],
    ids=["mod25", "mod50", "implicit-mod25", "device-plugin"],
)
def test_pod_templates_request_one_unit(template, index, want):
    pod = json.loads(templates.Template(workloads.CONFIG / "templates" / template).render(index))
    resources = pod["spec"]["containers"][0]["resources"]
    assert resources["requests"] == resources["limits"] == {want: "1"}


def test_steady_state_params_of_the_dra_suites():
    """Upstream's steadyState and duration params, in Go's duration form."""
    loaded = workloads.load_workloads(workloads.CONFIG / workloads.CONFIG_FILE)
    for suite in ("Partitionable", "PartitionableBacktracking", "ConsumableCapacity"):
        fast, full = loaded[f"{suite}/fast"], loaded[f"{suite}/full_500nodes"]
        (fast_op,) = [op for op in fast.ops if op.get("collectMetrics")]
        assert not fast.flag(fast_op, "steadyState")
        assert fast.duration(fast_op) == 0.0
        (op,) = [op for op in full.ops if op.get("collectMetrics")]
        assert full.flag(op, "steadyState") and full.duration(op) == 10.0
        assert full.count(op) == 10


@pytest.mark.parametrize(
    ("text", "seconds"), [("10s", 10.0), ("1m30s", 90.0), ("500ms", 0.5), ("1h", 3600.0)]
)
def test_go_durations(text, seconds):
    w = workloads.Workload("T/w", [], {"d": text}, None, workloads.CONFIG)
    assert w.duration({"durationParam": "$d"}) == seconds


def test_a_bad_duration_is_refused():
    w = workloads.Workload("T/w", [], {"d": "10"}, None, workloads.CONFIG)
    with pytest.raises(ValueError, match="duration '10' is not like 10s"):
        w.duration({"durationParam": "$d"})
