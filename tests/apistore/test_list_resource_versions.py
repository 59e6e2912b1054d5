"""A LIST's resourceVersion, resourceVersionMatch and continue over the NATS API, as
kube-apiserver serves them: Exact reads the state of that moment from the event log (410
Expired once compacted), pages of a list are all of its first page's state, a
resourceVersion not written yet is waited for and then answered 504."""

from __future__ import annotations

import asyncio

import msgspec
import pytest

from drasim.apistore import list_options
from drasim.apistore.compaction import Compactor
from drasim.common import client, errors, replay
from drasim.common.api import core_v1
from drasim.common.bus import messages
from tests.apistore.test_compaction import _busy_history, _logged, _on_stream
from tests.builders import make_pod


async def _list(api, **options) -> messages.ListResult:  # noqa: ANN001, ANN003
    options.setdefault("resource", "pods")
    options.setdefault("namespace", "default")
    data = await api.request(messages.List(**options))
    return messages.list_result_decoder.decode(data)


def _names(result: messages.ListResult) -> list[str]:
    return [msgspec.json.decode(item)["metadata"]["name"] for item in result.items]


def _labels(result: messages.ListResult) -> dict[str, dict[str, str]]:
    objects = [msgspec.json.decode(item)["metadata"] for item in result.items]
    return {m["name"]: m.get("labels", {}) for m in objects}


async def test_an_exact_list_is_the_state_at_its_resource_version(server, api):
    await api.create(make_pod("a").labels(v="1").obj())
    b = await api.create(make_pod("b").obj())
    then = int(b.metadata.resource_version)
    await api.patch(core_v1.Pod, "a", {"metadata": {"labels": {"v": "2"}}}, namespace="default")
    await api.delete(core_v1.Pod, "b", namespace="default", grace_period_seconds=0)
    await api.create(make_pod("c").obj())
    await api.bind(await api.get(core_v1.Pod, "a", namespace="default"), "n1")

    exact = await _list(api, resource_version=str(then), resource_version_match="Exact")
    assert exact.resource_version == then
    assert _labels(exact) == {"a": {"v": "1"}, "b": {}}
    # The legacy exact read: a resourceVersion with a limit and no match.
    legacy = await _list(api, resource_version=str(then), limit=10)
    assert (legacy.resource_version, legacy.items) == (then, exact.items)
    # NotOlderThan (and no match without a limit) reads the most recent state.
    now = await server.store.max_seq()
    for match in ("NotOlderThan", ""):
        newer = await _list(api, resource_version=str(then), resource_version_match=match)
        assert newer.resource_version == now
        assert _labels(newer) == {"a": {"v": "2"}, "c": {}}
    # The node a field selector asks for is the object's at that resourceVersion.
    on_n1 = {"field_selector": "spec.nodeName=n1", "resource_version_match": "Exact"}
    assert _names(await _list(api, resource_version=str(then), **on_n1)) == []
    assert _names(await _list(api, resource_version=str(now), **on_n1)) == ["a"]
    # A page of an exact list, and the rest of it.
    page = await _list(api, resource_version=str(then), limit=1)
    assert (_names(page), page.remaining) == (["a"], 1)
    rest = await _list(api, continue_token=page.continue_token, limit=1)
    assert (_names(rest), rest.resource_version, rest.continue_token) == (["b"], then, "")


async def test_every_page_of_a_list_is_of_its_first_pages_state(server, api):
    """Upstream's TestAPIListChunking: what changes while a list is paged through does not
    show in its later pages, and every page has the first page's resourceVersion."""
    for name in ("a", "c", "d", "e"):
        await api.create(make_pod(name).obj())
    first = await _list(api, limit=2)
    assert _names(first) == ["a", "c"]
    await api.create(make_pod("b").obj())  # sorts into the part already listed
    await api.create(make_pod("cc").obj())  # and into the rest
    await api.delete(core_v1.Pod, "d", namespace="default", grace_period_seconds=0)
    await api.patch(core_v1.Pod, "e", {"metadata": {"labels": {"late": "1"}}}, namespace="default")
    rest = await _list(api, limit=2, continue_token=first.continue_token)
    assert rest.resource_version == first.resource_version
    assert _labels(rest) == {"d": {}, "e": {}}
    assert rest.continue_token == "" and rest.remaining == 0
    # A label selector pages the same state.
    selected = await _list(api, limit=1, label_selector="late!=1")
    await api.patch(core_v1.Pod, "cc", {"metadata": {"labels": {"late": "1"}}}, namespace="default")
    names = _names(selected)
    token = selected.continue_token
    while token:
        page = await _list(api, limit=1, label_selector="late!=1", continue_token=token)
        assert page.resource_version == selected.resource_version
        names += _names(page)
        token = page.continue_token
    assert names == ["a", "b", "c", "cc"]


