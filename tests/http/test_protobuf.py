"""Reading protobuf request bodies (`apistore.http.protobuf`): what is outside the tables is
refused with 415 naming it; zeros of pointer fields are kept. Real kubectl bodies are
covered in test_kubectl.py."""

from __future__ import annotations

import pytest
from aiohttp import web

from drasim.apistore.http import protobuf


def varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def field(number: int, value: int | bytes) -> bytes:
    if isinstance(value, int):
        return varint(number << 3) + varint(value)
    return varint(number << 3 | 2) + varint(len(value)) + value


def body(kind: str, raw: bytes, api_version: str = "v1") -> bytes:
    type_meta = field(1, api_version.encode()) + field(2, kind.encode())
    return protobuf.MAGIC + field(1, type_meta) + field(2, raw)


def test_a_namespace_with_labels() -> None:
    label = field(1, b"team") + field(2, b"a")
    meta = field(1, b"ns") + field(3, b"") + field(7, 0) + field(11, label) + field(8, b"")
    assert protobuf.decode_body(body("Namespace", field(1, meta) + field(3, b""))) == {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": "ns", "labels": {"team": "a"}},  # zeros dropped, as omitempty
    }


def test_delete_options_keep_a_zero_grace_period() -> None:
    options = field(1, 0) + field(2, field(1, b"uid-1"))
    assert protobuf.decode_body(body("DeleteOptions", options)) == {
        "apiVersion": "v1",
        "kind": "DeleteOptions",
        "gracePeriodSeconds": 0,
        "preconditions": {"uid": "uid-1"},
    }


@pytest.mark.parametrize(
    ("data", "named"),
    [
        (b'{"kind": "Namespace"}', "k8s protobuf prefix"),
        (body("Pod", b""), "kind 'Pod'"),
        (body("Namespace", field(1, field(99, b"x"))), "field 99 of ObjectMeta"),
        (body("Namespace", field(1, field(1, 5))), "is not length-delimited"),
        (body("Namespace", field(1, b"\x0a\x10ab")), "runs past the end"),
    ],
)
def test_what_is_not_read_is_refused_naming_it(data: bytes, named: str) -> None:
    with pytest.raises(web.HTTPUnsupportedMediaType) as refused:
        protobuf.decode_body(data)
    assert named in refused.value.text and "send it as application/json" in refused.value.text
