"""Validation of resource.k8s.io/v1 (`pkg/apis/resource/validation`): DeviceClasses,
ResourceSlices, ResourceClaims and ResourceClaimTemplates.

Values are checked as stored: an unset `allocationMode` as ExactCount and an unset `count`
as 1. The limits these rules enforce are `resource_v1`'s, next to the types they bound.
"""

from __future__ import annotations

import functools
import re

from drasim.common import codec, dra_cel
from drasim.common.api import core_v1, resource_v1, resources
from drasim.common.api.meta_v1 import KubeObject
from drasim.common.api.validation import (
    core,
    device_status,
    device_taints,
    meta,
    names,
    resource_capacity,
)
from drasim.common.errors import (
    FieldError,
    field_duplicate,
    field_forbidden,
    field_invalid,
    field_not_supported,
    field_required,
    field_too_long,
    field_too_many,
)

__all__ = ["STATUS_VALIDATORS", "VALIDATORS"]

_SEMVER_RE = re.compile(
    r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?"
)


def _validate_driver_name(driver: str, path: str) -> list[FieldError]:
    if not driver:
        return [field_required(path)]
    errs = []
    if len(driver) > resource_v1.DRIVER_NAME_MAX_LENGTH:
        errs.append(field_too_long(path, resource_v1.DRIVER_NAME_MAX_LENGTH))
    return errs + meta.each(path, driver, names.is_dns1123_subdomain(driver.lower()))


def _validate_pool_name(pool: str, path: str) -> list[FieldError]:
    if not pool:
        return [field_required(path)]
    errs = []
    if len(pool) > resource_v1.POOL_NAME_MAX_LENGTH:
        errs.append(field_too_long(path, resource_v1.POOL_NAME_MAX_LENGTH))
    for part in pool.split("/"):
        errs += meta.each(path, pool, names.is_dns1123_subdomain(part))
    return errs


def _validate_attribute_name(name: str, path: str) -> list[FieldError]:
    """`[domain/]identifier`: domain a DNS subdomain of at most
    `resource_v1.DEVICE_MAX_DOMAIN_LENGTH`, identifier a C name
    (`resource_v1.DEVICE_MAX_ID_LENGTH`)."""
    domain, _, identifier = name.rpartition("/")
    errs = []
    if "/" in name:
        if len(domain) > resource_v1.DEVICE_MAX_DOMAIN_LENGTH:
            errs.append(field_too_long(path, resource_v1.DEVICE_MAX_DOMAIN_LENGTH))
        errs += meta.each(path, domain, names.is_dns1123_subdomain(domain))
    if not identifier:
        errs.append(field_required(path, "name part must be non-empty"))
        return errs
    if len(identifier) > resource_v1.DEVICE_MAX_ID_LENGTH:
        errs.append(field_too_long(path, resource_v1.DEVICE_MAX_ID_LENGTH))
    return errs + meta.each(path, identifier, names.is_c_identifier(identifier))


def _validate_selectors(
    selectors: list[resource_v1.DeviceSelector], path: str, *, stored: bool
) -> list[FieldError]:
    """A class's or request's selectors. `stored`: the expressions are the ones already
    stored, so they compiled when written and are not compiled again (upstream's
    `deviceValidationOptions.stored`: an update then never fails on an expression that
    an older release accepted)."""
    errs = []
    if len(selectors) > resource_v1.SELECTORS_MAX_SIZE:
        errs.append(field_too_many(path, len(selectors), resource_v1.SELECTORS_MAX_SIZE))
    for i, selector in enumerate(selectors):
        if selector.cel is None:
            errs.append(field_required(f"{path}[{i}].cel"))
        elif not selector.cel.expression:
            errs.append(field_required(f"{path}[{i}].cel.expression"))
        elif not stored:
            errs += _validate_cel_expression(selector.cel.expression, f"{path}[{i}].cel.expression")
    return errs


@functools.lru_cache(maxsize=1024)
def _cel_expression_errors(expression: str, path: str) -> tuple[FieldError, ...]:
    if len(expression.encode()) > dra_cel.SELECTOR_EXPRESSION_MAX_LENGTH:
        # Too long expressions are not compiled at all, as upstream.
        return (field_too_long(path, dra_cel.SELECTOR_EXPRESSION_MAX_LENGTH),)
    try:
        dra_cel.compile_expression(expression, cost_limit=dra_cel.SELECTOR_EXPRESSION_MAX_COST)
    except dra_cel.CostLimitExceeded as err:
        return (field_forbidden(path, str(err)),)
    except dra_cel.CompileError as err:
        return (field_invalid(path, expression, str(err)),)
    return ()


