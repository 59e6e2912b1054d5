"""Pod predicates the controllers share (upstream `pkg/api/v1/pod`, `pkg/controller`), and time."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from drasim.common import tables
from drasim.common.api import core_v1

# One readiness rule for the controllers and the eviction subresource.
from drasim.common.disruption import is_pod_ready as is_pod_ready

TERMINAL_PHASES = ("Succeeded", "Failed")


def parse_time(timestamp: str | None) -> datetime | None:
    """An RFC 3339 timestamp as the apistore writes it (`2026-07-01T12:00:00Z`)."""
    return datetime.fromisoformat(timestamp) if timestamp else None


def is_pod_terminal(pod: core_v1.Pod) -> bool:
    """`podutil.IsPodPhaseTerminal`: the pod's containers ended and will not run again."""
    return pod.status.phase in TERMINAL_PHASES


def is_pod_active(pod: core_v1.Pod) -> bool:
    """`controller.IsPodActive`: counts toward a ReplicaSet's replicas (not ended, not going)."""
    return not is_pod_terminal(pod) and pod.metadata.deletion_timestamp is None


def ready_condition(pod: core_v1.Pod) -> core_v1.PodCondition | None:
    return next((c for c in pod.status.conditions if c.type == "Ready"), None)


def is_pod_available(pod: core_v1.Pod, min_ready_seconds: int, now: datetime) -> bool:
    """`podutil.IsPodAvailable`: ready for at least `min_ready_seconds`."""
    condition = ready_condition(pod)
    if condition is None or condition.status != "True":
        return False
    if min_ready_seconds == 0:
        return True
    since = parse_time(condition.last_transition_time)
    return since is not None and since + timedelta(seconds=min_ready_seconds) < now


def now() -> datetime:
    return datetime.now(UTC)


def format_time(when: datetime) -> str:
    """Kubernetes timestamps: RFC 3339, UTC, whole seconds."""
    return tables.format_time(when)
