"""What one scheduling attempt of DynamicResources keeps in the CycleState: written once
in PreFilter under the plugin's name, read by Filter, Reserve, PreBind and Unreserve.

Upstream: `stateData` in `pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go`.
"""

from __future__ import annotations

import dataclasses

from drasim.common.api import core_v1, resource_v1
from drasim.scheduler import framework
from drasim.scheduler.plugins import names
from drasim.scheduler.plugins.dynamic_resources import allocator as structured
from drasim.scheduler.plugins.dynamic_resources.claims import ClaimStore

__all__ = [
    "STATE_KEY",
    "InformationForClaim",
    "NodeAllocation",
    "NodeExtendedClaim",
    "StateData",
    "read_state",
]

STATE_KEY = names.DYNAMIC_RESOURCES


@dataclasses.dataclass(slots=True)
class InformationForClaim:
    # Where an allocated claim can be used; None when unallocated or usable anywhere.
    available_on_nodes: core_v1.NodeSelector | None = None
    # Set by Reserve, written by PreBind; None when nothing had to be allocated.
    allocation: resource_v1.AllocationResult | None = None


@dataclasses.dataclass(slots=True)
class NodeAllocation:
    """What Filter found for one node, for Reserve and PreBind (upstream `nodeAllocation`)."""

    # Indices into the claim store of the claims allocated here, matching the results.
    claim_indices: list[int]
    allocations: list[structured.Allocation]
    # The special claim with the requests of this node; None when DRA serves nothing here.
    extended_resource_claim: resource_v1.ResourceClaim | None
    request_mappings: list[core_v1.ContainerExtendedResourceRequest]


NodeExtendedClaim = tuple[
    resource_v1.ResourceClaim | None, list[core_v1.ContainerExtendedResourceRequest]
]
"""A node's copy of the special claim with its device requests, and the request mappings."""


@dataclasses.dataclass(slots=True)
class StateData:
    """Written once in PreFilter and shared by reference with the later phases."""

    claims: ClaimStore = dataclasses.field(default_factory=lambda: ClaimStore([], None))
    # DRA-capable names the pod requests (non-zero) → the class that serves them, if any.
    extended_resources: dict[str, resource_v1.DeviceClass | None] = dataclasses.field(
        default_factory=dict
    )
    # Built when some claim needs allocation; one per attempt, shared by all Filter calls.
    allocator: structured.Allocator | None = None
    informations_for_claim: list[InformationForClaim] = dataclasses.field(default_factory=list)
    # Allocated claims that were unavailable on some node, for PostFilter.
    unavailable_claims: set[int] = dataclasses.field(default_factory=set)
    node_allocations: dict[str, NodeAllocation] = dataclasses.field(default_factory=dict)
    # Nodes on which DRA serves the same names get the same special claim: built once.
    node_extended_claims: dict[frozenset[str], NodeExtendedClaim] = dataclasses.field(
        default_factory=dict
    )
    # The pod has no user claim, only a special claim to allocate: Filter's short way.
    only_extended_resource_claim: bool = False
    # PreBind sent the pod a status naming its special claim (the answer may be lost):
    # Unreserve, which deletes that claim, clears the status again.
    extended_resource_claim_status_written: bool = False

    def clone(self) -> StateData:
        return self


def read_state(state: framework.CycleState) -> StateData:
    data = state.read(STATE_KEY)
    assert isinstance(data, StateData)
    return data