def _validate_cel_expression(expression: str, path: str) -> list[FieldError]:
    """Upstream `validateCELSelector`: the expression must compile as the scheduler will
    compile it (a class that does not leaves every pod of its extended resource Pending),
    and its estimated worst-case cost must not exceed `CELSelectorExpressionMaxCost`."""
    return list(_cel_expression_errors(expression, path))


def _validate_opaque(
    opaque: resource_v1.OpaqueDeviceConfiguration | None, path: str
) -> list[FieldError]:
    if opaque is None:
        return [field_required(f"{path}.opaque")]
    errs = _validate_driver_name(opaque.driver, f"{path}.opaque.driver")
    if opaque.parameters is None:
        errs.append(field_required(f"{path}.opaque.parameters"))
    elif not isinstance(opaque.parameters, dict):
        errs.append(
            field_invalid(
                f"{path}.opaque.parameters", "<value omitted>", "must be a valid JSON object"
            )
        )
    return errs


def _validate_device_class(dc: resource_v1.DeviceClass, old: KubeObject | None) -> list[FieldError]:
    # Selectors exactly as stored are not compiled again; any change (even reordering) is.
    stored = isinstance(old, resource_v1.DeviceClass) and dc.spec.selectors == old.spec.selectors
    errs = _validate_selectors(dc.spec.selectors, "spec.selectors", stored=stored)
    if len(dc.spec.config) > resource_v1.DEVICE_CONFIG_MAX_SIZE:
        errs.append(
            field_too_many("spec.config", len(dc.spec.config), resource_v1.DEVICE_CONFIG_MAX_SIZE)
        )
    for i, config in enumerate(dc.spec.config):
        errs += _validate_opaque(config.opaque, f"spec.config[{i}]")
    name = dc.spec.extended_resource_name
    if name is not None:
        errs += _validate_extended_resource_name(name, "spec.extendedResourceName")
    return errs


def _validate_extended_resource_name(name: str, path: str) -> list[FieldError]:
    """KEP-5004 (upstream `validateDeviceClassSpec`): never a `kubernetes.io/` name, so
    implicit names cannot clash. Each rule broken is its own error, as upstream's
    declarative validation (apimachinery `validate.ExtendedResourceName`, which answers for
    the handwritten rule's one generic message) words them."""
    errs = []
    if "/" not in name:
        message = "a name must be a domain-prefixed path, such as 'example.com/my-prop'"
        errs.append(field_invalid(path, name, message))
    elif resources.RESOURCE_DEFAULT_NAMESPACE_PREFIX in name:
        prefix = resources.RESOURCE_DEFAULT_NAMESPACE_PREFIX
        errs.append(field_invalid(path, name, f'must not have "{prefix}" domain'))
    if name.startswith(resources.RESOURCE_REQUESTS_PREFIX):
        prefix = resources.RESOURCE_REQUESTS_PREFIX
        errs.append(field_invalid(path, name, f'must not have "{prefix}" prefix'))
    # Its quota name `requests.<name>` must be a label key.
    for message in names.is_qualified_name(resources.RESOURCE_REQUESTS_PREFIX + name):
        errs.append(field_invalid(path, name, message))
    return errs


def _validate_device_taints(taints: list[resource_v1.DeviceTaint], path: str) -> list[FieldError]:
    errs = []
    if len(taints) > resource_v1.DEVICE_TAINTS_MAX_LENGTH:
        errs.append(field_too_many(path, len(taints), resource_v1.DEVICE_TAINTS_MAX_LENGTH))
    for i, taint in enumerate(taints):
        errs += device_taints.validate_device_taint(taint, None, f"{path}[{i}]")
    return errs


def _validate_slice_node_selector(selector: core_v1.NodeSelector, path: str) -> list[FieldError]:
    errs = core.validate_node_selector(selector, path)
    if len(selector.node_selector_terms) > 1:
        errs.append(
            field_invalid(
                f"{path}.nodeSelectorTerms",
                codec.to_builtins(selector.node_selector_terms),
                "must have exactly one node selector term",
            )
        )
    return errs


