"""The event chain: with each event the outbox publishes the resourceVersion of the event
before it of the same resource, and of the same resource on the same node
(`headers.PREV_OF_RESOURCE`, `headers.PREV_ON_NODE`).

Why: a watcher cannot otherwise tell that events it should have had never reached it. A
JetStream consumer that lags silently skips what compaction or the stream's limits
removed meanwhile; a kubelet following its nodes by plain subscription
(`drasim.kubelet.watch`) loses what is published while its connection is away. With the
chain, a watcher at resourceVersion R that gets an event naming a previous one after R
knows it missed something, and catches up or relists (410).

A link may name a later event than the true previous one (never an earlier one): that
only makes a watcher check. The outbox keeps the chain exact for the events the stream
holds up to where it published (`known_upto`); what it cannot know (events compacted from
the log before it started, events skipped when the stream was realigned) is covered by
the `floor`: no link names less than it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from drasim.apistore.store import EventRow, Store

# Events a replica that lost its place folds in from the log by their keys; further
# behind, it reads each resource's and node's last event instead.
FOLD_LIMIT = 100_000


class EventChain:
    """The last event of each resource and of each (resource, node), as published."""

    def __init__(self) -> None:
        # The chain holds every event up to this seq; None: not read yet.
        self.known_upto: int | None = None
        self.floor = 0
        self._of_resource: dict[str, int] = {}
        self._on_node: dict[tuple[str, str], int] = {}

    def links(self, events: Sequence[EventRow]) -> list[tuple[int, int]]:
        """(previous of its resource, previous on its node) of each of `events`, which
        continue the stream in order; the chain itself is left as it is (`advance`
        once the stream took them)."""
        of_resource: dict[str, int] = {}
        on_node: dict[tuple[str, str], int] = {}
        floor = self.floor
        result = []
        for ev in events:
            node_key = (ev.resource, ev.node_name)
            previous = of_resource.get(ev.resource) or self._of_resource.get(ev.resource, 0)
            previous_on_node = on_node.get(node_key) or self._on_node.get(node_key, 0)
            result.append((max(previous, floor), max(previous_on_node, floor)))
            of_resource[ev.resource] = ev.seq
            on_node[node_key] = ev.seq
        return result

    def node_heads(self) -> list[tuple[str, str, int]]:
        """(resource, node, last event's seq) of every resource on every node."""
        return [(resource, node, seq) for (resource, node), seq in self._on_node.items() if node]

    def advance(self, keys: Iterable[tuple[int, str, str]]) -> None:
        """Fold in events (seq, resource, node) that the stream now holds, in order."""
        for seq, resource, node in keys:
            self._of_resource[resource] = seq
            self._on_node[(resource, node)] = seq
            self.known_upto = seq

    def skip_to(self, seq: int) -> None:
        """The stream continues after `seq` without the events before it that the chain
        has not seen (realigned): no link names less than `seq`."""
        self.floor = max(self.floor, seq)
        self.known_upto = seq

    async def sync(self, store: Store, stream_last: int) -> None:
        """Make the chain hold every event up to `stream_last`, where the stream is: fold
        in the events published meanwhile (by another replica), or read the log's last
        event of each resource and node, with the compaction revision as the floor."""
        known = self.known_upto
        compacted = (await store.select_compaction()).revision
        if known is not None and compacted <= known <= stream_last <= known + FOLD_LIMIT:
            if stream_last > known:
                self.advance(await store.select_event_keys(known, stream_last))
                self.known_upto = stream_last
            return
        self._of_resource.clear()
        self._on_node.clear()
        for resource, node, seq in await store.select_last_event_keys(stream_last):
            self._on_node[(resource, node)] = seq
            self._of_resource[resource] = max(self._of_resource.get(resource, 0), seq)
        # The log keeps of the events up to the compaction revision only each live
        # object's last: a deleted object's later event may have been the last one.
        self.floor = compacted
        self.known_upto = stream_last
