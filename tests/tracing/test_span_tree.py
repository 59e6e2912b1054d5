"""One trace per pod: the span tree of a pod's life across the in-process services.

apistore (the root conftest's), scheduler, controllers and a kubelet process hosting two
DRA GPU nodes and a CPU-only node run in this test's event loop; spans go to an in-memory
exporter (`spans`). The pod asks for `example.com/gpu: 1`, served by DRA through KEP-5004's
DeviceClass, so the scheduler creates its special claim in PreBind.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Iterable
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind, StatusCode

from drasim.apistore.faults import FaultPlan, FaultRule
from drasim.apistore.server import ApiServer
from drasim.cli.main import main
from drasim.common import cluster_file, codec
from drasim.common.api import core_v1, resource_v1
from drasim.common.bus import messages
from drasim.common.bus.client import Bus
from drasim.common.client import ApiClient
from drasim.controllers.server import ControllerManager
from drasim.kubelet.run import KubeletProcess
from drasim.scheduler.framework import instrumentation
from drasim.scheduler.server import Scheduler
from tests.builders import KEP_DEVICE_CLASS_YAML, make_node, make_pod
from tests.kubelet.waiting import wait_for
from tests.tracing.conftest import Spans

CLUSTER = """
apiVersion: drasim.io/v1alpha1
kind: Cluster
pools:
  - name: dra
    count: 2
    profile: gpu-2
    devices: {gpu: {exposure: dra}}
  - name: cpu
    profile: cpu-only
"""

EXTENDED = {"example.com/gpu": "1"}


def device_class() -> resource_v1.DeviceClass:
    (document,) = codec.load_yaml_documents(KEP_DEVICE_CLASS_YAML)
    return codec.convert(document, resource_v1.DeviceClass)


@pytest.fixture
async def cluster(
    spans: Spans, api: ApiClient, bus: Bus, tmp_path: Path
) -> AsyncIterator[KubeletProcess]:
    """Kubelet, scheduler and controllers in-process, each with its own actor."""
    path = tmp_path / "cluster.yaml"
    path.write_text(CLUSTER)
    await api.create(device_class())
    kubelet = KubeletProcess(
        api=ApiClient(bus, actor="kubelet"), nodes=cluster_file.load(path).nodes
    )
    scheduler = Scheduler(ApiClient(bus, actor="system:kube-scheduler"), rng=random.Random(0))
    controllers = ControllerManager(bus)
    await kubelet.start()
    await scheduler.start(timeout=10)
    await controllers.start()
    try:
        yield kubelet
    finally:
        await controllers.stop()
        await scheduler.stop()
        await kubelet.stop()


# --- reading a span tree -------------------------------------------------------------------


def named(
    spans: Iterable[ReadableSpan], name: str, kind: SpanKind | None = None
) -> list[ReadableSpan]:
    return [s for s in spans if s.name == name and (kind is None or s.kind == kind)]


def one(spans: Iterable[ReadableSpan], name: str, kind: SpanKind | None = None) -> ReadableSpan:
    found = named(spans, name, kind)
    assert len(found) == 1, f"{len(found)} spans {name!r}: {[s.name for s in spans]}"
    return found[0]


def parent(span: ReadableSpan, spans: Iterable[ReadableSpan]) -> ReadableSpan | None:
    if span.parent is None:
        return None
    return next((s for s in spans if s.context.span_id == span.parent.span_id), None)


def children(span: ReadableSpan, spans: Iterable[ReadableSpan]) -> list[ReadableSpan]:
    return [s for s in spans if s.parent is not None and s.parent.span_id == span.context.span_id]


def ancestors(span: ReadableSpan, spans: list[ReadableSpan]) -> list[ReadableSpan]:
    chain = []
    while (up := parent(span, spans)) is not None:
        chain.append(up)
        span = up
    return chain


def create_request(spans: list[ReadableSpan], pod: str) -> ReadableSpan | None:
    """The apistore's server span of the request that created `pod`."""
    return next(
        (
            s
            for s in spans
            if s.name == "create pods"
            and s.kind == SpanKind.SERVER
            and s.attributes.get("drasim.name") == pod
        ),
        None,
    )


