"""The SLI arithmetic of `drasim loadtest`: clusterloader2's percentiles and transitions,
Prometheus' histogram_quantile, thresholds, and what the watches make of events."""

from __future__ import annotations

import math

import pytest

from drasim.cli.loadtest import measure, scrape, slis, workload
from drasim.common import codec
from drasim.common.api import core_v1, resource_v1


@pytest.mark.parametrize(
    ("latencies", "want"),
    [
        ([], (0.0, 0.0, 0.0, 0)),
        ([3.0], (3.0, 3.0, 3.0, 1)),
        # ceil(n*q/100)-th smallest: n=10 → 5th, 9th, 10th
        ([float(i) for i in range(10, 0, -1)], (5.0, 9.0, 10.0, 10)),
        # n=200 → 100th, 180th, 198th
        ([float(i) for i in range(1, 201)], (100.0, 180.0, 198.0, 200)),
    ],
    ids=["none", "one", "ten-unsorted", "two-hundred"],
)
def test_latency_metric_takes_clusterloader2s_percentiles(latencies, want) -> None:
    metric = slis.LatencyMetric.of(latencies)
    assert (metric.p50, metric.p90, metric.p99, metric.count) == want


def test_transitions_need_both_phases_and_clamp_negative_latencies() -> None:
    times = slis.TransitionTimes()
    assert times.set_once("a", "create", 10.0)
    assert not times.set_once("a", "create", 11.0)  # the first time seen stays
    times.set_once("a", "run", 12.5)
    times.set_once("b", "create", 10.0)  # never ran: left out
    times.set_once("c", "create", 10.0)
    times.set_once("c", "run", 9.0)  # clocks disagreeing: counted as 0
    assert sorted(times.latencies("create", "run")) == [0.0, 2.5]
    assert times.latencies("create", "run", keys=lambda k: k == "a") == [2.5]


def test_transitions_by_window_count_each_object_where_it_started() -> None:
    times = slis.TransitionTimes()
    for key, created, ran in (("a", 100.0, 100.5), ("b", 159.0, 162.0), ("c", 160.0, 160.25)):
        times.set_once(key, "create", created)
        times.set_once(key, "run", ran)
    times.set_once("d", "create", 250.0)  # never ran: left out, as from the whole
    times.set_once("e", "create", 230.0)
    times.set_once("e", "run", 231.0)
    windows = times.metric_by_window("create", "run", 60.0)
    assert [(m.count, m.p99) for m in windows] == [(2, 3.0), (1, 0.25), (1, 1.0)]
    assert times.metric_by_window("create", "run", 60.0, keys=lambda k: k == "z") == []


@pytest.mark.parametrize(
    ("q", "buckets", "want"),
    [
        # 10 observations: 4 up to 0.1, 10 up to 0.5 → p50 interpolated in (0.1, 0.5]
        (0.5, [(0.1, 4), (0.5, 10), (math.inf, 10)], 0.1 + 0.4 * (5 - 4) / 6),
        (0.99, [(0.1, 4), (0.5, 10), (math.inf, 10)], 0.1 + 0.4 * (9.9 - 4) / 6),
        # rank in the first bucket: from 0
        (0.5, [(1.0, 10), (math.inf, 10)], 0.5),
        # rank in +Inf: the highest finite bound
        (0.99, [(1.0, 5), (math.inf, 10)], 1.0),
        (0.5, [(1.0, 0), (math.inf, 0)], None),
        (0.5, [], None),
    ],
    ids=["p50-interpolated", "p99-interpolated", "first-bucket", "inf-bucket", "empty", "none"],
)
def test_histogram_quantile_is_prometheus(q, buckets, want) -> None:
    got = slis.histogram_quantile(q, buckets)
    assert got == pytest.approx(want) if want is not None else got is None


def test_api_call_thresholds_and_verdicts() -> None:
    assert slis.api_call_threshold("resource") == 1.0
    assert slis.api_call_threshold("namespace") == slis.api_call_threshold("cluster") == 30.0
    assert slis.Sli("x", 1.0, 1.0).passed is True
    assert slis.Sli("x", 1.01, 1.0).passed is False
    assert slis.Sli("x", None, 1.0).passed is None


