"""What two clusters are compared on: the observations of a scenario, made comparable.

Pure functions over plain JSON (no cluster, no Go), so CI tests them. An *observation* is a
mapping `item → {field path → value}`: one item per thing a user would look at (a write's
answer, a pod, a pod's special claim, a quota, the events), its fields flattened to
dotted paths (`spec.containers[0].resources.requests.cpu`). Everything that legitimately
differs between two runs is taken out here, never hidden in the diff:

- identities and times: uids, resourceVersions, creationTimestamps, managedFields,
  `kubectl`'s last-applied annotation; other times (a condition's transition, a claim's
  allocation) become `<time>`, so that only whether one is set is compared;
- generated names: `<pod>-extended-resources-x7k2p` becomes `<pod>-extended-resources-*`
  and a ReplicaSet's pods `demo-6fc5f567b9-*`, wherever they appear, messages included;
- what only a kubelet writes (pod phase, IPs, container statuses): the reference's nodes
  are kwok's, not a kubelet;
- device names within a pool: which of several identical devices an allocator picks is
  not behaviour; how many of each pool it picks is.
"""

from __future__ import annotations

import copy
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = [
    "EXTENDED_RESOURCE_CLAIM_ANNOTATION",
    "Observation",
    "allocation_counts",
    "event_reasons",
    "flatten",
    "is_special_claim",
    "name_placeholders",
    "normalize_claim",
    "normalize_pod_outcome",
    "normalize_refusal",
    "normalize_stored",
    "owner_group",
    "quota_fields",
    "replace_names",
]

Observation = dict[str, dict[str, Any]]
"""item → flattened fields."""

EXTENDED_RESOURCE_CLAIM_ANNOTATION = "resource.kubernetes.io/extended-resource-claim"
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
KWOK_ANNOTATION = "kwok.x-k8s.io/node"
POOL_LABEL = "drasim.io/pool"

# metadata fields that identify one run's object, not its behaviour
_VOLATILE_METADATA = (
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "deletionTimestamp",
    "managedFields",
    "selfLink",
)
_TIME_KEYS = {
    "lastTransitionTime",
    "lastProbeTime",
    "lastHeartbeatTime",
    "lastUpdateTime",
    "startTime",
    "renewTime",
    "acquireTime",
    "allocationTimestamp",
}
# A ReplicaSet's or generateName's random suffix: five of Kubernetes' "safe" characters.
_SUFFIX = r"[bcdfghjklmnpqrstvwxz2456789]{5}"


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """`{"a": {"b": [1]}}` → `{"a.b[0]": 1}`; an empty mapping or list is a leaf of its own,
    so that `tolerations: []` and no tolerations differ."""
    if isinstance(value, Mapping):
        if not value:
            return {prefix: {}} if prefix else {}
        found: dict[str, Any] = {}
        for key in sorted(value):
            path = f"{prefix}.{key}" if prefix else str(key)
            found.update(flatten(value[key], path))
        return found
    if isinstance(value, list):
        if not value:
            return {prefix: []}
        found = {}
        for i, item in enumerate(value):
            found.update(flatten(item, f"{prefix}[{i}]"))
        return found
    return {prefix: value}


def _drop_times(value: Any) -> Any:
    """Times become `<time>`: whether a server sets one is behaviour, its value is not."""
    if isinstance(value, dict):
        return {
            k: ("<time>" if k in _TIME_KEYS else _drop_times(v))
            for k, v in value.items()
            if not (k in _TIME_KEYS and v is None)
        }
    if isinstance(value, list):
        return [_drop_times(v) for v in value]
    return value


def normalize_stored(obj: Mapping[str, Any]) -> dict[str, Any]:
    """An object as a server stored it, less what identifies this run (see module doc).

    A pod's status is kept only where the control plane writes it (conditions other than
    the kubelet's, nominatedNodeName, extendedResourceClaimStatus, qosClass, phase at
    creation): the rest is the kubelet's, and the reference has none.
    """
    found: dict[str, Any] = _drop_times(copy.deepcopy(dict(obj)))
    meta = found.get("metadata") or {}
    for key in _VOLATILE_METADATA:
        meta.pop(key, None)
    annotations = meta.get("annotations") or {}
    for key in (LAST_APPLIED, KWOK_ANNOTATION):
        annotations.pop(key, None)
    if "annotations" in meta and not annotations:
        del meta["annotations"]
    for ref in meta.get("ownerReferences") or []:
        ref.pop("uid", None)
    if found.get("kind") == "Pod" and isinstance(found.get("status"), dict):
        status = found["status"]
        for key in (
            "hostIP",
            "hostIPs",
            "podIP",
            "podIPs",
            "containerStatuses",
            "initContainerStatuses",
            "ephemeralContainerStatuses",
            "observedGeneration",
        ):
            status.pop(key, None)
    return found