def _validate_device(device: resource_v1.Device, path: str, per_device: bool) -> list[FieldError]:
    errs = []
    if not device.name:
        errs.append(field_required(f"{path}.name"))
    else:
        errs += meta.each(f"{path}.name", device.name, names.is_dns1123_label(device.name))
    for name, attribute in device.attributes.items():
        a_path = f"{path}.attributes[{name}]"
        errs += _validate_attribute_name(name, a_path)
        values = [
            v
            for v in (
                attribute.int_value,
                attribute.bool_value,
                attribute.string_value,
                attribute.version_value,
            )
            if v is not None
        ]
        if len(values) != 1:
            errs.append(
                field_invalid(
                    a_path, codec.to_builtins(attribute), "exactly one value must be specified"
                )
            )
        if (
            attribute.string_value is not None
            and len(attribute.string_value) > resource_v1.DEVICE_ATTRIBUTE_MAX_VALUE_LENGTH
        ):
            errs.append(
                field_too_long(f"{a_path}.string", resource_v1.DEVICE_ATTRIBUTE_MAX_VALUE_LENGTH)
            )
        if attribute.version_value is not None:
            if len(attribute.version_value) > resource_v1.DEVICE_ATTRIBUTE_MAX_VALUE_LENGTH:
                errs.append(
                    field_too_long(
                        f"{a_path}.version", resource_v1.DEVICE_ATTRIBUTE_MAX_VALUE_LENGTH
                    )
                )
            if not _SEMVER_RE.fullmatch(attribute.version_value):
                errs.append(
                    field_invalid(
                        f"{a_path}.version",
                        attribute.version_value,
                        "must be a string compatible with semver.org spec 2.0.0",
                    )
                )
    for name, capacity in device.capacity.items():
        c_path = f"{path}.capacity[{name}]"
        errs += _validate_attribute_name(name, c_path)
        if capacity.value < 0:
            errs.append(
                field_invalid(
                    f"{c_path}.value", str(capacity.value), "must be greater than or equal to 0"
                )
            )
    combined = len(device.attributes) + len(device.capacity)
    if combined > resource_v1.ATTRIBUTES_AND_CAPACITIES_MAX_PER_DEVICE:
        errs.append(
            field_invalid(
                path,
                combined,
                "the total number of attributes and capacities must not exceed "
                f"{resource_v1.ATTRIBUTES_AND_CAPACITIES_MAX_PER_DEVICE}",
            )
        )
    errs += _validate_device_taints(device.taints, f"{path}.taints")
    errs += device_status.validate_binding_parameters(
        device.binding_conditions, device.binding_failure_conditions, path
    )
    errs += resource_capacity.validate_device_capacity(device, path)
    placements = [
        p
        for p in (device.node_name, device.node_selector, device.all_nodes or None)
        if p is not None
    ]
    if per_device:
        if len(placements) != 1:
            errs.append(
                field_invalid(
                    path,
                    device.name,
                    "exactly one of `nodeName`, `nodeSelector`, or `allNodes` is required when "
                    "`perDeviceNodeSelection` is set to true in the ResourceSlice spec",
                )
            )
        if device.node_name:
            errs += meta.each(
                f"{path}.nodeName", device.node_name, names.is_dns1123_subdomain(device.node_name)
            )
        if device.node_selector is not None:
            errs += _validate_slice_node_selector(device.node_selector, f"{path}.nodeSelector")
    elif placements:
        errs.append(
            field_invalid(
                path,
                device.name,
                "`nodeName`, `nodeSelector` and `allNodes` can only be set if "
                "`perDeviceNodeSelection` is set to true in the ResourceSlice spec",
            )
        )
    return errs


