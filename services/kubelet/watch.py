"""List+watch of the pods bound to the nodes one kubelet process hosts.

Events are published on `<prefix>.ev.pods.<node>.<namespace>.<name>`. A process hosting N
nodes reads them through N ordered consumers, one per node (`drasim.common.bus.consumer`),
so it receives its own nodes' pod events and nothing else: another process's nodes, leases
and slices never reach it, and NATS' permissions see to it that they cannot (a consumer
filtering several subjects could not be bounded by them). Their idle heartbeats are
sparse (`HEARTBEAT_S`): N consumers send N of them a period.

Layers as in `drasim.common.informer`: `run` retries forever; `_relist` lists every
hosted node (each list has its own resourceVersion) and reports the state; `_watch`
watches each node from its own position (its list, then its last event), so a broken
watch resumes every node where it was; `Expired` makes it relist.
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
from drasim.common.bus.consumer import ordered_messages
from drasim.common.bus.headers import TRACEPARENT
from drasim.common.client import ApiClient, stream_sequence
from drasim.common.nats_auth import node_identity

__all__ = ["PodHandler", "PodWatch", "watch_nodes_raw"]

log = logging.getLogger(__name__)

PodHandler = Callable[[str, core_v1.Pod, str], None]
"""Called with ADDED, MODIFIED or DELETED, the pod, and the event's `traceparent` ('' for
what a list showed), in event order."""

LIST_CONCURRENCY = 32
# Idle heartbeat of each node's consumer: how soon a consumer lost without a reconnection
# (a clustered NATS server gone) is noticed, against N heartbeats a period when idle.
HEARTBEAT_S = 30.0

Key = tuple[str, str]  # (namespace, name)


async def watch_nodes_raw(
    bus: Bus, resource: str, nodes: list[str], *, resource_version: int
) -> AsyncIterator[tuple[int, messages.WatchEvent]]:
    """Events of `resource` on `nodes` after `resource_version`, each node's in order."""
    decode = messages.watch_event_decoder.decode
    msgs = _watch_nodes(bus, resource, dict.fromkeys(nodes, resource_version))
    async with contextlib.aclosing(msgs):
        async for msg in msgs:
            yield stream_sequence(msg), decode(msg.data)


def _watch_nodes(bus: Bus, resource: str, positions: dict[str, int]) -> AsyncIterator[Msg]:
    """The stream's messages of `resource` on each node after the resourceVersion it maps
    to, with their headers."""
    starts = {
        subjects.events_of(bus.prefix, resource, node=node): rv + 1
        for node, rv in positions.items()
    }
    return ordered_messages(bus, starts, idle_heartbeat=HEARTBEAT_S)


class PodWatch:
    """The pods of `nodes`, kept current; `handler` hears every change after `synced`."""

    def __init__(self, api: ApiClient, nodes: list[str], handler: PodHandler) -> None:
        self.api = api
        self.nodes = nodes
        self.handler = handler
        self.cache: dict[Key, core_v1.Pod] = {}
        self.synced = asyncio.Event()
        # node → resourceVersion of the last event (or list) of it seen; empty: relist.
        self.positions: dict[str, int] = {}

    async def run(self) -> None:
        delay = 0.1
        while True:
            try:
                if not self.positions:
                    await self._relist()
                await self._watch()
            except errors.Expired as exc:
                log.info("pod watch: %s, relisting", exc)
                self.positions = {}
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
            # As that node: a node may list the pods bound to it alone (the Node authorizer).
            api = ApiClient(self.api.bus, actor=node_identity(node), timeout=self.api.timeout)
            async with limit:
                pods, rv = await api.list(core_v1.Pod, field_selector=f"spec.nodeName={node}")
            return node, pods, rv

        listed = await asyncio.gather(*(list_node(node) for node in self.nodes))
        fresh = {}
        positions = {}
        for node, pods, rv in listed:
            positions[node] = rv
            fresh.update({_key(p): p for p in pods})
        old_cache, self.cache = self.cache, fresh
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
        self.positions = positions
        self.synced.set()

    async def _watch(self) -> None:
        decode = messages.watch_event_decoder.decode
        msgs = _watch_nodes(self.api.bus, "pods", dict(self.positions))
        async with contextlib.aclosing(msgs):
            async for msg in msgs:
                self._on_event(stream_sequence(msg), decode(msg.data), msg.headers)

    def _on_event(
        self, seq: int, event: messages.WatchEvent, headers: dict[str, str] | None
    ) -> None:
        pod = codec.decode(event.object, core_v1.Pod)
        self.positions[pod.spec.node_name] = seq
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
