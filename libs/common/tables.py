"""Table columns per resource, as kubectl shows them; one place for `drasim get` and the
HTTP API's `as=Table` answers. Priority 1 columns appear with `-o wide` only."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from drasim.common import pod_table


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    cell: Callable[[Any, datetime], str]
    priority: int = 0
    type: str = "string"
    description: str = ""
    format: str = ""  # "name": the column holding the object's name (a Table's `format`)


# RFC 3339 as Kubernetes writes it: `metav1.Time` in whole seconds, `metav1.MicroTime`
# (eventTime) with six decimals, and other clients with any fraction or a UTC offset.
_RFC3339 = re.compile(
    r"(?P<date>\d{4}-\d{2}-\d{2})[Tt](?P<time>\d{2}:\d{2}:\d{2})(?:\.(?P<fraction>\d+))?"
    r"(?P<zone>[Zz]|[+-]\d{2}:\d{2})"
)


def parse_time(ts: str | None) -> datetime | None:
    """An RFC 3339 timestamp (`2026-11-30T03:45:46Z`, `2026-11-30T03:45:46.123456Z`,
    `2026-11-30T04:45:46.5+01:00`) in UTC; None for none, or for text that is not one (a
    table shows `<unknown>` rather than failing). Digits past microseconds are dropped."""
    match = _RFC3339.fullmatch(ts) if ts else None
    if match is None:
        return None
    micros = (match["fraction"] or "")[:6].ljust(6, "0")
    zone = "+00:00" if match["zone"] in ("Z", "z") else match["zone"]
    try:
        parsed = datetime.fromisoformat(f"{match['date']}T{match['time']}.{micros}{zone}")
    except ValueError:  # out of range: month 13, hour 25
        return None
    return parsed.astimezone(UTC)


def format_time(when: datetime | None = None) -> str:
    """A Kubernetes timestamp (`metav1.Time`: RFC 3339, UTC, whole seconds) of `when`, or of
    now."""
    return (when or datetime.now(UTC)).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def since(ts: str | None, now: datetime) -> str:
    """kubectl's `translateTimestampSince`: how long ago, or `<unknown>` without a time."""
    when = parse_time(ts)
    return human_duration((now - when).total_seconds()) if when else "<unknown>"


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
    return since(obj.metadata.creation_timestamp, now)


def _name(obj: Any, now: datetime) -> str:
    return obj.metadata.name


def pod_status_reason(pod: Any) -> str:
    """What kubectl shows under STATUS (upstream `printPod`)."""
    return pod_table.pod_cells(pod, datetime.now(UTC), since).status


def _pod_ready(pod: Any, now: datetime) -> str:
    return pod_table.pod_cells(pod, now, since).ready


def _pod_restarts(pod: Any, now: datetime) -> str:
    return pod_table.pod_cells(pod, now, since).restarts


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


def format_label_selector(selector: Any) -> str:
    """`metav1.FormatLabelSelector` without its `<none>`: `app=web,tier in (a,b),!gone`."""
    if selector is None:
        return ""
    terms = [f"{k}={v}" for k, v in sorted(selector.match_labels.items())]
    for req in selector.match_expressions:
        if req.operator in ("In", "NotIn"):
            terms.append(f"{req.key} {req.operator.lower()} ({','.join(req.values)})")
        elif req.operator == "Exists":
            terms.append(req.key)
        else:
            terms.append(f"!{req.key}")
    return ",".join(terms)


def _or_none(text: str) -> str:
    return text or "<none>"


def _container_names(template: Callable[[Any], Any]) -> Column:
    return Column(
        "Containers",
        lambda o, now: ",".join(c.name for c in template(o).spec.containers),
        priority=1,
        description="Names of each container in the template.",
    )


def _container_images(template: Callable[[Any], Any]) -> Column:
    return Column(
        "Images",
        lambda o, now: ",".join(c.image for c in template(o).spec.containers),
        priority=1,
        description="Images referenced by each container in the template.",
    )


