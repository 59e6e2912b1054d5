"""Validation of the core kinds applications ship: ConfigMaps, Secrets, ServiceAccounts,
Services, Endpoints and PersistentVolumeClaims (upstream
`pkg/apis/core/validation/validation.go`: `ValidateConfigMap`, `ValidateSecret`,
`validateService`, `ValidateEndpoints`, `ValidatePersistentVolumeClaimSpec` and their
updates), and discovery.k8s.io's EndpointSlices (`pkg/apis/discovery/validation`).

Field paths and messages are upstream's. A Service's cluster IPs are checked against
what is taken when they are allocated (`drasim.apistore.ipallocator`), not here.
"""

from __future__ import annotations

import ipaddress
import json
import re

import msgspec

from drasim.common.api import core_v1_app, discovery_v1
from drasim.common.api.meta_v1 import KubeObject
from drasim.common.api.validation import meta, names
from drasim.common.errors import (
    FieldError,
    field_duplicate,
    field_forbidden,
    field_invalid,
    field_not_supported,
    field_required,
    field_too_long,
)

__all__ = ["NAME_RULES", "VALIDATORS", "is_config_map_key", "is_headless"]

# What a ConfigMap's or Secret's data may hold in all (`core.MaxSecretSize`).
MAX_DATA_BYTES = 1024 * 1024
_CONFIG_MAP_KEY_FMT = "[-._a-zA-Z0-9]+"
_CONFIG_MAP_KEY_RE = re.compile(_CONFIG_MAP_KEY_FMT)
_IMMUTABLE_SET = "field is immutable when `immutable` is set"
_PROTOCOLS = ["SCTP", "TCP", "UDP"]
_SESSION_AFFINITIES = ["ClientIP", "None"]
_ACCESS_MODES = ["ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod"]
_VOLUME_MODES = ["Block", "Filesystem"]
_PORT_NAME_RE = re.compile("[-a-z0-9]+")
_PORT_RANGE = "must be between 1 and 65535, inclusive"


def is_config_map_key(key: str) -> list[str]:
    """Upstream `IsConfigMapKey`: the reasons a data key is refused."""
    errs = []
    if len(key) > names.DNS1123_SUBDOMAIN_MAX_LENGTH:
        errs.append(f"must be no more than {names.DNS1123_SUBDOMAIN_MAX_LENGTH} characters")
    if not _CONFIG_MAP_KEY_RE.fullmatch(key):
        errs.append(
            "a valid config key must consist of alphanumeric characters, '-', '_' or '.' "
            "(e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is "
            f"'{_CONFIG_MAP_KEY_FMT}')"
        )
    if key == ".":
        errs.append("must not be '.'")
    elif key == "..":
        errs.append("must not be '..'")
    elif key.startswith(".."):
        errs.append("must not start with '..'")
    return errs


def _validate_keys(keys: list[str], path: str) -> list[FieldError]:
    return [
        field_invalid(f"{path}[{key}]", key, msg) for key in keys for msg in is_config_map_key(key)
    ]


def _validate_config_map(cm: core_v1_app.ConfigMap, old: KubeObject | None) -> list[FieldError]:
    errs = _validate_keys(list(cm.data), "data")
    errs += [
        field_invalid(f"data[{key}]", key, "duplicate of key present in binaryData")
        for key in cm.data
        if key in cm.binary_data
    ]
    errs += _validate_keys(list(cm.binary_data), "binaryData")
    size = sum(len(v.encode()) for v in cm.data.values()) + sum(map(len, cm.binary_data.values()))
    if size > MAX_DATA_BYTES:
        errs.append(field_too_long("", MAX_DATA_BYTES))
    if isinstance(old, core_v1_app.ConfigMap) and old.immutable:
        errs += _immutable_errors(
            cm.immutable,
            ("data", cm.data, old.data),
            ("binaryData", cm.binary_data, old.binary_data),
        )
    return errs


