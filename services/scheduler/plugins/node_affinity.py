"""NodeAffinity: a pod fits only nodes matching its `nodeSelector` and its required node
affinity (`requiredDuringSchedulingIgnoredDuringExecution`).

Upstream: `pkg/scheduler/framework/plugins/nodeaffinity/node_affinity.go` and
`component-helpers/scheduling/corev1/nodeaffinity`. Preferred terms (scoring) and the
profile's `addedAffinity` are not implemented.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import ClassVar

from drasim.common import codec
from drasim.common.api import core_v1
from drasim.scheduler import framework
from drasim.scheduler.plugins import names

__all__ = [
    "ERR_REASON_CONFLICT",
    "ERR_REASON_POD",
    "NodeAffinity",
    "node_selector_matches",
    "required_node_affinity_matches",
]

ERR_REASON_POD = "node(s) didn't match Pod's node affinity/selector"
ERR_REASON_CONFLICT = "pod affinity terms conflict"

# The only field `matchFields` may select on.
OBJECT_NAME_FIELD = "metadata.name"

_INT64 = re.compile(r"[+-]?[0-9]+")
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _as_int64(text: str) -> int | None:
    """Go's `strconv.ParseInt(text, 10, 64)`: None when it is not a base-10 int64."""
    if not _INT64.fullmatch(text):
        return None
    value = int(text)
    return value if _INT64_MIN <= value <= _INT64_MAX else None


def _label_requirement_matches(
    requirement: core_v1.NodeSelectorRequirement, labels: Mapping[str, str]
) -> bool:
    """One `matchExpressions` entry (`labels.Requirement.Matches`); invalid ones match
    nothing, as upstream drops a term whose requirements do not parse."""
    op, key, values = requirement.operator, requirement.key, requirement.values
    if op in ("In", "NotIn"):
        if not values:
            return False
        if op == "In":
            return key in labels and labels[key] in values
        return key not in labels or labels[key] not in values
    if op in ("Exists", "DoesNotExist"):
        if values:
            return False
        return (key in labels) == (op == "Exists")
    if op in ("Gt", "Lt"):
        bound = _as_int64(values[0]) if len(values) == 1 else None
        value = _as_int64(labels[key]) if key in labels else None
        if bound is None or value is None:
            return False
        return value > bound if op == "Gt" else value < bound
    return False


def _field_requirement_matches(
    requirement: core_v1.NodeSelectorRequirement, node: core_v1.Node
) -> bool:
    """One `matchFields` entry: In/NotIn with exactly one value, as a field selector."""
    if len(requirement.values) != 1:
        return False
    fields = {OBJECT_NAME_FIELD: node.metadata.name}
    equal = fields.get(requirement.key, "") == requirement.values[0]
    if requirement.operator == "In":
        return equal
    if requirement.operator == "NotIn":
        return not equal
    return False


def _term_matches(term: core_v1.NodeSelectorTerm, node: core_v1.Node) -> bool:
    if not term.match_expressions and not term.match_fields:
        return False  # an empty term selects no node
    labels = node.metadata.labels
    return all(_label_requirement_matches(r, labels) for r in term.match_expressions) and all(
        _field_requirement_matches(r, node) for r in term.match_fields
    )


def node_selector_matches(selector: core_v1.NodeSelector, node: core_v1.Node) -> bool:
    """Terms are ORed, requirements within a term ANDed; no terms match no node."""
    return any(_term_matches(term, node) for term in selector.node_selector_terms)


def _required_node_selector(pod: core_v1.Pod) -> core_v1.NodeSelector | None:
    affinity = pod.spec.affinity
    if affinity is None or affinity.node_affinity is None:
        return None
    return affinity.node_affinity.required_during_scheduling_ignored_during_execution


def required_node_affinity_matches(pod: core_v1.Pod, node: core_v1.Node) -> bool:
    """Both the pod's `nodeSelector` (label equality) and its required node affinity."""
    labels = node.metadata.labels
    if any(labels.get(key) != value for key, value in pod.spec.node_selector.items()):
        return False
    selector = _required_node_selector(pod)
    return selector is None or node_selector_matches(selector, node)


def _node_names_from_terms(terms: Iterable[core_v1.NodeSelectorTerm]) -> set[str] | None:
    """The nodes named by `matchFields metadata.name In` in every term, or None when some
    term does not name nodes (then any node may match, as terms are ORed)."""
    node_names: set[str] = set()
    for term in terms:
        term_names: set[str] | None = None
        for requirement in term.match_fields:
            if requirement.key == OBJECT_NAME_FIELD and requirement.operator == "In":
                named = set(requirement.values)
                term_names = named if term_names is None else term_names & named
        if term_names is None:
            return None
        node_names |= term_names
    return node_names


class NodeAffinity:
    """PreFilter, Filter and EnqueueExtensions."""

    name: ClassVar[str] = names.NODE_AFFINITY

    def sign_pod(self, state: framework.CycleState, pod: core_v1.Pod) -> bytes:
        """Filter and Score read only the pod's node selector and node affinity (and the
        plugin's own `addedAffinity`), and the NodeInfo."""
        affinity = pod.spec.affinity
        return codec.encode((pod.spec.node_selector, affinity and affinity.node_affinity))

    def pre_filter(
        self,
        state: framework.CycleState,
        pod: core_v1.Pod,
        nodes: Sequence[framework.NodeInfo],
    ) -> tuple[framework.PreFilterResult | None, framework.Status | None]:
        """Skip pods without constraints; narrow to nodes named by `matchFields`."""
        selector = _required_node_selector(pod)
        if selector is None and not pod.spec.node_selector:
            return None, framework.Status.skip()
        if selector is None or not selector.node_selector_terms:
            return None, None
        node_names = _node_names_from_terms(selector.node_selector_terms)
        if node_names is None:
            return None, None
        if not node_names:
            # Every term names nodes, but no node satisfies all names of any term.
            return None, framework.Status.unresolvable(ERR_REASON_CONFLICT)
        return framework.PreFilterResult(frozenset(node_names)), None

    def filter(
        self, state: framework.CycleState, pod: core_v1.Pod, node_info: framework.NodeInfo
    ) -> framework.Status | None:
        if not required_node_affinity_matches(pod, node_info.node):
            # Labels rarely change, and preemption cannot change them.
            return framework.Status.unresolvable(ERR_REASON_POD)
        return None

    def events_to_register(self) -> list[framework.ClusterEventWithHint]:
        return [
            framework.ClusterEventWithHint(
                framework.ClusterEvent(
                    framework.EventResource.NODE,
                    framework.ActionType.ADD | framework.ActionType.UPDATE_NODE_LABEL,
                ),
                self.is_schedulable_after_node_change,
            )
        ]

    def is_schedulable_after_node_change(
        self, pod: core_v1.Pod, old: core_v1.Node | None, new: core_v1.Node
    ) -> framework.QueueingHint:
        """A matching node was added, or a node started to match."""
        if not required_node_affinity_matches(pod, new):
            return framework.QueueingHint.QUEUE_SKIP
        if old is not None and required_node_affinity_matches(pod, old):
            return framework.QueueingHint.QUEUE_SKIP
        return framework.QueueingHint.QUEUE