def job_status(job: Any) -> str:
    """The STATUS of upstream's `printJob`: the first true condition in its order."""
    true = {c.type for c in job.status.conditions if c.status == "True"}
    if "Complete" in true:
        return "Complete"
    if "Failed" in true:
        return "Failed"
    if job.metadata.deletion_timestamp:
        return "Terminating"
    for condition in ("Suspended", "FailureTarget", "SuccessCriteriaMet"):
        if condition in true:
            return condition
    return "Running"


def _job_completions(job: Any, now: datetime) -> str:
    if job.spec.completions is not None:
        return f"{job.status.succeeded}/{job.spec.completions}"
    parallelism = job.spec.parallelism or 0
    if parallelism > 1:
        return f"{job.status.succeeded}/1 of {parallelism}"
    return f"{job.status.succeeded}/1"


def _job_duration(job: Any, now: datetime) -> str:
    start = parse_time(job.status.start_time)
    if start is None:
        return ""
    end = parse_time(job.status.completion_time) or now
    return human_duration((end - start).total_seconds())


def _workload_columns() -> dict[str, list[Column]]:
    """Upstream's `daemonSetColumnDefinitions`, `jobColumnDefinitions`,
    `cronJobColumnDefinitions` and `statefulSetColumnDefinitions`."""
    pod_template = lambda o: o.spec.template  # noqa: E731
    job_template = lambda o: o.spec.job_template.spec.template  # noqa: E731
    return {
        "daemonsets": [
            NAME,
            Column(
                "Desired", lambda d, now: str(d.status.desired_number_scheduled), type="integer"
            ),
            Column(
                "Current", lambda d, now: str(d.status.current_number_scheduled), type="integer"
            ),
            Column("Ready", lambda d, now: str(d.status.number_ready), type="integer"),
            Column(
                "Up-to-date", lambda d, now: str(d.status.updated_number_scheduled), type="integer"
            ),
            Column("Available", lambda d, now: str(d.status.number_available), type="integer"),
            Column(
                "Node Selector",
                lambda d, now: _or_none(
                    ",".join(
                        f"{k}={v}" for k, v in sorted(d.spec.template.spec.node_selector.items())
                    )
                ),
            ),
            AGE,
            _container_names(pod_template),
            _container_images(pod_template),
            Column(
                "Selector",
                lambda d, now: _or_none(format_label_selector(d.spec.selector)),
                priority=1,
            ),
        ],
        "statefulsets": [
            NAME,
            Column(
                "Ready",
                lambda s, now: (
                    f"{s.status.ready_replicas}/{1 if s.spec.replicas is None else s.spec.replicas}"
                ),
                description="Number of the pod with ready state",
            ),
            AGE,
            _container_names(pod_template),
            _container_images(pod_template),
        ],
        "jobs": [
            NAME,
            Column("Status", lambda j, now: job_status(j), description="Status of the job."),
            Column("Completions", _job_completions),
            Column("Duration", _job_duration, description="Time required to complete the job."),
            AGE,
            _container_names(pod_template),
            _container_images(pod_template),
            Column(
                "Selector",
                lambda j, now: _or_none(format_label_selector(j.spec.selector)),
                priority=1,
            ),
        ],
        "cronjobs": [
            NAME,
            Column("Schedule", lambda c, now: c.spec.schedule),
            Column(
                "Timezone",
                lambda c, now: c.spec.time_zone if c.spec.time_zone is not None else "<none>",
            ),
            Column(
                "Suspend",
                lambda c, now: "<unset>" if c.spec.suspend is None else str(c.spec.suspend),
                type="boolean",
            ),
            Column("Active", lambda c, now: str(len(c.status.active)), type="integer"),
            Column(
                "Last Schedule",
                lambda c, now: (
                    since(c.status.last_schedule_time, now)
                    if c.status.last_schedule_time
                    else "<none>"
                ),
            ),
            AGE,
            _container_names(job_template),
            _container_images(job_template),
            Column(
                "Selector",
                lambda c, now: _or_none(format_label_selector(c.spec.job_template.spec.selector)),
                priority=1,
            ),
        ],
    }


def _deployment_ready(d: Any, now: datetime) -> str:
    return f"{d.status.ready_replicas}/{d.spec.replicas if d.spec.replicas is not None else 1}"


