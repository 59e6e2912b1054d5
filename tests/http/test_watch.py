"""`?watch=1` on the wire: resourceVersion, initial events, selectors, bookmarks, timeouts,
410 Expired and Tables. The application is built here over a plain apistore, with a short
bookmark interval so that no test waits long for one."""

from __future__ import annotations

import base64
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from drasim.apistore.http import HttpApi, build_app
from drasim.apistore.server import ApiServer
from drasim.common.api import core_v1
from drasim.common.bus.client import Bus
from drasim.common.client import ApiClient
from tests.builders import make_pod

PODS = "/api/v1/namespaces/default/pods"
TOKEN = "watch-token"
BOOKMARK_INTERVAL = 0.05
READ_TIMEOUT = 10.0


@contextlib.asynccontextmanager
async def serve(
    fresh: Any, **server_options: Any
) -> AsyncIterator[tuple[aiohttp.ClientSession, ApiClient]]:
    server = await ApiServer.start(
        nats_url=fresh.nats_url,
        database_url=fresh.database_url,
        prefix=fresh.prefix,
        **server_options,
    )
    http = HttpApi(
        build_app(server.core, server.bus, token=TOKEN, bookmark_interval=BOOKMARK_INTERVAL)
    )
    await http.start("127.0.0.1", 0)
    bus = await Bus.connect(fresh.nats_url, prefix=fresh.prefix, name="test")
    try:
        async with aiohttp.ClientSession(
            base_url=f"http://127.0.0.1:{http.port}",
            headers={"Authorization": f"Bearer {TOKEN}"},
        ) as session:
            yield session, ApiClient(bus, actor="test")
    finally:
        await bus.close()
        await http.stop()
        await server.stop()


@pytest.fixture
async def client(fresh) -> AsyncIterator[tuple[aiohttp.ClientSession, ApiClient]]:
    async with serve(fresh) as pair:
        yield pair


class Watch:
    """One open watch; `next()` reads its next event."""

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self.response = response

    async def next(self) -> dict[str, Any]:
        line = await self.response.content.readline()
        assert line, "the watch ended"
        return json.loads(line)

    async def names(self, count: int) -> list[tuple[str, str]]:
        events = [await self.next() for _ in range(count)]
        return [(e["type"], e["object"]["metadata"]["name"]) for e in events]


async def open_watch(
    http: aiohttp.ClientSession,
    path: str = PODS,
    *,
    headers: dict[str, str] | None = None,
    **params: Any,
) -> aiohttp.ClientResponse:
    response = await http.get(
        path,
        params={"watch": "true", **params},
        headers=headers,
        timeout=aiohttp.ClientTimeout(sock_read=READ_TIMEOUT),
    )
    assert response.status == 200
    assert response.headers["Content-Type"] == "application/json"
    return response


async def test_watch_from_a_resource_version_sees_each_change_in_order(client):
    http, api = client
    _, rv = await api.list(core_v1.Pod)
    async with await open_watch(http, resourceVersion=str(rv)) as response:
        await api.create(make_pod("a").obj())
        await api.create(make_pod("elsewhere", namespace="kube-system").obj())
        await api.patch(core_v1.Pod, "a", {"metadata": {"labels": {"x": "1"}}}, namespace="default")
        await api.delete(core_v1.Pod, "a", namespace="default")
        events = [await Watch(response).next() for _ in range(3)]
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
        ("ADDED", "a"),
        ("MODIFIED", "a"),
        ("DELETED", "a"),
    ]
    versions = [int(e["object"]["metadata"]["resourceVersion"]) for e in events]
    assert versions == sorted(versions) and versions[0] > rv


async def test_watch_without_a_resource_version_starts_with_the_current_objects(client):
    http, api = client
    await api.create(make_pod("a").obj())
    await api.create(make_pod("b").obj())
    async with await open_watch(http) as response:
        watch = Watch(response)
        assert await watch.names(2) == [("ADDED", "a"), ("ADDED", "b")]
        await api.create(make_pod("c").obj())
        assert await watch.names(1) == [("ADDED", "c")]


async def test_an_object_that_stops_matching_the_selector_is_deleted_from_the_watch(client):
    http, api = client
    await api.create(make_pod("a").labels(app="web").obj())
    async with await open_watch(http, labelSelector="app=web") as response:
        watch = Watch(response)
        assert await watch.names(1) == [("ADDED", "a")]
        await api.patch(
            core_v1.Pod, "a", {"metadata": {"labels": {"app": "db"}}}, namespace="default"
        )
        await api.create(make_pod("b").labels(app="db").obj())
        await api.create(make_pod("c").labels(app="web").obj())
        assert await watch.names(2) == [("DELETED", "a"), ("ADDED", "c")]


