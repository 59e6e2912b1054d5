"""The DaemonSet controller's pure rules (upstream `pkg/controller/daemon`:
`daemon_controller.go`, `update.go`, `util/daemonset_util.go`): which nodes should run a
daemon pod, the pod it makes for a node, and which old pods a rolling update may replace.
No I/O: `daemonset.py` acts on them."""

from __future__ import annotations

import math
from collections.abc import Iterable

import msgspec

from drasim.common.api import apps_v1, core_v1
from drasim.controllers import podutil
from drasim.controllers.deploymentutil import pod_template_hash
from drasim.scheduler.plugins.node_affinity import required_node_affinity_matches
from drasim.scheduler.plugins.taint_toleration import tolerations_tolerate_taint

__all__ = [
    "TEMPLATE_GENERATION_LABEL",
    "daemon_pod_tolerations",
    "node_should_run",
    "pod_for_node",
    "rolling_update_deletions",
    "target_node",
    "template_hash",
]

# Upstream `extensions.DaemonSetTemplateGenerationKey`, still set on daemon pods.
TEMPLATE_GENERATION_LABEL = "pod-template-generation"
_OBJECT_NAME_FIELD = "metadata.name"

# `AddOrUpdateDaemonPodTolerations`: daemon pods survive node problems and cordons.
_DEFAULT_TOLERATIONS = (
    ("node.kubernetes.io/not-ready", "NoExecute"),
    ("node.kubernetes.io/unreachable", "NoExecute"),
    ("node.kubernetes.io/disk-pressure", "NoSchedule"),
    ("node.kubernetes.io/memory-pressure", "NoSchedule"),
    ("node.kubernetes.io/pid-pressure", "NoSchedule"),
    ("node.kubernetes.io/unschedulable", "NoSchedule"),
)
_NETWORK_UNAVAILABLE = ("node.kubernetes.io/network-unavailable", "NoSchedule")


def daemon_pod_tolerations(spec: core_v1.PodSpec) -> list[core_v1.Toleration]:
    """The template's tolerations with the defaults every daemon pod gets (a toleration
    of the same key and effect is replaced, as `AddOrUpdateTolerationInPodSpec` does)."""
    tolerations = list(spec.tolerations)
    defaults = [*_DEFAULT_TOLERATIONS, *([_NETWORK_UNAVAILABLE] if spec.host_network else [])]
    for key, effect in defaults:
        toleration = core_v1.Toleration(key=key, operator="Exists", effect=effect)
        same = [i for i, t in enumerate(tolerations) if t.key == key and t.effect == effect]
        if same:
            tolerations[same[0]] = toleration
        else:
            tolerations.append(toleration)
    return tolerations


def template_hash(ds: apps_v1.DaemonSet) -> str:
    """The `controller-revision-hash` of the current template."""
    return pod_template_hash(ds.spec.template, ds.status.collision_count)


def node_should_run(ds: apps_v1.DaemonSet, node: core_v1.Node) -> tuple[bool, bool]:
    """`nodeShouldRunDaemonPod`: (should a pod run here, may one that runs here stay).
    A pod stays on a node whose only untolerated taints are NoSchedule ones."""
    spec = ds.spec.template.spec
    if spec.node_name and spec.node_name != node.metadata.name:
        return False, False
    probe = core_v1.Pod(spec=spec)
    if not required_node_affinity_matches(probe, node):
        return False, False
    tolerations = daemon_pod_tolerations(spec)
    untolerated = [t for t in node.spec.taints if not tolerations_tolerate_taint(tolerations, t)]
    if any(t.effect in ("NoSchedule", "NoExecute") for t in untolerated):
        return False, not any(t.effect == "NoExecute" for t in untolerated)
    return True, True


def target_node(pod: core_v1.Pod) -> str:
    """`GetTargetNodeName`: the node a daemon pod is for, bound or not (its node affinity
    names it by `metadata.name`)."""
    if pod.spec.node_name:
        return pod.spec.node_name
    affinity = pod.spec.affinity
    node_affinity = affinity.node_affinity if affinity else None
    required = (
        node_affinity.required_during_scheduling_ignored_during_execution if node_affinity else None
    )
    for term in required.node_selector_terms if required else []:
        for req in term.match_fields:
            if req.key == _OBJECT_NAME_FIELD and req.operator == "In" and len(req.values) == 1:
                return req.values[0]
    return ""


