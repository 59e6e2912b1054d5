"""Validation of Pods and their bindings (the pod part of `pkg/apis/core/validation`): the
spec on create, what an update may change, and the status a status write sets, the
KEP-5004 `extendedResourceClaimStatus` among it.
"""

from __future__ import annotations

import msgspec

from drasim.common import codec, container_runs
from drasim.common.api import core_v1, resources
from drasim.common.api.meta_v1 import KubeObject
from drasim.common.api.validation import core, memo, meta, names
from drasim.common.errors import (
    FieldError,
    field_duplicate,
    field_forbidden,
    field_invalid,
    field_not_found,
    field_not_supported,
    field_required,
)

__all__ = [
    "STATUS_VALIDATORS",
    "VALIDATORS",
    "validate_binding_target",
    "validate_pod_spec",
    "validate_pod_status",
    "validate_run_annotations",
]

_POD_RESTART_POLICIES = ["Always", "OnFailure", "Never"]


def _validate_pod(pod: core_v1.Pod, old: KubeObject | None) -> list[FieldError]:
    errs = validate_run_annotations(pod.metadata.annotations, "metadata.annotations")
    errs += validate_pod_spec(pod.spec, "spec")
    if isinstance(old, core_v1.Pod):
        errs += _validate_pod_spec_update(pod.spec, old.spec)
    elif pod.spec.node_name and pod.spec.scheduling_gates:
        # A pod made bound cannot also wait for its gates (ValidatePodCreate).
        errs.append(
            field_forbidden(
                "spec.nodeName", "cannot be set until all schedulingGates have been cleared"
            )
        )
    return errs


def validate_run_annotations(annotations: dict[str, str], path: str) -> list[FieldError]:
    """drasim's own: `drasim.io/run-for` must be a Go duration and `drasim.io/exit-code` an
    exit code (`drasim.common.container_runs`), or the kubelet could not honour them."""
    return [
        field_invalid(f"{path}[{key}]", value, problem)
        for key, value, problem in container_runs.validate_annotations(annotations)
    ]


@memo.by_content
def validate_pod_spec(spec: core_v1.PodSpec, path: str) -> list[FieldError]:
    errs = []
    claim_names = {claim.name for claim in spec.resource_claims}
    container_names: set[str] = set()
    if not spec.containers:
        errs.append(field_required(f"{path}.containers"))
    for i, container in enumerate(spec.containers):
        c_path = f"{path}.containers[{i}]"
        errs += _validate_container(container, c_path, container_names, claim_names)
        if container.restart_policy is not None:
            errs.append(
                field_forbidden(f"{c_path}.restartPolicy", "may not be set for non-init containers")
            )
    for i, container in enumerate(spec.init_containers):
        c_path = f"{path}.initContainers[{i}]"
        errs += _validate_container(container, c_path, container_names, claim_names)
        if container.restart_policy is not None and container.restart_policy != "Always":
            errs.append(
                field_not_supported(f"{c_path}.restartPolicy", container.restart_policy, ["Always"])
            )
    for i, container in enumerate(spec.ephemeral_containers):
        c_path = f"{path}.ephemeralContainers[{i}]"
        errs += _validate_container(container, c_path, container_names, claim_names)
        # Ephemeral containers get no resources, so never devices either (upstream
        # `validateEphemeralContainers`).
        if container.resources != core_v1.ResourceRequirements():
            errs.append(
                field_forbidden(f"{c_path}.resources", "cannot be set for an Ephemeral Container")
            )
    errs += core.validate_preemption_policy(spec.preemption_policy, f"{path}.preemptionPolicy")
    if spec.restart_policy and spec.restart_policy not in _POD_RESTART_POLICIES:
        errs.append(
            field_not_supported(f"{path}.restartPolicy", spec.restart_policy, _POD_RESTART_POLICIES)
        )
    if spec.node_name:
        errs += meta.each(
            f"{path}.nodeName", spec.node_name, names.is_dns1123_subdomain(spec.node_name)
        )
    if spec.scheduler_name:
        errs += meta.each(
            f"{path}.schedulerName",
            spec.scheduler_name,
            names.is_dns1123_subdomain(spec.scheduler_name),
        )
    if spec.termination_grace_period_seconds is not None:
        errs += meta.nonnegative(
            f"{path}.terminationGracePeriodSeconds", spec.termination_grace_period_seconds
        )
    errs += meta.validate_labels(spec.node_selector, f"{path}.nodeSelector")
    errs += core.validate_resource_requirements(
        core_v1.ResourceRequirements(limits=spec.overhead), f"{path}.overhead"
    )
    for i, toleration in enumerate(spec.tolerations):
        errs += core.validate_toleration(toleration, f"{path}.tolerations[{i}]", core.TAINT_EFFECTS)
    errs += _validate_pod_resource_claims(spec.resource_claims, f"{path}.resourceClaims")
    errs += _validate_scheduling_gates(spec.scheduling_gates, f"{path}.schedulingGates")
    affinity = spec.affinity
    if affinity and affinity.node_affinity:
        required = affinity.node_affinity.required_during_scheduling_ignored_during_execution
        if required is not None:
            errs += core.validate_node_selector(
                required,
                f"{path}.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution",
            )
        for i, term in enumerate(
            affinity.node_affinity.preferred_during_scheduling_ignored_during_execution
        ):
            term_path = (
                f"{path}.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[{i}]"
            )
            if not 1 <= term.weight <= 100:
                errs.append(
                    field_invalid(f"{term_path}.weight", term.weight, "must be in the range 1-100")
                )
            errs += core.validate_node_selector_term(term.preference, f"{term_path}.preference")
    return errs


