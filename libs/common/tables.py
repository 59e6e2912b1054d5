"""Table columns per resource, as kubectl shows them; one place for `drasim get` and the
HTTP API's `as=Table` answers. Priority 1 columns appear with `-o wide` only."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    cell: Callable[[Any, datetime], str]
    priority: int = 0
    type: str = "string"
    description: str = ""


def parse_time(ts: str | None) -> datetime | None:
    if not ts:
        return None
    return datetime.strptime(ts, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)


def human_duration(seconds: float) -> str:
    """kubectl's short durations: 45s, 5m30s, 3h20m, 2d3h, 400d."""
    s = int(max(seconds, 0))
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        return f"{minutes}m{s % 60}s" if s % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    days = hours // 24
    if days < 8:
        return f"{days}d{hours % 24}h" if hours % 24 else f"{days}d"
    return f"{days}d"


def age(obj: Any, now: datetime) -> str:
    created = parse_time(obj.metadata.creation_timestamp)
    return human_duration((now - created).total_seconds()) if created else "<unknown>"


def _name(obj: Any, now: datetime) -> str:
    return obj.metadata.name


def pod_status_reason(pod: Any) -> str:
    """What kubectl shows under STATUS: Terminating, a waiting reason, or the phase."""
    if pod.metadata.deletion_timestamp:
        return "Terminating"
    for status in pod.status.container_statuses:
        waiting = status.state.waiting if status.state else None
        if waiting is not None and waiting.reason:
            return waiting.reason
    return pod.status.reason or pod.status.phase or "Pending"


def _pod_ready(pod: Any, now: datetime) -> str:
    ready = sum(1 for s in pod.status.container_statuses if s.ready)
    return f"{ready}/{len(pod.spec.containers)}"


def _pod_restarts(pod: Any, now: datetime) -> str:
    return str(sum(s.restart_count for s in pod.status.container_statuses))


def _node_status(node: Any, now: datetime) -> str:
    ready = next((c for c in node.status.conditions if c.type == "Ready"), None)
    status = "Ready" if ready is not None and ready.status == "True" else "NotReady"
    if node.spec.unschedulable:
        status += ",SchedulingDisabled"
    return status


def _node_roles(node: Any, now: datetime) -> str:
    prefix = "node-role.kubernetes.io/"
    roles = sorted(k[len(prefix) :] for k in node.metadata.labels if k.startswith(prefix))
    return ",".join(roles) or "<none>"


def claim_state(claim: Any) -> str:
    """ResourceClaim STATE as kubectl shows it: pending, allocated,reserved, deleted…"""
    parts = []
    if claim.metadata.deletion_timestamp:
        parts.append("deleted")
    if claim.status.allocation is None:
        if not parts:
            parts.append("pending")
    else:
        parts.append("allocated")
        if claim.status.reserved_for:
            parts.append("reserved")
    return ",".join(parts)


def _deployment_ready(d: Any, now: datetime) -> str:
    return f"{d.status.ready_replicas}/{d.spec.replicas if d.spec.replicas is not None else 1}"


NAME = Column("Name", _name, description="Name must be unique within a namespace.")
AGE = Column("Age", age, description="CreationTimestamp of the object.")

COLUMNS: dict[str, list[Column]] = {
    "pods": [
        NAME,
        Column("Ready", _pod_ready),
        Column("Status", lambda p, now: pod_status_reason(p)),
        Column("Restarts", _pod_restarts, type="integer"),
        AGE,
        Column("IP", lambda p, now: p.status.pod_ip or "<none>", priority=1),
        Column("Node", lambda p, now: p.spec.node_name or "<none>", priority=1),
        Column(
            "Nominated Node", lambda p, now: p.status.nominated_node_name or "<none>", priority=1
        ),
    ],
    "nodes": [
        NAME,
        Column("Status", _node_status),
        Column("Roles", _node_roles),
        AGE,
        Column("Version", lambda n, now: n.status.node_info.kubelet_version or ""),
    ],
    "resourceclaims": [NAME, Column("State", lambda c, now: claim_state(c)), AGE],
    "deviceclasses": [
        NAME,
        Column(
            "Extended Resource",
            lambda c, now: c.spec.extended_resource_name or "<none>",
            priority=1,
        ),
        AGE,
    ],
    "resourceslices": [
        NAME,
        Column("Node", lambda s, now: s.spec.node_name or "<none>"),
        Column("Driver", lambda s, now: s.spec.driver),
        Column("Pool", lambda s, now: s.spec.pool.name),
        AGE,
    ],
    "deployments": [
        NAME,
        Column("Ready", _deployment_ready),
        Column("Up-to-date", lambda d, now: str(d.status.updated_replicas), type="integer"),
        Column("Available", lambda d, now: str(d.status.available_replicas), type="integer"),
        AGE,
    ],
    "replicasets": [
        NAME,
        Column(
            "Desired",
            lambda r, now: str(r.spec.replicas if r.spec.replicas is not None else 1),
            type="integer",
        ),
        Column("Current", lambda r, now: str(r.status.replicas), type="integer"),
        Column("Ready", lambda r, now: str(r.status.ready_replicas), type="integer"),
        AGE,
    ],
    "events": [
        Column(
            "Last Seen",
            lambda e, now: human_duration(
                (now - (parse_time(e.last_timestamp) or now)).total_seconds()
            ),
        ),
        Column("Type", lambda e, now: e.type),
        Column("Reason", lambda e, now: e.reason),
        Column(
            "Object", lambda e, now: f"{e.involved_object.kind.lower()}/{e.involved_object.name}"
        ),
        Column("Message", lambda e, now: e.message),
    ],
}


def columns_for(resource: str, *, wide: bool = False) -> list[Column]:
    cols = COLUMNS.get(resource, [NAME, AGE])
    return [c for c in cols if wide or c.priority == 0]


def rows(
    resource: str, objects: list[Any], *, wide: bool = False, now: datetime | None = None
) -> tuple[list[str], list[list[str]]]:
    """Header and cells for a list of objects of one resource."""
    now = now or datetime.now(UTC)
    cols = columns_for(resource, wide=wide)
    return [c.name for c in cols], [[c.cell(o, now) for c in cols] for o in objects]


def render(
    header: list[str], body: list[list[str]], *, namespace_column: list[str] | None = None
) -> str:
    """Plain-text table, kubectl style (upper-case header, three-space gaps)."""
    head = [h.upper() for h in header]
    lines = [head, *body]
    if namespace_column is not None:
        lines = [
            ["NAMESPACE", *head],
            *[[ns, *row] for ns, row in zip(namespace_column, body, strict=True)],
        ]
    widths = [max(len(row[i]) for row in lines) for i in range(len(lines[0]))]
    return "\n".join(
        "   ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in lines
    )
