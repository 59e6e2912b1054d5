"""Every in-tree plugin by name, as one dict of factories (upstream `plugins/registry.go`).

A factory gets a `Handle`: the shared views a plugin may use and, through them, the feature
gates. A profile picks plugins from here by name; `Framework` sorts them into extension
points.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from drasim.scheduler import framework
from drasim.scheduler.plugins import (
    names,
    node_affinity,
    node_name,
    node_resources_fit,
    node_unschedulable,
    taint_toleration,
)

__all__ = ["REGISTRY", "Handle", "PluginFactory"]


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Handle:
    """What factories may use (upstream's `framework.Handle`, plugin args and features).

    `resolve_device_class` is None when the DRAExtendedResource gate is off (spec §0.4);
    `dra_capacity` counts a node's devices for scoring DRA-served extended resources.
    """

    resolve_device_class: node_resources_fit.DeviceClassResolver | None = None
    dra_capacity: node_resources_fit.DRACapacity | None = None
    node_resources_fit_args: node_resources_fit.NodeResourcesFitArgs = dataclasses.field(
        default_factory=node_resources_fit.NodeResourcesFitArgs
    )


PluginFactory = Callable[[Handle], framework.Plugin]


def _node_resources_fit(handle: Handle) -> node_resources_fit.NodeResourcesFit:
    return node_resources_fit.NodeResourcesFit(
        handle.node_resources_fit_args,
        resolve_device_class=handle.resolve_device_class,
        dra_capacity=handle.dra_capacity,
    )


REGISTRY: dict[str, PluginFactory] = {
    names.NODE_NAME: lambda _: node_name.NodeName(),
    names.NODE_UNSCHEDULABLE: lambda _: node_unschedulable.NodeUnschedulable(),
    names.TAINT_TOLERATION: lambda _: taint_toleration.TaintToleration(),
    names.NODE_AFFINITY: lambda _: node_affinity.NodeAffinity(),
    names.NODE_RESOURCES_FIT: _node_resources_fit,
}
