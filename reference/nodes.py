"""The objects a drasim cluster file makes, for upstream's control plane.

drasim's kubelet emulators register each node of a cluster file and its DRA driver shims
publish the node's ResourceSlices. Upstream has no such processes: kwok keeps fake nodes
Ready and pods Running, but the Nodes and slices themselves are written here. They are
built by drasim's own code (`drasim.kubelet.node_status`, `drasim.drivers.dra_driver`), so
the two clusters under comparison have the same nodes (names, labels, taints, capacity and
allocatable, device-plugin resources included) and the same devices, and cannot drift.
"""

from __future__ import annotations

from typing import Any

from drasim.common import codec
from drasim.common.api import meta_v1
from drasim.common.cluster_file import DRA, Cluster, NodeConfig
from drasim.drivers import dra_driver
from drasim.drivers.device_plugin import DevicePlugin
from drasim.drivers.probe import EmulatedProbe
from drasim.kubelet import node_status

__all__ = ["KWOK_NODE_ANNOTATION", "device_classes", "node_object", "slice_objects"]

# kwok manages the nodes carrying this annotation (`--manage-nodes-with-annotation-selector`):
# it heartbeats them and their Leases, and plays the pods bound to them.
KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"
KWOK_NODE_VALUE = "fake"


def _json(obj: meta_v1.KubeObject) -> dict[str, Any]:
    """The object as the JSON an API server takes."""
    found: dict[str, Any] = codec.to_builtins(obj)
    return found


def node_object(config: NodeConfig) -> dict[str, Any]:
    """The Node drasim's kubelet registers for `config`, marked for kwok."""
    probe = EmulatedProbe.of(config)
    exposures = {g.name: config.exposure(g.name) for g in config.profile.devices}
    plugins = {
        e.extended_resource_name: DevicePlugin(
            resource_name=e.extended_resource_name,
            group=group,
            probe=probe,
            on_health_change=lambda: None,
        )
        for group, e in exposures.items()
        if e.exposure != DRA
    }
    node = node_status.new_node(
        config,
        node_labels=node_status.labels(config, exposures),
        node_status=node_status.status(
            config,
            machine=probe.machine(),
            plugins=plugins,
            internal_ip=node_status.internal_ip(config.index),
            previous=None,
        ),
        pod_cidr=node_status.pod_cidr(config.index),
    )
    node.metadata.annotations = {KWOK_NODE_ANNOTATION: KWOK_NODE_VALUE}
    return _json(node)


def slice_objects(config: NodeConfig, *, node_uid: str) -> list[dict[str, Any]]:
    """The ResourceSlices drasim's DRA driver shims publish for the node: one pool per
    driver, named after the node, generation 1 (a fresh driver's first publication)."""
    probe = EmulatedProbe.of(config)
    drivers: dict[str, set[str]] = {}
    for group in config.profile.devices:
        if config.exposure(group.name).exposure == DRA:
            drivers.setdefault(group.driver, set()).add(group.name)
    found = []
    for driver, groups in sorted(drivers.items()):
        devices = [d for d in probe.devices() if d.driver == driver and d.group.name in groups]
        wanted = dra_driver.pool_devices(config.name, driver, devices)
        counters = dra_driver.pool_counter_sets(config.name, driver, devices)
        count = len(wanted) + len(counters)
        for name, chunk in wanted.items():
            spec = dra_driver.slice_spec(config.name, driver, chunk, generation=1, count=count)
            found.append(_json(dra_driver.new_slice(name, spec, node_uid=node_uid)))
        for name, sets in counters.items():
            spec = dra_driver.slice_spec(
                config.name, driver, [], generation=1, count=count, shared_counters=sets
            )
            found.append(_json(dra_driver.new_slice(name, spec, node_uid=node_uid)))
    return found


def device_classes(cluster: Cluster) -> list[dict[str, Any]]:
    """The DeviceClasses `drasim up` creates before the nodes register."""
    return [_json(c) for c in cluster.device_classes()]