def _exposition(series: list[tuple[str, str, dict[str, float]]]) -> str:
    """apiserver_request_duration_seconds as an apistore exposes it: one histogram per
    (verb, component), its cumulative buckets by upper bound."""
    lines = ["# TYPE apiserver_request_duration_seconds histogram"]
    for verb, component, buckets in series:
        labels = (
            f'verb="{verb}",resource="pods",subresource="",component="{component}",'
            f'scope="{"namespace" if verb == "WATCH" else "resource"}"'
        )
        for le, count in buckets.items():
            lines.append(f'apiserver_request_duration_seconds_bucket{{{labels},le="{le}"}} {count}')
        lines.append(f"apiserver_request_duration_seconds_count{{{labels}}} {buckets['+Inf']}")
        lines.append(f"apiserver_request_duration_seconds_sum{{{labels}}} 1")
    return "\n".join(lines) + "\n"


METRICS_BEFORE = _exposition([("POST", "nats", {"0.1": 1, "+Inf": 1})])
METRICS_AFTER = _exposition([
    ("POST", "nats", {"0.1": 1, "+Inf": 3}),
    ("POST", "http", {"0.1": 2, "+Inf": 2}),
    ("WATCH", "http", {"0.1": 0, "+Inf": 7}),
])  # fmt: skip


def test_api_calls_are_the_window_growth_summed_over_components_without_watches() -> None:
    before, after = scrape.Snapshot.parse([METRICS_BEFORE]), scrape.Snapshot.parse([METRICS_AFTER])
    rows = scrape.api_calls(after.since(before))
    # In the window: 2 slow NATS creates (above 0.1 s) and 2 fast HTTP ones; no WATCH.
    assert rows == [{
        "verb": "POST", "resource": "pods", "subresource": "", "scope": "resource",
        "calls": 4, "p99_s": 0.1, "threshold_s": 1.0, "pass": True,
    }]  # fmt: skip


def _pod(name: str, *, node: str = "", phase: str = "Pending") -> core_v1.Pod:
    body = {
        "metadata": {
            "name": name,
            "namespace": "loadtest-1",
            "labels": {"job-type": "short-lived"},
        },
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "i"}]},
        "status": {"phase": phase},
    }
    return codec.convert(body, core_v1.Pod)


def _claim(name: str, devices: list[str], *, special: bool = False) -> resource_v1.ResourceClaim:
    results = [
        {"request": "gpu", "driver": "gpu.example.com", "pool": "n0", "device": d} for d in devices
    ]
    annotations = {resource_v1.EXTENDED_RESOURCE_CLAIM_ANNOTATION: "true"} if special else {}
    body = {
        "metadata": {
            "name": name, "namespace": "loadtest-1", "annotations": annotations,
            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "u"}],
        },
        "spec": {"devices": {"requests": []}},
        "status": {"allocation": {"devices": {"results": results}}} if devices else {},
    }  # fmt: skip
    return codec.convert(body, resource_v1.ResourceClaim)


def test_pod_and_claim_watches_record_first_sightings_per_phase() -> None:
    now = [100.0]
    progress = measure.Progress()
    pods = measure.PodStartups({"loadtest-1"}, progress, clock=lambda: now[0])
    claims = measure.ClaimAllocations({"loadtest-1"}, pods, clock=lambda: now[0])
    pods.on_pod(_pod("p"))
    now[0] = 100.5
    claims.on_claim(_claim("p-gpu", [], special=True))
    now[0] = 101.0
    pods.on_pod(_pod("p"), _pod("p", node="n0"))
    claims.on_claim(_claim("p-gpu", [], special=True), _claim("p-gpu", ["gpu-0"], special=True))
    now[0] = 103.0
    pods.on_pod(_pod("p", node="n0"), _pod("p", node="n0", phase="Running"))
    now[0] = 104.0
    pods.on_pod(_pod("p", node="n0", phase="Running"), _pod("p", node="n0", phase="Running"))
    claims.on_claim(_claim("late", ["gpu-1"]))  # first seen allocated: left out, as upstream

    assert pods.startup(workload.CHURN).p99 == 3.0  # first seen running, not the later event
    assert pods.scheduling(workload.CHURN).p99 == 1.0
    assert pods.running_in(workload.CHURN) == 1 and pods.started(workload.CHURN) == 1
    assert pods.startup(workload.FILL).count == 0
    assert claims.allocation(workload.CHURN).as_dict()["p99_s"] == 0.5
    assert claims.pod_create_to_claim_create(workload.CHURN).p99 == 0.5
    assert claims.pod_create_to_allocation(workload.CHURN, special=True).p99 == 1.0
    assert claims.pod_create_to_allocation(workload.CHURN, special=False).count == 0
    pods.on_delete(_pod("p", node="n0", phase="Running"))
    assert pods.running_in(workload.CHURN) == 0


