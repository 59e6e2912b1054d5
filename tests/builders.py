"""Fluent builders for test objects: `make_pod("p").limits({"example.com/gpu": "1"}).obj()`."""

from __future__ import annotations

from typing import Any

from drasim.common import codec
from drasim.common.api import core_v1, meta_v1, resource_v1

# KEP-5004's example DeviceClass: devices pods can request as `example.com/gpu`.
KEP_DEVICE_CLASS_YAML = """\
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata:
  name: gpu.example.com
spec:
  selectors:
  - cel:
      expression: device.driver == "gpu.example.com"
  extendedResourceName: example.com/gpu
"""


class PodBuilder:
    def __init__(self, name: str, namespace: str = "default") -> None:
        self._pod: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"containers": []},
        }

    def _container(self) -> dict[str, Any]:
        if not self._pod["spec"]["containers"]:
            self.container("con0")
        return self._pod["spec"]["containers"][-1]

    def container(self, name: str, **resources: dict[str, str]) -> PodBuilder:
        c: dict[str, Any] = {"name": name, "image": "registry.k8s.io/pause:3.10"}
        if resources:
            c["resources"] = resources
        self._pod["spec"]["containers"].append(c)
        return self

    def init_container(self, name: str, *, sidecar: bool = False, **resources: Any) -> PodBuilder:
        c: dict[str, Any] = {"name": name, "image": "registry.k8s.io/pause:3.10"}
        if sidecar:
            c["restartPolicy"] = "Always"
        if resources:
            c["resources"] = resources
        self._pod["spec"].setdefault("initContainers", []).append(c)
        return self

    def limits(self, limits: dict[str, str]) -> PodBuilder:
        self._container().setdefault("resources", {})["limits"] = limits
        return self

    def requests(self, requests: dict[str, str]) -> PodBuilder:
        self._container().setdefault("resources", {})["requests"] = requests
        return self

    def labels(self, **labels: str) -> PodBuilder:
        self._pod["metadata"]["labels"] = labels
        return self

    def annotations(self, annotations: dict[str, str]) -> PodBuilder:
        self._pod["metadata"].setdefault("annotations", {}).update(annotations)
        return self

    def restart_policy(self, policy: str) -> PodBuilder:
        self._pod["spec"]["restartPolicy"] = policy
        return self

    def node(self, name: str) -> PodBuilder:
        self._pod["spec"]["nodeName"] = name
        return self

    def claim(self, name: str, *, claim_name: str = "", template: str = "") -> PodBuilder:
        ref: dict[str, Any] = {"name": name}
        if claim_name:
            ref["resourceClaimName"] = claim_name
        if template:
            ref["resourceClaimTemplateName"] = template
        self._pod["spec"].setdefault("resourceClaims", []).append(ref)
        return self

    def dict(self) -> dict[str, Any]:
        if not self._pod["spec"]["containers"]:
            self.container("con0")
        return self._pod

    def obj(self) -> core_v1.Pod:
        return codec.convert(self.dict(), core_v1.Pod)


def make_pod(name: str, namespace: str = "default") -> PodBuilder:
    return PodBuilder(name, namespace)


def make_claim(
    name: str, namespace: str = "default", *, owner: Any = None, finalizers: list[str] | None = None
) -> resource_v1.ResourceClaim:
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if owner is not None:
        meta["ownerReferences"] = [
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": owner.metadata.name,
                "uid": owner.metadata.uid,
                "controller": True,
            }
        ]
    if finalizers:
        meta["finalizers"] = finalizers
    return codec.convert(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": meta,
            "spec": {
                "devices": {
                    "requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]
                }
            },
        },
        resource_v1.ResourceClaim,
    )


def make_node(name: str, **allocatable: str) -> core_v1.Node:
    return codec.convert(
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "status": {"capacity": allocatable, "allocatable": allocatable},
        },
        core_v1.Node,
    )


def meta(name: str, namespace: str = "") -> meta_v1.ObjectMeta:
    return meta_v1.ObjectMeta(name=name, namespace=namespace)
