"""The apistore's /metrics: requests through both front doors, the event log's length and
the outbox's publish lag, against real NATS and Postgres."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import aiohttp
import asyncpg
import pytest

from drasim.apistore import metrics as apistore_metrics
from drasim.apistore.compaction import Compactor
from drasim.apistore.server import ApiServer
from drasim.common import metrics, watch
from drasim.common.api import core_v1
from drasim.common.bus.client import Bus
from drasim.common.client import ApiClient
from tests.builders import make_pod
from tests.conftest import Fresh
from tests.metrics.scraping import Scrape, scrape

TOKEN = "metrics-test-token"


@pytest.fixture
async def apistore(fresh: Fresh) -> AsyncIterator[tuple[ApiServer, str]]:
    """An apistore with its HTTP API (plain HTTP), and its /metrics URL."""
    server = await ApiServer.start(
        nats_url=fresh.nats_url,
        database_url=fresh.database_url,
        prefix=fresh.prefix,
        http_port=0,
        http_token=TOKEN,
    )
    assert server.metrics is not None
    endpoint = await metrics.serve(
        0, registry=server.metrics.registry, refresh=server.metrics.refresh
    )
    yield server, endpoint.url
    await endpoint.stop()
    await server.stop()


async def test_http_requests_are_counted_by_verb_resource_and_code(
    apistore: tuple[ApiServer, str],
) -> None:
    server, url = apistore
    assert server.http is not None
    base = f"http://127.0.0.1:{server.http.port}"
    auth = {"Authorization": f"Bearer {TOKEN}"}
    async with aiohttp.ClientSession(base, headers=auth) as http:
        async with http.post("/api/v1/namespaces/default/pods", json=make_pod("p").dict()) as r:
            assert r.status == 201
        async with http.get("/api/v1/namespaces/default/pods") as r:
            assert r.status == 200
        async with http.get("/api/v1/namespaces/default/pods/missing") as r:
            assert r.status == 404
        async with http.get("/version") as r:
            assert r.status == 200
        async with http.get("/openapi/v3/api/v1") as r:
            assert r.status == 200

    got = await scrape(url)
    pods = {"group": "", "version": "v1", "resource": "pods", "component": "http"}
    # Scopes as upstream's CleanScope: a call on one object (a create too) is `resource`.
    one = {**pods, "subresource": "", "scope": "resource"}
    namespaced = {**pods, "subresource": "", "scope": "namespace"}
    assert got.value("apiserver_request_total", verb="POST", code="201", **one) == 1
    assert got.value("apiserver_request_total", verb="LIST", code="200", **namespaced) == 1
    assert got.value("apiserver_request_total", verb="GET", code="404", **one) == 1
    assert got.value("apiserver_request_duration_seconds_count", verb="POST", **one) == 1
    # Non-resource requests are labelled by their route, as upstream labels them by path.
    assert got.value("apiserver_request_total", verb="GET", subresource="/version", code="200")
    openapi = {"verb": "GET", "subresource": "/openapi/v3/{path}", "code": "200"}
    assert got.value("apiserver_request_total", **openapi) == 1
    # The HTTP create went through the core like a NATS one, but is counted once, as http.
    assert got.all("apiserver_request_total", resource="pods", component="nats") == []


async def count_events(database_url: str) -> int:
    conn = await asyncpg.connect(database_url)
    try:
        return await conn.fetchval("SELECT count(*) FROM events")
    finally:
        await conn.close()


async def test_event_log_length_is_the_number_of_events(
    apistore: tuple[ApiServer, str], bus: Bus, fresh: Fresh, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, url = apistore
    api = ApiClient(bus, actor="test")
    for name in ("a", "b", "c"):
        await api.create(make_pod(name).obj())
    await api.delete(core_v1.Pod, "a", namespace="default")

    got = await scrape(url)
    events = await count_events(fresh.database_url)
    assert events >= 4 + 1  # the writes above, after the built-in namespaces
    assert got.value("drasim_apistore_event_log_events") == events
    assert got.value("drasim_apistore_event_log_last_sequence") == events
    published = got.value("drasim_apistore_outbox_published_sequence")
    lag = got.value("drasim_apistore_outbox_lag_events")
    assert published is not None and lag is not None and published + lag == events
    assert got.value("drasim_apistore_write_requests_total") >= 4
    assert got.value("drasim_apistore_write_batches_total") >= 1
    nats = {"resource": "pods", "component": "nats", "scope": "resource"}
    assert got.value("apiserver_request_total", verb="POST", code="201", **nats) == 3
    assert got.value("apiserver_request_total", verb="DELETE", code="200", **nats) == 1

    # Compaction folds the deleted pod's events away: the log keeps fewer events than its
    # last sequence, which the next count says.
    server, _ = apistore
    await api.create(make_pod("d").obj())  # (a round never compacts the log's last event)
    events += 1
    stream = watch.watch_raw(bus, None, resource_version=events - 1)
    async with contextlib.aclosing(stream), asyncio.timeout(10):
        assert (await anext(stream))[0] == events  # the stream holds every event
    assert await Compactor(server.store, bus, 300.0).compact(events - 1) == events - 1
    monkeypatch.setattr(apistore_metrics, "EVENTS_COUNT_INTERVAL", 0.0)
    got = await scrape(url)
    kept = await count_events(fresh.database_url)
    assert kept < events
    assert got.value("drasim_apistore_event_log_events") == kept
    assert got.value("drasim_apistore_event_log_last_sequence") == events


async def test_publish_lag_counts_events_not_acknowledged_by_jetstream(
    apistore: tuple[ApiServer, str], bus: Bus, fresh: Fresh
) -> None:
    server, url = apistore
    # The outbox stops publishing, as when NATS is away: commits go on, the stream does not.
    server.outbox_task.cancel()
    with contextlib.suppress(BaseException):
        await server.outbox_task
    published = server.outbox.published
    api = ApiClient(bus, actor="test")
    for name in ("a", "b", "c"):
        await api.create(make_pod(name).obj())

    got: Scrape = await scrape(url)
    events = await count_events(fresh.database_url)
    assert got.value("drasim_apistore_outbox_published_sequence") == published
    assert got.value("drasim_apistore_outbox_lag_events") == events - published >= 3
    assert got.value("drasim_apistore_outbox_lag_seconds") > 0