def _node_name_affinity(affinity: core_v1.Affinity | None, node: str) -> core_v1.Affinity:
    """`ReplaceDaemonSetPodNodeNameNodeAffinity`: the pod's required node affinity becomes
    one term selecting `node` by name (preferred terms kept)."""
    term = core_v1.NodeSelectorTerm(
        match_fields=[
            core_v1.NodeSelectorRequirement(key=_OBJECT_NAME_FIELD, operator="In", values=[node])
        ]
    )
    required = core_v1.NodeSelector(node_selector_terms=[term])
    affinity = affinity or core_v1.Affinity()
    node_affinity = affinity.node_affinity or core_v1.NodeAffinity()
    node_affinity = msgspec.structs.replace(
        node_affinity, required_during_scheduling_ignored_during_execution=required
    )
    return msgspec.structs.replace(affinity, node_affinity=node_affinity)


def pod_for_node(ds: apps_v1.DaemonSet, node: str, hash_: str, owner_ref: object) -> core_v1.Pod:
    """`CreatePodTemplate` for `node`: the template with the default tolerations, the
    generation and revision hash labels, and node affinity to that node alone (the
    scheduler binds it, as upstream's)."""
    template = ds.spec.template
    labels = {
        **template.metadata.labels,
        TEMPLATE_GENERATION_LABEL: str(ds.metadata.generation),
        apps_v1.CONTROLLER_REVISION_HASH_LABEL: hash_,
    }
    spec = msgspec.structs.replace(
        template.spec,
        tolerations=daemon_pod_tolerations(template.spec),
        affinity=_node_name_affinity(template.spec.affinity, node),
    )
    return core_v1.Pod(
        metadata=msgspec.structs.replace(
            template.metadata,
            generate_name=f"{ds.metadata.name}-",
            namespace=ds.metadata.namespace,
            labels=labels,
            annotations=dict(template.metadata.annotations),
            owner_references=[owner_ref],
        ),
        spec=spec,
    )


def scaled(value: int | str | None, total: int, *, default: int, round_up: bool) -> int:
    """An IntOrString bound against `total` (`GetScaledValueFromIntOrPercent`)."""
    if value is None:
        return default
    if isinstance(value, int):
        return value
    percent = int(value.rstrip("%")) * total / 100
    return math.ceil(percent) if round_up else math.floor(percent)


def max_unavailable(ds: apps_v1.DaemonSet, desired: int) -> int:
    """`unavailableCount`: the rolling update's maxUnavailable for `desired` nodes (a
    percentage rounds up; both zero means one)."""
    rolling = ds.spec.update_strategy.rolling_update or apps_v1.RollingUpdateDaemonSet()
    unavailable = scaled(rolling.max_unavailable, desired, default=1, round_up=True)
    surge = scaled(rolling.max_surge, desired, default=0, round_up=True)
    return 1 if unavailable == 0 and surge == 0 else unavailable


def rolling_update_deletions(
    ds: apps_v1.DaemonSet,
    pods_by_node: dict[str, list[core_v1.Pod]],
    should_run: Iterable[str],
    hash_: str,
    now: object,
) -> list[core_v1.Pod]:
    """`rollingUpdate` without surge: the old pods to delete now. Unavailable old pods go
    at once; available ones while fewer than maxUnavailable nodes are unavailable."""
    nodes = list(should_run)
    budget = max_unavailable(ds, len(nodes))
    unavailable = 0
    replace_now: list[core_v1.Pod] = []
    candidates: list[core_v1.Pod] = []
    for node in nodes:
        pods = [p for p in pods_by_node.get(node, []) if p.metadata.deletion_timestamp is None]
        new = [
            p
            for p in pods
            if p.metadata.labels.get(apps_v1.CONTROLLER_REVISION_HASH_LABEL) == hash_
        ]
        old = [p for p in pods if p not in new]
        if not old:
            if not new or not podutil.is_pod_available(new[0], ds.spec.min_ready_seconds, now):
                unavailable += 1
            continue
        for pod in old:
            if podutil.is_pod_available(pod, ds.spec.min_ready_seconds, now):
                candidates.append(pod)
            else:
                unavailable += 1
                replace_now.append(pod)
    room = max(0, budget - unavailable)
    return replace_now + candidates[:room]
