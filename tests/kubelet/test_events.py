"""The kubelet's Warning Events: a failure retried with the same message counts up on one
Event (client-go's recorder), rather than writing one Event per retry."""

from __future__ import annotations

from drasim.common.api import core_v1
from drasim.common.client import ApiClient
from drasim.kubelet.events import EventRecorder
from drasim.kubelet.run import KubeletProcess
from tests.builders import make_pod
from tests.kubelet.conftest import DRA_NODE
from tests.kubelet.scheduling import schedule_with_dra
from tests.kubelet.waiting import wait_for_all

REASON = "FailedPrepareDynamicResources"


def _about(events: list[core_v1.Event], pod: str, reason: str) -> list[core_v1.Event]:
    return [e for e in events if e.involved_object.name == pod and e.reason == reason]


async def test_a_repeated_warning_counts_up_on_one_event(api: ApiClient) -> None:
    pod = await api.create(make_pod("p").obj())
    recorder = EventRecorder(api, "n1")
    for _ in range(3):
        await recorder.warn(pod, REASON, "driver not answering")

    [event] = _about((await api.list(core_v1.Event))[0], "p", REASON)
    assert event.count == 3
    assert event.type == "Warning" and event.message == "driver not answering"
    assert event.source == core_v1.EventSource(component="kubelet", host="n1")
    assert (event.reporting_component, event.reporting_instance) == ("kubelet", "n1")
    assert event.involved_object.uid == pod.metadata.uid
    assert event.last_timestamp is not None and event.first_timestamp is not None
    assert event.last_timestamp >= event.first_timestamp

    # Another message is another Event; forgetting the pod starts new ones.
    await recorder.warn(pod, REASON, "claim not reserved")
    recorder.forget(pod.metadata.uid)
    await recorder.warn(pod, REASON, "driver not answering")
    found = _about((await api.list(core_v1.Event))[0], "p", REASON)
    assert sorted((e.message, e.count) for e in found) == [
        ("claim not reserved", 1),
        ("driver not answering", 1),
        ("driver not answering", 3),
    ]


async def test_a_retried_prepare_failure_is_one_event_with_a_count(
    api: ApiClient, kubelet: KubeletProcess
) -> None:
    """Prepare fails, and is retried, until the pod is in reservedFor (upstream
    `prepareResources`)."""
    await schedule_with_dra(
        api, make_pod("f4").limits({"example.com/gpu": "1"}).obj(), DRA_NODE,
        mappings=[("con0", "example.com/gpu", "container-0-request-0")],
        results=[("container-0-request-0", "gpu-0")],
        reserved=False,
    )  # fmt: skip

    def retried(events: list[core_v1.Event]) -> bool:
        return any(e.count >= 2 for e in _about(events, "f4", REASON))

    events = await wait_for_all(api, core_v1.Event, retried, namespace="default")
    [event] = _about(events, "f4", REASON)
    assert event.message.startswith(
        "Failed to prepare dynamic resources: prepare dynamic resources: pod f4 "
    )
    assert event.source == core_v1.EventSource(component="kubelet", host=DRA_NODE)