async def running(api: ApiClient, name: str) -> core_v1.Pod:
    pod = await wait_for(
        api,
        core_v1.Pod,
        name,
        lambda p: p is not None and p.status.phase == "Running",
        namespace="default",
    )
    assert pod is not None
    return pod


# --- tests ---------------------------------------------------------------------------------


async def test_a_pods_life_is_one_trace(api: ApiClient, cluster: KubeletProcess, spans: Spans):
    await api.create(make_pod("p").limits(EXTENDED).obj())
    pod = await running(api, "p")

    create = await spans.wait_for(lambda finished: create_request(finished, "p"))
    assert create.parent is None  # the test sent no trace: the request starts it
    assert create.attributes["drasim.verb"] == "create"
    assert create.attributes["drasim.kind"] == "Pod"
    assert create.resource.attributes["service.name"] == "drasim-test"
    trace_id = create.context.trace_id
    # The Running write's span ends after the write: wait for it, not for the event.
    await spans.wait_for(
        lambda _: (
            named(spans.of_trace(trace_id), "patch pods/status", SpanKind.SERVER)
            and named(spans.of_trace(trace_id), "set pod running")
        )
    )
    tree = spans.of_trace(trace_id)

    # create request → scheduling attempt → one span per extension point.
    attempt = one(tree, "schedule pod")
    assert parent(attempt, tree) is create
    assert attempt.attributes["k8s.pod.name"] == "p"
    assert attempt.attributes["drasim.result"] == "scheduled"
    assert attempt.attributes["k8s.node.name"] == pod.spec.node_name
    assert attempt.status.status_code != StatusCode.ERROR
    points = [s.name for s in sorted(children(attempt, tree), key=lambda s: s.start_time)]
    assert [p for p in points if p[0].isupper()] == [
        "PreFilter",
        "Filter",
        "Score",
        "Reserve",
        "PreBind",
        "Bind",
    ]
    # The CPU-only node is rejected, with the plugin's verdict as an event.
    (event,) = one(tree, "Filter").events
    assert event.name == "node rejected"
    assert event.attributes["k8s.node.name"] == "cpu-0"
    assert event.attributes["drasim.plugin"] == "DynamicResources"
    assert event.attributes["drasim.reasons"]

    # PreBind's API writes are its children: the special claim and the pod's status.
    pre_bind = one(tree, "PreBind")
    writes = {s.name for s in children(pre_bind, tree) if s.kind == SpanKind.CLIENT}
    assert {"create resourceclaims", "update resourceclaims/status", "patch pods/status"} <= writes
    for write in children(pre_bind, tree):
        served = children(write, tree)
        assert [s.kind for s in served] == [SpanKind.SERVER], write.name
        assert served[0].resource.attributes["service.name"] == "drasim-test"
    bind_request = one(tree, "bind pods", SpanKind.SERVER)
    assert ancestors(bind_request, tree)[:3] == [
        one(tree, "bind pods", SpanKind.CLIENT),
        one(tree, "Bind"),
        attempt,
    ]

    # The kubelet continues from the binding: admission, prepare (with the driver's
    # NodePrepareResources), and the Running status write.
    admit = one(tree, "admit pod")
    assert parent(admit, tree) is bind_request
    assert admit.attributes["k8s.node.name"] == pod.spec.node_name
    # The driver is called once, from the prepare of the sync the binding started. (Another
    # sync of the pod may pass through prepare again, as seen once in twelve runs; its claims
    # are prepared already, so it reads nothing and calls no driver.)
    call = one(tree, "NodePrepareResources", SpanKind.CLIENT)
    prepare = parent(call, tree)
    assert prepare is not None and prepare.name == "prepare resources"
    assert parent(prepare, tree) is bind_request
    assert call.attributes["drasim.driver"] == "gpu.example.com"
    served = one(tree, "NodePrepareResources", SpanKind.SERVER)
    assert parent(served, tree) is call
    claim_name = pod.status.extended_resource_claim_status.resource_claim_name
    assert served.attributes["drasim.claims"] == (claim_name,)
    assert named(children(served, tree), "get resourceclaims", SpanKind.CLIENT)
    set_running = one(tree, "set pod running")
    assert parent(set_running, tree) is bind_request
    assert named(children(set_running, tree), "patch pods/status", SpanKind.CLIENT)

    # The event log knows the trace too: every write of the pod's life is in it.
    data = await api.request(messages.EventLog(trace_id=f"{trace_id:032x}"))
    logged = messages.event_log_decoder.decode(data).events
    written = {(e.resource, e.actor) for e in logged}
    assert written >= {
        ("pods", "test"),
        ("resourceclaims", "system:kube-scheduler"),
        ("pods", "system:kube-scheduler"),
    }
    # The kubelet writes as the node the pod runs on.
    assert any(r == "pods" and a.startswith("system:node:dra-") for r, a in written)


