"""The Priority admission's index of PriorityClasses: a class this apistore committed is
used by the next request at once; one another replica wrote, once the index reloads (as
upstream's admission reads a lister that follows the store)."""

from __future__ import annotations

import msgspec
import pytest

from drasim.apistore import admission
from drasim.apistore.core import ApiCore
from drasim.apistore.request import Context
from drasim.apistore.store import EventRow
from drasim.common import codec, errors
from drasim.common.api import core_v1, scheduling_v1
from drasim.common.api.meta_v1 import ObjectMeta
from drasim.common.bus import messages
from tests.builders import make_pod


def high_class(name: str = "high") -> messages.Create:
    body = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": name}, "value": 1000}  # fmt: skip
    return messages.Create(resource="priorityclasses", object=msgspec.Raw(codec.encode(body)))


def pod_of_class(name: str, class_name: str) -> core_v1.Pod:
    pod = make_pod(name).obj()
    pod.spec.priority_class_name = class_name
    return pod


async def test_a_class_committed_here_is_used_at_once(server, api):
    await api.create(scheduling_v1.PriorityClass(metadata=ObjectMeta(name="high"), value=1000))
    created = await api.create(pod_of_class("a", "high"))
    assert created.spec.priority == 1000


async def test_a_class_another_replica_wrote_is_used_once_the_index_reloads(server, api):
    other = ApiCore(server.store)
    await other.start()
    try:
        await other.handle(high_class(), Context())
    finally:
        await other.stop()
    with pytest.raises(errors.Forbidden, match="no PriorityClass with name high was found"):
        await api.create(pod_of_class("a", "high"))
    await server.core.reload_priority_classes()
    created = await api.create(pod_of_class("a", "high"))
    assert created.spec.priority == 1000


def class_event(seq: int, name: str, value: int, *, default: bool = False, kind: str = "ADDED"):
    pc = scheduling_v1.PriorityClass(
        metadata=ObjectMeta(name=name), value=value, global_default=default
    )
    return EventRow(
        seq=seq, type=kind, resource="priorityclasses", namespace="", name=name, uid="u",
        node_name="", object=codec.encode(pc), actor="t", traceparent="",
    )  # fmt: skip


def test_index_follows_writes_and_ignores_a_list_older_than_them() -> None:
    index = admission.PriorityClasses()
    index.observe(
        [class_event(5, "low", 10, default=True), class_event(6, "lower", 5, default=True)]
    )
    default = index.default()
    assert default is not None and default.metadata.name == "lower"  # the lowest, as upstream
    # A list taken before seq 6 would lose "lower": it is not taken.
    index.replace(admission.PriorityClassList(resource_version=5, items=[]))
    assert index.get("lower") is not None
    index.observe([class_event(7, "lower", 5, kind="DELETED")])
    index.replace(admission.PriorityClassList(resource_version=7, items=[]))
    assert index.get("low") is None and index.default() is None
