"""What a kubectl or HTTP client sees of a LIST at a resourceVersion: the Status upstream
answers for a compacted one (410 Expired, with a way on for a continue token), for one not
written yet (504 with Retry-After), and for options upstream refuses."""

from __future__ import annotations

import pytest

from drasim.apistore import list_options
from drasim.apistore.compaction import Compactor
from drasim.common.api import core_v1
from tests.apistore.test_compaction import _on_stream
from tests.builders import make_pod
from tests.http.test_api import PODS, call


async def _compacted(cluster) -> tuple[int, int]:  # noqa: ANN001
    """Pods a, b, c, then b deleted and d created: (the resourceVersion after c, the
    compaction mark past it)."""
    api = cluster.api
    for name in ("a", "b", "c"):
        created = await api.create(make_pod(name).obj())
    then = int(created.metadata.resource_version)
    await api.delete(core_v1.Pod, "b", namespace="default", grace_period_seconds=0)
    last = await api.create(make_pod("d").obj())
    end = int(last.metadata.resource_version)
    await _on_stream(api, end)
    return then, await Compactor(cluster.server.store, cluster.server.bus, 60).compact(end)


async def test_kubectl_lists_at_a_resource_version_until_it_is_compacted(cluster, kubectl):
    api = cluster.api
    await api.create(make_pod("a").obj())
    created = await api.create(make_pod("b").obj())
    then = created.metadata.resource_version
    await api.delete(core_v1.Pod, "b", namespace="default", grace_period_seconds=0)
    exact = f"{PODS}?resourceVersionMatch=Exact&resourceVersion={then}"
    done = await kubectl("get", "--raw", exact)
    assert '"name":"b"' in done.stdout

    last = await api.create(make_pod("c").obj())
    end = int(last.metadata.resource_version)
    await _on_stream(api, end)
    await Compactor(cluster.server.store, cluster.server.bus, 60).compact(end)
    done = await kubectl("get", "--raw", exact, check=False)
    assert done.returncode == 1
    assert done.stderr.strip() == (
        "Error from server (Expired): The resourceVersion for the provided list is too old."
    )
    # Paged as kubectl pages (`--chunk-size`), a list is of one state.
    done = await kubectl("get", "pods", "--chunk-size=1", "-o", "name")
    assert done.stdout.split() == ["pod/a", "pod/c"]


async def test_a_compacted_resource_version_is_410_expired(cluster, http):
    then, cut = await _compacted(cluster)
    assert then < cut
    for params in (
        {"resourceVersion": then, "resourceVersionMatch": "Exact"},
        {"resourceVersion": then, "limit": 1},  # the legacy exact read
    ):
        status, _ = await call(http, "GET", PODS, 410, params=params)
        assert status == {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": "The resourceVersion for the provided list is too old.",
            "reason": "Expired",
            "code": 410,
        }
    # At the mark the state is whole; NotOlderThan an old one is the latest state.
    at_cut, _ = await call(
        http, "GET", PODS, 200, params={"resourceVersion": cut, "resourceVersionMatch": "Exact"}
    )
    assert at_cut["metadata"]["resourceVersion"] == str(cut)
    latest, _ = await call(http, "GET", PODS, 200, params={"resourceVersion": then})
    assert [p["metadata"]["name"] for p in latest["items"]] == ["a", "c", "d"]


async def test_an_expired_continue_token_answers_a_token_for_the_rest(cluster, http):
    api = cluster.api
    for name in ("a", "b", "c"):
        await api.create(make_pod(name).obj())
    page, _ = await call(http, "GET", PODS, 200, params={"limit": 1})
    token = page["metadata"]["continue"]
    await api.delete(core_v1.Pod, "c", namespace="default", grace_period_seconds=0)
    last = await api.create(make_pod("bb").obj())
    end = int(last.metadata.resource_version)
    await _on_stream(api, end)
    await Compactor(cluster.server.store, cluster.server.bus, 60).compact(end)

    status, _ = await call(http, "GET", PODS, 410, params={"limit": 1, "continue": token})
    assert status["reason"] == "Expired"
    assert status["message"] == list_options.INCONSISTENT_CONTINUE
    assert status["message"].startswith(
        "The provided continue parameter is too old to display a consistent list result."
    )
    params = {"limit": 5, "continue": status["metadata"]["continue"]}
    rest, _ = await call(http, "GET", PODS, 200, params=params)
    assert [p["metadata"]["name"] for p in rest["items"]] == ["b", "bb"]
    assert rest["metadata"]["resourceVersion"] == str(end)


async def test_a_resource_version_not_written_yet_is_504_with_retry_after(
    cluster, http, monkeypatch
):
    monkeypatch.setattr(list_options, "FRESHNESS_WAIT_SECONDS", 0.2)
    created = await cluster.api.create(make_pod("a").obj())
    now = int(created.metadata.resource_version)
    params = {"resourceVersion": now + 100, "resourceVersionMatch": "NotOlderThan"}
    status, response = await call(http, "GET", PODS, 504, params=params)
    assert response.headers["Retry-After"] == "1"
    assert status == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": f"Timeout: Too large resource version: {now + 100}, current: {now}",
        "reason": "Timeout",
        "details": {
            "causes": [
                {"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}
            ],
            "retryAfterSeconds": 1,
        },
        "code": 504,
    }


@pytest.mark.parametrize(
    ("params", "code", "message"),
    [
        ({"resourceVersionMatch": "NotOlderThan"}, 422,
         'ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: '
         "resourceVersionMatch is forbidden unless resourceVersion is provided"),
        ({"resourceVersion": "1", "continue": "{token}"}, 400,
         "specifying resource version is not allowed when using continue"),
        ({"limit": "1", "continue": "bm90IGpzb24"}, 400,
         "invalid continue token: continue key is not valid: "),
    ],
    ids=["match without rv", "continue and rv", "not json"],
)  # fmt: skip
async def test_list_options_upstream_refuses_are_refused(cluster, http, params, code, message):
    for name in ("a", "b"):
        await cluster.api.create(make_pod(name).obj())
    page, _ = await call(http, "GET", PODS, 200, params={"limit": 1})
    params = {k: v.format(token=page["metadata"]["continue"]) for k, v in params.items()}
    status, _ = await call(http, "GET", PODS, code, params=params)
    assert status["message"].startswith(message)
    if code == 422:
        assert status["message"] == message
        assert status["details"]["causes"] == [
            {
                "reason": "FieldValueForbidden",
                "message": "Forbidden: resourceVersionMatch is forbidden unless resourceVersion "
                "is provided",
                "field": "resourceVersionMatch",
            }
        ]
