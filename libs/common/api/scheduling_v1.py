"""scheduling.k8s.io/v1: PriorityClass, the name a pod's `priorityClassName` refers to."""

from __future__ import annotations

from typing import ClassVar

from drasim.common.api.meta_v1 import KubeObject

__all__ = [
    "DEFAULT_PRIORITY",
    "HIGHEST_USER_DEFINABLE_PRIORITY",
    "NEVER",
    "PREEMPT_LOWER_PRIORITY",
    "SYSTEM_PRIORITY_CLASSES",
    "PriorityClass",
]

PREEMPT_LOWER_PRIORITY = "PreemptLowerPriority"
NEVER = "Never"
# A pod's priority when it names no class and no class is the global default.
DEFAULT_PRIORITY = 0
# Classes users make may not go above this; only the system classes do.
HIGHEST_USER_DEFINABLE_PRIORITY = 1_000_000_000


class PriorityClass(KubeObject):
    API_VERSION: ClassVar[str] = "scheduling.k8s.io/v1"
    KIND: ClassVar[str] = "PriorityClass"

    value: int = 0
    global_default: bool = False
    description: str = ""
    preemption_policy: str | None = None  # defaulted to PreemptLowerPriority


# The classes every cluster has (upstream `SystemPriorityClasses`): name → (value, description).
SYSTEM_PRIORITY_CLASSES: dict[str, tuple[int, str]] = {
    "system-node-critical": (
        2_000_001_000,
        "Used for system critical pods that must not be moved from their current node.",
    ),
    "system-cluster-critical": (
        2_000_000_000,
        "Used for system critical pods that must run in the cluster, but can be moved to "
        "another node if necessary.",
    ),
}
