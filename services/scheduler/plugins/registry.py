"""Every in-tree plugin by name, as one dict of factories (upstream `plugins/registry.go`).

A factory gets the plugin's arguments (None: its defaults) and a `Handle`: the shared views
a plugin may use, the feature gates, and the framework's Filter. A profile picks plugins
from here by name (`new_framework`); `Framework` sorts them into extension points.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from drasim.common import events, metrics
from drasim.common.api import core_v1
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
    scheduling_gates,
    taint_toleration,
)
from drasim.scheduler.plugins.dynamic_resources import plugin as dynamic_resources
from drasim.scheduler.plugins.feature import DEFAULT_FEATURES, Features

__all__ = ["REGISTRY", "Handle", "PluginFactory", "new_framework"]


def _no_framework(
    state: framework.CycleState, pod: core_v1.Pod, node_info: framework.NodeInfo
) -> framework.Status | None:
    raise RuntimeError("this Handle belongs to no framework; build plugins with new_framework")


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Handle:
    """What factories may use (upstream's `framework.Handle` and feature gates).

    `dra_manager` is the shared DRA view (None: DRA is off, DynamicResources cannot be
    built); `api` the client PreBind and PostFilter write with; `features` the feature
    gates plugins read; `resourceclaim_creates` the scheduler's counter of special
    claim creates (None: the plugin's own); `recorder` the scheduler's event recorder
    (None: plugins record no events of their own); `preemption` what DefaultPreemption reads of
    the cluster; `run_filter_plugins` the framework's Filter on one node (set by
    `new_framework`).
    """

    dra_manager: DraManager | None = None
    api: ApiClient | None = None
    features: Features = DEFAULT_FEATURES
    resourceclaim_creates: metrics.CounterVec | None = None
    recorder: events.EventRecorder | None = None
    preemption: default_preemption.ClusterViews = dataclasses.field(
        default_factory=default_preemption.ClusterViews
    )
    run_filter_plugins: Callable[
        [framework.CycleState, core_v1.Pod, framework.NodeInfo], framework.Status | None
    ] = _no_framework

    @property
    def resolve_device_class(self) -> node_resources_fit.DeviceClassResolver | None:
        """Extended resource name → DeviceClass; None when DRA or the DRAExtendedResource
        gate is off, so nothing is delegated to DRA (upstream `shouldDelegateResourceToDRA`)."""
        if self.dra_manager is None or not self.features.enable_dra_extended_resource:
            return None
        return self.dra_manager.resolve_device_class

    @property
    def dra_capacity(self) -> node_resources_fit.DRACapacity | None:
        """Counts a node's devices for scoring DRA-served extended resources (upstream
        `calculateDRAExtendedResourceAllocatableRequest`);
        None whenever `resolve_device_class` is."""
        if self.dra_manager is None or not self.features.enable_dra_extended_resource:
            return None
        return self.dra_manager.dra_capacity


PluginFactory = Callable[[Any, Handle], framework.Plugin]
"""`(args, handle)`: the plugin's arguments (None: its defaults) and the Handle."""


def _node_resources_fit(
    args: node_resources_fit.NodeResourcesFitArgs | None, handle: Handle
) -> node_resources_fit.NodeResourcesFit:
    return node_resources_fit.NodeResourcesFit(
        args,
        resolve_device_class=handle.resolve_device_class,
        dra_capacity=handle.dra_capacity,
    )


def _dynamic_resources(
    args: dynamic_resources.DynamicResourcesArgs | None, handle: Handle
) -> dynamic_resources.DynamicResources:
    if handle.dra_manager is None or handle.api is None:
        raise ValueError(f"plugin {names.DYNAMIC_RESOURCES} needs the handle's dra_manager and api")
    return dynamic_resources.DynamicResources(
        handle.dra_manager,
        handle.api,
        features=handle.features,
        resourceclaim_creates=handle.resourceclaim_creates,
        args=args,
        recorder=handle.recorder,
    )


def _default_binder(args: None, handle: Handle) -> default_binder.DefaultBinder:
    if handle.api is None:
        raise ValueError(f"{names.DEFAULT_BINDER} needs the API client in its Handle")
    return default_binder.DefaultBinder(handle.api)


def _default_preemption(args: None, handle: Handle) -> default_preemption.DefaultPreemption:
    if handle.api is None:
        raise ValueError(f"{names.DEFAULT_PREEMPTION} needs the API client in its Handle")
    return default_preemption.DefaultPreemption(
        handle.api, handle.preemption, run_filter_plugins=handle.run_filter_plugins
    )


REGISTRY: dict[str, PluginFactory] = {
    names.SCHEDULING_GATES: lambda args, handle: scheduling_gates.SchedulingGates(),
    names.NODE_NAME: lambda args, handle: node_name.NodeName(),
    names.NODE_UNSCHEDULABLE: lambda args, handle: node_unschedulable.NodeUnschedulable(),
    names.TAINT_TOLERATION: lambda args, handle: taint_toleration.TaintToleration(),
    names.NODE_AFFINITY: lambda args, handle: node_affinity.NodeAffinity(),
    names.NODE_RESOURCES_FIT: _node_resources_fit,
    names.DYNAMIC_RESOURCES: _dynamic_resources,
    names.DEFAULT_PREEMPTION: _default_preemption,
    names.DEFAULT_BINDER: _default_binder,
}


def new_framework(
    profile: Sequence[str],
    handle: Handle,
    *,
    args: Mapping[str, Any] | None = None,
    observe_plugin_duration: framework.PluginDurationObserver | None = None,
) -> framework.Framework:
    """The profile's plugins, each built by its factory from its `args` and the Handle,
    in a framework whose Filter the Handle runs (upstream `NewFramework`, where the
    framework is its plugins' Handle)."""

    def build(name: str) -> Callable[[framework.Framework], framework.Plugin]:
        def plugin(fwk: framework.Framework) -> framework.Plugin:
            own = dataclasses.replace(handle, run_filter_plugins=fwk.run_filter_plugins)
            return REGISTRY[name]((args or {}).get(name), own)

        return plugin

    return framework.Framework(
        factories=[build(name) for name in profile],
        observe_plugin_duration=observe_plugin_duration,
    )
