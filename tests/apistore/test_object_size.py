"""Object and request size: what etcd and kube-apiserver refuse is refused, and whatever is
accepted is published to every watcher, however large."""

from __future__ import annotations

import asyncio
import logging

import msgspec
import pytest

from drasim.apistore import limits
from drasim.apistore.server import ApiServer
from drasim.common import codec, errors
from drasim.common.api import core_v1
from drasim.common.bus import messages, subjects
from drasim.common.bus.client import Bus
from drasim.common.client import ApiClient
from drasim.common.config import ConfigError
from drasim.common.embedded import EmbeddedNats
from tests.apistore.watching import collect
from tests.builders import make_pod


def pod_with_arg(name: str, size: int) -> core_v1.Pod:
    """A pod whose container has one argument of `size` bytes."""
    pod = make_pod(name).dict()
    pod["spec"]["containers"][0]["args"] = ["x" * size]
    return codec.convert(pod, core_v1.Pod)


async def test_a_pod_with_a_1_2_mb_argument_is_published_and_later_events_follow(server, api):
    """The issue's pod: accepted (etcd takes 1.2 MB), then every watcher must get it and
    every event after it (an outbox that cannot publish it stalls every later event)."""
    assert server.core.max_object_bytes == limits.MAX_OBJECT_BYTES  # the embedded NATS
    _, rv = await api.list(core_v1.Pod)
    watch = asyncio.create_task(collect(api, rv, 2))
    await api.create(pod_with_arg("big", 1_200_000))
    await api.create(make_pod("after").obj())
    big, after = await watch
    assert (big.type, big.object.metadata.name) == ("ADDED", "big")
    assert len(big.object.spec.containers[0].args[0]) == 1_200_000
    assert (after.type, after.object.metadata.name) == ("ADDED", "after")
    got = await api.get(core_v1.Pod, "big", namespace="default")
    assert got.spec.containers[0].args == big.object.spec.containers[0].args


async def test_objects_up_to_the_limit_are_kept_and_larger_ones_refused_as_etcd_does(
    server, api, bus
):
    limit = server.core.max_object_bytes
    # The stored pod is its request plus what the apistore adds (uid, timestamps, rv).
    base = len(codec.encode(await api.create(pod_with_arg("probe", 0))))
    _, rv = await api.list(core_v1.Pod)
    watch = asyncio.create_task(collect(api, rv, 1))
    near = await api.create(pod_with_arg("near", limit - base - 64))
    stored = await server.core.get(messages.Get(resource="pods", namespace="default", name="near"))
    assert limit - 128 < len(stored) <= limit
    (event,) = await watch
    assert event.object == near

    over = messages.Create(
        resource="pods", object=msgspec.Raw(codec.encode(pod_with_arg("over", limit - base + 64)))
    )
    msg = await bus.request(
        subjects.api(bus.prefix, "test"), messages.encoder.encode(over), timeout=10
    )
    status = msgspec.json.decode(msg.data, type=errors.Status)
    assert (status.code, status.reason) == (500, "")  # as kube-apiserver passes etcd's on
    assert status.message == "etcdserver: request is too large"
    with pytest.raises(errors.NotFound):
        await api.get(core_v1.Pod, "over", namespace="default")

    # Growing an object past the limit is refused the same way, and changes nothing.
    with pytest.raises(errors.ApiError, match="etcdserver: request is too large"):
        await api.patch(
            core_v1.Pod, "near", {"metadata": {"labels": {"grown": "x" * 60}}}, namespace="default"
        )
    assert await api.get(core_v1.Pod, "near", namespace="default") == near
    # Deleting it still works (a removal stores nothing).
    await api.delete(core_v1.Pod, "near", namespace="default")


async def test_a_request_over_the_body_limit_is_refused_before_it_is_read(server, bus):
    body = messages.encoder.encode(
        messages.Create(
            resource="pods",
            object=msgspec.Raw(codec.encode(pod_with_arg("huge", limits.MAX_REQUEST_BODY_BYTES))),
        )
    )
    msg = await bus.request(subjects.api(bus.prefix, "test"), body, timeout=10.0)
    status = msgspec.json.decode(msg.data, type=errors.Status)
    assert (status.code, status.reason) == (413, "RequestEntityTooLarge")
    assert status.message == "Request entity too large: limit is 3145728"


@pytest.mark.parametrize(
    ("max_payload", "accepted"),
    [
        (8 << 20, limits.MAX_OBJECT_BYTES),
        (limits.MAX_OBJECT_BYTES + limits.BUS_OVERHEAD_BYTES, limits.MAX_OBJECT_BYTES),
        (1 << 20, (1 << 20) - limits.BUS_OVERHEAD_BYTES),
    ],
    ids=["embedded", "just enough", "nats-default"],
)
def test_the_accepted_object_size_fits_the_bus(max_payload, accepted):
    assert limits.max_object_bytes(max_payload) == accepted


def test_a_bus_too_small_for_annotations_is_refused():
    with pytest.raises(ConfigError, match=r"^DRASIM_NATS_URL: .* at most 131072 bytes"):
        limits.max_object_bytes(128 << 10)


async def test_on_a_nats_with_a_smaller_max_payload_the_apistore_accepts_less(
    fresh, tmp_path, caplog
):
    """A given NATS at nats-server's default 1 MB: the apistore starts, says so, accepts
    objects the bus carries and refuses larger ones as etcd would; all are watchable."""
    nats_server = EmbeddedNats(tmp_path / "small", max_payload=1 << 20).start()
    try:
        with caplog.at_level(logging.WARNING, logger="drasim.apistore.limits"):
            server = await ApiServer.start(
                nats_url=nats_server.admin_url, database_url=fresh.database_url, prefix=fresh.prefix
            )
        bus = await Bus.connect(nats_server.admin_url, prefix=fresh.prefix)
        try:
            assert server.core.max_object_bytes == (1 << 20) - limits.BUS_OVERHEAD_BYTES
            assert "at most 1048576 bytes (max_payload)" in caplog.text
            api = ApiClient(bus, actor="test")
            _, rv = await api.list(core_v1.Pod)
            watch = asyncio.create_task(collect(api, rv, 2))
            with pytest.raises(errors.ApiError, match="etcdserver: request is too large"):
                await api.create(pod_with_arg("big", 1_000_000))
            # A request the bus cannot carry is refused before it leaves.
            with pytest.raises(errors.RequestEntityTooLarge, match="limit is 1048576$"):
                await api.create(pod_with_arg("bigger", 1_100_000))
            await api.create(pod_with_arg("fits", 900_000))
            await api.create(make_pod("after").obj())
            fits, after = await watch
            assert len(fits.object.spec.containers[0].args[0]) == 900_000
            assert after.object.metadata.name == "after"
        finally:
            await bus.close()
            await server.stop()
    finally:
        nats_server.stop()


async def test_on_a_nats_too_small_the_apistore_refuses_to_start(fresh, tmp_path):
    nats_server = EmbeddedNats(tmp_path / "tiny", max_payload=128 << 10).start()
    try:
        with pytest.raises(ConfigError, match=r"at most 131072 bytes \(max_payload\)"):
            await ApiServer.start(
                nats_url=nats_server.admin_url, database_url=fresh.database_url, prefix=fresh.prefix
            )
    finally:
        nats_server.stop()
