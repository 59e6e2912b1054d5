"""The kubelet ↔ DRA driver API (upstream `k8s.io/kubelet/pkg/apis/dra/v1`), over NATS.

Upstream it is gRPC on a Unix socket per driver; here each (node, driver) pair has one
request/reply subject, `<prefix>.dra.<node>.<driver>`, so only the process hosting the node
receives its requests. Messages are a tagged union, decoded once:

    reply = await DraPluginClient(bus, node="n1", driver="gpu.example.com").prepare(
        [Claim(namespace="default", uid=claim.metadata.uid, name=claim.metadata.name)]
    )
"""

from __future__ import annotations

import msgspec
import nats.errors

from drasim.common import tracing
from drasim.common.bus import subjects
from drasim.common.bus.client import Bus
from drasim.drivers import errors

__all__ = [
    "Claim",
    "DraPluginClient",
    "NodePrepareResourceResponse",
    "NodePrepareResourcesRequest",
    "NodePrepareResourcesResponse",
    "NodeUnprepareResourceResponse",
    "NodeUnprepareResourcesRequest",
    "NodeUnprepareResourcesResponse",
    "PreparedDevice",
    "decode_request",
    "encode",
    "plugin_subject",
]

TIMEOUT = 10.0


class _Message(msgspec.Struct, kw_only=True, rename="camel", omit_defaults=True):
    pass


class Claim(_Message):
    """A claim to prepare, as the kubelet names it (the driver reads the object itself)."""

    namespace: str
    uid: str
    name: str


class NodePrepareResourcesRequest(_Message, tag="NodePrepareResources"):
    claims: list[Claim]


class NodeUnprepareResourcesRequest(_Message, tag="NodeUnprepareResources"):
    claims: list[Claim]


class PreparedDevice(_Message):
    """One prepared device (upstream `Device`) and the requests of the claim it serves."""

    pool_name: str
    device_name: str
    request_names: list[str]
    cdi_device_ids: list[str] = msgspec.field(default_factory=list, name="cdiDeviceIDs")
    share_id: str | None = msgspec.field(default=None, name="shareID")
    # The driver's own note: some request got the device with admin access (KEP-5018).
    admin_access: bool = False


class NodePrepareResourceResponse(_Message):
    """One claim's result: its devices, or why they could not be prepared."""

    devices: list[PreparedDevice] = []
    error: str = ""


class NodePrepareResourcesResponse(_Message):
    claims: dict[str, NodePrepareResourceResponse]  # by claim UID


class NodeUnprepareResourceResponse(_Message):
    error: str = ""


class NodeUnprepareResourcesResponse(_Message):
    claims: dict[str, NodeUnprepareResourceResponse]  # by claim UID


Request = NodePrepareResourcesRequest | NodeUnprepareResourcesRequest

_encoder = msgspec.json.Encoder()
_request_decoder = msgspec.json.Decoder(Request)
_prepare_decoder = msgspec.json.Decoder(NodePrepareResourcesResponse)
_unprepare_decoder = msgspec.json.Decoder(NodeUnprepareResourcesResponse)


def encode(message: msgspec.Struct) -> bytes:
    return _encoder.encode(message)


def decode_request(data: bytes) -> Request:
    return _request_decoder.decode(data)


def plugin_subject(prefix: str, node: str, driver: str) -> str:
    """Where the kubelet plugin of `driver` on `node` answers."""
    return f"{prefix}.dra.{subjects.token(node)}.{subjects.token(driver)}"


class DraPluginClient:
    """The kubelet's side: one node's calls to one driver."""

    def __init__(self, bus: Bus, *, node: str, driver: str) -> None:
        self._bus = bus
        self.node = node
        self.driver = driver
        self._subject = plugin_subject(bus.prefix, node, driver)

    async def prepare(self, claims: list[Claim]) -> NodePrepareResourcesResponse:
        data = await self._call(NodePrepareResourcesRequest(claims=claims))
        return _prepare_decoder.decode(data)

    async def unprepare(self, claims: list[Claim]) -> NodeUnprepareResourcesResponse:
        data = await self._call(NodeUnprepareResourcesRequest(claims=claims))
        return _unprepare_decoder.decode(data)

    async def _call(self, request: Request) -> bytes:
        """A driver that is absent or slow is a temporary condition: the kubelet retries.

        The call is a CLIENT span of the current trace (when it records), and carries the
        trace in a `traceparent` header, so the driver's handling continues it."""
        span, traceparent = tracing.start_client_span(_method, request)
        if span is not None and span.is_recording():
            span.set_attribute("k8s.node.name", self.node)
            span.set_attribute("drasim.driver", self.driver)
            span.set_attribute("drasim.claims", [c.name for c in request.claims])
        try:
            msg = await self._bus.request(
                self._subject,
                encode(request),
                timeout=TIMEOUT,
                headers={tracing.TRACEPARENT: traceparent} if traceparent else None,
            )
        except nats.errors.NoRespondersError as exc:
            tracing.end(span, exc)
            raise errors.TemporaryError(
                f"DRA driver {self.driver} is not registered on node {self.node}", delay=2.0
            ) from exc
        except nats.errors.TimeoutError as exc:
            tracing.end(span, exc)
            raise errors.TemporaryError(
                f"DRA driver {self.driver} on node {self.node} did not answer in {TIMEOUT:.0f}s"
            ) from exc
        except BaseException as exc:
            tracing.end(span, exc)
            raise
        tracing.end(span)
        return msg.data


def _method(request: Request) -> str:
    """`NodePrepareResources` or `NodeUnprepareResources`: the request's tag."""
    return str(type(request).__struct_config__.tag)
