"""`drasim describe KIND NAME`: an object for people, kubectl describe style.

Pods also show why they are (not) scheduled, and, once bound through DRA, the special
ResourceClaim, its devices and which container got which request.
"""

from __future__ import annotations

import argparse
import asyncio
from datetime import UTC, datetime
from typing import Any

import yaml

from drasim.cli import session
from drasim.common import codec, errors, tables
from drasim.common.api import core_v1, registry, resource_v1
from drasim.common.client import ApiClient
from drasim.common.quantity import Quantity


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("describe", help="show an object in detail, with its events")
    p.add_argument("kind")
    p.add_argument("name")
    p.add_argument("-n", "--namespace", default="")
    p.set_defaults(func=run)


def _field(label: str, value: Any, indent: int = 0) -> str:
    """`Label:` padded to 16 columns, and at least one space before the value."""
    return f"{' ' * indent}{label + ':':<15} {value}"


def _mapping(label: str, values: dict[str, str]) -> list[str]:
    if not values:
        return [_field(label, "<none>")]
    items = [f"{k}={v}" for k, v in sorted(values.items())]
    return [_field(label, items[0])] + [" " * 16 + item for item in items[1:]]


def _yaml_block(label: str, value: Any) -> list[str]:
    body = codec.to_builtins(value)
    if not body:
        return []
    text = yaml.safe_dump(body, sort_keys=False, default_flow_style=False).rstrip()
    return [f"{label}:"] + ["  " + line for line in text.splitlines()]


def describe_meta(obj: Any) -> list[str]:
    meta = obj.metadata
    lines = [_field("Name", meta.name)]
    if meta.namespace:
        lines.append(_field("Namespace", meta.namespace))
    lines += _mapping("Labels", meta.labels)
    lines += _mapping("Annotations", meta.annotations)
    lines.append(_field("Created", meta.creation_timestamp or "<unknown>"))
    if meta.deletion_timestamp:
        lines.append(_field("Deleting since", meta.deletion_timestamp))
    if meta.finalizers:
        lines.append(_field("Finalizers", ", ".join(meta.finalizers)))
    for ref in meta.owner_references:
        lines.append(
            _field("Controlled By" if ref.controller else "Owned By", f"{ref.kind}/{ref.name}")
        )
    return lines


def _devices_by_request(claim: resource_v1.ResourceClaim) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    if claim.status.allocation is not None:
        for r in claim.status.allocation.devices.results:
            found.setdefault(r.request, []).append(f"{r.driver}/{r.pool}/{r.device}")
    return found


async def describe_pod(api: ApiClient, pod: core_v1.Pod) -> list[str]:
    lines = describe_meta(pod)
    lines.append(_field("Priority", pod.spec.priority or 0))
    if pod.spec.priority_class_name:
        lines.append(_field("Priority Class Name", pod.spec.priority_class_name))
    lines.append(_field("Node", pod.spec.node_name or "<none>"))
    if pod.status.nominated_node_name:
        lines.append(_field("Nominated Node Name", pod.status.nominated_node_name))
    lines.append(_field("Status", tables.pod_status_reason(pod)))
    for kind, containers in (
        ("Init Containers", pod.spec.init_containers),
        ("Containers", pod.spec.containers),
    ):
        if not containers:
            continue
        lines.append(f"{kind}:")
        for c in containers:
            lines.append(f"  {c.name}:")
            if c.restart_policy:
                lines.append(_field("Restart Policy", c.restart_policy, 4))
            for label, values in (
                ("Limits", c.resources.limits),
                ("Requests", c.resources.requests),
            ):
                if values:
                    lines.append(f"    {label}:")
                    lines += [f"      {k}: {v}" for k, v in sorted(values.items())]
    if pod.status.conditions:
        lines.append("Conditions:")
        lines.append(f"  {'Type':<16}{'Status':<8}{'Reason':<16}Message")
        for cond in pod.status.conditions:
            lines.append(f"  {cond.type:<16}{cond.status:<8}{cond.reason:<16}{cond.message}")
    for ref in pod.status.resource_claim_statuses:
        lines.append(_field("Claim", f"{ref.name} -> {ref.resource_claim_name or '<none>'}"))
    ercs = pod.status.extended_resource_claim_status
    if ercs is not None:
        lines.append("Extended Resource Claim:")
        lines.append(_field("Claim", ercs.resource_claim_name, 2))
        try:
            claim = await api.get(
                resource_v1.ResourceClaim,
                ercs.resource_claim_name,
                namespace=pod.metadata.namespace,
            )
            devices = _devices_by_request(claim)
            lines.append(_field("State", tables.claim_state(claim), 2))
        except errors.NotFound:
            devices = {}
            lines.append(_field("State", "<claim not found>", 2))
        lines.append(f"  {'Container':<16}{'Resource':<40}{'Request':<26}Devices")
        for m in ercs.request_mappings:
            shown = ", ".join(devices.get(m.request_name, [])) or "<none>"
            lines.append(
                f"  {m.container_name:<16}{m.resource_name:<40}{m.request_name:<26}{shown}"
            )
    return lines


