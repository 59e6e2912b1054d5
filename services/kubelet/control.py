"""Commands to one node's kubelet over NATS request/reply: `drasim node fault` and the
exposure switch of `drasim node migrate`.

Each node has its own subject, `<prefix>.ctl.kubelet.<node>`, answered only by the process
hosting it, so the CLI needs no map of which process hosts which node.
"""

from __future__ import annotations

import msgspec
import nats.errors

from drasim.common import errors
from drasim.common.bus import subjects
from drasim.common.bus.client import Bus
from drasim.common.cluster_file import Exposure

__all__ = [
    "ControlReply",
    "SetDeviceHealth",
    "SetExposure",
    "decode_command",
    "encode",
    "node_subject",
    "send",
]

TIMEOUT = 30.0


class _Message(msgspec.Struct, kw_only=True, rename="camel", omit_defaults=True):
    pass


class SetDeviceHealth(_Message, tag="SetDeviceHealth"):
    """Make the probe report `device` (`gpu-3` or `gpu.example.com/gpu-3`) (un)healthy."""

    device: str
    healthy: bool


class SetExposure(_Message, tag="SetExposure"):
    """Expose a device group through DRA or a device plugin (refused while pods use it)."""

    group: str
    exposure: Exposure
    extended_resource_name: str = ""


class ControlReply(_Message):
    ok: bool
    message: str = ""
    pods: list[str] = []  # namespace/name of the pods in the way, when refused for them


Command = SetDeviceHealth | SetExposure

_encoder = msgspec.json.Encoder()
_command_decoder = msgspec.json.Decoder(Command)
_reply_decoder = msgspec.json.Decoder(ControlReply)


def encode(message: msgspec.Struct) -> bytes:
    return _encoder.encode(message)


def decode_command(data: bytes) -> Command:
    return _command_decoder.decode(data)


def node_subject(prefix: str, node: str) -> str:
    return f"{prefix}.ctl.kubelet.{subjects.token(node)}"


async def send(bus: Bus, node: str, command: Command, *, timeout: float = TIMEOUT) -> ControlReply:
    """Send `command` to the kubelet hosting `node`."""
    try:
        msg = await bus.nc.request(node_subject(bus.prefix, node), encode(command), timeout=timeout)
    except nats.errors.NoRespondersError as exc:
        raise errors.ServiceUnavailable(f"no kubelet is hosting node {node}") from exc
    except nats.errors.TimeoutError as exc:
        raise errors.Timeout(
            f"the kubelet of node {node} did not answer in {timeout:.0f}s"
        ) from exc
    return _reply_decoder.decode(msg.data)