async def test_exact_lists_fold_the_compacted_log_as_replay_does(server, api):
    """At every resourceVersion from the compaction mark on, an exact list holds what a
    fold of the log gives (`drasim replay`); before the mark it is 410 Expired."""
    await _busy_history(api)
    cut = await server.store.max_seq()
    await _busy_history_after(api)
    end = await server.store.max_seq()
    await _on_stream(api, end)
    assert await Compactor(server.store, server.bus, 60).compact(cut) == cut

    view = replay.ClusterView()
    events = await _logged(server)
    for rv in range(cut, end + 1):
        while events and events[0].seq <= rv:
            view.apply(events.pop(0))
        for resource in ("pods", "resourceclaims"):
            listed = await _list(
                api, resource=resource, resource_version=str(rv), resource_version_match="Exact"
            )
            folded = view.of(resource, "default")
            assert [bytes(i) for i in listed.items] == [folded[k] for k in sorted(folded)], rv

    for rv in (cut - 1, 1):
        with pytest.raises(errors.Expired) as expired:
            await _list(api, resource_version=str(rv), resource_version_match="Exact")
        assert expired.value.message == "The resourceVersion for the provided list is too old."
        assert expired.value.continue_token == ""
    # Without Exact, an old resourceVersion is only a lower bound: the most recent state.
    assert (await _list(api, resource_version=str(cut - 1))).resource_version == end


async def _busy_history_after(api) -> None:  # noqa: ANN001
    """Writes after the cut: changes, deletions and a re-creation of objects from before."""
    await api.patch(core_v1.Pod, "p1", {"metadata": {"labels": {"late": "1"}}}, namespace="default")
    await api.delete(core_v1.Pod, "p3", namespace="default", grace_period_seconds=0)
    await api.create(make_pod("p2").labels(again="twice").obj())
    await api.create(make_pod("late").obj())
    await api.delete(core_v1.Pod, "p0", namespace="default", grace_period_seconds=0)


async def test_a_continue_token_of_a_compacted_state_is_expired_with_a_way_on(server, api):
    for name in ("a", "b", "c"):
        await api.create(make_pod(name).obj())
    first = await _list(api, limit=1)
    await api.create(make_pod("bb").obj())
    await api.delete(core_v1.Pod, "c", namespace="default", grace_period_seconds=0)
    end = await server.store.max_seq()
    await _on_stream(api, end)
    await Compactor(server.store, server.bus, 60).compact(end)

    with pytest.raises(errors.Expired) as expired:
        await _list(api, limit=1, continue_token=first.continue_token)
    assert expired.value.message == list_options.INCONSISTENT_CONTINUE
    # The token in the Status lists the rest at the latest state, page by page.
    page = await _list(api, limit=1, continue_token=expired.value.continue_token)
    assert (_names(page), page.resource_version) == (["b"], end)
    rest = await _list(api, limit=1, continue_token=page.continue_token)
    assert (_names(rest), rest.resource_version, rest.continue_token) == (["bb"], end, "")
    # `ApiClient.list` pages with tokens too: a whole list is of one state.
    pods, rv = await api.list(core_v1.Pod, namespace="default")
    assert ([p.metadata.name for p in pods], rv) == (["a", "b", "bb"], end)