def _immutable_errors(
    immutable: bool | None, *fields: tuple[str, object, object]
) -> list[FieldError]:
    """Upstream's rule once `immutable: true` is stored: it stays, and so does the data."""
    errs = [] if immutable else [field_forbidden("immutable", _IMMUTABLE_SET)]
    return errs + [field_forbidden(path, _IMMUTABLE_SET) for path, new, old in fields if new != old]


def _validate_secret(secret: core_v1_app.Secret, old: KubeObject | None) -> list[FieldError]:
    errs = []
    if isinstance(old, core_v1_app.Secret):
        if secret.type != old.type:
            errs.append(field_invalid("type", secret.type, "field is immutable"))
        if old.immutable:
            errs += _immutable_errors(secret.immutable, ("data", secret.data, old.data))
    errs += _validate_keys(list(secret.data), "data")
    if sum(map(len, secret.data.values())) > MAX_DATA_BYTES:
        errs.append(field_too_long("data", MAX_DATA_BYTES))
    data = secret.data
    if secret.type == "kubernetes.io/service-account-token":
        key = "kubernetes.io/service-account.name"
        if not secret.metadata.annotations.get(key):
            errs.append(field_required(f"metadata.annotations[{key}]"))
    elif secret.type in ("kubernetes.io/dockercfg", "kubernetes.io/dockerconfigjson"):
        (key,) = core_v1_app.SECRET_TYPES[secret.type]
        if key not in data:
            errs.append(field_required(f"data[{key}]"))
        else:
            try:
                json.loads(data[key])
            except ValueError as exc:
                errs.append(field_invalid(f"data[{key}]", "<secret contents redacted>", str(exc)))
    elif secret.type == "kubernetes.io/basic-auth":
        if "username" not in data and "password" not in data:
            errs += [field_required("data[username]"), field_required("data[password]")]
    elif secret.type == "kubernetes.io/ssh-auth":
        if not data.get("ssh-privatekey"):
            errs.append(field_required("data[ssh-privatekey]"))
    elif secret.type == "kubernetes.io/tls":
        errs += [field_required(f"data[{k}]") for k in ("tls.crt", "tls.key") if k not in data]
    return errs


def _validate_service_account(sa: KubeObject, old: KubeObject | None) -> list[FieldError]:
    return []  # ObjectMeta only, as upstream


# --- Service -----------------------------------------------------------------------------


def _is_valid_port_name(name: str) -> list[str]:
    """Upstream `IsValidPortName` (an IANA service name)."""
    errs = []
    if len(name) > 15:
        errs.append("must be no more than 15 characters")
    if not _PORT_NAME_RE.fullmatch(name):
        errs.append("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)")
    if not re.search("[a-z]", name):
        errs.append("must contain at least one letter (a-z)")
    if "--" in name:
        errs.append("must not contain consecutive hyphens (-)")
    if name and (name[0] == "-" or name[-1] == "-"):
        errs.append("must not begin or end with a hyphen (-)")
    return errs


def _validate_port_num_or_name(port: int | str | None, path: str) -> list[FieldError]:
    if isinstance(port, str):
        return meta.each(path, port, _is_valid_port_name(port))
    value = port or 0
    return [] if 1 <= value <= 65535 else [field_invalid(path, value, _PORT_RANGE)]


def _validate_service_port(
    port: core_v1_app.ServicePort, require_name: bool, seen: set[str], path: str
) -> list[FieldError]:
    errs = []
    if require_name and not port.name:
        errs.append(field_required(f"{path}.name"))
    elif port.name:
        errs += meta.each(f"{path}.name", port.name, names.is_dns1123_label(port.name))
        errs += meta.validate_unique_name(port.name, f"{path}.name", seen)
    if not 1 <= port.port <= 65535:
        errs.append(field_invalid(f"{path}.port", port.port, _PORT_RANGE))
    if not port.protocol:
        errs.append(field_required(f"{path}.protocol"))
    elif port.protocol not in _PROTOCOLS:
        errs.append(field_not_supported(f"{path}.protocol", port.protocol, _PROTOCOLS))
    errs += _validate_port_num_or_name(port.target_port, f"{path}.targetPort")
    if port.app_protocol is not None:
        app = port.app_protocol
        errs += meta.each(f"{path}.appProtocol", app, names.is_qualified_name(app))
    return errs


