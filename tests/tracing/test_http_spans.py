"""The apistore's HTTP API traces like its NATS API: a server span per request continuing
the `traceparent` header, stored with the event the write appends."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest
from opentelemetry.trace import SpanKind, StatusCode

from drasim.apistore.server import ApiServer
from drasim.common import tracing
from drasim.common.bus import messages
from drasim.common.bus.client import Bus
from drasim.common.client import ApiClient
from tests.conftest import Fresh
from tests.tracing.conftest import Spans

TOKEN = "test-token"
POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "web"},
    "spec": {"containers": [{"name": "c", "image": "pause"}]},
}


@pytest.fixture
async def http_server(spans: Spans, fresh: Fresh) -> AsyncIterator[ApiServer]:
    server = await ApiServer.start(
        nats_url=fresh.nats_url,
        database_url=fresh.database_url,
        prefix=fresh.prefix,
        http_port=0,
        http_token=TOKEN,
    )
    try:
        yield server
    finally:
        await server.stop()


async def test_http_requests_continue_the_callers_trace(
    http_server: ApiServer, bus: Bus, spans: Spans
) -> None:
    assert http_server.http is not None
    url = f"http://127.0.0.1:{http_server.http.port}/api/v1/namespaces/default/pods"
    caller = tracing.mint()
    _, trace_id, span_id, _ = caller.split("-")
    headers = {"Authorization": f"Bearer {TOKEN}", "traceparent": caller}
    async with aiohttp.ClientSession(headers=headers) as session:
        async with session.post(url, json=POD) as response:
            assert response.status == 201
        async with session.post(url, json=POD) as response:
            assert response.status == 409

    created, refused = await spans.wait_for(
        lambda finished: (
            len(found := [s for s in finished if s.name == "create pods"]) == 2 and found
        )
    )
    for s in (created, refused):
        assert s.kind == SpanKind.SERVER
        assert f"{s.context.trace_id:032x}" == trace_id
        assert f"{s.parent.span_id:016x}" == span_id
        assert s.attributes["drasim.kind"] == "Pod"
        assert s.attributes["drasim.namespace"] == "default"
    assert created.attributes["http.response.status_code"] == 201
    assert created.status.status_code != StatusCode.ERROR
    assert refused.attributes["http.response.status_code"] == 409
    assert refused.status.status_code == StatusCode.ERROR

    # The event stores the server span's context: watchers continue from the request.
    api = ApiClient(bus, actor="test")
    data = await api.request(messages.EventLog(resource="pods", name="web"))
    (event,) = messages.event_log_decoder.decode(data).events
    assert event.traceparent == tracing.traceparent_of(created)
