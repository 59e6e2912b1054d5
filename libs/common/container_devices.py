"""The pod annotation `drasim.io/container-devices`: per container, the CDI device ids and
environment the emulated runtime gave it. The kubelet writes it; `kubectl logs` (the
apistore's pods/log) and tests read it. One codec for both sides."""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

__all__ = [
    "CONTAINER_DEVICES_ANNOTATION",
    "ContainerDevices",
    "decode_container_devices",
    "encode_container_devices",
]

CONTAINER_DEVICES_ANNOTATION = "drasim.io/container-devices"


class ContainerDevices(msgspec.Struct, kw_only=True, omit_defaults=True, rename="camel"):
    """What the runtime gave one container."""

    cdi_devices: list[str] = []
    env: dict[str, str] = {}


_annotation_encoder = msgspec.json.Encoder(order="sorted")
_annotation_decoder = msgspec.json.Decoder(dict[str, ContainerDevices])


def encode_container_devices(devices: Mapping[str, ContainerDevices]) -> str:
    return _annotation_encoder.encode(dict(devices)).decode()


def decode_container_devices(text: str) -> dict[str, ContainerDevices]:
    """Raises msgspec.DecodeError (or ValidationError) for a malformed annotation."""
    return _annotation_decoder.decode(text)
