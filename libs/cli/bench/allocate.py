"""Upstream's `allocResourceClaims` op: allocate the claims of a namespace without pods, each
on the first node (in a shuffled order) where the allocator finds devices for it, as a
cluster in which earlier pods took devices.

Upstream: `allocResourceClaimsOp.run` in
`test/integration/scheduler_perf/dra.go`, with the scheduler's own allocator and its
accounting of devices, shares and counters (drasim's `DraManager`).
"""

from __future__ import annotations

import random

from drasim.common.api import core_v1, resource_v1
from drasim.common.client import ApiClient
from drasim.scheduler.dra_manager import DraManager

__all__ = ["AllocationError", "allocate_claims"]

# The node order is shuffled per claim, as upstream; seeded so that runs repeat.
_SEED = 5004


class AllocationError(Exception):
    """A claim fits on no node."""


async def allocate_claims(api: ApiClient, namespace: str) -> int:
    """Allocate every unallocated claim of `namespace`; how many were allocated."""
    manager = DraManager()
    for cls in (await api.list(resource_v1.DeviceClass))[0]:
        manager.on_class_add(cls)
    for s in (await api.list(resource_v1.ResourceSlice))[0]:
        manager.on_slice_add(s)
    for claim in (await api.list(resource_v1.ResourceClaim))[0]:
        manager.on_claim_add(claim)
    nodes = (await api.list(core_v1.Node))[0]
    pending, _ = await api.list(resource_v1.ResourceClaim, namespace=namespace)
    rng = random.Random(_SEED)
    allocated = 0
    for i, claim in enumerate(pending):
        if claim.status.allocation is not None:
            continue
        allocator = manager.allocator()
        rng.shuffle(nodes)
        for node in nodes:
            found = allocator.allocate(node, [claim])
            if found is not None:
                claim.status.allocation = found[0]
                manager.assume_claim_after_api_call(await api.update_status(claim))
                allocated += 1
                break
        else:
            raise AllocationError(f"could not allocate claim {i} out of {len(pending)}")
    return allocated