# Events, as upstream's `printEvent`: a core/v1 Event has first/lastTimestamp, one written
# through events.k8s.io only eventTime, so each time falls back on the other.
def _event_first_seen(e: Any, now: datetime) -> str:
    return since(e.first_timestamp or e.event_time, now)


def _event_last_seen(e: Any, now: datetime) -> str:
    if e.series is not None:
        return since(e.series.last_observed_time, now)
    if e.last_timestamp:
        return since(e.last_timestamp, now)
    return _event_first_seen(e, now)


def _event_object(e: Any, now: datetime) -> str:
    ref = e.involved_object
    return f"{ref.kind.lower()}/{ref.name}" if ref.name else ref.kind.lower()


def _event_source(e: Any, now: datetime) -> str:
    """`formatEventSource`: component (or reporting controller), then host (or instance)."""
    component = e.source.component or e.reporting_component
    instance = e.source.host or e.reporting_instance
    return f"{component}, {instance}" if instance else component


def _event_count(e: Any, now: datetime) -> str:
    if e.series is not None:
        return str(e.series.count)
    return str(e.count or 1)  # a singleton event of the new API has no count


def _int_or_string(value: int | str | None) -> str:
    return "N/A" if value is None else str(value)


NAME = Column("Name", _name, description="Name must be unique within a namespace.", format="name")
AGE = Column("Age", age, description="CreationTimestamp of the object.")


def _quota_usage(limits: bool) -> Callable[[Any, datetime], str]:
    """`name: used/hard` of a quota's status, by name, the `limits.` ones or the others
    (upstream's `printResourceQuota`)."""

    def cell(rq: Any, now: datetime) -> str:
        parts = [
            f"{name}: {rq.status.used.get(name, 0)}/{rq.status.hard[name]}"
            for name in sorted(rq.status.hard)
            if (name.split(".")[0] == "limits" and "." in name) == limits
        ]
        return ", ".join(parts)

    return cell


def _role_ref(binding: Any, now: datetime) -> str:
    return f"{binding.role_ref.kind}/{binding.role_ref.name}"


def _subjects(kind: str) -> Callable[[Any, datetime], str]:
    """The names of a binding's subjects of one kind (a service account as
    `namespace/name`), as upstream's `SubjectsStrings`."""

    def cell(binding: Any, now: datetime) -> str:
        return ", ".join(
            f"{s.namespace}/{s.name}" if kind == "ServiceAccount" else s.name
            for s in binding.subjects
            if s.kind == kind
        )

    return cell


ROLE_COLUMNS = [
    NAME,
    Column(
        "Created At",
        lambda r, now: r.metadata.creation_timestamp or "",
        type="date",
        description="CreationTimestamp of the object.",
    ),
]
ROLE_BINDING_COLUMNS = [
    NAME,
    Column("Role", _role_ref),
    AGE,
    Column("Users", _subjects("User"), priority=1),
    Column("Groups", _subjects("Group"), priority=1),
    Column("ServiceAccounts", _subjects("ServiceAccount"), priority=1),
]

