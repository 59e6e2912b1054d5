"""The scheduler cache: every node with the pods bound or assumed on it, and the per-cycle
snapshot the plugins read.

Upstream: `pkg/scheduler/backend/cache/{cache.go,snapshot.go}`. Nodes come from the Node
informer and bound pods from the Pod informer. A pod the scheduler has placed is *assumed*
on its node before binding, so the next cycles count it without waiting for the API server;
the informer's bound pod later confirms it, and a failed binding forgets it. Assumed pods do
not expire here: every failure path forgets them.

Nodes are kept in the order they last changed, and every change raises the NodeInfo's
generation, so `update_snapshot` copies only the nodes changed since the snapshot's
generation: one or two per cycle, not all 5000.
"""

from __future__ import annotations

import collections
import logging
from collections.abc import Iterable

from drasim.common.api import core_v1, meta_v1
from drasim.scheduler.framework import NodeInfo
from drasim.scheduler.framework.node_info import NodeInfoList

__all__ = ["Cache", "Snapshot"]

log = logging.getLogger(__name__)


class Snapshot:
    """The NodeInfos one scheduling cycle works on; the cache does not change them."""

    # Changes a list logs before a fresh one replaces it (its readers start over then).
    MAX_CHANGED = 10_000

    def __init__(self) -> None:
        self.node_info_map: dict[str, NodeInfo] = {}
        self.node_info_list = NodeInfoList()
        self.generation = 0

    def num_nodes(self) -> int:
        return len(self.node_info_list)

    def get(self, node_name: str) -> NodeInfo | None:
        return self.node_info_map.get(node_name)

    def _replace(self, node_info: NodeInfo) -> None:
        name = node_info.name
        self.node_info_map[name] = node_info
        nodes = self.node_info_list
        if len(nodes.changed) >= self.MAX_CHANGED:
            nodes = self.node_info_list = NodeInfoList(nodes)
        nodes[nodes.positions[name]] = node_info
        nodes.changed.append(name)

    def _rebuild_list(self, order: Iterable[str]) -> None:
        self.node_info_list = NodeInfoList(self.node_info_map[name] for name in order)


