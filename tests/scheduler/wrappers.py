"""Fluent builders for scheduler tests, after upstream's `pkg/scheduler/testing/wrappers.go`:
`make_pod("p").req({"cpu": "1"}).node_selector({"zone": "a"}).obj()`.

Objects are written as Kubernetes JSON and decoded, so they look as they would coming from
the API server. Containers are named as upstream's wrappers name them: `con0, con1…`,
`init-con<k>`, `sidecar-con<k>`. A node starts with `pods: 110` allocatable, as a kubelet
would report.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from drasim.common import codec
from drasim.common.api import core_v1, resource_v1

__all__ = ["NodeWrapper", "PodWrapper", "make_device_class", "make_node", "make_pod"]


class PodWrapper:
    def __init__(self, name: str, namespace: str) -> None:
        self._pod: dict[str, Any] = {
            "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}"},
            "spec": {"containers": []},
        }

    @property
    def _spec(self) -> dict[str, Any]:
        return self._pod["spec"]

    def uid(self, uid: str) -> PodWrapper:
        self._pod["metadata"]["uid"] = uid
        return self

    def container(self, requests: Mapping[str, str] | None = None) -> PodWrapper:
        """Add a regular container `con<i>`, optionally with requests."""
        containers = self._spec["containers"]
        containers.append({"name": f"con{len(containers)}", "image": "pause"})
        if requests:
            containers[-1]["resources"] = {"requests": dict(requests)}
        return self

    def req(self, requests: Mapping[str, str]) -> PodWrapper:
        """Requests on the last regular container (`con0` is added when there is none)."""
        if not self._spec["containers"]:
            self.container()
        resources = self._spec["containers"][-1].setdefault("resources", {})
        resources.setdefault("requests", {}).update(requests)
        return self

    def limits(self, limits: Mapping[str, str]) -> PodWrapper:
        """Limits on the last regular container; API defaulting turns them into requests."""
        if not self._spec["containers"]:
            self.container()
        resources = self._spec["containers"][-1].setdefault("resources", {})
        resources.setdefault("limits", {}).update(limits)
        return self

    def init_req(self, requests: Mapping[str, str], *, sidecar: bool = False) -> PodWrapper:
        """Add an init container (`init-con<k>`) or a sidecar (`sidecar-con<k>`)."""
        init = self._spec.setdefault("initContainers", [])
        prefix = "sidecar-con" if sidecar else "init-con"
        container: dict[str, Any] = {
            "name": f"{prefix}{len(init)}",
            "image": "pause",
            "resources": {"requests": dict(requests)},
        }
        if sidecar:
            container["restartPolicy"] = "Always"
        init.append(container)
        return self

    def overhead(self, overhead: Mapping[str, str]) -> PodWrapper:
        self._spec["overhead"] = dict(overhead)
        return self

    def node_selector(self, selector: Mapping[str, str]) -> PodWrapper:
        self._spec["nodeSelector"] = dict(selector)
        return self

    def node_affinity(self, *terms: Mapping[str, Any]) -> PodWrapper:
        """Required node affinity with these `nodeSelectorTerms` (ORed)."""
        self._spec["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [dict(t) for t in terms]
                }
            }
        }
        return self

    def node_affinity_in(
        self, key: str, values: Sequence[str], *, field: bool = False
    ) -> PodWrapper:
        """One term with one `In` requirement, on a label or (`field`) `metadata.name`."""
        kind = "matchFields" if field else "matchExpressions"
        requirement = {"key": key, "operator": "In", "values": list(values)}
        return self.node_affinity({kind: [requirement]})

    def toleration(
        self, key: str = "", operator: str = "", value: str = "", effect: str = ""
    ) -> PodWrapper:
        toleration = {"key": key, "operator": operator, "value": value, "effect": effect}
        self._spec.setdefault("tolerations", []).append(toleration)
        return self

    def scheduling_gates(self, *names: str) -> PodWrapper:
        self._spec["schedulingGates"] = [{"name": name} for name in names]
        return self

    def node(self, name: str) -> PodWrapper:
        self._spec["nodeName"] = name
        return self

    def nominated_node(self, name: str) -> PodWrapper:
        self._pod.setdefault("status", {})["nominatedNodeName"] = name
        return self

    def obj(self) -> core_v1.Pod:
        if not self._spec["containers"]:
            self.container()
        return codec.convert(self._pod, core_v1.Pod)


class NodeWrapper:
    def __init__(self, name: str) -> None:
        self._node: dict[str, Any] = {
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "spec": {},
            "status": {"capacity": {"pods": "110"}, "allocatable": {"pods": "110"}},
        }

    def capacity(self, resources: Mapping[str, str]) -> NodeWrapper:
        """Set capacity and allocatable (merged over the default `pods: 110`)."""
        self._node["status"]["capacity"].update(resources)
        self._node["status"]["allocatable"].update(resources)
        return self

    def label(self, key: str, value: str) -> NodeWrapper:
        self._node["metadata"]["labels"][key] = value
        return self

    def taint(self, key: str, value: str = "", effect: str = "NoSchedule") -> NodeWrapper:
        taint = {"key": key, "value": value, "effect": effect}
        self._node["spec"].setdefault("taints", []).append(taint)
        return self

    def unschedulable(self, unschedulable: bool = True) -> NodeWrapper:
        self._node["spec"]["unschedulable"] = unschedulable
        return self

    def obj(self) -> core_v1.Node:
        return codec.convert(self._node, core_v1.Node)


def make_pod(name: str = "my-pod", namespace: str = "default") -> PodWrapper:
    return PodWrapper(name, namespace)


def make_node(name: str = "worker") -> NodeWrapper:
    return NodeWrapper(name)


def make_device_class(
    name: str, extended_resource_name: str | None = None
) -> resource_v1.DeviceClass:
    spec = (
        {} if extended_resource_name is None else {"extendedResourceName": extended_resource_name}
    )
    return codec.convert({"metadata": {"name": name}, "spec": spec}, resource_v1.DeviceClass)