def _validate_resource_slice(
    rs: resource_v1.ResourceSlice, old: KubeObject | None
) -> list[FieldError]:
    spec = rs.spec
    errs = _validate_driver_name(spec.driver, "spec.driver")
    errs += _validate_pool_name(spec.pool.name, "spec.pool.name")
    errs += meta.nonnegative("spec.pool.generation", spec.pool.generation)
    if spec.pool.resource_slice_count <= 0:
        errs.append(
            field_invalid(
                "spec.pool.resourceSliceCount",
                spec.pool.resource_slice_count,
                "must be greater than zero",
            )
        )
    selection = 0
    if spec.node_name is not None:
        selection += 1
        errs += meta.each(
            "spec.nodeName", spec.node_name, names.is_dns1123_subdomain(spec.node_name)
        )
    if spec.node_selector is not None:
        selection += 1
        errs += _validate_slice_node_selector(spec.node_selector, "spec.nodeSelector")
    if spec.all_nodes:
        selection += 1
    if spec.per_device_node_selection:
        selection += 1
    detail = (
        "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` "
        "is required"
    )
    if selection == 0:
        errs.append(field_required("spec", detail))
    elif selection > 1:
        errs.append(
            field_invalid(
                "spec", "{`nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection`}", detail
            )
        )
    if spec.shared_counters and spec.devices:
        errs.append(
            field_invalid("spec", "", "only one of `sharedCounters` or `devices` is allowed")
        )
    max_devices = resource_capacity.max_devices(spec)
    if len(spec.devices) > max_devices:
        errs.append(field_too_many("spec.devices", len(spec.devices), max_devices))
    device_names = set()
    for i, device in enumerate(spec.devices):
        errs += _validate_device(device, f"spec.devices[{i}]", bool(spec.per_device_node_selection))
        if device.name in device_names:
            errs.append(field_duplicate(f"spec.devices[{i}].name", device.name))
        device_names.add(device.name)
    errs += resource_capacity.validate_counter_sets(spec, "spec")
    if isinstance(old, resource_v1.ResourceSlice):
        if spec.driver != old.spec.driver:
            errs.append(field_invalid("spec.driver", spec.driver, "field is immutable"))
        if spec.node_name != old.spec.node_name:
            errs.append(field_invalid("spec.nodeName", spec.node_name, "field is immutable"))
    return errs


def _request_names(claim: resource_v1.DeviceClaim) -> set[str]:
    """Names a constraint, config or result may refer to: `<request>` or `<request>/<sub>`."""
    known = set()
    for request in claim.requests:
        known.add(request.name)
        known.update(f"{request.name}/{sub.name}" for sub in request.first_available)
    return known


_UNKNOWN_REQUEST = (
    "must be the name of a request in the claim or the name of a request and a subrequest "
    "separated by '/'"
)


def _validate_request_references(refs: list[str], path: str, known: set[str]) -> list[FieldError]:
    return [
        field_invalid(f"{path}[{i}]", ref, _UNKNOWN_REQUEST)
        for i, ref in enumerate(refs)
        if ref not in known
    ]


def _validate_exact(
    request: resource_v1.ExactDeviceRequest | resource_v1.DeviceSubRequest,
    path: str,
    *,
    stored: bool,
) -> list[FieldError]:
    errs = meta.validate_required_subdomain(request.device_class_name, f"{path}.deviceClassName")
    errs += _validate_selectors(request.selectors, f"{path}.selectors", stored=stored)
    mode = request.allocation_mode or resource_v1.ALLOCATION_MODE_EXACT_COUNT
    if mode == resource_v1.ALLOCATION_MODE_ALL:
        if request.count != 0:
            errs.append(
                field_invalid(
                    f"{path}.count",
                    request.count,
                    "must not be specified when allocationMode is 'All'",
                )
            )
    elif mode == resource_v1.ALLOCATION_MODE_EXACT_COUNT:
        if request.count < 0:  # 0 means unset: defaulted to 1
            errs.append(field_invalid(f"{path}.count", request.count, "must be greater than zero"))
    else:
        errs.append(
            field_not_supported(
                f"{path}.allocationMode", request.allocation_mode, resource_v1.ALLOCATION_MODES
            )
        )
    for i, toleration in enumerate(request.tolerations):
        errs += device_taints.validate_device_toleration(toleration, f"{path}.tolerations[{i}]")
    return errs