COLUMNS: dict[str, list[Column]] = {
    "pods": [
        NAME,
        Column("Ready", _pod_ready),
        Column("Status", lambda p, now: pod_status_reason(p)),
        Column("Restarts", _pod_restarts),
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
    **_workload_columns(),
    # Upstream's `podDisruptionBudgetColumnDefinitions`: an unset bound shows as N/A.
    "poddisruptionbudgets": [
        NAME,
        Column("Min Available", lambda p, now: _int_or_string(p.spec.min_available)),
        Column("Max Unavailable", lambda p, now: _int_or_string(p.spec.max_unavailable)),
        Column(
            "Allowed Disruptions",
            lambda p, now: str(p.status.disruptions_allowed),
            type="integer",
        ),
        AGE,
    ],
    # Upstream's `resourceQuotaColumnDefinitions`.
    "resourcequotas": [
        NAME,
        Column(
            "Request",
            _quota_usage(limits=False),
            description="Request represents a minimum amount of cpu/memory that a container "
            "may consume.",
        ),
        Column(
            "Limit",
            _quota_usage(limits=True),
            description="Limits control the maximum amount of cpu/memory that a container "
            "may use independent of contention on the node.",
        ),
        AGE,
    ],
    # Upstream's `deviceTaintRuleColumnDefinitions`.
    "devicetaintrules": [
        NAME,
        Column("Key", lambda r, now: r.spec.taint.key),
        Column("Value", lambda r, now: r.spec.taint.value),
        Column("Effect", lambda r, now: r.spec.taint.effect),
        Column("TimeAdded", lambda r, now: since(r.spec.taint.time_added, now)),
        AGE,
    ],
    # Upstream's `priorityClassColumnDefinitions`.
    "priorityclasses": [
        NAME,
        Column("Value", lambda c, now: str(c.value), type="integer"),
        Column("Global-Default", lambda c, now: str(c.global_default).lower(), type="boolean"),
        AGE,
        Column("PreemptionPolicy", lambda c, now: c.preemption_policy or ""),
    ],
    # Upstream's `roleColumnDefinitions` and `roleBindingsColumnDefinitions` (the cluster
    # ones the same).
    "roles": ROLE_COLUMNS,
    "clusterroles": ROLE_COLUMNS,
    "rolebindings": ROLE_BINDING_COLUMNS,
    "clusterrolebindings": ROLE_BINDING_COLUMNS,
    # Upstream's `eventColumnDefinitions`, in its order; `-o wide` adds the priority 1 ones.
    "events": [
        Column("Last Seen", _event_last_seen),
        Column("Type", lambda e, now: e.type),
        Column("Reason", lambda e, now: e.reason),
        Column("Object", _event_object),
        Column("Subobject", lambda e, now: e.involved_object.field_path, priority=1),
        Column("Source", _event_source, priority=1),
        Column("Message", lambda e, now: e.message.strip()),
        Column("First Seen", _event_first_seen, priority=1),
        Column("Count", _event_count, priority=1, type="integer"),
        Column("Name", _name, priority=1, format="name"),
    ],
}


# --- the core kinds applications ship (upstream printers.go) ----------------------------

_ACCESS_MODES_SHORT = {
    "ReadWriteOnce": "RWO",
    "ReadOnlyMany": "ROX",
    "ReadWriteMany": "RWX",
    "ReadWriteOncePod": "RWOP",
}


def _service_external_ip(svc: Any, now: datetime) -> str:
    """Upstream `getServiceExternalIP` (not wide)."""
    spec = svc.spec
    if spec.type in ("ClusterIP", "NodePort"):
        return ",".join(spec.external_ips) or "<none>"
    if spec.type == "LoadBalancer":
        ingress = sorted(
            {i.get("ip") or i.get("hostname") or "" for i in svc.status.load_balancer.ingress}
            - {""}
        )
        found = ",".join(ingress)
        if len(found) > 16:
            found = found[:13] + "..."
        return ",".join([*([found] if found else []), *spec.external_ips]) or "<pending>"
    if spec.type == "ExternalName":
        return spec.external_name
    return "<unknown>"


def _service_ports(svc: Any, now: datetime) -> str:
    """Upstream `makePortString`."""
    return (
        ",".join(
            f"{p.port}:{p.node_port}/{p.protocol}" if p.node_port > 0 else f"{p.port}/{p.protocol}"
            for p in svc.spec.ports
        )
        or "<none>"
    )


def _listed(items: list[str], count: int) -> str:
    """The first three and how many more (upstream `listWithMoreString`)."""
    if count > 3:
        return f"{','.join(items[:3])} + {count - 3} more..."
    return ",".join(items) or "<unset>"


def _endpoints(ep: Any, now: datetime) -> str:
    """Upstream `formatEndpoints`: address:port for each port, the first three."""
    if not ep.subsets:
        return "<none>"
    shown: list[str] = []
    for subset in ep.subsets:
        if not subset.ports:
            shown += [a.ip for a in subset.addresses]
        for port in subset.ports:
            for a in subset.addresses:
                shown.append(f"[{a.ip}]:{port.port}" if ":" in a.ip else f"{a.ip}:{port.port}")
    if len(shown) > 3:
        return f"{','.join(shown[:3])} + {len(shown) - 3} more..."
    return ",".join(shown)


def _slice_ports(eps: Any, now: datetime) -> str:
    shown = [str(p.port) if p.port is not None else (p.name or "*") for p in eps.ports]
    return _listed(shown, len(shown))


def _slice_endpoints(eps: Any, now: datetime) -> str:
    shown = [a for e in eps.endpoints for a in e.addresses]
    return _listed(shown, len(shown))


def _pvc_bound(pvc: Any, cell: Callable[[Any], str]) -> str:
    return cell(pvc) if pvc.spec.volume_name else ""


def _pvc_class(pvc: Any, now: datetime) -> str:
    annotation = pvc.metadata.annotations.get("volume.beta.kubernetes.io/storage-class")
    return annotation if annotation is not None else pvc.spec.storage_class_name or ""


def _ip_parent(ip: Any, now: datetime) -> str:
    ref = ip.spec.parent_ref
    if ref is None:
        return "<none>"
    resource = f"{ref.resource}.{ref.group}" if ref.group else ref.resource
    return "/".join(filter(None, (resource.lower(), ref.namespace, ref.name)))


APP_COLUMNS: dict[str, list[Column]] = {
    "configmaps": [
        NAME,
        Column("Data", lambda c, now: str(len(c.data) + len(c.binary_data))),
        AGE,
    ],
    "secrets": [
        NAME,
        Column("Type", lambda s, now: s.type),
        Column("Data", lambda s, now: str(len(s.data))),
        AGE,
    ],
    "serviceaccounts": [NAME, AGE],
    "services": [
        NAME,
        Column("Type", lambda s, now: s.spec.type),
        Column("Cluster-IP", lambda s, now: (s.spec.cluster_ips or ["<none>"])[0]),
        Column("External-IP", _service_external_ip),
        Column("Port(s)", _service_ports),
        AGE,
        Column(
            "Selector",
            lambda s, now: (
                ",".join(f"{k}={v}" for k, v in sorted(s.spec.selector.items())) or "<none>"
            ),
            priority=1,
        ),
    ],
    "endpoints": [NAME, Column("Endpoints", _endpoints), AGE],
    "endpointslices": [
        NAME,
        Column("AddressType", lambda e, now: e.address_type),
        Column("Ports", _slice_ports),
        Column("Endpoints", _slice_endpoints),
        AGE,
    ],
    "persistentvolumeclaims": [
        NAME,
        Column(
            "Status",
            lambda p, now: "Terminating" if p.metadata.deletion_timestamp else p.status.phase,
        ),
        Column("Volume", lambda p, now: p.spec.volume_name),
        Column(
            "Capacity",
            lambda p, now: _pvc_bound(p, lambda c: str(c.status.capacity.get("storage") or "0")),
        ),
        Column(
            "Access Modes",
            lambda p, now: _pvc_bound(
                p,
                lambda c: ",".join(
                    short
                    for mode, short in _ACCESS_MODES_SHORT.items()
                    if mode in c.status.access_modes
                ),
            ),
        ),
        Column("StorageClass", _pvc_class),
        Column(
            "VolumeAttributesClass",
            lambda p, now: (
                p.spec.volume_attributes_class_name
                if p.spec.volume_attributes_class_name is not None
                else "<unset>"
            ),
        ),
        AGE,
        Column("VolumeMode", lambda p, now: p.spec.volume_mode or "<unset>", priority=1),
    ],
    "ipaddresses": [NAME, Column("ParentRef", _ip_parent)],
    # apiextensions' `customResourceDefinitionColumnDefinitions`.
    "customresourcedefinitions": [
        NAME,
        Column("Scope", lambda c, now: c.spec.scope),
        Column(
            "Versions",
            lambda c, now: ",".join(
                f"{v.name}(storage)" if v.storage else v.name for v in c.spec.versions
            ),
        ),
        Column("Created At", lambda c, now: c.metadata.creation_timestamp or "", type="date"),
    ],
}

# The columns of custom resources, by plural, which `customresources` keeps as CRDs come
# and go.
CUSTOM_COLUMNS: dict[str, list[Column]] = {}


def columns_for(resource: str, *, wide: bool = False) -> list[Column]:
    cols = COLUMNS.get(resource) or APP_COLUMNS.get(resource) or CUSTOM_COLUMNS.get(resource)
    cols = cols or [NAME, AGE]
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