def is_headless(svc: core_v1_app.Service) -> bool:
    return svc.spec.cluster_ip == core_v1_app.CLUSTER_IP_NONE


def _validate_service(svc: core_v1_app.Service, old: KubeObject | None) -> list[FieldError]:
    spec = svc.spec
    errs = []
    headless = is_headless(svc)
    if not spec.ports and not headless and spec.type != "ExternalName":
        errs.append(field_required("spec.ports"))
    if spec.type in ("LoadBalancer", "NodePort") and headless:
        errs.append(
            field_invalid(
                "spec.clusterIPs[0]",
                core_v1_app.CLUSTER_IP_NONE,
                f"may not be set to 'None' for {spec.type} services",
            )
        )
    elif spec.type == "ExternalName":
        if spec.cluster_ips:
            errs.append(
                field_forbidden("spec.clusterIPs", "may not be set for ExternalName services")
            )
        cname = spec.external_name.removesuffix(".")
        if cname:
            errs += meta.each("spec.externalName", cname, names.is_dns1123_subdomain(cname))
        else:
            errs.append(field_required("spec.externalName"))
    seen: set[str] = set()
    for i, port in enumerate(spec.ports):
        errs += _validate_service_port(port, len(spec.ports) > 1, seen, f"spec.ports[{i}]")
    errs += meta.validate_labels(spec.selector, "spec.selector")
    if not spec.session_affinity:
        errs.append(field_required("spec.sessionAffinity"))
    elif spec.session_affinity not in _SESSION_AFFINITIES:
        errs.append(
            field_not_supported("spec.sessionAffinity", spec.session_affinity, _SESSION_AFFINITIES)
        )
    elif spec.session_affinity == "None" and spec.session_affinity_config is not None:
        errs.append(
            field_forbidden(
                "spec.sessionAffinityConfig", "must not be set when session affinity is None"
            )
        )
    errs += _validate_cluster_ip(svc)
    if not spec.type:
        errs.append(field_required("spec.type"))
    elif spec.type not in core_v1_app.SERVICE_TYPES:
        errs.append(field_not_supported("spec.type", spec.type, core_v1_app.SERVICE_TYPES))
    if spec.type == "ClusterIP":
        errs += [
            field_forbidden(
                f"spec.ports[{i}].nodePort", "may not be used when `type` is 'ClusterIP'"
            )
            for i, port in enumerate(spec.ports)
            if port.node_port
        ]
    node_ports: set[tuple[str, int]] = set()
    ports: set[tuple[str, int]] = set()
    for i, port in enumerate(spec.ports):
        if port.node_port:
            if (port.protocol, port.node_port) in node_ports:
                errs.append(field_duplicate(f"spec.ports[{i}].nodePort", port.node_port))
            node_ports.add((port.protocol, port.node_port))
        if (port.protocol, port.port) in ports:
            value = {"port": port.port, "protocol": port.protocol, "targetPort": 0}
            errs.append(field_duplicate(f"spec.ports[{i}]", value))
        ports.add((port.protocol, port.port))
    if spec.allocate_load_balancer_node_ports is not None and spec.type != "LoadBalancer":
        errs.append(
            field_forbidden(
                "spec.allocateLoadBalancerNodePorts",
                "may only be used when `type` is 'LoadBalancer'",
            )
        )
    if isinstance(old, core_v1_app.Service):
        errs += _validate_cluster_ip_update(svc, old)
    return errs