async def test_bookmarks_carry_the_resource_version(client):
    http, api = client
    pod = await api.create(make_pod("a").obj())
    rv = pod.metadata.resource_version
    async with await open_watch(http, resourceVersion=rv, allowWatchBookmarks="true") as response:
        event = await Watch(response).next()
    assert event == {
        "type": "BOOKMARK",
        "object": {"kind": "Pod", "apiVersion": "v1", "metadata": {"resourceVersion": rv}},
    }


async def test_timeout_seconds_ends_the_watch(client):
    http, api = client
    _, rv = await api.list(core_v1.Pod)
    async with await open_watch(http, resourceVersion=str(rv), timeoutSeconds="1") as response:
        assert await response.content.read() == b""


async def test_tables_define_their_columns_in_the_first_event_only(client):
    http, api = client
    await api.create(make_pod("a").obj())
    table = {"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"}
    async with await open_watch(http, headers=table) as response:
        watch = Watch(response)
        first = await watch.next()
        await api.create(make_pod("b").obj())
        second = await watch.next()
    assert first["object"]["kind"] == "Table"
    assert [c["name"] for c in first["object"]["columnDefinitions"]][:2] == ["Name", "Ready"]
    assert first["object"]["rows"][0]["cells"][0] == "a"
    assert second["object"]["columnDefinitions"] == []
    assert second["object"]["rows"][0]["cells"][0] == "b"


async def test_a_resource_version_too_old_ends_the_watch_with_410(fresh):
    async with serve(fresh, max_stream_msgs=5) as (http, api):
        for i in range(8):
            last = await api.create(make_pod(f"p{i}").obj())
        rv = int(last.metadata.resource_version)
        # Once the newest event is on the stream, the oldest have been dropped.
        async with await open_watch(http, resourceVersion=str(rv - 1)) as response:
            assert await Watch(response).names(1) == [("ADDED", "p7")]
        async with await open_watch(http, resourceVersion="1") as response:
            event = await Watch(response).next()
            assert await response.content.read() == b""
        assert event["type"] == "ERROR"
        assert event["object"]["kind"] == "Status"
        assert (event["object"]["code"], event["object"]["reason"]) == (410, "Expired")
        assert event["object"]["message"].startswith("too old resource version: 1")


@pytest.mark.parametrize(
    ("version", "problem"),
    [
        (str(2**64), "value out of range"),  # one past uint64: was a 200, then a dead stream
        ("-5", "invalid syntax"),
        ("+5", "invalid syntax"),
        ("12abc", "invalid syntax"),
    ],
)
async def test_a_resource_version_that_is_no_uint64_is_refused_before_the_stream(
    client, version: str, problem: str
):
    """As upstream's `ParseResourceVersion` (Go's strconv.ParseUint): 422 Invalid naming
    `resourceVersion`, answered before any watch event."""
    http, _ = client
    response = await http.get(PODS, params={"watch": "true", "resourceVersion": version})
    status = await response.json()
    detail = f'Invalid value: "{version}": strconv.ParseUint: parsing "{version}": {problem}'
    assert (response.status, status["reason"]) == (422, "Invalid")
    assert status["message"] == f'pods "" is invalid: resourceVersion: {detail}'
    assert status["details"] == {
        "kind": "pods",
        "causes": [{"reason": "FieldValueInvalid", "message": detail, "field": "resourceVersion"}],
    }


async def test_a_resource_version_past_every_event_waits_for_none(client):
    """The largest uint64 is a valid version no event reaches: the watch stays open and
    quiet until its timeout, as a watch from a future revision does upstream."""
    http, _ = client
    params = {"resourceVersion": str(2**64 - 1), "timeoutSeconds": "1"}
    async with await open_watch(http, **params) as response:
        assert await response.content.read() == b""