async def test_api_client_lists_again_when_its_pages_state_is_compacted(server, api, monkeypatch):
    """Compacted between two pages, `ApiClient.list` starts again (as client-go's pager
    lists again in full) and answers one state, the later one."""
    monkeypatch.setattr(client, "LIST_PAGE", 1)
    for name in ("a", "b"):
        await api.create(make_pod(name).obj())
    send = api.request
    compacted: list[int] = []

    async def request(req: messages.Request, **kwargs: str) -> bytes:
        if isinstance(req, messages.List) and req.continue_token and not compacted:
            for name in ("c", "d"):
                created = await api.create(make_pod(name).obj())
            await api.delete(core_v1.Pod, "a", namespace="default", grace_period_seconds=0)
            end = await server.store.max_seq()
            await _on_stream(api, end)
            compacted.append(await Compactor(server.store, server.bus, 60).compact(end))
            assert compacted[0] >= int(created.metadata.resource_version)
        return await send(req, **kwargs)

    monkeypatch.setattr(api, "request", request)
    pods, rv = await api.list(core_v1.Pod, namespace="default")
    assert ([p.metadata.name for p in pods], rv) == (["b", "c", "d"], compacted[0] + 1)


async def test_a_resource_version_not_written_yet_is_waited_for(server, api, monkeypatch):
    """As the watch cache: up to 3 seconds (here less), then 504 Timeout with upstream's
    message, a ResourceVersionTooLarge cause and a retry-after of a second."""
    monkeypatch.setattr(list_options, "FRESHNESS_WAIT_SECONDS", 0.5)
    await api.create(make_pod("a").obj())
    now = await server.store.max_seq()
    for match in ("NotOlderThan", "Exact"):
        waiting = asyncio.create_task(
            _list(api, resource_version=str(now + 1), resource_version_match=match)
        )
        created = await api.create(make_pod(f"b-{match.lower()}").obj())
        listed = await waiting
        assert listed.resource_version >= now + 1
        if match == "Exact":
            assert listed.resource_version == now + 1
        now = int(created.metadata.resource_version)

    for match in ("NotOlderThan", "Exact"):
        with pytest.raises(errors.Timeout) as timeout:
            await _list(api, resource_version=str(now + 5), resource_version_match=match)
        assert timeout.value.message == (
            f"Timeout: Too large resource version: {now + 5}, current: {now}"
        )
        assert timeout.value.retry_after_seconds == 1
        assert timeout.value.causes == [
            errors.StatusCause(
                reason="ResourceVersionTooLarge", message="Too large resource version"
            )
        ]


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"resource_version_match": "Exact"}, errors.Invalid,
         'ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: '
         "resourceVersionMatch is forbidden unless resourceVersion is provided"),
        ({"resource_version": "0", "resource_version_match": "Exact"}, errors.Invalid,
         'ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: '
         'resourceVersionMatch "exact" is forbidden for resourceVersion "0"'),
        ({"resource_version": "1", "resource_version_match": "Newest"}, errors.Invalid,
         'ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Unsupported value: '
         '"Newest": supported values: "Exact", "NotOlderThan", ""'),
        ({"resource_version": "x"}, errors.Invalid,
         'pods "" is invalid: resourceVersion: Invalid value: "x": strconv.ParseUint: '
         'parsing "x": invalid syntax'),
        ({"continue_token": "{token}", "resource_version": "1"}, errors.BadRequest,
         "specifying resource version is not allowed when using continue"),
        ({"continue_token": "{token}", "resource_version": "1",
          "resource_version_match": "NotOlderThan"}, errors.Invalid,
         'ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: '
         "resourceVersionMatch is forbidden when continue is provided"),
        ({"continue_token": "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MCwic3RhcnQiOiJhL2IifQ"},
         errors.BadRequest,
         "invalid continue token: continue key is not valid: incorrect encoded start "
         "resourceVersion (version meta.k8s.io/v1)"),
        ({"continue_token": "eyJ2IjoibWV0YS5rOHMuaW8vdjAiLCJydiI6MSwic3RhcnQiOiJhL2IifQ"},
         errors.BadRequest,
         "invalid continue token: continue key is not valid: server does not recognize this "
         "encoded version meta.k8s.io/v0"),
    ],
    ids=["match without rv", "exact at 0", "unknown match", "bad rv", "continue and rv",
         "continue and match", "token rv 0", "token version"],
)  # fmt: skip
async def test_list_options_upstream_refuses_are_refused(server, api, options, error, message):
    await api.create(make_pod("a").obj())
    await api.create(make_pod("b").obj())
    token = (await _list(api, limit=1)).continue_token
    options = {k: v.format(token=token) for k, v in options.items()}
    with pytest.raises(error) as refused:
        await _list(api, **options)
    assert refused.value.message == message