async def describe_events(api: ApiClient, obj: Any, info: registry.ResourceInfo) -> list[str]:
    events, _ = await api.list(
        core_v1.Event,
        namespace=obj.metadata.namespace or "default",
        field_selector=f"involvedObject.name={obj.metadata.name},involvedObject.kind={info.kind}",
    )
    if not events:
        return ["Events:          <none>"]
    now = datetime.now(UTC)
    events.sort(key=lambda e: e.last_timestamp or "")
    rows = [
        (
            ev.type,
            ev.reason,
            event_age(ev, now),
            ev.source.component or ev.reporting_component,
            ev.message.strip(),
        )
        for ev in events
    ]
    header = ("Type", "Reason", "Age", "From", "Message")
    # Columns as wide as their longest cell plus two, as kubectl's tabwriter sets them.
    widths = [max(len(row[i]) for row in [header, *rows]) + 2 for i in range(4)]
    lines = ["Events:"]
    for row in [header, tuple("-" * len(h) for h in header), *rows]:
        cells = "".join(f"{cell:<{width}}" for cell, width in zip(row, widths, strict=False))
        lines.append(f"  {cells}{row[4]}")
    return lines


def event_age(event: core_v1.Event, now: datetime) -> str:
    """As kubectl describe: since the last occurrence, and for a repeated event how many
    and since the first ("2m (x5 over 10m)")."""

    def since(ts: str | None) -> str:
        seen = tables.parse_time(ts) or now
        return tables.human_duration((now - seen).total_seconds())

    first = since(event.event_time or event.first_timestamp or event.last_timestamp)
    if event.series is not None:
        return f"{since(event.series.last_observed_time)} (x{event.series.count} over {first})"
    if event.count > 1:
        return f"{since(event.last_timestamp)} (x{event.count} over {first})"
    return first


_QUOTA_SCOPE_HELP = {
    "Terminating": "Matches all pods that have an active deadline. These pods have a limited "
    "lifespan on a node before being actively terminated by the system.",
    "NotTerminating": "Matches all pods that do not have an active deadline. These pods usually "
    "include long running pods whose container command is not expected to terminate.",
    "BestEffort": "Matches all pods that do not have resource requirements set. These pods "
    "have a best effort quality of service.",
    "NotBestEffort": "Matches all pods that have at least one resource requirement set. These "
    "pods have a burstable or guaranteed quality of service.",
}


def tabbed(lines: list[list[str]]) -> str:
    """Lines of cells aligned as Go's tabwriter (padding 2) aligns `a\tb\tc`: every cell but
    a line's last is padded to the widest of its column among the adjacent lines that have
    that column."""
    widths = [[0] * (len(line) - 1) for line in lines]
    for column in range(max(len(line) - 1 for line in lines)):
        row = 0
        while row < len(lines):
            end = row
            while end < len(lines) and len(lines[end]) - 1 > column:
                end += 1
            width = max((len(lines[r][column]) for r in range(row, end)), default=0) + 2
            for r in range(row, end):
                widths[r][column] = width
            row = end + 1 if end == row else end
    return "\n".join(
        "".join(cell.ljust(widths[r][c]) for c, cell in enumerate(line[:-1])) + line[-1]
        for r, line in enumerate(lines)
    )


def describe_quota(rq: core_v1.ResourceQuota) -> str:
    """As `kubectl describe quota`: the scopes, and used against hard for each name the
    status holds (a used value shown in the hard value's format)."""
    lines = [["Name:", rq.metadata.name], ["Namespace:", rq.metadata.namespace or ""]]
    if rq.spec.scopes:
        scopes = sorted(rq.spec.scopes)
        lines.append(["Scopes:", ", ".join(scopes)])
        lines += [[f" * {_QUOTA_SCOPE_HELP[s]}"] for s in scopes if s in _QUOTA_SCOPE_HELP]
    lines += [["Resource", "Used", "Hard"], ["--------", "----", "----"]]
    for name in sorted(rq.status.hard):
        hard = rq.status.hard[name]
        used = rq.status.used.get(name, Quantity(0))
        if used.format != hard.format:
            used = Quantity(used.int_value(), hard.format)
        lines.append([name, str(used), str(hard)])
    return tabbed(lines)


async def describe(api: ApiClient, info: registry.ResourceInfo, name: str, namespace: str) -> str:
    obj = await api.get(info.type, name, namespace=namespace)
    if info.plural == "resourcequotas":
        return describe_quota(obj)
    if info.plural == "pods":
        lines = await describe_pod(api, obj)
    elif info.plural == "priorityclasses":
        # As `kubectl describe priorityclass`: its fields are not under spec.
        lines = describe_meta(obj)
        lines.append(_field("Value", obj.value))
        lines.append(_field("GlobalDefault", str(obj.global_default).lower()))
        lines.append(_field("PreemptionPolicy", obj.preemption_policy or "<none>"))
        lines.append(_field("Description", obj.description))
    else:
        lines = describe_meta(obj)
        for part in ("spec", "status"):
            if hasattr(obj, part):
                lines += _yaml_block(part.capitalize(), getattr(obj, part))
    lines += await describe_events(api, obj, info)
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    info = registry.resolve(args.kind)
    namespace = (args.namespace or "default") if info.namespaced else ""

    async def go() -> str:
        async with session.connect(args) as api:
            return await describe(api, info, args.name, namespace)

    print(asyncio.run(go()))
    return 0
