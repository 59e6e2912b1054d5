"""The objects of `drasim loadtest`, shaped as clusterloader2's DRA test makes them
(kubernetes/perf-tests `clusterloader2/testing/dra/`: config.yaml, long-running-job.yaml,
job.yaml, resourceclaimtemplate.yaml).

- The cluster: N nodes of 8 GPUs, whose GPUs a DRA driver publishes (`gpu.example.com`),
  or, for a fraction of them, a device plugin advertises as `example.com/gpu`.
- One namespace per 100 nodes (the test's `CL2_NODES_PER_NAMESPACE` default), each with
  the ResourceClaimTemplate `single-gpu-0` asking one device of class `gpu.example.com`
  (mode `claims` only).
- Fill Jobs (`job-type: long-running`) and churn Jobs (`job-type: short-lived`): one pod
  each at a time (parallelism 1, completion mode Indexed, restart policy Never) holding
  one GPU, through the template's claim (mode `claims`) or as `example.com/gpu: 1` in its
  limits (mode `extended-resources`, the test's `CL2_ENABLE_EXTENDED_RESOURCES`). The
  sleep image's run time becomes drasim's `drasim.io/run-for` annotation.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from drasim.common import codec
from drasim.common.api import batch_v1, core_v1, resource_v1

__all__ = [
    "CHURN",
    "CLAIMS",
    "EXTENDED_RESOURCES",
    "FILL",
    "MODES",
    "Shape",
    "cluster_file",
    "job",
    "namespace",
    "phase_of_labels",
    "resource_claim_template",
]

CLAIMS, EXTENDED_RESOURCES = "claims", "extended-resources"
MODES = (CLAIMS, EXTENDED_RESOURCES)
FILL, CHURN = "fill", "churn"
GPUS_PER_NODE = 8
NODES_PER_NAMESPACE = 100
DRIVER = "gpu.example.com"
DEVICE_CLASS = "gpu.example.com"
EXTENDED_RESOURCE_NAME = "example.com/gpu"
CLAIM_TEMPLATE = "single-gpu-0"
IMAGE = "gcr.io/k8s-staging-perf-tests/sleep:v0.0.3"
RUN_FOR = "drasim.io/run-for"
JOB_TYPE = "job-type"
_JOB_TYPES = {FILL: "long-running", CHURN: "short-lived"}
_PHASES = {v: k for k, v in _JOB_TYPES.items()}


@dataclass(frozen=True)
class Shape:
    """How big the test is: nodes (of which `device_plugin_nodes` serve their GPUs through
    a device plugin), the mode, and what fraction of the usable GPUs the fill takes."""

    nodes: int
    mode: str
    fill: float
    device_plugin_nodes: int = 0

    @property
    def dra_nodes(self) -> int:
        return self.nodes - self.device_plugin_nodes

    @property
    def gpus(self) -> int:
        """GPUs a pod of this mode can get: claims only DRA devices, the extended
        resource every GPU (DRA devices through the class, the device plugins' own)."""
        usable = self.dra_nodes if self.mode == CLAIMS else self.nodes
        return usable * GPUS_PER_NODE

    @property
    def fill_pods(self) -> int:
        return int(self.gpus * self.fill)

    @property
    def free_gpus(self) -> int:
        """GPUs left for churn pods: the test creates as many churn Jobs (`smallJobPodsCount`)."""
        return self.gpus - self.fill_pods

    @property
    def namespaces(self) -> list[str]:
        count = max(1, self.nodes // min(self.nodes, NODES_PER_NAMESPACE))
        return [f"loadtest-{i}" for i in range(1, count + 1)]


def cluster_file(shape: Shape) -> str:
    """The drasim cluster file of `shape` (YAML). The DeviceClass maps the extended
    resource only in mode `extended-resources`, as the test installs its driver."""
    extended = (
        f"\n      extendedResourceName: {EXTENDED_RESOURCE_NAME}"
        if shape.mode == EXTENDED_RESOURCES
        else ""
    )
    pools = [
        ("dra-gpu", shape.dra_nodes, "dra"),
        ("dp-gpu", shape.device_plugin_nodes, "device-plugin"),
    ]
    pool_lines = "".join(
        f"  - {{name: {name}, count: {count}, profile: gpu-8, devices: {{gpu: {{exposure: "
        f"{exposure}, extendedResourceName: {EXTENDED_RESOURCE_NAME}}}}}}}\n"
        for name, count, exposure in pools
        if count
    )
    return (
        "apiVersion: drasim.io/v1alpha1\nkind: Cluster\ndeviceClasses:\n"
        "  - apiVersion: resource.k8s.io/v1\n    kind: DeviceClass\n"
        f"    metadata: {{name: {DEVICE_CLASS}}}\n    spec:\n"
        f"      selectors: [{{cel: {{expression: \"device.driver == '{DRIVER}'\"}}}}]"
        f"{extended}\npools:\n{pool_lines}"
    )


def namespace(name: str) -> core_v1.Namespace:
    return codec.convert({"metadata": {"name": name}}, core_v1.Namespace)


def resource_claim_template(ns: str) -> resource_v1.ResourceClaimTemplate:
    body = {
        "metadata": {"name": CLAIM_TEMPLATE, "namespace": ns},
        "spec": {"spec": {"devices": {"requests": [
            {"name": "gpu", "exactly": {"deviceClassName": DEVICE_CLASS}}
        ]}}},
    }  # fmt: skip
    return codec.convert(body, resource_v1.ResourceClaimTemplate)


def job(
    name: str, ns: str, *, phase: str, mode: str, run_for: str, completions: int = 1
) -> batch_v1.Job:
    """One Job of `phase` (`fill`: long-running-job.yaml; `churn`: job.yaml)."""
    job_labels = {"group": "test-job", JOB_TYPE: _JOB_TYPES[phase]}
    pod_labels = {"group": "test-pod", JOB_TYPE: _JOB_TYPES[phase]}
    container: dict[str, Any] = {"name": name, "image": IMAGE, "args": [run_for]}
    pod_spec: dict[str, Any] = {"restartPolicy": "Never", "containers": [container]}
    if mode == CLAIMS:
        container["resources"] = {"claims": [{"name": "gpu"}]}
        pod_spec["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": CLAIM_TEMPLATE}]
    else:
        container["resources"] = {"limits": {EXTENDED_RESOURCE_NAME: "1"}}
    spec: dict[str, Any] = {
        "parallelism": 1,
        "completions": completions,
        "completionMode": "Indexed",
        "template": {
            "metadata": {"labels": pod_labels, "annotations": {RUN_FOR: run_for}},
            "spec": pod_spec,
        },
    }
    if phase == FILL:
        spec["activeDeadlineSeconds"] = 86400
    else:
        spec["ttlSecondsAfterFinished"] = 300
    body = {"metadata": {"name": name, "namespace": ns, "labels": job_labels}, "spec": spec}
    return codec.convert(body, batch_v1.Job)


def phase_of_labels(labels: Mapping[str, str]) -> str:
    """The load-test phase of a Job or pod by its `job-type` label ('' if none)."""
    return _PHASES.get(labels.get(JOB_TYPE, ""), "")
