"""The little of each object the bench reads, as msgspec "view structs": decoding only
these fields keeps the bench's own CPU per object small, so it is not the bottleneck it
measures."""

from __future__ import annotations

import msgspec


class Meta(msgspec.Struct):
    name: str = ""
    namespace: str = ""
    annotations: dict[str, str] = {}


class PodSpec(msgspec.Struct, rename="camel"):
    node_name: str = ""


class PodView(msgspec.Struct):
    """A pod's name, namespace and node."""

    metadata: Meta = msgspec.field(default_factory=Meta)
    spec: PodSpec = msgspec.field(default_factory=PodSpec)


class InvolvedObject(msgspec.Struct):
    namespace: str = ""
    name: str = ""


class EventView(msgspec.Struct, rename="camel"):
    metadata: Meta = msgspec.field(default_factory=Meta)
    reason: str = ""
    involved_object: InvolvedObject = msgspec.field(default_factory=InvolvedObject)
    count: int = 0


class Device(msgspec.Struct, rename={"share_id": "shareID", "admin_access": "adminAccess"}):
    driver: str = ""
    pool: str = ""
    device: str = ""
    share_id: str | None = None
    admin_access: bool | None = None


class DeviceResults(msgspec.Struct):
    results: list[Device] = []


class Allocation(msgspec.Struct):
    devices: DeviceResults = msgspec.field(default_factory=DeviceResults)


class ClaimStatus(msgspec.Struct):
    allocation: Allocation | None = None


class ClaimView(msgspec.Struct):
    metadata: Meta = msgspec.field(default_factory=Meta)
    status: ClaimStatus = msgspec.field(default_factory=ClaimStatus)


pod_decoder = msgspec.json.Decoder(PodView)
event_decoder = msgspec.json.Decoder(EventView)
claim_decoder = msgspec.json.Decoder(ClaimView)
name_decoder = msgspec.json.Decoder(PodView)  # only metadata.name is read