class Cache:
    """Nodes and the pods on them; fed by informer handlers, read through snapshots."""

    def __init__(self) -> None:
        # Least recently changed first, so a snapshot update walks back only to its
        # generation.
        self._nodes: collections.OrderedDict[str, NodeInfo] = collections.OrderedDict()
        # The nodes whose Node object exists, in the order they were added: the order of
        # snapshot lists (upstream's nodeTree). Other NodeInfos are known only from pods
        # bound to them: their node is not seen yet, or deleted with pods left.
        self._node_tree: dict[str, None] = {}
        # Pod UID → the pod as counted, on its (assigned or assumed) node.
        self._pod_states: dict[str, core_v1.Pod] = {}
        self._assumed_pods: set[str] = set()

    # -- nodes ----------------------------------------------------------------------------

    def add_node(self, node: core_v1.Node) -> None:
        name = node.metadata.name
        info = self._nodes.get(name)
        if info is None:
            self._nodes[name] = NodeInfo(node)
        else:
            info.set_node(node)
            self._nodes.move_to_end(name)
        self._node_tree[name] = None

    def update_node(self, old: core_v1.Node, new: core_v1.Node) -> None:
        self.add_node(new)

    def remove_node(self, node: core_v1.Node) -> None:
        """Pods still bound to the node keep it in the cache, out of snapshots, until
        their own deletion arrives."""
        name = node.metadata.name
        self._node_tree.pop(name, None)
        info = self._nodes.get(name)
        if info is not None and not info.pods:
            del self._nodes[name]

    # -- pods -----------------------------------------------------------------------------

    def assume_pod(self, pod: core_v1.Pod) -> None:
        """Count a pod on `pod.spec.nodeName` before it is bound there."""
        uid = pod.metadata.uid
        if uid in self._pod_states:
            raise ValueError(f"pod {_name(pod)} is in the cache, so can't be assumed")
        self._add_pod(pod)
        self._assumed_pods.add(uid)

    def forget_pod(self, pod: core_v1.Pod) -> None:
        """Undo `assume_pod` after the scheduling or binding cycle failed."""
        uid = pod.metadata.uid
        if uid not in self._assumed_pods:
            raise ValueError(f"pod {_name(pod)} wasn't assumed so cannot be forgotten")
        self._remove_pod(self._pod_states.pop(uid))
        self._assumed_pods.discard(uid)

    def is_assumed_pod(self, pod: core_v1.Pod) -> bool:
        return pod.metadata.uid in self._assumed_pods

    def add_pod(self, pod: core_v1.Pod) -> None:
        """A bound pod from the informer; for an assumed pod this is the confirmation."""
        uid = pod.metadata.uid
        current = self._pod_states.get(uid)
        if current is not None and uid not in self._assumed_pods:
            log.error("pod %s was already in the cache", _name(pod))
            return
        if current is not None:
            self._assumed_pods.discard(uid)
            if self._replace_pod(current, pod):
                return
            self._remove_pod(current)
        self._add_pod(pod)

    def update_pod(self, old: core_v1.Pod, new: core_v1.Pod) -> None:
        uid = new.metadata.uid
        current = self._pod_states.get(uid)
        if current is None or uid in self._assumed_pods:
            log.error("pod %s updated but not bound in the cache", _name(new))
            return
        if self._replace_pod(current, new):
            return
        self._remove_pod(current)
        self._add_pod(new)

    def remove_pod(self, pod: core_v1.Pod) -> None:
        """A bound pod was deleted; it is taken off the node it was counted on."""
        uid = pod.metadata.uid
        current = self._pod_states.pop(uid, None)
        if current is None:
            log.error("pod %s removed but not in the cache", _name(pod))
            return
        self._assumed_pods.discard(uid)
        self._remove_pod(current)

    def _add_pod(self, pod: core_v1.Pod) -> None:
        """Count the pod on its node and remember it as counted."""
        self._pod_states[pod.metadata.uid] = pod
        name = pod.spec.node_name
        info = self._nodes.get(name)
        if info is None:
            placeholder = core_v1.Node(metadata=meta_v1.ObjectMeta(name=name))
            info = self._nodes[name] = NodeInfo(placeholder)
        info.add_pod(pod)
        self._nodes.move_to_end(name)

    def _replace_pod(self, current: core_v1.Pod, new: core_v1.Pod) -> bool:
        """A newer version of a counted pod on the same node, without a change the
        scheduling cycle could see (see `NodeInfo.replace_pod`)."""
        name = current.spec.node_name
        if new.spec.node_name != name or name not in self._nodes:
            return False
        if not self._nodes[name].replace_pod(current, new):
            return False
        self._pod_states[new.metadata.uid] = new
        return True

    def _remove_pod(self, pod: core_v1.Pod) -> None:
        name = pod.spec.node_name
        info = self._nodes[name]
        info.remove_pod(pod)
        self._nodes.move_to_end(name)
        if name not in self._node_tree and not info.pods:
            del self._nodes[name]

    # -- snapshots ------------------------------------------------------------------------

    def update_snapshot(self, snapshot: Snapshot) -> None:
        """Bring `snapshot` up to date, copying only the nodes changed since its last update
        (upstream `UpdateSnapshot`)."""
        membership_changed = False
        newest = snapshot.generation
        for name in reversed(self._nodes):
            info = self._nodes[name]
            if info.generation <= snapshot.generation:
                break
            newest = max(newest, info.generation)
            if name not in self._node_tree:
                continue
            if name in snapshot.node_info_map:
                snapshot._replace(info.snapshot())
            else:
                snapshot.node_info_map[name] = info.snapshot()
                membership_changed = True
        # Removed nodes are not in the walk; after it, a snapshot holding more nodes than
        # the cache has stale ones.
        if len(snapshot.node_info_map) > len(self._node_tree):
            for name in list(snapshot.node_info_map):
                if name not in self._node_tree:
                    del snapshot.node_info_map[name]
            membership_changed = True
        if membership_changed:
            snapshot._rebuild_list(self._node_tree)
        snapshot.generation = newest


def _name(pod: core_v1.Pod) -> str:
    return f"{pod.metadata.namespace}/{pod.metadata.name}"