def _validate_container(
    container: core_v1.Container, path: str, container_names: set[str], claim_names: set[str]
) -> list[FieldError]:
    """Checks one container; `container_names` collects the names of init, regular and
    ephemeral containers alike."""
    errs = meta.validate_unique_name(container.name, f"{path}.name", container_names)
    if not container.image:
        errs.append(field_required(f"{path}.image"))
    errs += core.validate_resource_requirements(container.resources, f"{path}.resources")
    seen_claims = set()
    for i, claim in enumerate(container.resources.claims):
        claim_path = f"{path}.resources.claims[{i}]"
        if not claim.name:
            errs.append(field_required(claim_path))
            continue
        key = (claim.name, claim.request)
        if key in seen_claims:
            errs.append(field_duplicate(claim_path, claim.name))
        seen_claims.add(key)
        if claim.name not in claim_names:
            errs.append(
                field_not_found(
                    claim_path, claim.name, "must be one of the names in pod.spec.resourceClaims"
                )
            )
    return errs


def _validate_pod_resource_claims(
    claims: list[core_v1.PodResourceClaim], path: str
) -> list[FieldError]:
    errs = []
    seen = set()
    for i, claim in enumerate(claims):
        claim_path = f"{path}[{i}]"
        errs += meta.validate_unique_name(claim.name, f"{claim_path}.name", seen)
        sources = meta.set_fields(
            resourceClaimName=claim.resource_claim_name,
            resourceClaimTemplateName=claim.resource_claim_template_name,
        )
        if not sources:
            errs.append(
                field_invalid(
                    claim_path,
                    codec.to_builtins(claim),
                    "must specify one of: `resourceClaimName`, `resourceClaimTemplateName`",
                )
            )
        elif len(sources) > 1:
            errs.append(
                field_invalid(
                    claim_path,
                    codec.to_builtins(claim),
                    "at most one of `resourceClaimName` or `resourceClaimTemplateName` "
                    "may be specified",
                )
            )
        for field_name, value in sources:
            errs += meta.each(
                f"{claim_path}.{field_name}", value, names.is_dns1123_subdomain(value)
            )
    return errs