def _validate_claim_spec(
    spec: resource_v1.ResourceClaimSpec, path: str, *, stored: bool
) -> list[FieldError]:
    """`stored`: the spec is the stored one (it is immutable), so its CEL expressions are
    not compiled again."""
    claim = spec.devices
    path = f"{path}.devices"
    errs = []
    if len(claim.requests) > resource_v1.DEVICE_REQUESTS_MAX_SIZE:
        errs.append(
            field_too_many(
                f"{path}.requests", len(claim.requests), resource_v1.DEVICE_REQUESTS_MAX_SIZE
            )
        )
    seen = set()
    for i, request in enumerate(claim.requests):
        r_path = f"{path}.requests[{i}]"
        errs += meta.validate_unique_name(request.name, f"{r_path}.name", seen)
        if request.exactly is not None and request.first_available:
            errs.append(
                field_forbidden(
                    r_path,
                    "exactly one of `exactly` or `firstAvailable` is required, "
                    "but multiple fields are set",
                )
            )
        elif request.exactly is not None:
            errs += _validate_exact(request.exactly, f"{r_path}.exactly", stored=stored)
        elif request.first_available:
            errs += _validate_subrequests(
                request.first_available, f"{r_path}.firstAvailable", stored=stored
            )
        else:
            errs.append(
                field_required(r_path, "exactly one of `exactly` or `firstAvailable` is required")
            )
    known = _request_names(claim)
    if len(claim.constraints) > resource_v1.DEVICE_REQUESTS_MAX_SIZE:
        errs.append(
            field_too_many(
                f"{path}.constraints", len(claim.constraints), resource_v1.DEVICE_REQUESTS_MAX_SIZE
            )
        )
    for i, constraint in enumerate(claim.constraints):
        c_path = f"{path}.constraints[{i}]"
        errs += _validate_request_references(constraint.requests, f"{c_path}.requests", known)
        attributes = meta.set_fields(
            matchAttribute=constraint.match_attribute,
            distinctAttribute=constraint.distinct_attribute,
        )
        if len(attributes) != 1:
            errs.append(
                field_required(
                    f"{c_path}.matchAttribute", "exactly one constraint must be specified"
                )
            )
        for field_name, value in attributes:
            if "/" not in value:
                errs.append(
                    field_required(
                        f"{c_path}.{field_name}",
                        "a fully qualified name must be a domain and a name separated by a slash",
                    )
                )
            errs += _validate_attribute_name(value, f"{c_path}.{field_name}")
    if len(claim.config) > resource_v1.DEVICE_CONFIG_MAX_SIZE:
        errs.append(
            field_too_many(f"{path}.config", len(claim.config), resource_v1.DEVICE_CONFIG_MAX_SIZE)
        )
    for i, config in enumerate(claim.config):
        errs += _validate_request_references(config.requests, f"{path}.config[{i}].requests", known)
        errs += _validate_opaque(config.opaque, f"{path}.config[{i}]")
    return errs


def _validate_subrequests(
    subrequests: list[resource_v1.DeviceSubRequest], path: str, *, stored: bool
) -> list[FieldError]:
    errs = []
    if len(subrequests) > resource_v1.FIRST_AVAILABLE_MAX_SIZE:
        errs.append(field_too_many(path, len(subrequests), resource_v1.FIRST_AVAILABLE_MAX_SIZE))
    seen = set()
    for i, sub in enumerate(subrequests):
        s_path = f"{path}[{i}]"
        errs += meta.validate_unique_name(sub.name, f"{s_path}.name", seen)
        errs += _validate_exact(sub, s_path, stored=stored)
    return errs


def _validate_resource_claim(
    claim: resource_v1.ResourceClaim, old: KubeObject | None
) -> list[FieldError]:
    stored = isinstance(old, resource_v1.ResourceClaim)
    errs = _validate_claim_spec(claim.spec, "spec", stored=stored)
    if isinstance(old, resource_v1.ResourceClaim) and claim.spec != old.spec:
        errs.append(field_invalid("spec", codec.to_builtins(claim.spec), "field is immutable"))
    return errs


