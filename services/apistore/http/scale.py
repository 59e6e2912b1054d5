"""The `scale` subresource of deployments, replicasets and statefulsets: an `autoscaling/v1`
Scale view of the parent's `spec.replicas`, and the merge patch that writes a new count back."""

from __future__ import annotations

from typing import Any

from drasim.common import errors, tables


def to_scale(obj: Any) -> dict[str, Any]:
    """The Scale of a Deployment, ReplicaSet or StatefulSet (`status.selector` as a selector
    string)."""
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
        "status": {
            "replicas": obj.status.replicas,
            "selector": tables.format_label_selector(obj.spec.selector),
        },
    }


def replicas_patch(name: str, scale: Any) -> dict[str, Any]:
    """The merge patch of the parent that a new Scale asks for; a `resourceVersion` in the
    Scale becomes the parent's precondition."""
    metadata = scale.get("metadata") if isinstance(scale, dict) else None
    if metadata is None:
        metadata = {}
    elif not isinstance(metadata, dict):
        raise _cannot_decode(metadata, "Scale.metadata", "v1.ObjectMeta")
    version = metadata.get("resourceVersion")
    if version is not None and not isinstance(version, str):
        raise _cannot_decode(version, "ObjectMeta.metadata.resourceVersion", "string")
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
    if version:
        patch["metadata"] = {"resourceVersion": version}
    return patch


def _cannot_decode(value: Any, field: str, go_type: str) -> errors.BadRequest:
    """What kube-apiserver answers a Scale its JSON decoder cannot read (400, not 500)."""
    return errors.BadRequest(
        'Scale in version "v1" cannot be handled as a Scale: json: cannot unmarshal '
        f"{_json_type(value)} into Go struct field {field} of type {go_type}"
    )


def _json_type(value: Any) -> str:
    """The JSON type of a value as Go's decoder names it in its errors."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"