async def test_filter_shows_why_each_rejected_node_was(
    api: ApiClient, bus: Bus, spans: Spans
) -> None:
    """25 nodes too small, one that fits: the Filter span names the first 20 rejected
    nodes with the plugin's verdict and counts the rest."""
    for i in range(25):
        await api.create(make_node(f"small-{i:02}", cpu="1", memory="1Gi", pods="10"))
    await api.create(make_node("big", cpu="8", memory="8Gi", pods="10"))
    scheduler = Scheduler(ApiClient(bus, actor="system:kube-scheduler"), rng=random.Random(0))
    await scheduler.start(timeout=10)
    try:
        await api.create(make_pod("p").requests({"cpu": "2"}).obj())
        attempt = await spans.wait_for(lambda finished: named(finished, "schedule pod"))
    finally:
        await scheduler.stop()
    (attempt,) = attempt
    tree = spans.of_trace(attempt.context.trace_id)
    filter_span = one(tree, "Filter")
    assert parent(filter_span, tree) is attempt
    assert filter_span.attributes["drasim.nodes"] == 26
    assert filter_span.attributes["drasim.feasible_nodes"] == 1
    assert filter_span.attributes["drasim.rejected_nodes"] == 25
    assert filter_span.attributes["drasim.rejected_nodes_not_shown"] == 25 - 20
    assert len(filter_span.events) == instrumentation.MAX_NODE_EVENTS == 20
    for event in filter_span.events:
        assert event.name == "node rejected"
        assert event.attributes["k8s.node.name"].startswith("small-")
        assert event.attributes["drasim.plugin"] == "NodeResourcesFit"
        # More than the node has at all: no preemption helps.
        assert event.attributes["drasim.code"] == "UNSCHEDULABLE_AND_UNRESOLVABLE"
        assert event.attributes["drasim.reasons"] == ("Insufficient cpu",)
    assert attempt.attributes["k8s.node.name"] == "big"


async def test_a_failed_prebind_is_an_error_span_and_the_retry_joins_the_trace(
    api: ApiClient, server: ApiServer, cluster: KubeletProcess, spans: Spans
) -> None:
    # The special claim cannot be created the first time: PreBind fails, the pod is
    # requeued with backoff and bound by the next attempt.
    rule = FaultRule(resource="resourceclaims", verb="create", code=500)
    server.core.fault_plan = FaultPlan(rules=[rule])
    await api.create(make_pod("p").limits(EXTENDED).obj())
    await running(api, "p")
    create = await spans.wait_for(lambda finished: create_request(finished, "p"))
    trace_id = create.context.trace_id
    attempts = await spans.wait_for(
        lambda _: (
            (found := named(spans.of_trace(trace_id), "schedule pod")) and len(found) >= 2 and found
        )
    )
    tree = spans.of_trace(trace_id)
    failed, *_, bound = sorted(attempts, key=lambda s: s.start_time)

    assert failed.status.status_code == StatusCode.ERROR
    assert failed.attributes["drasim.result"] == "error"
    assert "injected fault" in failed.status.description
    pre_bind = one(children(failed, tree), "PreBind")
    assert pre_bind.status.status_code == StatusCode.ERROR
    write = one(children(pre_bind, tree), "create resourceclaims", SpanKind.CLIENT)
    assert write.status.status_code == StatusCode.ERROR
    (served,) = children(write, tree)
    assert served.status.status_code == StatusCode.ERROR
    assert served.attributes["drasim.status_code"] == 500
    assert named(children(failed, tree), "Unreserve")
    assert not named(children(failed, tree), "Bind")

    assert bound.status.status_code != StatusCode.ERROR
    assert bound.attributes["drasim.result"] == "scheduled"
    assert bound.attributes["drasim.attempt"] > failed.attributes["drasim.attempt"]
    assert named(children(bound, tree), "Bind")
    assert parent(bound, tree) is create  # both attempts continue the pod's trace