def test_devices_held_by_two_claims_at_once_are_counted_once_each() -> None:
    holders = measure.DeviceHolders()
    holders.on_claim(_claim("a", ["gpu-0"]))
    holders.on_claim(_claim("a", ["gpu-0"]), _claim("a", []))  # deallocated
    holders.on_claim(_claim("b", ["gpu-0"]))  # then given to another: fine
    assert holders.twice == set()
    holders.on_claim(_claim("c", ["gpu-0", "gpu-1"]))
    holders.on_claim(_claim("d", ["gpu-0"]))
    assert holders.twice == {("gpu.example.com", "n0", "gpu-0")}
    holders.on_delete(_claim("b", ["gpu-0"]))
    holders.on_delete(_claim("c", []))
    holders.on_claim(_claim("e", ["gpu-1"]))  # gpu-1 was released with c
    assert len(holders.twice) == 1


def _plugin_pod(
    name: str,
    devices: dict[str, list[str]],
    *,
    node: str = "dp-gpu-0",
    phase: str = "Running",
    init_devices: list[str] | None = None,
    deleting: bool = False,
) -> core_v1.Pod:
    """A pod whose containers' `allocatedResourcesStatus` (KEP-4680) name `devices` by
    resource, as its kubelet reports what the device manager gave them."""

    def statuses(by_resource: dict[str, list[str]]) -> list[dict[str, object]]:
        return [
            {"name": resource, "resources": [{"resourceID": d, "health": "Healthy"} for d in ids]}
            for resource, ids in by_resource.items()
        ]

    status: dict[str, object] = {
        "phase": phase,
        "containerStatuses": [{"name": "c", "allocatedResourcesStatus": statuses(devices)}],
    }
    if init_devices is not None:
        status["initContainerStatuses"] = [
            {"name": "i", "allocatedResourcesStatus": statuses({"example.com/gpu": init_devices})}
        ]
    metadata: dict[str, object] = {"name": name, "namespace": "loadtest-1"}
    if deleting:
        metadata["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    body = {
        "metadata": metadata,
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "i"}]},
        "status": status,
    }
    return codec.convert(body, core_v1.Pod)


GPU = "example.com/gpu"


@pytest.mark.parametrize(
    ("pod", "want"),
    [
        (_plugin_pod("p", {GPU: ["gpu-0", "gpu-1"]}),
         {("dp-gpu-0", GPU, "gpu-0"), ("dp-gpu-0", GPU, "gpu-1")}),
        # A claim's entry (`claim:<claim>/<request>`) is a DRA device: the claim watch's.
        (_plugin_pod("p", {"claim:p-gpu-xyz/gpu": ["gpu.example.com/dra-gpu-0/gpu-0"]}), set()),
        # A regular init container hands its device on: the pod holds it once.
        (_plugin_pod("p", {GPU: ["gpu-2"]}, init_devices=["gpu-2"]),
         {("dp-gpu-0", GPU, "gpu-2")}),
        (_plugin_pod("p", {GPU: ["gpu-0"]}, phase="Succeeded"), set()),
        (_plugin_pod("p", {GPU: ["gpu-0"]}, phase="Failed"), set()),
        (_plugin_pod("p", {GPU: ["gpu-0"]}, deleting=True), set()),
        (_plugin_pod("p", {GPU: ["gpu-0"]}, node=""), set()),
    ],
    ids=["running", "claim-entry", "init-hands-on", "succeeded", "failed", "deleting", "unbound"],
)  # fmt: skip
def test_plugin_devices_are_what_a_live_pods_statuses_name(pod, want) -> None:
    assert measure.plugin_devices(pod) == want