def _validate_cluster_ip(svc: core_v1_app.Service) -> list[FieldError]:
    """The addresses a client asked for are IPs (or `None`), the first one `clusterIP`."""
    spec = svc.spec
    errs = []
    if spec.cluster_ips and spec.cluster_ip and spec.cluster_ips[0] != spec.cluster_ip:
        errs.append(
            field_invalid("spec.clusterIPs", spec.cluster_ips, "first value must match `clusterIP`")
        )
    for i, ip in enumerate(spec.cluster_ips or ([spec.cluster_ip] if spec.cluster_ip else [])):
        if ip == core_v1_app.CLUSTER_IP_NONE:
            if i:
                errs.append(
                    field_invalid(f"spec.clusterIPs[{i}]", ip, "must be a valid IP address")
                )
            continue
        try:
            ipaddress.ip_address(ip)
        except ValueError:
            detail = "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"
            errs.append(field_invalid(f"spec.clusterIPs[{i}]", ip, detail))
    return errs


def _validate_cluster_ip_update(
    svc: core_v1_app.Service, old: core_v1_app.Service
) -> list[FieldError]:
    """Upstream `validateUpgradeDowngradeClusterIPs`: the primary address stays, unless the
    service turns from or into an ExternalName."""
    if "ExternalName" in (svc.spec.type, old.spec.type) or not old.spec.cluster_ips:
        return []
    if svc.spec.cluster_ips[:1] != old.spec.cluster_ips[:1]:
        return [
            field_invalid("spec.clusterIPs[0]", svc.spec.cluster_ips, "may not change once set")
        ]
    return []


# --- Endpoints and EndpointSlices --------------------------------------------------------


def _ip_errors(ip: str, path: str) -> list[FieldError]:
    try:
        ipaddress.ip_address(ip)
    except ValueError:
        return [field_invalid(path, ip, "must be a valid IP address")]
    return []


def _validate_endpoints(ep: core_v1_app.Endpoints, old: KubeObject | None) -> list[FieldError]:
    errs = []
    for i, subset in enumerate(ep.subsets):
        path = f"subsets[{i}]"
        if not subset.addresses and not subset.not_ready_addresses:
            errs.append(field_required(path, "must specify `addresses` or `notReadyAddresses`"))
        for field, addresses in (
            ("addresses", subset.addresses),
            ("notReadyAddresses", subset.not_ready_addresses),
        ):
            for j, address in enumerate(addresses):
                errs += _ip_errors(address.ip, f"{path}.{field}[{j}].ip")
        for j, port in enumerate(subset.ports):
            port_path = f"{path}.ports[{j}]"
            if len(subset.ports) > 1 and not port.name:
                errs.append(field_required(f"{port_path}.name"))
            errs += _validate_endpoint_port(port.port, port.protocol, port_path)
    return errs


def _validate_endpoint_port(port: int | None, protocol: str | None, path: str) -> list[FieldError]:
    """A port of an Endpoints subset or an EndpointSlice: a number (where given) and a
    protocol upstream supports."""
    errs = []
    if port is not None and not 1 <= port <= 65535:
        errs.append(field_invalid(f"{path}.port", port, _PORT_RANGE))
    if protocol not in _PROTOCOLS:
        errs.append(field_not_supported(f"{path}.protocol", protocol, _PROTOCOLS))
    return errs


def _validate_endpoint_slice(
    eps: discovery_v1.EndpointSlice, old: KubeObject | None
) -> list[FieldError]:
    errs = []
    if eps.address_type not in discovery_v1.ADDRESS_TYPES:
        errs.append(
            field_not_supported("addressType", eps.address_type, discovery_v1.ADDRESS_TYPES)
        )
    if isinstance(old, discovery_v1.EndpointSlice) and eps.address_type != old.address_type:
        errs.append(field_invalid("addressType", eps.address_type, "field is immutable"))
    for i, endpoint in enumerate(eps.endpoints):
        path = f"endpoints[{i}].addresses"
        if not 1 <= len(endpoint.addresses) <= 100:
            errs.append(field_required(path, "must contain at least 1 address"))
        if eps.address_type in ("IPv4", "IPv6"):
            for j, address in enumerate(endpoint.addresses):
                errs += _ip_errors(address, f"{path}[{j}]")
    for i, port in enumerate(eps.ports):
        errs += _validate_endpoint_port(port.port, port.protocol, f"ports[{i}]")
    return errs


