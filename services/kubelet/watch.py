"""List+watch of the pods bound to the nodes one kubelet process hosts.

Events are published on `<prefix>.ev.pods.<node>.<namespace>.<name>`. A process hosting N
nodes reads them through ONE JetStream ordered consumer whose `filter_subjects` (NATS
2.10+) names its N nodes, so it receives its own nodes' pod events and nothing else:
another process's nodes, leases and slices never reach it. One consumer per node would
also filter correctly, but costs N consumers on the server and N idle heartbeats a period
on the wire (`benchmarks/kubelet_scale.py` measures both).

Layers as in `drasim.common.informer`: `run` retries forever; `_list_then_watch` lists
every hosted node (each list has its own resourceVersion), reports the state, then watches
from the oldest list, skipping a node's events its own list already held; `Expired` makes
it relist.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable

from nats.aio.msg import Msg

from drasim.common import codec, errors
from drasim.common.api import core_v1
from drasim.common.bus import messages, subjects
from drasim.common.bus.client import Bus
from drasim.common.bus.headers import TRACEPARENT
from drasim.common.client import ApiClient, ordered_messages, stream_bounds, stream_sequence

__all__ = ["PodHandler", "PodWatch", "watch_nodes_raw"]

log = logging.getLogger(__name__)

PodHandler = Callable[[str, core_v1.Pod, str], None]
"""Called with ADDED, MODIFIED or DELETED, the pod, and the event's `traceparent` ('' for
what a list showed), in event order."""

LIST_CONCURRENCY = 32

Key = tuple[str, str]  # (namespace, name)


async def watch_nodes_raw(
    bus: Bus, resource: str, nodes: list[str], *, resource_version: int
) -> AsyncIterator[tuple[int, messages.WatchEvent]]:
    """Events of `resource` on `nodes` after `resource_version`: one consumer, N filters."""
    decode = messages.watch_event_decoder.decode
    msgs = _watch_nodes(bus, resource, nodes, resource_version=resource_version)
    async with contextlib.aclosing(msgs):
        async for msg in msgs:
            yield stream_sequence(msg), decode(msg.data)


async def _watch_nodes(
    bus: Bus, resource: str, nodes: list[str], *, resource_version: int
) -> AsyncIterator[Msg]:
    """The stream's messages behind `watch_nodes_raw`, with their headers."""
    start = resource_version + 1
    first, last = await stream_bounds(bus)
    if start < first and not (first == last + 1 == start):
        raise errors.Expired(f"too old resource version: {resource_version} ({first - 1})")
    filters = [subjects.events_of(bus.prefix, resource, node=node) for node in nodes]
    msgs = ordered_messages(
        bus, filters[0], start=start, filter_subjects=filters, idle_heartbeat=5.0
    )
    async with contextlib.aclosing(msgs):
        async for msg in msgs:
            yield msg


class PodWatch:
    """The pods of `nodes`, kept current; `handler` hears every change after `synced`."""

    def __init__(self, api: ApiClient, nodes: list[str], handler: PodHandler) -> None:
        self.api = api
        self.nodes = nodes
        self.handler = handler
        self.cache: dict[Key, core_v1.Pod] = {}
        self.resource_version = 0
        self.synced = asyncio.Event()
        self._listed_at: dict[str, int] = {}  # node → resourceVersion of its last list

    async def run(self) -> None:
        delay = 0.1
        while True:
            try:
                if self.resource_version == 0:
                    await self._relist()
                await self._watch()
            except errors.Expired:
                log.info("pod watch: resourceVersion %d too old, relisting", self.resource_version)
                self.resource_version = 0
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the bus or apistore is away: retry from where we are
                log.warning("pod watch: %s; retrying in %.1fs", exc, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)
            else:
                delay = 0.1

    async def _relist(self) -> None:
        limit = asyncio.Semaphore(LIST_CONCURRENCY)

        async def list_node(node: str) -> tuple[str, list[core_v1.Pod], int]:
            async with limit:
                pods, rv = await self.api.list(core_v1.Pod, field_selector=f"spec.nodeName={node}")
            return node, pods, rv

        listed = await asyncio.gather(*(list_node(node) for node in self.nodes))
        fresh = {}
        for node, pods, rv in listed:
            self._listed_at[node] = rv
            fresh.update({_key(p): p for p in pods})
        old_cache, self.cache = self.cache, fresh
        self.resource_version = min(self._listed_at.values(), default=0)
        # Pods already running first, oldest first: a restarted kubelet re-admits what it
        # ran before it admits anything new (upstream sorts by creation time).
        for pod in sorted(fresh.values(), key=_admission_order):
            old = old_cache.get(_key(pod))
            if old is None:
                self.handler("ADDED", pod, "")
            elif old.metadata.resource_version != pod.metadata.resource_version:
                self.handler("MODIFIED", pod, "")
        for key, pod in old_cache.items():
            if key not in fresh:
                self.handler("DELETED", pod, "")
        self.synced.set()

    async def _watch(self) -> None:
        decode = messages.watch_event_decoder.decode
        msgs = _watch_nodes(
            self.api.bus, "pods", self.nodes, resource_version=self.resource_version
        )
        async with contextlib.aclosing(msgs):
            async for msg in msgs:
                self._on_event(stream_sequence(msg), decode(msg.data), msg.headers)

    def _on_event(
        self, seq: int, event: messages.WatchEvent, headers: dict[str, str] | None
    ) -> None:
        self.resource_version = seq
        pod = codec.decode(event.object, core_v1.Pod)
        if seq <= self._listed_at.get(pod.spec.node_name, 0):
            return  # that node's list already showed this change
        traceparent = headers.get(TRACEPARENT, "") if headers else ""
        key = _key(pod)
        if event.type == "DELETED":
            self.cache.pop(key, None)
            self.handler("DELETED", pod, traceparent)
            return
        event_type = "MODIFIED" if key in self.cache else "ADDED"
        self.cache[key] = pod
        self.handler(event_type, pod, traceparent)


def _key(pod: core_v1.Pod) -> Key:
    return (pod.metadata.namespace, pod.metadata.name)


def _admission_order(pod: core_v1.Pod) -> tuple[bool, str, str]:
    return (pod.status.phase != "Running", pod.metadata.creation_timestamp or "", pod.metadata.name)