def test_device_plugin_devices_held_by_two_pods_at_once_are_counted_once_each() -> None:
    holders = measure.PluginDeviceHolders()
    holders.on_pod(_plugin_pod("a", {}, phase="Pending"))
    holders.on_pod(_plugin_pod("a", {}), _plugin_pod("a", {GPU: ["gpu-0"]}))
    holders.on_pod(_plugin_pod("a", {GPU: ["gpu-0"]}, phase="Succeeded"))  # given back
    holders.on_pod(_plugin_pod("b", {GPU: ["gpu-0"]}))  # then to another pod: fine
    holders.on_pod(_plugin_pod("c", {GPU: ["gpu-0"]}, node="dp-gpu-1"))  # another node's
    assert holders.twice == set()
    holders.on_pod(_plugin_pod("d", {GPU: ["gpu-0", "gpu-1"]}))
    holders.on_pod(_plugin_pod("e", {GPU: ["gpu-1"]}))
    assert holders.twice == {("dp-gpu-0", GPU, "gpu-0"), ("dp-gpu-0", GPU, "gpu-1")}
    holders.on_delete(_plugin_pod("b", {GPU: ["gpu-0"]}))
    holders.on_pod(_plugin_pod("d", {GPU: ["gpu-0", "gpu-1"]}, deleting=True))
    holders.on_delete(_plugin_pod("e", {GPU: ["gpu-1"]}))
    holders.on_pod(_plugin_pod("f", {GPU: ["gpu-0"]}))  # every holder of gpu-0 let go
    assert len(holders.twice) == 2
    assert len(holders.seen) == 3  # gpu-0 and gpu-1 of dp-gpu-0, gpu-0 of dp-gpu-1


@pytest.mark.parametrize(
    ("shape", "gpus", "fill", "free", "namespaces"),
    [
        (workload.Shape(100, workload.CLAIMS, 0.9), 800, 720, 80, 1),
        (workload.Shape(1000, workload.EXTENDED_RESOURCES, 0.9), 8000, 7200, 800, 10),
        # claims reach DRA devices only; the extended resource every GPU
        (workload.Shape(10, workload.CLAIMS, 0.5, device_plugin_nodes=4), 48, 24, 24, 1),
        (
            workload.Shape(10, workload.EXTENDED_RESOURCES, 0.5, device_plugin_nodes=4),
            80,
            40,
            40,
            1,
        ),
    ],
    ids=["100-claims", "1000-extended", "mixed-claims", "mixed-extended"],
)
def test_shape_sizes_the_fill_as_the_test_does(shape, gpus, fill, free, namespaces) -> None:
    assert (shape.gpus, shape.fill_pods, shape.free_gpus) == (gpus, fill, free)
    assert len(shape.namespaces) == namespaces


@pytest.mark.parametrize("mode", workload.MODES)
def test_jobs_ask_one_gpu_the_modes_way(mode: str) -> None:
    job = workload.job("small-0", "loadtest-1", phase=workload.CHURN, mode=mode, run_for="5s")
    pod = job.spec.template
    assert (job.spec.parallelism, job.spec.completion_mode) == (1, "Indexed")
    assert pod.metadata.annotations[workload.RUN_FOR] == "5s"
    assert workload.phase_of_labels(pod.metadata.labels) == workload.CHURN
    resources = pod.spec.containers[0].resources
    if mode == workload.CLAIMS:
        assert [c.name for c in resources.claims] == ["gpu"]
        assert pod.spec.resource_claims[0].resource_claim_template_name == "single-gpu-0"
    else:
        assert str(resources.limits["example.com/gpu"]) == "1"
        assert not pod.spec.resource_claims