def _validate_resource_claim_status(
    claim: resource_v1.ResourceClaim, old: resource_v1.ResourceClaim | None
) -> list[FieldError]:
    status = claim.status
    errs = []
    allocation = status.allocation
    if allocation is not None:
        results = allocation.devices.results
        results_path = "status.allocation.devices.results"
        if len(results) > resource_v1.ALLOCATION_RESULTS_MAX_SIZE:
            errs.append(
                field_too_many(results_path, len(results), resource_v1.ALLOCATION_RESULTS_MAX_SIZE)
            )
        known = _request_names(claim.spec.devices)
        for i, result in enumerate(results):
            r_path = f"{results_path}[{i}]"
            if result.request not in known:
                errs.append(field_invalid(f"{r_path}.request", result.request, _UNKNOWN_REQUEST))
            errs += _validate_driver_name(result.driver, f"{r_path}.driver")
            errs += _validate_pool_name(result.pool, f"{r_path}.pool")
            errs += meta.each(
                f"{r_path}.device", result.device, names.is_dns1123_label(result.device)
            )
            errs += device_status.validate_binding_parameters(
                result.binding_conditions, result.binding_failure_conditions, r_path
            )
        if allocation.node_selector is not None:
            errs += core.validate_node_selector(
                allocation.node_selector, "status.allocation.nodeSelector"
            )
        if (
            old is not None
            and old.status.allocation is not None
            and allocation != old.status.allocation
        ):
            errs.append(
                field_invalid(
                    "status.allocation", codec.to_builtins(allocation), "field is immutable"
                )
            )
    for i, device in enumerate(status.devices):
        d_path = f"status.devices[{i}]"
        errs += _validate_driver_name(device.driver, f"{d_path}.driver")
        errs += _validate_pool_name(device.pool, f"{d_path}.pool")
        errs += meta.each(f"{d_path}.device", device.device, names.is_dns1123_label(device.device))
    errs += device_status.validate_device_statuses(claim)
    reserved_path = "status.reservedFor"
    if len(status.reserved_for) > resource_v1.RESERVED_FOR_MAX_SIZE:
        errs.append(
            field_too_many(
                reserved_path, len(status.reserved_for), resource_v1.RESERVED_FOR_MAX_SIZE
            )
        )
    uids = set()
    for i, ref in enumerate(status.reserved_for):
        for field_name, value in (("resource", ref.resource), ("name", ref.name), ("uid", ref.uid)):
            if not value:
                errs.append(field_required(f"{reserved_path}[{i}].{field_name}"))
        if ref.uid in uids:
            errs.append(field_duplicate(f"{reserved_path}[{i}].uid", ref.uid))
        uids.add(ref.uid)
    if status.reserved_for and allocation is None:
        errs.append(
            field_forbidden(reserved_path, "may not be specified when `allocated` is not set")
        )
    # A claim being deleted may lose consumers but gain none: its devices are going away.
    if old is not None and claim.metadata.deletion_timestamp is not None:
        old_uids = {ref.uid for ref in old.status.reserved_for}
        if uids - old_uids:
            errs.append(
                field_forbidden(
                    reserved_path, "new entries may not be added while `deletionTimestamp` is set"
                )
            )
    return errs


def _validate_resource_claim_template(
    template: resource_v1.ResourceClaimTemplate, old: KubeObject | None
) -> list[FieldError]:
    errs = meta.validate_labels(template.spec.metadata.labels, "spec.metadata.labels")
    errs += meta.validate_annotations(
        template.spec.metadata.annotations, "spec.metadata.annotations"
    )
    stored = isinstance(old, resource_v1.ResourceClaimTemplate)
    errs += _validate_claim_spec(template.spec.spec, "spec.spec", stored=stored)
    if isinstance(old, resource_v1.ResourceClaimTemplate) and template.spec != old.spec:
        errs.append(field_invalid("spec", codec.to_builtins(template.spec), "field is immutable"))
    return errs


def _validate_device_taint_rule(
    rule: resource_v1.DeviceTaintRule, old: KubeObject | None
) -> list[FieldError]:
    errs: list[FieldError] = []
    selector, path = rule.spec.device_selector, "spec.deviceSelector"
    if selector is not None and selector.driver is not None:
        errs += _validate_driver_name(selector.driver, f"{path}.driver")
    if selector is not None and selector.pool is not None:
        errs += _validate_pool_name(selector.pool, f"{path}.pool")
    if selector is not None and selector.device is not None:
        device = selector.device
        errs += meta.each(f"{path}.device", device, names.is_dns1123_label(device))
    old_taint = old.spec.taint if isinstance(old, resource_v1.DeviceTaintRule) else None
    return errs + device_taints.validate_device_taint(rule.spec.taint, old_taint, "spec.taint")


def _validate_device_taint_rule_status(
    rule: resource_v1.DeviceTaintRule, old: KubeObject | None
) -> list[FieldError]:
    conditions, path = rule.status.conditions, "status.conditions"
    errs = meta.validate_conditions(conditions, path)
    limit = resource_v1.DEVICE_TAINT_RULE_STATUS_MAX_CONDITIONS
    if len(conditions) > limit:
        errs.append(field_too_many(path, len(conditions), limit))
    return errs


VALIDATORS: dict[type[KubeObject], meta.Validator] = {
    resource_v1.DeviceClass: _validate_device_class,
    resource_v1.ResourceSlice: _validate_resource_slice,
    resource_v1.ResourceClaim: _validate_resource_claim,
    resource_v1.ResourceClaimTemplate: _validate_resource_claim_template,
    resource_v1.DeviceTaintRule: _validate_device_taint_rule,
}
STATUS_VALIDATORS: dict[type[KubeObject], meta.Validator] = {
    resource_v1.ResourceClaim: _validate_resource_claim_status,
    resource_v1.DeviceTaintRule: _validate_device_taint_rule_status,
}
