"""The `scale` subresource of deployments and replicasets: an `autoscaling/v1` Scale view
of the parent's `spec.replicas`, and the merge patch that writes a new count back."""

from __future__ import annotations

from typing import Any

from drasim.common import errors


def to_scale(obj: Any) -> dict[str, Any]:
    """The Scale of a Deployment or ReplicaSet (`status.selector` as a selector string)."""
    meta = obj.metadata
    return {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            "name": meta.name,
            "namespace": meta.namespace,
            "uid": meta.uid,
            "resourceVersion": meta.resource_version,
            "creationTimestamp": meta.creation_timestamp,
        },
        "spec": {"replicas": 1 if obj.spec.replicas is None else obj.spec.replicas},
        "status": {"replicas": obj.status.replicas, "selector": _selector(obj.spec.selector)},
    }


def replicas_patch(name: str, scale: Any) -> dict[str, Any]:
    """The merge patch of the parent that a new Scale asks for; a `resourceVersion` in the
    Scale becomes the parent's precondition."""
    spec = scale.get("spec") if isinstance(scale, dict) else None
    replicas = spec.get("replicas") if isinstance(spec, dict) else None
    if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
        raise errors.invalid(
            "Scale",
            name,
            [errors.field_invalid("spec.replicas", replicas, "must be greater than or equal to 0")],
            group="autoscaling",
        )
    patch: dict[str, Any] = {"spec": {"replicas": replicas}}
    version = (scale.get("metadata") or {}).get("resourceVersion")
    if version:
        patch["metadata"] = {"resourceVersion": version}
    return patch


def _selector(selector: Any) -> str:
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
