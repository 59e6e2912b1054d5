"""The mutating admission of pods: Priority (a pod's priority comes from its PriorityClass)
and DefaultTolerationSeconds (`add_default_tolerations`).

As upstream's `Priority` admission plugin: a created pod gets `spec.priority` and
`spec.preemptionPolicy` from the class its `priorityClassName` names, or from the global
default class when it names none (and takes that class's name); a class that does not exist,
or a priority or policy the pod sets that the class does not give, is refused with 403. Only
one class may be the global default. The scheduler's queue orders pods by that priority.

The classes are read from `PriorityClasses`, which plays the part of upstream's lister: the
apistore loads it at start, updates it from every batch it commits (before any answer of
that batch goes out, so a client that saw its class created sees it used) and reloads it
now and then for what other apistore replicas wrote.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import msgspec

from drasim.apistore.store import EventRow
from drasim.common import codec, errors
from drasim.common.api import core_v1, scheduling_v1

PriorityClass = scheduling_v1.PriorityClass


class PriorityClassList(msgspec.Struct):
    """The part of the apistore's own list answer the index reads."""

    resource_version: int = 0
    items: list[PriorityClass] = []


# A class by name as a batch sees it: its own writes first, then the index.
Lookup = Callable[[str], PriorityClass | None]


class PriorityClasses:
    """Every PriorityClass by name."""

    def __init__(self) -> None:
        self._by_name: dict[str, PriorityClass] = {}
        self._observed = 0  # the seq of the last class write `observe` took

    def replace(self, listed: PriorityClassList) -> None:
        """Take a list of every class, unless a write this index already took is newer
        than the list (the next reload brings both)."""
        if self._observed <= listed.resource_version:
            self._by_name = {pc.metadata.name: pc for pc in listed.items}

    def observe(self, events: Iterable[EventRow]) -> None:
        """Follow a committed batch's writes."""
        for ev in events:
            if ev.resource != "priorityclasses":
                continue
            self._observed = ev.seq
            if ev.type == "DELETED":
                self._by_name.pop(ev.name, None)
            else:
                self._by_name[ev.name] = codec.decode(ev.object, PriorityClass)

    def get(self, name: str) -> PriorityClass | None:
        return self._by_name.get(name)

    def default(self) -> PriorityClass | None:
        """The global default class; of several (written before the check could see the
        other), the lowest, as upstream picks."""
        found = None
        for pc in self._by_name.values():
            if pc.global_default and (found is None or pc.value < found.value):
                found = pc
        return found


def default_priority_class(pc: PriorityClass) -> None:
    """API defaulting of a new class."""
    if pc.preemption_policy is None:
        pc.preemption_policy = scheduling_v1.PREEMPT_LOWER_PRIORITY


def admit_priority_class(pc: PriorityClass, default: PriorityClass | None) -> None:
    """Only one class may be the global default (a create, or an update of another class)."""
    if pc.global_default and default is not None and default.metadata.name != pc.metadata.name:
        raise errors.forbidden(
            "priorityclasses",
            pc.metadata.name,
            f"PriorityClass {default.metadata.name} is already marked as default. "
            "Only one default can exist",
            group="scheduling.k8s.io",
        )


def admit_priority_class_deletion(pc: PriorityClass) -> None:
    """The system classes stay (upstream's PriorityClass storage refuses their deletion)."""
    if pc.metadata.name in scheduling_v1.SYSTEM_PRIORITY_CLASSES:
        raise errors.forbidden(
            "priorityclasses",
            pc.metadata.name,
            "this is a system priority class and cannot be deleted",
            group="scheduling.k8s.io",
        )


def admit_pod(pod: core_v1.Pod, lookup: Lookup, default: PriorityClass | None) -> None:
    """Set a created pod's priority and preemption policy from its class."""
    spec = pod.spec
    policy = scheduling_v1.PREEMPT_LOWER_PRIORITY
    if not spec.priority_class_name:
        priority = scheduling_v1.DEFAULT_PRIORITY
        if default is not None:
            spec.priority_class_name = default.metadata.name
            priority = default.value
            policy = default.preemption_policy or policy
    else:
        pc = lookup(spec.priority_class_name)
        if pc is None:
            raise errors.forbidden(
                "pods",
                pod.metadata.name,
                f"no PriorityClass with name {spec.priority_class_name} was found",
            )
        priority = pc.value
        policy = pc.preemption_policy or policy
    _not_provided(pod, "integer value of priority", spec.priority, priority)
    _not_provided(pod, "string value of PreemptionPolicy", spec.preemption_policy, policy)
    spec.priority = priority
    spec.preemption_policy = policy


def keep_pod_priority(pod: core_v1.Pod, old: core_v1.Pod) -> None:
    """An update that leaves out what the admission set at create keeps it (a replace with
    the manifest the pod was made from); changing it is refused by validation."""
    if pod.spec.priority is None:
        pod.spec.priority = old.spec.priority
    if pod.spec.preemption_policy is None:
        pod.spec.preemption_policy = old.spec.preemption_policy


def _not_provided(pod: core_v1.Pod, what: str, given: object, computed: object) -> None:
    """Refuse a pod that set a field the admission computes, to another value."""
    if given is not None and given != computed:
        raise errors.forbidden(
            "pods",
            pod.metadata.name,
            f"the {what} ({given}) must not be provided in pod spec; priority admission "
            f"controller computed {computed} from the given PriorityClass name",
        )


# DefaultTolerationSeconds: how long a pod stays on a node that turns not-ready or
# unreachable (upstream's `--default-not-ready-toleration-seconds` and
# `--default-unreachable-toleration-seconds`).
DEFAULT_NOT_READY_TOLERATION_SECONDS = 300
DEFAULT_UNREACHABLE_TOLERATION_SECONDS = 300
TAINT_NODE_NOT_READY = "node.kubernetes.io/not-ready"
TAINT_NODE_UNREACHABLE = "node.kubernetes.io/unreachable"


def add_default_tolerations(pod: core_v1.Pod) -> None:
    """Upstream's DefaultTolerationSeconds admission, on create and update of a pod: a pod
    that does not already tolerate the node's not-ready or unreachable NoExecute taint gets
    a toleration of it for 300 s, so its node controller evicts it after five minutes."""
    tolerations = pod.spec.tolerations
    for key, seconds in (
        (TAINT_NODE_NOT_READY, DEFAULT_NOT_READY_TOLERATION_SECONDS),
        (TAINT_NODE_UNREACHABLE, DEFAULT_UNREACHABLE_TOLERATION_SECONDS),
    ):
        if not any(t.key in ("", key) and t.effect in ("", "NoExecute") for t in tolerations):
            tolerations.append(
                core_v1.Toleration(
                    key=key, operator="Exists", effect="NoExecute", toleration_seconds=seconds
                )
            )