# --- PersistentVolumeClaim ---------------------------------------------------------------


def _validate_pvc(
    pvc: core_v1_app.PersistentVolumeClaim, old: KubeObject | None
) -> list[FieldError]:
    spec = pvc.spec
    errs = []
    if not spec.access_modes:
        errs.append(field_required("spec.accessModes", "at least 1 access mode is required"))
    if spec.selector is not None:
        errs += meta.validate_label_selector(spec.selector, "spec.selector")
    for mode in spec.access_modes:
        if mode not in _ACCESS_MODES:
            errs.append(field_not_supported("spec.accessModes", mode, _ACCESS_MODES))
    if "ReadWriteOncePod" in spec.access_modes and len(set(spec.access_modes)) > 1:
        errs.append(
            field_forbidden(
                "spec.accessModes", "may not use ReadWriteOncePod with other access modes"
            )
        )
    storage = spec.resources.requests.get("storage")
    if storage is None:
        errs.append(field_required("spec.resources[storage]"))
    elif storage.value <= 0:
        errs.append(
            field_invalid("spec.resources[storage]", str(storage), "must be greater than zero")
        )
    if spec.volume_mode is not None and spec.volume_mode not in _VOLUME_MODES:
        errs.append(field_not_supported("spec.volumeMode", spec.volume_mode, _VOLUME_MODES))
    if isinstance(old, core_v1_app.PersistentVolumeClaim):
        errs += _validate_pvc_update(pvc, old)
    return errs


def _validate_pvc_update(
    new: core_v1_app.PersistentVolumeClaim, old: core_v1_app.PersistentVolumeClaim
) -> list[FieldError]:
    """A claim's spec is fixed once made, but for a bound claim's storage request (which may
    grow) and volume attributes class (upstream `ValidatePersistentVolumeClaimUpdate`)."""
    compared = msgspec.structs.replace(new.spec)
    if not old.spec.volume_name:
        compared.volume_name = old.spec.volume_name
    if new.status.phase == "Bound":
        requests = dict(compared.resources.requests)
        if "storage" in old.spec.resources.requests:
            requests["storage"] = old.spec.resources.requests["storage"]
        compared.resources = msgspec.structs.replace(compared.resources, requests=requests)
        compared.volume_attributes_class_name = old.spec.volume_attributes_class_name
    errs = []
    if compared != old.spec:
        errs.append(
            field_forbidden(
                "spec",
                "spec is immutable after creation except resources.requests and "
                "volumeAttributesClassName for bound claims",
            )
        )
    new_size = new.spec.resources.requests.get("storage")
    old_size = old.spec.resources.requests.get("storage")
    if new_size is not None and old_size is not None and new_size < old_size:
        errs.append(
            field_forbidden(
                "spec.resources.requests.storage", "field can not be less than status.capacity"
            )
        )
    return errs


VALIDATORS: dict[type[KubeObject], meta.Validator] = {
    core_v1_app.ConfigMap: _validate_config_map,
    core_v1_app.Secret: _validate_secret,
    core_v1_app.ServiceAccount: _validate_service_account,
    core_v1_app.Service: _validate_service,
    core_v1_app.Endpoints: _validate_endpoints,
    core_v1_app.PersistentVolumeClaim: _validate_pvc,
    discovery_v1.EndpointSlice: _validate_endpoint_slice,
}
# Services are DNS labels (upstream's RelaxedServiceNameValidation, locked on in 1.37), and
# ServiceAccounts DNS subdomains as the rest.
NAME_RULES: dict[type[KubeObject], meta.NameRule] = {core_v1_app.Service: meta.LABEL_NAME}
