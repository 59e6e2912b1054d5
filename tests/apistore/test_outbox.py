"""The outbox never stops at one event: an event NATS will not take is published as a
stand-in, which watchers resolve from the event log, and the events after it follow."""

from __future__ import annotations

import asyncio
import logging

import msgspec
from nats.js import api as js_api

from drasim.apistore import outbox
from drasim.apistore.store import EventRow
from drasim.common.api import core_v1
from drasim.common.bus import headers, subjects
from drasim.common.bus.client import Bus
from drasim.common.informer import Informer
from tests.apistore.watching import collect
from tests.builders import make_pod


def annotated(name: str, size: int) -> core_v1.Pod:
    pod = make_pod(name).obj()
    pod.metadata.annotations = {"example.com/blob": "x" * size}
    return pod


async def test_an_event_the_stream_refuses_is_a_stand_in_and_later_events_follow(
    server, api, bus, caplog
):
    # The operator lowers the stream's max_msg_size below an object the apistore accepts
    # (the outbox learns of it only when JetStream refuses the event).
    name = subjects.stream(bus.prefix)
    config = (await bus.js.stream_info(name)).config
    config.max_msg_size = 64 * 1024
    await bus.js.update_stream(config)

    _, rv = await api.list(core_v1.Pod)
    watch = asyncio.create_task(collect(api, rv, 3))
    seen: dict[str, core_v1.Pod] = {}
    done = asyncio.Event()

    def on_add(pod: core_v1.Pod) -> None:
        seen[pod.metadata.name] = pod
        if pod.metadata.name == "after":
            done.set()

    informer = Informer(api, core_v1.Pod, on_add=on_add)
    informer.start()
    await informer.wait_synced(10.0)
    try:
        with caplog.at_level(logging.ERROR, logger="drasim.apistore.outbox"):
            big = await api.create(annotated("big", 100_000))
            await api.create(make_pod("after").obj())
            await api.delete(core_v1.Pod, "big", namespace="default")
            events = await watch
            await asyncio.wait_for(done.wait(), 10.0)
        # Every watcher has the event itself, in its place.
        assert [(e.type, e.object.metadata.name) for e in events] == [
            ("ADDED", "big"),
            ("ADDED", "after"),
            ("DELETED", "big"),
        ]
        assert events[0].object == big
        assert events[0].resource_version == int(big.metadata.resource_version)
        assert events[2].object.metadata.annotations == big.metadata.annotations
        assert seen["big"] == big
        # What the stream holds at their place: stand-ins, named as such.
        seq = int(big.metadata.resource_version)
        stored = await bus.js.get_msg(name, seq)
        assert stored.headers is not None and int(stored.headers[headers.STAND_IN]) > 100_000
        assert msgspec.json.decode(stored.data)["object"]["metadata"] == {
            "name": "big",
            "namespace": "default",
            "uid": big.metadata.uid,
            "resourceVersion": str(seq),
        }
        # The alarm: one ERROR and one count per event, however often it was retried.
        assert server.outbox.oversized == 2
        alarms = [r for r in caplog.records if "stand-in" in r.getMessage()]
        assert [r.levelno for r in alarms] == [logging.ERROR, logging.ERROR]
        assert f"event {seq} (ADDED pods default/big)" in alarms[0].getMessage()
    finally:
        await informer.stop()


def test_a_stand_in_keeps_the_events_place_and_names_its_object():
    ev = EventRow(
        seq=7,
        type="MODIFIED",
        resource="pods",
        namespace="default",
        name="big",
        uid="u-1",
        node_name="n1",
        object=b'{"metadata":{"name":"big"},"spec":{"x":"' + b"x" * 1000 + b'"}}',
        actor="kubelet",
        traceparent="00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
    )
    whole = outbox.event_frame("p", ev, links=(5, 3))
    stand_in = outbox.event_frame("p", ev, links=(5, 3), stand_in_for=len(whole))
    assert len(stand_in) < 500 < len(whole)
    line, rest = stand_in.split(b"\r\n", 1)
    assert line.split()[1] == b"p.ev.pods.n1.default.big"  # the same subject
    hdr = rest.split(b"\r\n\r\n", 1)[0].decode()
    for expected in (
        "Nats-Msg-Id: 7",
        "Nats-Expected-Last-Sequence: 6",
        "traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "Drasim-Actor: kubelet",
        f"Drasim-Stand-In: {len(whole)}",
        "Drasim-Prev-Resource: 5",
        "Drasim-Prev-Node: 3",
    ):
        assert expected in hdr.splitlines()
    assert msgspec.json.decode(outbox.stand_in_payload(ev)) == {
        "type": "MODIFIED",
        "object": {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "big",
                "namespace": "default",
                "uid": "u-1",
                "resourceVersion": "7",
            },
        },
    }


async def test_the_event_stream_takes_a_watch_per_node_of_a_thousand_nodes(bus: Bus):
    # `bus` alone (no apistore): the test's prefix has no stream yet.
    # nats-server 2.15 and later hold a stream without a limit of its own to 1,000
    # consumers; a kubelet watches each of its nodes' pods through a consumer.
    info = await outbox.ensure_stream(bus)
    assert info.config.max_consumers == outbox.MAX_CONSUMERS
    name = subjects.stream(bus.prefix)

    async def watch_node(i: int) -> None:
        await bus.js.add_consumer(
            name,
            js_api.ConsumerConfig(
                durable_name=f"node-{i}",
                filter_subject=subjects.events_of(bus.prefix, "pods", node=f"node-{i}"),
            ),
        )

    for start in range(0, 1001, 100):
        await asyncio.gather(*(watch_node(i) for i in range(start, min(start + 100, 1001))))
    assert (await bus.js.stream_info(name)).state.consumer_count == 1001


async def test_a_stream_made_without_the_limit_gets_it(bus: Bus):
    name = subjects.stream(bus.prefix)
    await bus.js.add_stream(
        js_api.StreamConfig(name=name, subjects=[subjects.events_of(bus.prefix)])
    )
    info = await outbox.ensure_stream(bus)
    assert info.config.max_consumers == outbox.MAX_CONSUMERS
    assert (await bus.js.stream_info(name)).config.max_consumers == outbox.MAX_CONSUMERS