async def test_a_failing_event_stream_ends_the_watch_with_an_error_event(client, monkeypatch):
    """A stream failing for a reason the watch does not know still ends it with an ERROR
    event (500) the client re-watches on, instead of a stream that never sends again."""
    http, api = client

    async def failing(*args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise RuntimeError("the bus went away")
        yield  # an async generator, as `watch.watch_raw`

    monkeypatch.setattr("drasim.apistore.http.watch.watch.watch_raw", failing)
    _, rv = await api.list(core_v1.Pod)
    async with await open_watch(http, resourceVersion=str(rv)) as response:
        event = await Watch(response).next()
        assert await response.content.read() == b""
    assert event["type"] == "ERROR"
    assert (event["object"]["code"], event["object"]["reason"]) == (500, "InternalError")
    assert "the bus went away" in event["object"]["message"]


async def test_a_watch_not_accepting_json_is_refused(client):
    http, _ = client
    response = await http.get(PODS, params={"watch": "true"}, headers={"Accept": "text/xml"})
    assert response.status == 406
    assert (await response.json())["reason"] == "NotAcceptable"


WATCH_LIST = {"sendInitialEvents": "true", "resourceVersionMatch": "NotOlderThan"}


@pytest.mark.parametrize("since", ["", "0", "listed"])
async def test_a_watch_list_ends_its_initial_events_with_the_annotated_bookmark(client, since: str):
    """client-go's watch-list (KEP-3157): the current objects as ADDED, then one BOOKMARK
    at their resourceVersion annotated `k8s.io/initial-events-end` with the empty list to
    build from; later changes follow. From "" (consistent), "0" (any) or a resourceVersion
    (not older than it) alike."""
    http, api = client
    await api.create(make_pod("a").obj())
    await api.create(make_pod("b").obj())
    _, listed_at = await api.list(core_v1.Pod)
    rv = str(listed_at) if since == "listed" else since
    params = {**WATCH_LIST, "resourceVersion": rv, "allowWatchBookmarks": "true"}
    async with await open_watch(http, **params) as response:
        watch = Watch(response)
        assert await watch.names(2) == [("ADDED", "a"), ("ADDED", "b")]
        bookmark = await watch.next()
        await api.create(make_pod("c").obj())
        after = await watch.next()
    assert bookmark["type"] == "BOOKMARK"
    assert bookmark["object"]["kind"] == "Pod"
    metadata = bookmark["object"]["metadata"]
    assert int(metadata["resourceVersion"]) >= listed_at
    annotations = metadata["annotations"]
    assert annotations["k8s.io/initial-events-end"] == "true"
    blueprint = json.loads(base64.b64decode(annotations["k8s.io/initial-events-list-blueprint"]))
    assert blueprint == {"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": []}
    assert (after["type"], after["object"]["metadata"]["name"]) == ("ADDED", "c")
    assert int(after["object"]["metadata"]["resourceVersion"]) > int(metadata["resourceVersion"])


async def test_a_watch_list_without_bookmarks_allowed_sends_no_end_marker(client):
    http, api = client
    await api.create(make_pod("a").obj())
    async with await open_watch(http, **WATCH_LIST) as response:
        watch = Watch(response)
        assert await watch.names(1) == [("ADDED", "a")]
        await api.create(make_pod("b").obj())
        assert await watch.names(1) == [("ADDED", "b")]


async def test_send_initial_events_false_watches_from_now_without_the_objects(client):
    http, api = client
    await api.create(make_pod("a").obj())
    params = {**WATCH_LIST, "sendInitialEvents": "false"}
    async with await open_watch(http, **params) as response:
        watch = Watch(response)
        await api.create(make_pod("b").obj())
        assert await watch.names(1) == [("ADDED", "b")]


@pytest.mark.parametrize(
    ("params", "causes"),
    [
        (
            {"sendInitialEvents": "true"},
            ["resourceVersionMatch: Forbidden: sendInitialEvents requires setting "
             "resourceVersionMatch to NotOlderThan"],
        ),
        (
            {"resourceVersionMatch": "NotOlderThan", "resourceVersion": "1"},
            ["resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch "
             "unless sendInitialEvents is provided"],
        ),
        (
            {"sendInitialEvents": "true", "resourceVersionMatch": "Exact"},
            ["resourceVersionMatch: Forbidden: sendInitialEvents requires setting "
             "resourceVersionMatch to NotOlderThan",
             'resourceVersionMatch: Unsupported value: "Exact": supported values: '
             '"NotOlderThan"'],
        ),
    ],
)  # fmt: skip
async def test_watch_options_are_checked_as_upstream_checks_them(
    client, params: dict[str, str], causes: list[str]
):
    http, _ = client
    response = await http.get(PODS, params={"watch": "true", **params})
    status = await response.json()
    assert (response.status, status["reason"]) == (422, "Invalid")
    joined = causes[0] if len(causes) == 1 else f"[{', '.join(causes)}]"
    assert status["message"] == f'ListOptions.meta.k8s.io "" is invalid: {joined}'


async def test_a_list_refuses_send_initial_events(client):
    http, _ = client
    response = await http.get(PODS, params={"sendInitialEvents": "true"})
    status = await response.json()
    assert response.status == 422
    assert status["message"] == (
        'ListOptions.meta.k8s.io "" is invalid: sendInitialEvents: Forbidden: '
        "sendInitialEvents is forbidden for list"
    )