def _validate_scheduling_gates(
    gates: list[core_v1.PodSchedulingGate], path: str
) -> list[FieldError]:
    """Each gate a qualified name, none twice (upstream `validateSchedulingGates`)."""
    errs = []
    seen: set[str] = set()
    for i, gate in enumerate(gates):
        errs += meta.each(f"{path}[{i}]", gate.name, names.is_qualified_name(gate.name))
        if gate.name in seen:
            errs.append(field_duplicate(f"{path}[{i}]", gate.name))
        seen.add(gate.name)
    return errs


def _validate_pod_spec_update(new: core_v1.PodSpec, old: core_v1.PodSpec) -> list[FieldError]:
    """A pod's spec is fixed once created, except images, the deadline, added tolerations
    and removed scheduling gates; while gated, node selectors may be added.

    The node is set through `pods/binding` and ephemeral containers through their own
    subresource, neither of which is an update of the pod.
    """
    if not all(t in new.tolerations for t in old.tolerations):
        return [field_forbidden("spec.tolerations", "existing toleration can not be modified")]
    errs = _validate_only_deleted_scheduling_gates(new.scheduling_gates, old.scheduling_gates)
    node_selector = None
    if old.scheduling_gates and new.node_selector != old.node_selector:
        # A gated pod may be narrowed to more nodes' labels before it is scheduled.
        if any(new.node_selector.get(k) != v for k, v in old.node_selector.items()):
            errs.append(
                field_invalid(
                    "spec.nodeSelector",
                    new.node_selector,
                    "only additions to spec.nodeSelector are allowed (no mutations or deletions)",
                )
            )
        node_selector = new.node_selector
    if not _same_but_mutable_fields(new, old, node_selector=node_selector):
        errs.append(
            field_forbidden(
                "spec",
                "pod updates may not change fields other than `spec.containers[*].image`,"
                "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,"
                "`spec.tolerations` (only additions to existing tolerations),"
                "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was "
                "previously negative)",
            )
        )
    return errs


def _validate_only_deleted_scheduling_gates(
    new: list[core_v1.PodSchedulingGate], old: list[core_v1.PodSchedulingGate]
) -> list[FieldError]:
    """Gates may be removed, never added (upstream `validateOnlyDeletedSchedulingGates`)."""
    old_names = {gate.name for gate in old}
    return [
        field_forbidden(
            f"spec.schedulingGates[{i}].name",
            f"only deletion is allowed, but found new scheduling gate '{gate.name}'",
        )
        for i, gate in enumerate(new)
        if gate.name not in old_names
    ]


def _same_but_mutable_fields(
    new: core_v1.PodSpec, old: core_v1.PodSpec, *, node_selector: dict[str, str] | None = None
) -> bool:
    """`new == old` once `new` takes `old`'s images, deadline, tolerations and scheduling
    gates; `node_selector` given, old's node selector is that one (a gated pod's additions).

    Upstream copies the new spec, overwrites those fields with the old ones and compares.
    Only the copy's top-level fields and its containers change, so shallow copies of those
    suffice (no deep copy of the whole spec). Images are paired in `all_containers()` order,
    init containers first; when the container lists differ in length the specs differ anyway.
    """
    if new == old:  # the usual update (labels, status): nothing of the spec changed
        return True
    if len(new.init_containers) != len(old.init_containers) or len(new.containers) != len(
        old.containers
    ):
        return False
    replace = msgspec.structs.replace
    comparable = replace(
        new,
        init_containers=[
            replace(mine, image=theirs.image)
            for mine, theirs in zip(new.init_containers, old.init_containers, strict=True)
        ],
        containers=[
            replace(mine, image=theirs.image)
            for mine, theirs in zip(new.containers, old.containers, strict=True)
        ],
        active_deadline_seconds=old.active_deadline_seconds,
        tolerations=old.tolerations,
        scheduling_gates=old.scheduling_gates,
    )
    if node_selector is not None:
        old = replace(old, node_selector=node_selector)
    return comparable == old