async def test_controllers_continue_the_trace(
    api: ApiClient, cluster: KubeletProcess, spans: Spans
) -> None:
    # A claim from a template: created in the trace of the pod's creation.
    template = codec.convert(
        {
            "metadata": {"name": "gpu", "namespace": "default"},
            "spec": {
                "spec": {
                    "devices": {
                        "requests": [
                            {"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}
                        ]
                    }
                }
            },
        },
        resource_v1.ResourceClaimTemplate,
    )
    await api.create(template)
    with_template = codec.convert(
        {
            "metadata": {"name": "t", "namespace": "default"},
            "spec": {
                "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "gpu"}],
                "containers": [
                    {"name": "c", "image": "pause", "resources": {"claims": [{"name": "gpu"}]}}
                ],
            },
        },
        core_v1.Pod,
    )
    await api.create(with_template)
    await running(api, "t")
    create = await spans.wait_for(lambda finished: create_request(finished, "t"))
    made = await spans.wait_for(
        lambda _: named(spans.of_trace(create.context.trace_id), "create claim from template")
    )
    (made,) = made
    assert parent(made, spans.finished) is create
    assert made.attributes["drasim.template"] == "gpu"
    assert made.attributes["drasim.claim"].startswith("t-gpu-")

    # The special claim's cleanup: released in the trace of the pod's deletion.
    await api.create(make_pod("p").limits(EXTENDED).obj())
    await running(api, "p")
    await api.delete(core_v1.Pod, "p", namespace="default")
    await wait_for(api, core_v1.Pod, "p", lambda p: p is None, namespace="default")
    delete = await spans.wait_for(
        lambda finished: next(
            (
                s
                for s in finished
                if s.name == "delete pods"
                and s.kind == SpanKind.SERVER
                and s.attributes.get("drasim.actor") == "test"
            ),
            None,
        )
    )
    released = await spans.wait_for(
        lambda _: [
            s
            for s in named(spans.of_trace(delete.context.trace_id), "release claim")
            if s.attributes["drasim.special_claim"]
        ]
    )
    assert released[0].attributes["k8s.pod.name"] == "p"
    assert released[0].attributes["drasim.deallocate"] is True


async def test_without_an_sdk_trace_ids_still_travel(
    fresh, api: ApiClient, bus: Bus, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Tracing off: no spans, but every write of the pod's life names one trace, which
    `drasim events --trace-id` lists."""
    path = tmp_path / "cluster.yaml"
    path.write_text(CLUSTER)
    await api.create(device_class())
    kubelet = KubeletProcess(
        api=ApiClient(bus, actor="kubelet"), nodes=cluster_file.load(path).nodes
    )
    scheduler = Scheduler(ApiClient(bus, actor="system:kube-scheduler"), rng=random.Random(0))
    await kubelet.start()
    await scheduler.start(timeout=10)
    try:
        created = await api.create(make_pod("p").limits(EXTENDED).obj())
        await running(api, "p")
    finally:
        await scheduler.stop()
        await kubelet.stop()

    data = await api.request(messages.EventLog(resource="pods", name="p"))
    (first, *_) = messages.event_log_decoder.decode(data).events
    assert first.seq == int(created.metadata.resource_version)
    trace_id = first.traceparent.split("-")[1]
    assert len(trace_id) == 32 and int(trace_id, 16)

    flags = ["--nats-url", fresh.nats_url, "--prefix", fresh.prefix]
    code = await asyncio.to_thread(main, [*flags, "events", "--trace-id", trace_id])
    out = capsys.readouterr().out
    assert code == 0
    rows = [line.split() for line in out.splitlines()[1:]]
    assert all(row[-1] == trace_id for row in rows)
    written = {(row[3], row[-2]) for row in rows}
    assert written >= {
        ("pods", "test"),
        ("resourceclaims", "system:kube-scheduler"),
        ("pods", "system:kube-scheduler"),
    }
    assert any(r == "pods" and a.startswith("system:node:dra-") for r, a in written)
