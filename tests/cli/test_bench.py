"""`drasim bench`: the workload configuration, the throughput statistics, and
ExtendedResource/fast end to end (apistore and scheduler as processes) on the session's
servers."""

from __future__ import annotations

import asyncio
import json
import time

import msgspec
import pytest

from drasim.cli import bench
from drasim.cli.main import main

FAST_LIMIT_S = 30.0


def test_every_workload_loads_and_renders():
    workloads = bench.load_workloads(bench.CONFIG / bench.CONFIG_FILE)
    assert {
        "ExtendedResource/fast": None,
        "ExtendedResource_25Classes/5000pods_500nodes": 197,
        "ExtendedResource_50Classes/5000pods_500nodes": 195,
        "ImplicitExtendedResource_25Classes/5000pods_500nodes": 130,
        "SchedulingWithResourceClaimTemplate/5000pods_500nodes": 40,
        "SchedulingWithExtendedResource/5000pods_5000nodes": 180,
    }.items() <= {name: w.threshold for name, w in workloads.items()}.items()
    for w in workloads.values():
        assert w.measured_namespace == "test"
        for op in w.ops:
            for key in ("nodeTemplatePath", "templatePath", "podTemplatePath"):
                if key in op:
                    json.loads(bench.Template(w.base / op[key]).render(7))
    assert workloads["SchedulingWithResourceClaimTemplate/fast"].needs_controllers
    assert not workloads["ExtendedResource/fast"].needs_controllers


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
    pod = json.loads(bench.Template(bench.CONFIG / "templates" / template).render(index))
    resources = pod["spec"]["containers"][0]["resources"]
    assert resources["requests"] == resources["limits"] == {want: "1"}


@pytest.mark.parametrize(
    ("samples", "want"),
    [
        ([5.0], (5.0, 5.0, 5.0)),
        ([float(i) for i in range(1, 11)], (5.0, 9.0, 10.0)),
        ([float(i) for i in range(1, 101)], (50.0, 90.0, 99.0)),
    ],
    ids=["one", "ten", "hundred"],
)
def test_percentiles_as_upstream(samples, want):
    assert tuple(bench.percentile(samples, q) for q in (50, 90, 99)) == want


class _Done(Exception):
    pass


def _script(values):
    """A function answering `values`, one per call, then raising _Done."""
    it = iter(values)

    def answer():
        for value in it:
            return value
        raise _Done

    return answer


async def test_collector_merges_idle_intervals(monkeypatch):
    """No sample before the first binding; the first one seen is the baseline; an interval
    with no binding is merged into the next and counted once per interval it covers."""
    monkeypatch.setattr(bench, "SAMPLE_INTERVAL", 0)
    collector = bench.ThroughputCollector(
        _script([0, 10, 20, 20, 40, 55]), clock=_script([0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    )
    with pytest.raises(_Done):
        await collector.run()
    assert collector.samples == [10.0, 10.0, 10.0, 15.0]


async def test_fast_end_to_end(infra, tmp_path):
    out = tmp_path / "fast.json"
    argv = ["--nats-url", infra.nats_url, "--database-url", infra.admin_url]
    start = time.monotonic()
    code = await asyncio.to_thread(
        main, [*argv, "bench", "ExtendedResource/fast", "--json", str(out)]
    )
    elapsed = time.monotonic() - start
    assert code == 0
    assert elapsed < FAST_LIMIT_S
    result = msgspec.json.decode(out.read_bytes())
    assert result["workload"] == "ExtendedResource/fast"
    assert result["measured_pods"] == result["bound_pods"] == 10
    assert result["devices_allocated_twice"] == 0
    # One special claim per pod, one device each, and one successful attempt per pod.
    assert result["claims"] == result["allocated_devices"] == 10
    assert result["attempts"] >= result["attempts_scheduled"] == 10
    for key in ("throughput_avg", "throughput_p50", "throughput_p90", "throughput_p99"):
        assert key in result
    assert result["throughput_overall"] > 0
    assert result["ok"] is True


def _event(name: str, reason: str, count: int) -> bench._EventView:
    return bench._EventView(
        metadata=bench._Meta(name=name, namespace="test"),
        reason=reason,
        involved_object=bench._InvolvedObject(namespace="test", name=name.split(".")[0]),
        count=count,
    )


def test_attempts_count_how_much_each_event_count_grew():
    tracker = bench.ClusterTracker(bus=None)
    for watch_event, event in [
        ("ADDED", _event("a.1", "FailedScheduling", 1)),
        ("MODIFIED", _event("a.1", "FailedScheduling", 2)),
        ("MODIFIED", _event("a.1", "FailedScheduling", 4)),  # two attempts between updates
        ("MODIFIED", _event("a.1", "FailedScheduling", 4)),  # no new attempt
        ("MODIFIED", _event("b.1", "FailedScheduling", 3)),  # first seen: all of its count
        ("ADDED", _event("a.2", "Scheduled", 1)),
        ("ADDED", _event("a.3", "Pulled", 1)),  # not the scheduler's
        ("DELETED", _event("a.1", "FailedScheduling", 4)),
        ("ADDED", _event("a.4", "FailedScheduling", 1)),  # re-created after the deletion
    ]:
        tracker.observe_event(watch_event, event)
    assert tracker.attempts_in("test") == {"FailedScheduling": 8, "Scheduled": 1}
    assert tracker.attempts_in("other") == {}