def validate_pod_status(pod: core_v1.Pod) -> list[FieldError]:
    """Errors of `status.extendedResourceClaimStatus` (upstream
    `validatePodExtendedResourceClaimStatus`, `pkg/apis/core/validation/validation.go`).

    The mapping ties a container's extended resource to a request of the special claim; the
    kubelet trusts it to find the devices, so it must name real containers and requests.
    """
    status = pod.status.extended_resource_claim_status
    if status is None:
        return []
    path = "status.extendedResourceClaimStatus"
    mappings_path = f"{path}.requestMappings"
    errs = []
    if not status.request_mappings:
        errs.append(field_required(mappings_path, "at least one request mapping is required"))
    # Ephemeral containers are deliberately absent: they never get devices.
    containers = {c.name: c for c in pod.spec.all_containers()}
    seen = set()
    for i, mapping in enumerate(status.request_mappings):
        item = f"{mappings_path}[{i}]"
        container = containers.get(mapping.container_name)
        # Upstream's words, and its field paths: a bad requestName is reported at
        # `<path>.requestName`, without the mapping's index.
        if container is None:
            errs.append(
                field_invalid(
                    f"{item}.containerName",
                    mapping.container_name,
                    "must match the name of an entry in spec.initContainers.name or "
                    "spec.containers.name",
                )
            )
        elif mapping.resource_name not in resources.container_requests(container):
            errs.append(
                field_invalid(
                    f"{item}.resourceName",
                    mapping.resource_name,
                    "must match the extended resource name of an entry in "
                    "spec.initContainers.resources.requests or spec.containers.resources.requests",
                )
            )
        errs += meta.each(
            f"{path}.requestName",
            mapping.request_name,
            names.is_dns1123_label(mapping.request_name),
        )
        key = (mapping.container_name, mapping.resource_name, mapping.request_name)
        if key in seen:
            errs += [
                field_duplicate(f"{item}.containerName", mapping.container_name),
                field_duplicate(f"{item}.resourceName", mapping.resource_name),
                field_duplicate(f"{item}.requestName", mapping.request_name),
            ]
        seen.add(key)
    errs += meta.validate_required_subdomain(
        status.resource_claim_name, f"{path}.resourceClaimName"
    )
    return errs


def _validate_pod_phase(phase: str) -> list[FieldError]:
    """The phase a status write sets must be one of `PodPhase`'s values (empty: not yet set).
    Upstream's ValidatePodStatusUpdate leaves this to its writers; drasim's kubelets,
    controllers and scheduler all branch on the phase, so a status write may not invent one."""
    if phase and phase not in core_v1.POD_PHASES:
        return [field_not_supported("status.phase", phase, core_v1.POD_PHASES)]
    return []


def _validate_binding(binding: core_v1.Binding, old: KubeObject | None) -> list[FieldError]:
    errs = []
    if binding.target.kind not in ("", "Node"):
        errs.append(field_not_supported("target.kind", binding.target.kind, ["Node", "<empty>"]))
    return errs + validate_binding_target(binding.target.name)


def validate_binding_target(node_name: str) -> list[FieldError]:
    """The node a `pods/binding` names. Upstream takes any name; drasim checks it as the
    pod's `spec.nodeName` is checked on every later write of the pod (and a NUL could not be
    stored)."""
    if not node_name:
        return [field_required("target.name")]
    return meta.each("target.name", node_name, names.is_dns1123_subdomain(node_name))


def _validate_pod_status_update(pod: core_v1.Pod, old: KubeObject | None) -> list[FieldError]:
    return _validate_pod_phase(pod.status.phase) + validate_pod_status(pod)


VALIDATORS: dict[type[KubeObject], meta.Validator] = {
    core_v1.Pod: _validate_pod,
    core_v1.Binding: _validate_binding,
}
STATUS_VALIDATORS: dict[type[KubeObject], meta.Validator] = {
    core_v1.Pod: _validate_pod_status_update,
}
