"""What a node remembers of each pod it has admitted: its admission, the versions it wrote,
and its containers (`containers.PodRun`) until the pod has ended."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from drasim.common.quantity import Quantity
from drasim.kubelet import admission, containers, runtime

__all__ = ["PodRecord"]


@dataclass
class PodRecord:
    """A pod this node has admitted (or rejected, until the rejection is written)."""

    namespace: str
    name: str
    requests: dict[str, Quantity]
    rejection: admission.Rejection | None = None
    # resourceVersion of this kubelet's last write: events up to it are echoes of what
    # this kubelet already acted on (older ones stale, that one its own result), not
    # states to act on ...
    written: int = 0
    # ... unless something of the node's own changed since (a device's health): then the
    # pod is synced again whatever its version (a flag here, since the pod's work queue
    # keeps only the newest event, which may be such an echo) ...
    resync: bool = False
    # ... or the last sync did not complete: whatever failed in it (a driver, a checkpoint,
    # a write whose answer was lost), the retry and the echoes of the writes it made are
    # not finished work.
    settled: bool = False
    # The trace of the event that admitted the pod (its binding): preparing and starting
    # it continue that trace.
    traceparent: str = ""
    # Its containers, once started; `finished` once the pod has ended and given back its
    # devices (it stays known, so that a late event of it does not admit it again).
    run: containers.PodRun | None = None
    assigned: dict[str, runtime.Assignment] = field(default_factory=dict)
    finished: bool = False
    # When the pod is next synced because a container is due to exit or start.
    wake: asyncio.TimerHandle | None = None

    def cancel_wake(self) -> None:
        if self.wake is not None:
            self.wake.cancel()
            self.wake = None
