"""The nats-py internals `drasim.common.bus.wire` relies on: there, shaped as it assumes,
and behaving as it assumes against a real nats-server.

Each failure names what changed in nats-py. Then fix `wire` (nothing else touches nats-py's
internals) and move the pin of nats-py in pyproject.toml to the version it was fixed for.
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib.metadata
import inspect
import uuid

import nats
import pytest
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.protocol import command

from drasim.common.bus import wire
from drasim.common.bus.client import Bus
from tests.conftest import Infra

NATS_PY = f"nats-py {importlib.metadata.version('nats-py')}"

# Client methods `wire` calls or replaces: their parameters after `self`, all coroutines.
CLIENT_METHODS = {
    "_send_command": ["cmd", "priority"],
    "_flush_pending": ["force_flush"],
    "_process_msg": ["sid", "subject", "reply", "data", "headers"],
    "_process_headers": ["headers"],
}
# Attributes of a connected client `wire` reads, and their types.
CLIENT_ATTRIBUTES = {
    "_pending_data_size": int,
    "_max_pending_size": int,
    "_flush_queue": asyncio.Queue,
    "_subs": dict,
}
# Fields `wire` builds a `Msg` with (the first positional: the client).
MSG_FIELDS = ["_client", "subject", "reply", "data", "headers", "_sid"]
# How long a message may take to arrive: a lost one never does, and a machine busy with other
# suites beside this one delays a local delivery by seconds.
RECEIVE_TIMEOUT = 30.0

HEADER_BLOCKS = {
    "one": b"NATS/1.0\r\ntraceparent: 00-ab-cd-01\r\n\r\n",
    "several, padded": b"NATS/1.0\r\nA:  x \r\nDrasim-Actor: system:node:n1\r\nB:\r\n\r\n",
    "a name with a space": b"NATS/1.0\r\nbad name: x\r\ngood: y\r\n\r\n",
    "a line without a colon": b"NATS/1.0\r\njunk\r\nk: v\r\n\r\n",
    "empty": b"NATS/1.0\r\n\r\n",
    "a status line": b"NATS/1.0 503\r\n\r\n",
    "a heartbeat": b"NATS/1.0 100 Idle Heartbeat\r\nNats-Last-Consumer: 3\r\n\r\n",
    "not ASCII": "NATS/1.0\r\nname: caf\u00e9\r\n\r\n".encode(),
}


@pytest.mark.parametrize("name", CLIENT_METHODS)
def test_the_client_methods_wire_uses_keep_their_shape(name: str) -> None:
    method = getattr(NATS, name, None)
    assert method is not None, f"{NATS_PY}: Client.{name} is gone; wire uses it"
    params = list(inspect.signature(method).parameters)[1:]
    assert params == CLIENT_METHODS[name], (
        f"{NATS_PY}: Client.{name} now takes {params}; wire passes {CLIENT_METHODS[name]}"
    )
    assert inspect.iscoroutinefunction(method), f"{NATS_PY}: Client.{name} is no coroutine"


def test_messages_are_built_with_their_sid() -> None:
    fields = [f.name for f in dataclasses.fields(Msg)]
    missing = [f for f in MSG_FIELDS if f not in fields]
    assert not missing, f"{NATS_PY}: Msg has no field {missing}; wire builds messages with them"
    assert fields[0] == "_client", f"{NATS_PY}: Msg's first field is {fields[0]}, not _client"


@pytest.mark.parametrize("case", HEADER_BLOCKS, ids=HEADER_BLOCKS.keys())
async def test_headers_parse_as_nats_py_parses_them(case: str) -> None:
    nc = NATS()
    block = HEADER_BLOCKS[case]
    ours = await wire.parse_headers(nc._process_headers, block)
    assert ours == await nc._process_headers(block), f"{NATS_PY}: headers parse differently"


@pytest.mark.parametrize("reply", ["", "_INBOX.r.1"], ids=["no reply", "a reply"])
@pytest.mark.parametrize("headers", [b"", b"NATS/1.0\r\nk: v\r\n\r\n"], ids=["PUB", "HPUB"])
def test_frames_are_the_commands_nats_py_writes(reply: str, headers: bytes) -> None:
    frame = wire.pub_frame("a.b", b"payload", reply=reply, headers=headers)
    if headers:
        theirs = command.hpub_cmd("a.b", reply, headers, b"payload")
    else:
        theirs = command.pub_cmd("a.b", reply, b"payload")
    # nats-py writes an empty reply as an empty field (two spaces), which the server reads
    # as no reply, as it reads the field left out.
    assert frame == theirs.replace(b"a.b  ", b"a.b "), f"{NATS_PY}: PUB/HPUB written otherwise"


async def test_a_connected_client_has_the_attributes_wire_reads(infra: Infra) -> None:
    nc = await nats.connect(infra.nats_url)
    try:
        for name, type_ in CLIENT_ATTRIBUTES.items():
            value = getattr(nc, name, None)
            assert isinstance(value, type_), (
                f"{NATS_PY}: Client.{name} is {value!r}; wire expects a {type_.__name__}"
            )
        sub = await nc.subscribe("wire.test")
        sid = wire.subscription_id(sub)
        assert nc._subs.get(sid) is sub, f"{NATS_PY}: Subscription._id is no key of Client._subs"
        await sub.unsubscribe()
        assert sid not in nc._subs, f"{NATS_PY}: an unsubscribed sid stays in Client._subs"
    finally:
        await nc.close()


async def test_frames_sent_by_wire_arrive_as_publish_sends_them(infra: Infra) -> None:
    """The same message through `Client.publish` and through `wire`, received by a client
    without wire's hooks: the same subject, reply, payload and headers."""
    subject = f"wire.{uuid.uuid4().hex}"
    bus = await Bus.connect(infra.nats_url, prefix="wire", name="wire-sender")
    plain = await nats.connect(infra.nats_url)
    try:
        sub = await plain.subscribe(f"{subject}.>")
        await plain.flush()
        cases = [
            (b"p1", "", None),
            (b"p2", "reply.to", None),
            (b"p3", "reply.to", {"traceparent": " 00-ab \r\n", "Drasim-Actor": "a:b"}),
        ]
        for i, (payload, reply, headers) in enumerate(cases):
            await bus.nc.publish(f"{subject}.publish", payload, reply=reply, headers=headers)
            block = wire.header_block(headers.items()) if headers else b""
            frame = wire.pub_frame(f"{subject}.wire", payload, reply=reply, headers=block)
            await wire.send_frames(bus.nc, [frame])
            # Both through the connection's own flush: what is compared is how the frames
            # arrive, not when nats-py's flusher gets to them.
            await bus.nc.flush()
            by_publish, by_wire = (
                await sub.next_msg(RECEIVE_TIMEOUT),
                await sub.next_msg(RECEIVE_TIMEOUT),
            )
            assert by_wire.subject == f"{subject}.wire", f"case {i}: {NATS_PY}"
            assert (by_wire.reply, by_wire.data, by_wire.headers) == (
                by_publish.reply,
                by_publish.data,
                by_publish.headers,
            ), f"case {i}: a frame sent through wire arrives otherwise than `publish`'s"
    finally:
        await plain.close()
        await bus.close()


