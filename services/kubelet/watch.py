"""The pods bound to the nodes one kubelet process hosts: an informer with one scope per
node, followed by plain subscription (`drasim.common.follow`).

Events are published on `<prefix>.ev.pods.<node>.<namespace>.<name>`. A process hosting N
nodes subscribes to N subjects, one per node, so it receives its own nodes' pod events and
nothing else: another process's nodes, leases and slices never reach it, and NATS'
permissions see to it that they cannot. Plain subscriptions, not a JetStream consumer per
node: ten thousand consumers made the stream fall minutes behind the writes. The stream
serves only catch-ups, of a node whose events were lost (the event chain says so) and
of every node after a reconnection. Each node is listed as that node (the Node authorizer
lets it list the pods bound to it alone) and followed from its own position, so a broken
watch resumes every node where it was.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import AsyncIterator, Callable

from drasim.common import watch
from drasim.common.api import core_v1
from drasim.common.bus import subjects
from drasim.common.bus.client import Bus
from drasim.common.client import ApiClient
from drasim.common.informer import Informer, event_traceparent
from drasim.common.nats_auth import node_identity

__all__ = ["PodHandler", "pod_informer", "watch_nodes_raw"]

PodHandler = Callable[[str, core_v1.Pod, str], None]
"""Called with ADDED, MODIFIED or DELETED, the pod, and the event's `traceparent` ('' for
what a list showed), in event order."""

# Idle heartbeat of each node's consumer (`watch_nodes_raw`): how soon a consumer lost
# without a reconnection is noticed, against N heartbeats a period when idle.
HEARTBEAT_S = 30.0


def pod_informer(api: ApiClient, nodes: list[str], handler: PodHandler) -> Informer[core_v1.Pod]:
    """The pods of `nodes`, kept current; `handler` hears every change. After a list, pods
    already running come first, oldest first: a restarted kubelet re-admits what it ran
    before it admits anything new (upstream sorts by creation time)."""
    return Informer(
        api,
        core_v1.Pod,
        scopes=[_node_scope(api, node) for node in nodes],
        follow=True,
        list_order=_admission_order,
        on_add=lambda pod: handler("ADDED", pod, event_traceparent()),
        on_update=lambda _, pod: handler("MODIFIED", pod, event_traceparent()),
        on_delete=lambda pod: handler("DELETED", pod, event_traceparent()),
    )


async def watch_nodes_raw(
    bus: Bus, resource: str, nodes: list[str], *, resource_version: int
) -> AsyncIterator[tuple[int, watch.WatchEvent]]:
    """Events of `resource` on `nodes` after `resource_version`, each node's in order, as
    `watch.watch_raw` gives them: the kubelet's watch without its informer."""
    starts = {subjects.events_of(bus.prefix, resource, node=n): resource_version for n in nodes}
    events = watch.watch_once(bus=bus, starts=starts, heartbeat=HEARTBEAT_S)
    async with contextlib.aclosing(events):
        async for _, event in events:
            yield event.resource_version, event


def _node_scope(api: ApiClient, node: str) -> watch.Scope:
    """The pods bound to `node`, listed as that node."""
    as_node = ApiClient(api.bus, actor=node_identity(node), timeout=api.timeout)
    return watch.Scope(
        subjects.events_of(api.bus.prefix, "pods", node=node),
        functools.partial(as_node.list, core_v1.Pod, field_selector=f"spec.nodeName={node}"),
        heads=subjects.heads_of(api.bus.prefix, "pods", node),
    )


def _admission_order(pod: core_v1.Pod) -> tuple[bool, str, str]:
    return (pod.status.phase != "Running", pod.metadata.creation_timestamp or "", pod.metadata.name)
