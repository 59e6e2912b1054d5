"""Every in-tree plugin by name, as one dict of factories (upstream `plugins/registry.go`).

A factory gets a `Handle`: the shared views a plugin may use and, through them, the feature
gates. A profile picks plugins from here by name; `Framework` sorts them into extension
points.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from drasim.common.client import ApiClient
from drasim.scheduler import framework
from drasim.scheduler.dra_manager import DraManager
from drasim.scheduler.plugins import (
    default_binder,
    default_preemption,
    names,
    node_affinity,
    node_name,
    node_resources_fit,
    node_unschedulable,
    taint_toleration,
)
from drasim.scheduler.plugins.dynamic_resources import plugin as dynamic_resources

__all__ = ["REGISTRY", "Handle", "PluginFactory"]


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Handle:
    """What factories may use (upstream's `framework.Handle`, plugin args and features).

    `dra_manager` is the shared DRA view (None: DRA is off, DynamicResources cannot be
    built); `api` the client PreBind and PostFilter write with; `extended_resources` the
    DRAExtendedResource gate.
    """

    dra_manager: DraManager | None = None
    api: ApiClient | None = None
    extended_resources: bool = True
    preemption: default_preemption.ClusterViews = dataclasses.field(
        default_factory=default_preemption.ClusterViews
    )
    node_resources_fit_args: node_resources_fit.NodeResourcesFitArgs = dataclasses.field(
        default_factory=node_resources_fit.NodeResourcesFitArgs
    )

    @property
    def resolve_device_class(self) -> node_resources_fit.DeviceClassResolver | None:
        """Extended resource name → DeviceClass; None when DRA or the DRAExtendedResource
        gate is off, so nothing is delegated to DRA (spec §0.4)."""
        if self.dra_manager is None or not self.extended_resources:
            return None
        return self.dra_manager.resolve_device_class

    @property
    def dra_capacity(self) -> node_resources_fit.DRACapacity | None:
        """Counts a node's devices for scoring DRA-served extended resources (spec §3.7.2);
        None whenever `resolve_device_class` is."""
        if self.dra_manager is None or not self.extended_resources:
            return None
        return self.dra_manager.dra_capacity


PluginFactory = Callable[[Handle], framework.Plugin]


def _node_resources_fit(handle: Handle) -> node_resources_fit.NodeResourcesFit:
    return node_resources_fit.NodeResourcesFit(
        handle.node_resources_fit_args,
        resolve_device_class=handle.resolve_device_class,
        dra_capacity=handle.dra_capacity,
    )


def _dynamic_resources(handle: Handle) -> dynamic_resources.DynamicResources:
    if handle.dra_manager is None or handle.api is None:
        raise ValueError(f"plugin {names.DYNAMIC_RESOURCES} needs the handle's dra_manager and api")
    return dynamic_resources.DynamicResources(
        handle.dra_manager, handle.api, extended_resources=handle.extended_resources
    )


def _default_binder(handle: Handle) -> default_binder.DefaultBinder:
    if handle.api is None:
        raise ValueError(f"{names.DEFAULT_BINDER} needs the API client in its Handle")
    return default_binder.DefaultBinder(handle.api)


def _default_preemption(handle: Handle) -> default_preemption.DefaultPreemption:
    if handle.api is None:
        raise ValueError(f"{names.DEFAULT_PREEMPTION} needs the API client in its Handle")
    return default_preemption.DefaultPreemption(handle.api, handle.preemption)


REGISTRY: dict[str, PluginFactory] = {
    names.NODE_NAME: lambda _: node_name.NodeName(),
    names.NODE_UNSCHEDULABLE: lambda _: node_unschedulable.NodeUnschedulable(),
    names.TAINT_TOLERATION: lambda _: taint_toleration.TaintToleration(),
    names.NODE_AFFINITY: lambda _: node_affinity.NodeAffinity(),
    names.NODE_RESOURCES_FIT: _node_resources_fit,
    names.DYNAMIC_RESOURCES: _dynamic_resources,
    names.DEFAULT_PREEMPTION: _default_preemption,
    names.DEFAULT_BINDER: _default_binder,
}
