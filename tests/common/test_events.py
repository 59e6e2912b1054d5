"""The shared event recorder: identical occurrences are counted on one Event (client-go's
EventCorrelator), the key and its LRU cache without servers, the writes against a real
apistore."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import msgspec
import pytest

from drasim.common import errors, events
from drasim.common.api import core_v1
from drasim.common.client import ApiClient
from tests.builders import make_pod

# --- the key and the cache (no servers) ----------------------------------------------------

BASE = core_v1.Event(
    involved_object=core_v1.ObjectReference(
        kind="Pod", namespace="default", name="p", uid="u1", api_version="v1"
    ),
    reason="FailedScheduling",
    message="0/1 nodes are available",
    source=core_v1.EventSource(component="default-scheduler"),
    type="Warning",
    reporting_component="default-scheduler",
)


def _ref(**changes: str) -> core_v1.ObjectReference:
    return msgspec.structs.replace(BASE.involved_object, **changes)


@pytest.mark.parametrize(
    "other",
    [
        msgspec.structs.replace(BASE, message="0/2 nodes are available"),
        msgspec.structs.replace(BASE, reason="Scheduled"),
        msgspec.structs.replace(BASE, type="Normal"),
        msgspec.structs.replace(BASE, source=core_v1.EventSource(component="kubelet")),
        msgspec.structs.replace(
            BASE, source=core_v1.EventSource(component="default-scheduler", host="n1")
        ),
        msgspec.structs.replace(BASE, involved_object=_ref(uid="u2")),
        msgspec.structs.replace(BASE, involved_object=_ref(name="q")),
        msgspec.structs.replace(BASE, involved_object=_ref(namespace="other")),
        msgspec.structs.replace(BASE, involved_object=_ref(kind="Node")),
        msgspec.structs.replace(BASE, involved_object=_ref(field_path="spec.containers{c}")),
        msgspec.structs.replace(BASE, reporting_instance="sched-2"),
    ],
    ids=[
        "message",
        "reason",
        "type",
        "source-component",
        "source-host",
        "uid",
        "name",
        "namespace",
        "kind",
        "field-path",
        "reporting-instance",
    ],
)
def test_a_different_field_makes_a_different_key(other: core_v1.Event) -> None:
    assert events.event_key(other) != events.event_key(BASE)


def test_what_changes_between_occurrences_is_not_in_the_key() -> None:
    later = msgspec.structs.replace(
        BASE,
        involved_object=_ref(resource_version="42"),
        count=7,
        first_timestamp="2024-01-01T00:00:00Z",
        last_timestamp="2024-01-01T00:05:00Z",
        action="Scheduling",
    )
    assert events.event_key(later) == events.event_key(BASE)


def _key(uid: str, message: str = "m") -> events.EventKey:
    return events.event_key(
        msgspec.structs.replace(BASE, involved_object=_ref(uid=uid), message=message)
    )


def test_the_cache_evicts_the_least_recently_used_key() -> None:
    cache = events.EventCache(size=2)
    a, b, c = _key("a"), _key("b"), _key("c")
    cache.add(a, events.Observation("ev-a", 1))
    cache.add(b, events.Observation("ev-b", 1))
    assert cache.get(a) == events.Observation("ev-a", 1)  # a is now the most recent
    cache.add(c, events.Observation("ev-c", 1))
    assert len(cache) == 2
    assert b not in cache
    assert a in cache and c in cache


def test_the_cache_updates_a_key_in_place() -> None:
    cache = events.EventCache(size=2)
    cache.add(_key("a"), events.Observation("ev-a", 1))
    cache.add(_key("a"), events.Observation("ev-a", 2))
    assert len(cache) == 1
    assert cache.get(_key("a")) == events.Observation("ev-a", 2)


def test_forgetting_an_object_drops_all_its_keys() -> None:
    cache = events.EventCache()
    for key in (_key("a", "one"), _key("a", "two"), _key("b", "one")):
        cache.add(key, events.Observation(key.message, 1))
    cache.forget("a")
    assert len(cache) == 1 and _key("b", "one") in cache
    cache.forget("a")  # nothing left to forget: no error
    cache.forget("b")
    assert len(cache) == 0


def test_an_evicted_key_leaves_the_uid_index() -> None:
    cache = events.EventCache(size=1)
    cache.add(_key("a"), events.Observation("ev-a", 1))
    cache.add(_key("b"), events.Observation("ev-b", 1))
    cache.forget("a")  # evicted already; must not touch b
    assert _key("b") in cache


def test_the_default_cache_holds_4096_keys_as_upstream() -> None:
    assert events.EventCache().size == events.CACHE_SIZE == 4096


# --- against the apistore ------------------------------------------------------------------


class Clock:
    """A clock the test moves forward, so lastTimestamp visibly moves."""

    def __init__(self) -> None:
        self.now = datetime(2025, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


def _involved(pod: core_v1.Pod) -> core_v1.ObjectReference:
    return core_v1.ObjectReference(
        kind="Pod",
        api_version="v1",
        namespace=pod.metadata.namespace,
        name=pod.metadata.name,
        uid=pod.metadata.uid,
    )


async def _events_about(api: ApiClient, name: str) -> list[core_v1.Event]:
    items, _ = await api.list(core_v1.Event, namespace="default")
    return [e for e in items if e.involved_object.name == name]


@pytest.fixture
async def pod(api: ApiClient) -> core_v1.Pod:
    return await api.create(make_pod("p").obj())


async def test_a_repeated_event_is_counted_on_one_event(api: ApiClient, pod: core_v1.Pod) -> None:
    clock = Clock()
    recorder = events.EventRecorder(
        api, component="default-scheduler", host="h", reporting_instance="i", clock=clock
    )
    for _ in range(3):
        await recorder.record(_involved(pod), "Warning", "FailedScheduling", "no fit")
        clock.advance(90)

    [event] = await _events_about(api, "p")
    assert event.count == 3
    assert event.first_timestamp == "2025-01-01T00:00:00Z"
    assert event.last_timestamp == "2025-01-01T00:03:00Z"
    assert event.last_timestamp >= event.first_timestamp
    assert (event.type, event.reason, event.message) == ("Warning", "FailedScheduling", "no fit")
    assert event.source == core_v1.EventSource(component="default-scheduler", host="h")
    assert (event.reporting_component, event.reporting_instance) == ("default-scheduler", "i")
    assert event.involved_object.uid == pod.metadata.uid
    assert event.metadata.name.startswith("p.")
    # A legacy event (no action) carries no eventTime.
    assert event.event_time is None and event.action == ""


async def test_an_action_makes_a_new_style_event_with_event_time(
    api: ApiClient, pod: core_v1.Pod
) -> None:
    recorder = events.EventRecorder(api, component="default-scheduler", clock=Clock())
    first = await recorder.record(
        _involved(pod), "Normal", "Scheduled", "assigned", action="Binding"
    )
    assert first.action == "Binding"
    assert first.event_time == "2025-01-01T00:00:00.000000Z"
    again = await recorder.record(
        _involved(pod), "Normal", "Scheduled", "assigned", action="Binding"
    )
    # eventTime is when it was first observed: the patch leaves it alone.
    assert again.metadata.name == first.metadata.name
    assert (again.count, again.event_time) == (2, first.event_time)


async def test_a_different_message_is_a_second_event(api: ApiClient, pod: core_v1.Pod) -> None:
    recorder = events.EventRecorder(api, component="default-scheduler")
    await recorder.record(_involved(pod), "Warning", "FailedScheduling", "0/1 nodes")
    await recorder.record(_involved(pod), "Warning", "FailedScheduling", "0/2 nodes")
    await recorder.record(_involved(pod), "Warning", "FailedScheduling", "0/1 nodes")

    found = await _events_about(api, "p")
    assert sorted((e.message, e.count) for e in found) == [("0/1 nodes", 2), ("0/2 nodes", 1)]


async def test_a_deleted_event_is_created_again_with_count_1(
    api: ApiClient, pod: core_v1.Pod
) -> None:
    recorder = events.EventRecorder(api, component="kubelet", host="n1")
    first = await recorder.record(_involved(pod), "Warning", "Failed", "boom")
    await recorder.record(_involved(pod), "Warning", "Failed", "boom")
    await api.delete(core_v1.Event, first.metadata.name, namespace="default")

    again = await recorder.record(_involved(pod), "Warning", "Failed", "boom")
    assert again.metadata.name != first.metadata.name
    assert again.count == 1
    # The new Event is remembered: the next occurrence counts on it.
    await recorder.record(_involved(pod), "Warning", "Failed", "boom")
    [event] = await _events_about(api, "p")
    assert (event.metadata.name, event.count) == (again.metadata.name, 2)


async def test_concurrent_identical_records_make_one_event(
    api: ApiClient, pod: core_v1.Pod
) -> None:
    recorder = events.EventRecorder(api, component="default-scheduler")
    written = await asyncio.gather(
        *(
            recorder.record(_involved(pod), "Warning", "FailedScheduling", "no fit")
            for _ in range(5)
        )
    )
    assert len({e.metadata.name for e in written}) == 1
    assert sorted(e.count for e in written) == [1, 2, 3, 4, 5]
    [event] = await _events_about(api, "p")
    assert event.count == 5
    # Once every caller is done, nothing waits on the key's lock any more.
    assert recorder._locks == {}


async def test_forgetting_the_object_starts_a_new_event(api: ApiClient, pod: core_v1.Pod) -> None:
    recorder = events.EventRecorder(api, component="kubelet", host="n1")
    await recorder.record(_involved(pod), "Warning", "Failed", "boom")
    recorder.forget(pod.metadata.uid)
    await recorder.record(_involved(pod), "Warning", "Failed", "boom")
    assert [e.count for e in await _events_about(api, "p")] == [1, 1]


async def test_events_about_cluster_scoped_objects_go_to_default(api: ApiClient) -> None:
    recorder = events.EventRecorder(api, component="kubelet", host="n1")
    node = core_v1.ObjectReference(kind="Node", api_version="v1", name="n1", uid="n1")
    event = await recorder.record(node, "Normal", "Starting", "Starting kubelet.")
    assert event.metadata.namespace == "default"
    again = await recorder.record(node, "Normal", "Starting", "Starting kubelet.")
    assert again.count == 2


async def test_a_refused_write_raises_and_is_not_remembered(
    api: ApiClient, pod: core_v1.Pod
) -> None:
    recorder = events.EventRecorder(api, component="default-scheduler")
    with pytest.raises(errors.Invalid):
        await recorder.record(_involved(pod), "Bogus", "FailedScheduling", "no fit")
    assert len(recorder.cache) == 0
    assert await _events_about(api, "p") == []


def test_the_spam_filter_allows_a_burst_per_source_and_object_then_refills() -> None:
    now = [0.0]
    spam = events.SpamFilter(burst=3, refill_seconds=300.0, clock=lambda: now[0])

    def event(name: str, host: str = "n1", reason: str = "R") -> core_v1.Event:
        return core_v1.Event(
            involved_object=core_v1.ObjectReference(kind="Pod", namespace="d", name=name),
            source=core_v1.EventSource(component="kubelet", host=host),
            reason=reason,
        )

    # Reasons and messages share the object's bucket; other objects and sources have theirs.
    assert [spam.allow(event("a", reason=r)) for r in "XYZW"] == [True, True, True, False]
    assert spam.allow(event("b")) and spam.allow(event("a", host="n2"))
    now[0] = 299.0
    assert not spam.allow(event("a"))
    now[0] = 301.0  # one token back
    assert spam.allow(event("a")) and not spam.allow(event("a"))
    now[0] = 10_000.0  # never more than the burst
    assert [spam.allow(event("a")) for _ in range(4)] == [True, True, True, False]


def test_the_spam_filter_forgets_the_least_recently_used_object() -> None:
    spam = events.SpamFilter(burst=1, size=2, clock=lambda: 0.0)

    def event(name: str) -> core_v1.Event:
        return core_v1.Event(involved_object=core_v1.ObjectReference(kind="Pod", name=name))

    assert spam.allow(event("a")) and not spam.allow(event("a"))
    assert spam.allow(event("b")) and spam.allow(event("c"))  # "a" is evicted
    assert spam.allow(event("a"))


async def test_a_recorder_with_a_spam_filter_drops_past_the_burst(api) -> None:
    recorder = events.EventRecorder(
        api, component="replicaset-controller", spam_filter=events.SpamFilter(burst=2)
    )
    involved = core_v1.ObjectReference(kind="ReplicaSet", namespace="default", name="rs")
    written = [
        await recorder.record(involved, "Normal", "SuccessfulCreate", f"Created pod: p{i}")
        for i in range(4)
    ]
    assert [w is not None for w in written] == [True, True, False, False]
    listed, _ = await api.list(core_v1.Event, namespace="default")
    assert sorted(e.message for e in listed) == ["Created pod: p0", "Created pod: p1"]
