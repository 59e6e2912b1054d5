"""OTLP export from real service processes: `python -m drasim.apistore` and
`python -m drasim.scheduler`, with `OTEL_EXPORTER_OTLP_ENDPOINT` pointing at an OTLP/HTTP
receiver this test runs, send the spans of one pod's scheduling as one trace."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import TypeVar

import pytest
from aiohttp import web
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

from drasim.cli.launch import Launch, ServiceProcess
from drasim.common.api import core_v1
from drasim.common.bus.client import Bus
from drasim.common.client import ApiClient
from tests.builders import make_node, make_pod
from tests.conftest import Fresh
from tests.kubelet.waiting import wait_for

T = TypeVar("T")

TIMEOUT = 30.0


@dataclass(frozen=True)
class ReceivedSpan:
    service: str
    name: str
    trace_id: str
    span_id: str
    parent_span_id: str
    attributes: dict[str, object]


@dataclass
class Receiver:
    """An OTLP/HTTP trace receiver (`POST /v1/traces`, protobuf)."""

    spans: list[ReceivedSpan] = field(default_factory=list)
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    endpoint: str = ""

    async def handle(self, request: web.Request) -> web.Response:
        assert request.content_type == "application/x-protobuf"
        export = trace_service_pb2.ExportTraceServiceRequest()
        export.ParseFromString(await request.read())
        for resource_spans in export.resource_spans:
            resource = {a.key: a.value.string_value for a in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for s in scope_spans.spans:
                    self.spans.append(
                        ReceivedSpan(
                            service=resource.get("service.name", ""),
                            name=s.name,
                            trace_id=s.trace_id.hex(),
                            span_id=s.span_id.hex(),
                            parent_span_id=s.parent_span_id.hex(),
                            attributes={a.key: _value(a.value) for a in s.attributes},
                        )
                    )
        self.changed.set()
        body = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
        return web.Response(body=body, content_type="application/x-protobuf")

    async def wait_for(self, predicate: Callable[[list[ReceivedSpan]], T]) -> T:
        async with asyncio.timeout(TIMEOUT):
            while not (result := predicate(self.spans)):
                self.changed.clear()
                await self.changed.wait()
            return result


def _value(value: object) -> object:
    kind = value.WhichOneof("value")  # type: ignore[attr-defined]
    return getattr(value, kind) if kind else None


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    received = Receiver()
    app = web.Application()
    app.router.add_post("/v1/traces", received.handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    received.endpoint = f"http://127.0.0.1:{runner.addresses[0][1]}"
    try:
        yield received
    finally:
        await runner.cleanup()


async def start_service(name: str, fresh: Fresh, receiver: Receiver) -> ServiceProcess:
    """`python -m drasim.<name>` exporting to the receiver; returns once it is READY."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DRASIM_", "OTEL_"))}
    env["OTEL_EXPORTER_OTLP_ENDPOINT"] = receiver.endpoint
    env["OTEL_BSP_SCHEDULE_DELAY"] = "100"  # milliseconds: export soon, not every 5 s
    spec = Launch.service(
        f"drasim.{name}",
        nats_url=fresh.nats_url,
        database_url=fresh.database_url,
        prefix=fresh.prefix,
        environment=env,
    )
    return await ServiceProcess.start(spec, timeout=TIMEOUT)


async def stop_service(service: ServiceProcess) -> int:
    """SIGTERM (the service flushes its spans), then SIGKILL if it lingers."""
    return await service.stop(TIMEOUT)


@pytest.fixture
async def services(fresh: Fresh, receiver: Receiver) -> AsyncIterator[dict[str, ServiceProcess]]:
    started: dict[str, ServiceProcess] = {}
    try:
        for name in ("apistore", "scheduler"):
            started[name] = await start_service(name, fresh, receiver)
        yield started
    finally:
        for service in reversed(started.values()):
            await stop_service(service)


async def test_services_export_one_trace_over_otlp(
    fresh: Fresh, bus: Bus, receiver: Receiver, services: dict[str, ServiceProcess]
) -> None:
    api = ApiClient(bus, actor="test")
    await api.create(make_node("n1", cpu="4", memory="8Gi", pods="10"))
    await api.create(make_pod("p").requests({"cpu": "1"}).obj())
    pod = await wait_for(api, core_v1.Pod, "p", lambda p: p is not None and bool(p.spec.node_name))
    assert pod is not None and pod.spec.node_name == "n1"

    def pod_trace(spans: list[ReceivedSpan]) -> list[ReceivedSpan]:
        create = next(
            (
                s
                for s in spans
                if s.name == "create pods" and s.attributes.get("drasim.name") == "p"
            ),
            None,
        )
        if create is None:
            return []
        trace = [s for s in spans if s.trace_id == create.trace_id]
        arrived = {(s.service, s.name) for s in trace}
        # Each process exports on its own schedule: wait for the last span of each.
        if not {("drasim-apistore", "bind pods"), ("drasim-scheduler", "schedule pod")} <= arrived:
            return []
        return trace

    trace = await receiver.wait_for(pod_trace)
    by_name = {(s.service, s.name): s for s in trace}
    create = by_name[("drasim-apistore", "create pods")]
    attempt = by_name[("drasim-scheduler", "schedule pod")]
    assert create.parent_span_id == ""  # the test sent no trace
    assert attempt.parent_span_id == create.span_id
    assert attempt.attributes["k8s.pod.name"] == "p"
    assert attempt.attributes["drasim.result"] == "scheduled"
    bind = by_name[("drasim-scheduler", "Bind")]
    bind_call = by_name[("drasim-scheduler", "bind pods")]
    bind_served = by_name[("drasim-apistore", "bind pods")]
    assert (bind.parent_span_id, bind_call.parent_span_id, bind_served.parent_span_id) == (
        attempt.span_id,
        bind.span_id,
        bind_call.span_id,
    )
    assert {s.service for s in trace} == {"drasim-apistore", "drasim-scheduler"}

    for service in services.values():
        assert await stop_service(service) == 0