async def test_direct_subscriptions_get_each_message_until_unsubscribed(infra: Infra) -> None:
    """wire's `_process_msg` in the parser's place: a direct subscription's handler gets
    the message, headers parsed, as a callback subscription would; none after unsubscribe."""
    subject = f"wire.{uuid.uuid4().hex}"
    bus = await Bus.connect(infra.nats_url, prefix="wire", name="wire-receiver")
    plain = await nats.connect(infra.nats_url)
    got: asyncio.Queue[Msg] = asyncio.Queue()
    by_callback: asyncio.Queue[Msg] = asyncio.Queue()
    try:
        direct = await bus.subscribe_direct(subject, got.put_nowait)
        await bus.nc.subscribe(subject, cb=by_callback.put)
        await bus.nc.flush()
        await plain.publish(subject, b"one", reply="r.1", headers={"k": " v "})
        await plain.flush()
        msg = await asyncio.wait_for(got.get(), RECEIVE_TIMEOUT)
        expected = await asyncio.wait_for(by_callback.get(), RECEIVE_TIMEOUT)
        assert (msg.subject, msg.reply, msg.data, msg.headers) == (
            expected.subject,
            expected.reply,
            expected.data,
            expected.headers,
        ), f"{NATS_PY}: a direct subscription's message differs from a callback's"
        sid = wire.subscription_id(direct)
        assert msg.sid == sid
        await direct.unsubscribe()
        # A message the server sent before it had the UNSUB, as the parser hands it over.
        await bus.nc._process_msg(sid, subject.encode(), b"", b"late", b"")
        assert got.empty(), f"{NATS_PY}: a direct subscription got a message after unsubscribe"
    finally:
        await plain.close()
        await bus.close()
