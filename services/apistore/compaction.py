"""Compaction: the event log and the event stream keep a bounded history, as etcd does
when kube-apiserver compacts it (`staging/src/k8s.io/apiserver/pkg/storage/etcd3/compact.go`).

Every accepted write is an event, so a cluster that runs for long (node Leases renew every
ten seconds per node) grows its log and its JetStream stream without end. Every `interval`
(kube-apiserver's `--etcd-compaction-interval`, 5 minutes by default) one apistore replica
takes a round, by a compare-and-set in Postgres as upstream's on `compact_rev_key`, and
compacts up to the log's end as the previous round saw it: what was written during the
last interval stays whole, older history is folded away.

Compacting up to seq C keeps, of the events at or before C, each live object's last one
(deleted objects lose every event, as etcd drops tombstones), and moves the mark to C in
the same transaction. What remains is a snapshot of the cluster at C written in the log's
own terms: folding the log from its start still gives the state at any resourceVersion from
C on (`drasim replay`, `replay --verify`, a LIST with `resourceVersionMatch=Exact` or a
continue token), and an earlier one is refused (`replay --to`; the LIST is 410 Expired, see
`list_options`). The stream drops every message up to C: a watch from an older
resourceVersion is answered 410 Expired, "too old resource version", and relists.

A round never compacts what the stream does not hold yet (the outbox may be behind, and a
watcher needs every event after its resourceVersion) nor the log's last event (its seq is
where the next resourceVersion is counted from).
"""

from __future__ import annotations

import asyncio
import logging
import time

import nats.errors
import nats.js.errors

from drasim.apistore.store import Store
from drasim.common import errors
from drasim.common.bus import subjects
from drasim.common.bus.client import Bus

log = logging.getLogger(__name__)

DEFAULT_COMPACTION_INTERVAL = 300.0  # seconds, kube-apiserver's --etcd-compaction-interval
# Events of the log one step (one transaction) of a compaction goes through.
STEP_EVENTS = 10_000
# The share of its time a round spends in its steps: after a step of d seconds it waits
# d * (1 - ROUND_DUTY) / ROUND_DUTY. At 10,000 nodes a round deletes ~450,000 events (five
# minutes of Lease renewals); back to back its steps hold a Postgres backend for as long,
# on a machine already near its cores, and every write waits meanwhile.
ROUND_DUTY = 0.25


class Compactor:
    """Compacts the event log and the event stream every `interval` seconds, up to the
    log's end as the previous round saw it (the first round only records it)."""

    def __init__(self, store: Store, bus: Bus, interval: float) -> None:
        self.store = store
        self.bus = bus
        self.interval = interval
        # The count of rounds as this replica last knew it (upstream's compact time).
        self._rounds = 0
        # Set after each compaction (for whoever waits for one: tests, benchmarks).
        self.compacted = asyncio.Event()

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            try:
                await self.round()
            except (errors.ApiError, nats.errors.Error, nats.js.errors.Error, OSError) as exc:
                log.warning("compaction failed: %s; trying again in %.0fs", exc, self.interval)

    async def round(self) -> int | None:
        """Take a round if no other replica took it since this one's last look, and
        compact up to what the round before recorded; answers the revision compacted to,
        or None (lost the round, or nothing to compact yet)."""
        revision = await self.store.take_compaction_round(self._rounds)
        if revision is None:  # another replica took it: follow its count, try next time
            self._rounds = (await self.store.select_compaction()).rounds
            return None
        self._rounds += 1
        if revision == 0:  # the first round: nothing recorded before it
            return None
        return await self.compact(revision, duty=ROUND_DUTY)

    async def compact(self, revision: int, *, duty: float = 1.0) -> int:
        """Compact the log and the stream up to `revision`, bounded by what the stream
        holds (the outbox may be behind) and by the log's last event; answers the revision
        the log is compacted to. Its steps take `duty` of the time it runs (1: one after
        another)."""
        name = subjects.stream(self.bus.prefix)
        stream = (await self.bus.js.stream_info(name)).state
        target = min(revision, stream.last_seq, await self.store.max_seq() - 1)
        done = (await self.store.select_compaction()).revision
        if target > done:
            started, removed, after = time.monotonic(), 0, done
            while after < target:
                upto = min(after + STEP_EVENTS, target)
                step_started = time.monotonic()
                removed += await self.store.compact_events(after, upto)
                after = upto
                if duty < 1.0 and after < target:
                    await asyncio.sleep((time.monotonic() - step_started) * (1 - duty) / duty)
            log.info(
                "compacted the event log up to resourceVersion %d: %d events removed in %.1fs",
                target,
                removed,
                time.monotonic() - started,
            )
            done = target
        # The stream's sequence is the resourceVersion (see the outbox): drop what the log
        # compacted, also where an earlier round did the log but not the stream.
        if stream.first_seq <= done:
            await self.bus.js.purge_stream(name, seq=done + 1)
        self.compacted.set()
        return done