def normalize_refusal(code: int, status: Mapping[str, Any] | None) -> dict[str, Any]:
    """A refused write as a user sees it: code, reason, message and each cause's field,
    reason and message (sorted, as servers order causes differently only by accident)."""
    status = status or {}
    details = status.get("details") or {}
    causes = sorted(
        (c.get("field", ""), c.get("reason", ""), c.get("message", ""))
        for c in details.get("causes") or []
    )
    found: dict[str, Any] = {
        "refused.code": code,
        "refused.reason": status.get("reason", ""),
        "refused.message": status.get("message", ""),
    }
    for i, (field, reason, message) in enumerate(causes):
        found[f"refused.causes[{i}].field"] = field
        found[f"refused.causes[{i}].reason"] = reason
        found[f"refused.causes[{i}].message"] = message
    return found


def name_placeholders(objects: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """Generated name → stable placeholder, for every object made from a `generateName`:
    `demo-6fc5f567b9-pfmb8` → `demo-<hash>-*`, its special claim
    `demo-6fc5f567b9-pfmb8-extended-resources-x7k2p` → `demo-<hash>-*-extended-resources-*`.

    A Deployment's pod-template-hash becomes `<hash>` too: upstream hashes a Go struct's
    printed form, which names no behaviour and which no emulator reproduces."""
    found: dict[str, str] = {}
    for obj in objects:
        meta = obj.get("metadata") or {}
        template_hash = (meta.get("labels") or {}).get("pod-template-hash", "")
        if template_hash:
            found[template_hash] = "<hash>"
        name, generate = meta.get("name", ""), meta.get("generateName", "")
        if generate and name.startswith(generate) and name != generate:
            found[name] = generate + "*"
    # A placeholder may hold other generated names (a claim's holds its pod's): replace
    # those inside it too, shortest last, until nothing changes.
    for _ in range(3):
        changed = False
        for name, placeholder in list(found.items()):
            others = {n: p for n, p in found.items() if n != name and n in placeholder}
            better = replace_names(placeholder, others) if others else placeholder
            if better != placeholder:
                found[name], changed = better, True
        if not changed:
            break
    return found


def replace_names(value: Any, placeholders: Mapping[str, str]) -> Any:
    """`value` with every generated name replaced, in keys, values and inside messages."""
    if not placeholders:
        return value
    pattern = re.compile("|".join(re.escape(n) for n in sorted(placeholders, key=len)[::-1]))

    def sub(text: str) -> str:
        return pattern.sub(lambda m: placeholders[m.group(0)], text)

    def walk(v: Any) -> Any:
        if isinstance(v, str):
            return sub(v)
        if isinstance(v, dict):
            return {sub(k): walk(x) for k, x in v.items()}
        if isinstance(v, list):
            return [walk(x) for x in v]
        return v

    return walk(value)


def is_special_claim(claim: Mapping[str, Any]) -> bool:
    """A claim the scheduler made for a pod's extended resources (spec §1.3)."""
    annotations = (claim.get("metadata") or {}).get("annotations") or {}
    return annotations.get(EXTENDED_RESOURCE_CLAIM_ANNOTATION) == "true"


def owner_group(pod: Mapping[str, Any]) -> str:
    """How pods are told apart across clusters: a standalone pod by its name, a
    ReplicaSet's pods together by their Deployment (`Deployment/demo`) or ReplicaSet."""
    meta = pod.get("metadata") or {}
    for ref in meta.get("ownerReferences") or []:
        if ref.get("kind") == "ReplicaSet" and ref.get("controller"):
            rs = ref.get("name", "")
            template_hash = (meta.get("labels") or {}).get("pod-template-hash", "")
            if template_hash and rs.endswith("-" + template_hash):
                return f"Deployment/{rs[: -len(template_hash) - 1]}"
            return f"ReplicaSet/{rs}"
    return f"Pod/{meta.get('name', '')}"


def normalize_pod_outcome(pod: Mapping[str, Any], node_pools: Mapping[str, str]) -> dict[str, Any]:
    """Where a pod went and why: bound (and to which pool of nodes: among identical nodes
    the choice is a tie), or its PodScheduled condition; its special claim's mapping."""
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    node = spec.get("nodeName") or ""
    found: dict[str, Any] = {"bound": bool(node)}
    if node:
        found["pool"] = node_pools.get(node, node)
    for condition in status.get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("status") != "True":
            found["PodScheduled.status"] = condition.get("status", "")
            found["PodScheduled.reason"] = condition.get("reason", "")
            found["PodScheduled.message"] = condition.get("message", "")
    if not node and status.get("nominatedNodeName"):
        found["nominated"] = node_pools.get(status["nominatedNodeName"], "?")
    claim_status = status.get("extendedResourceClaimStatus")
    if claim_status:
        found["extendedResourceClaimStatus.resourceClaimName"] = claim_status.get(
            "resourceClaimName", ""
        )
        mappings = sorted(
            (m.get("containerName", ""), m.get("resourceName", ""), m.get("requestName", ""))
            for m in claim_status.get("requestMappings") or []
        )
        for i, (container, resource, request) in enumerate(mappings):
            found[f"extendedResourceClaimStatus.requestMappings[{i}]"] = (
                f"{container} {resource} → {request}"
            )
    return found


def normalize_claim(claim: Mapping[str, Any], node_pools: Mapping[str, str]) -> dict[str, Any]:
    """A ResourceClaim as stored, with its allocation reduced to (request, driver, pool)
    per device and its node selector to the pool, `reservedFor` to kinds and names."""
    found = normalize_stored(claim)
    # Items of a list carry no apiVersion and kind on upstream's wire (the list does).
    found.pop("apiVersion", None)
    found.pop("kind", None)
    status = found.get("status") or {}
    allocation = status.get("allocation")
    if allocation:
        results = (allocation.get("devices") or {}).get("results") or []
        allocation["devices"]["results"] = sorted(
            f"{r.get('request', '')} {r.get('driver', '')}/{_pool(r.get('pool', ''), node_pools)}"
            for r in results
        )
        selector = allocation.get("nodeSelector")
        if selector:
            allocation["nodeSelector"] = _pool_selector(selector, node_pools)
    if status.get("reservedFor"):
        status["reservedFor"] = sorted(
            f"{r.get('resource', '')}/{r.get('name', '')}" for r in status["reservedFor"]
        )
    return found


def _pool(pool: str, node_pools: Mapping[str, str]) -> str:
    """A node-local pool (named after its node) → the node's drasim pool."""
    return node_pools.get(pool, pool)


def _pool_selector(selector: Mapping[str, Any], node_pools: Mapping[str, str]) -> Any:
    """A claim's node selector naming one node (`metadata.name In [n]`) → that node's pool."""
    terms = selector.get("nodeSelectorTerms") or []
    names = [
        value
        for term in terms
        for field in term.get("matchFields") or []
        if field.get("key") == "metadata.name"
        for value in field.get("values") or []
    ]
    if len(terms) == 1 and len(names) == 1 and not terms[0].get("matchExpressions"):
        return {"node in pool": node_pools.get(names[0], names[0])}
    return selector


def allocation_counts(
    claims: Iterable[Mapping[str, Any]], node_pools: Mapping[str, str]
) -> dict[str, Any]:
    """Devices allocated per (driver, pool of nodes) over all claims, and how many devices
    two claims hold at once (always 0 unless one is shared: a double allocation is a bug)."""
    per_pool: Counter[str] = Counter()
    holders: Counter[tuple[str, str, str]] = Counter()
    for claim in claims:
        allocation = (claim.get("status") or {}).get("allocation") or {}
        for r in (allocation.get("devices") or {}).get("results") or []:
            pool = r.get("pool", "")
            per_pool[f"{r.get('driver', '')}/{node_pools.get(pool, pool)}"] += 1
            if not r.get("shareID"):
                holders[(r.get("driver", ""), pool, r.get("device", ""))] += 1
    found: dict[str, Any] = {f"devices {k}": v for k, v in sorted(per_pool.items())}
    found["devices held twice"] = sum(1 for n in holders.values() if n > 1)
    return found


def quota_fields(quota: Mapping[str, Any]) -> dict[str, Any]:
    """A ResourceQuota's `status.hard` and `status.used`."""
    status = quota.get("status") or {}
    return flatten({"hard": status.get("hard") or {}, "used": status.get("used") or {}})


def event_reasons(events: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Which reasons the control plane recorded on which kinds (`Pod FailedScheduling`),
    of which type and by whom (`Warning from default-scheduler`); counts are left out, as
    retries and aggregation make them timing. The kubelet's events are left out: the
    reference's nodes have none."""
    found: dict[str, Any] = {}
    for event in events:
        component = event.get("reportingComponent") or (event.get("source") or {}).get(
            "component", ""
        )
        if component == "kubelet" or component.startswith("kwok"):
            continue
        kind = (event.get("involvedObject") or event.get("regarding") or {}).get("kind", "")
        found[f"{kind} {event.get('reason', '')}"] = f"{event.get('type', '')} from {component}"
    return dict(sorted(found.items()))
