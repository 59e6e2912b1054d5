"""Defaulting of core/v1 Pods and pod specs, as upstream's `pkg/apis/core/v1/defaults.go`
and the `SetObjectDefaults_Pod` its generator writes (`zz_generated.defaults.go`).

Two layers, as upstream has them: `default_pod_spec` is what every pod spec gets, the
templates of Deployments and ReplicaSets included; `default_pod` adds what only a Pod gets
(requests copied from limits, `enableServiceLinks`), since a template defaulted that way
would change the hash its controller names pods by. Fields drasim keeps as raw JSON
(volumes, probes, lifecycle hooks) are defaulted in place, key by key.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any

from drasim.common.api import core_v1
from drasim.common.quantity import Quantity

__all__ = [
    "DEFAULT_SCHEDULER_NAME",
    "DEFAULT_TERMINATION_GRACE_PERIOD_SECONDS",
    "DEFAULTERS",
    "TERMINATION_MESSAGE_PATH_DEFAULT",
    "default_container",
    "default_pod",
    "default_pod_spec",
    "image_pull_policy",
]

DEFAULT_SCHEDULER_NAME = "default-scheduler"
DEFAULT_TERMINATION_GRACE_PERIOD_SECONDS = 30
TERMINATION_MESSAGE_PATH_DEFAULT = "/dev/termination-log"
# Files of secret, configMap, downwardAPI and projected volumes: 0644.
_VOLUME_DEFAULT_MODE = 0o644
_SERVICE_ACCOUNT_TOKEN_EXPIRATION_SECONDS = 3600
_MILLI = Fraction(1, 1000)


def default_pod(pod: core_v1.Pod) -> None:
    """`SetObjectDefaults_Pod`: the pod-only defaults, then its spec's."""
    spec = pod.spec
    # A negative grace period reads as "as fast as possible", which the kubelet takes as 1 s.
    if spec.termination_grace_period_seconds is not None and (
        spec.termination_grace_period_seconds < 0
    ):
        spec.termination_grace_period_seconds = 1
    # Limits without requests ask for as much as they allow (on a Pod, not a template).
    for container in (*spec.containers, *spec.init_containers):
        resources = container.resources
        for name, quantity in resources.limits.items():
            resources.requests.setdefault(name, quantity)
    if spec.enable_service_links is None:
        spec.enable_service_links = True
    if spec.host_network:
        for container in (*spec.containers, *spec.init_containers):
            for port in container.ports:
                if port.host_port == 0:
                    port.host_port = port.container_port
    default_pod_spec(spec)
    _default_pod_status(pod.status)


def default_pod_spec(spec: core_v1.PodSpec) -> None:
    """`SetDefaults_PodSpec` with the nested defaulters: what every pod spec gets."""
    if not spec.service_account_name:
        spec.service_account_name = spec.service_account
    spec.service_account = spec.service_account_name
    if not spec.dns_policy:
        spec.dns_policy = "ClusterFirst"
    if not spec.restart_policy:
        spec.restart_policy = "Always"
    if spec.security_context is None:
        spec.security_context = {}
    if spec.termination_grace_period_seconds is None:
        spec.termination_grace_period_seconds = DEFAULT_TERMINATION_GRACE_PERIOD_SECONDS
    if not spec.scheduler_name:
        spec.scheduler_name = DEFAULT_SCHEDULER_NAME
    for volume in spec.volumes:
        _default_volume(volume)
    for container in (*spec.init_containers, *spec.containers, *spec.ephemeral_containers):
        default_container(container)
    _round_up_to_milli(spec.overhead)


def default_container(container: core_v1.Container) -> None:
    """`SetDefaults_Container` and what the generator adds for the container's parts."""
    if not container.image_pull_policy:
        container.image_pull_policy = image_pull_policy(container.image)
    if not container.termination_message_path:
        container.termination_message_path = TERMINATION_MESSAGE_PATH_DEFAULT
    if not container.termination_message_policy:
        container.termination_message_policy = "File"
    for port in container.ports:
        if not port.protocol:
            port.protocol = "TCP"
    for env in container.env:
        if env.value_from is not None:
            _default_field_ref(env.value_from.get("fieldRef"))
            file_key_ref = env.value_from.get("fileKeyRef")
            if isinstance(file_key_ref, dict):
                file_key_ref.setdefault("optional", False)
    _round_up_to_milli(container.resources.limits)
    _round_up_to_milli(container.resources.requests)
    for probe in (container.liveness_probe, container.readiness_probe, container.startup_probe):
        if probe is not None:
            _default_probe(probe)
    lifecycle = container.lifecycle or {}
    for hook in (lifecycle.get("postStart"), lifecycle.get("preStop")):
        if isinstance(hook, dict):
            _default_http_get(hook.get("httpGet"))


def image_pull_policy(image: str) -> str:
    """`Always` for the tag `latest`, or for no tag and no digest (which means latest);
    otherwise, and for a reference that does not parse, `IfNotPresent`."""
    name, _, digest = image.partition("@")
    domain, slash, path = name.partition("/")
    if not slash or (
        not any(c in domain for c in ".:") and domain != "localhost" and domain == domain.lower()
    ):
        path = name  # no registry in front (upstream `splitDockerDomain`)
    repository, colon, tag = path.rpartition(":") if ":" in path else (path, "", "")
    if not repository or repository != repository.lower():
        return "IfNotPresent"  # upstream's parser refuses it, and finds no tag
    if not colon and not digest:
        tag = "latest"
    return "Always" if tag == "latest" else "IfNotPresent"


def _default_pod_status(status: core_v1.PodStatus) -> None:
    """`SetDefaults_PodStatus`: `podIP` and `podIPs[0]` say the same, `podIP` winning."""
    if status.pod_ip and (not status.pod_ips or status.pod_ips[0].ip != status.pod_ip):
        status.pod_ips = [core_v1.PodIP(ip=status.pod_ip)]
    elif not status.pod_ip and status.pod_ips:
        status.pod_ip = status.pod_ips[0].ip


def _round_up_to_milli(resources: dict[str, Quantity]) -> None:
    """`SetDefaults_ResourceList`: no quantity is finer than a thousandth; a finer one is
    rounded away from zero, as `Quantity.RoundUp(-3)`."""
    for name, quantity in resources.items():
        scaled = quantity.value / _MILLI
        if scaled.denominator != 1:
            units = math.ceil(abs(scaled)) * (1 if scaled > 0 else -1)
            resources[name] = Quantity(units * _MILLI, quantity.format)


def _default_probe(probe: dict[str, Any]) -> None:
    """`SetDefaults_Probe` and its handler's defaults."""
    for key, value in (
        ("timeoutSeconds", 1),
        ("periodSeconds", 10),
        ("successThreshold", 1),
        ("failureThreshold", 3),
    ):
        if not probe.get(key):
            probe[key] = value
    _default_http_get(probe.get("httpGet"))
    grpc = probe.get("grpc")
    if isinstance(grpc, dict):
        grpc.setdefault("service", "")


def _default_http_get(action: object) -> None:
    """`SetDefaults_HTTPGetAction`."""
    if isinstance(action, dict):
        if not action.get("path"):
            action["path"] = "/"
        if not action.get("scheme"):
            action["scheme"] = "HTTP"


def _default_field_ref(selector: object) -> None:
    """`SetDefaults_ObjectFieldSelector`."""
    if isinstance(selector, dict) and not selector.get("apiVersion"):
        selector["apiVersion"] = "v1"


def _default_mode(source: dict[str, Any]) -> None:
    source.setdefault("defaultMode", _VOLUME_DEFAULT_MODE)


def _default_downward_api(source: dict[str, Any]) -> None:
    for item in source.get("items") or ():
        if isinstance(item, dict):
            _default_field_ref(item.get("fieldRef"))


def _default_projected(source: dict[str, Any]) -> None:
    _default_mode(source)
    for projection in source.get("sources") or ():
        if not isinstance(projection, dict):
            continue
        if isinstance(downward := projection.get("downwardAPI"), dict):
            _default_downward_api(downward)
        if isinstance(token := projection.get("serviceAccountToken"), dict):
            token.setdefault("expirationSeconds", _SERVICE_ACCOUNT_TOKEN_EXPIRATION_SECONDS)


def _default_ephemeral(source: dict[str, Any]) -> None:
    template = source.get("volumeClaimTemplate")
    if isinstance(template, dict) and isinstance(spec := template.get("spec"), dict):
        spec.setdefault("volumeMode", "Filesystem")


def _default_host_path(source: dict[str, Any]) -> None:
    source.setdefault("type", "")


_VOLUME_SOURCE_DEFAULTS: dict[str, Callable[[dict[str, Any]], None]] = {
    "secret": _default_mode,
    "configMap": _default_mode,
    "downwardAPI": lambda source: (_default_mode(source), _default_downward_api(source)),
    "projected": _default_projected,
    "ephemeral": _default_ephemeral,
    "hostPath": _default_host_path,
}


def _default_volume(volume: dict[str, Any]) -> None:
    """`SetDefaults_Volume` and its sources' defaults: a volume naming no source is an
    emptyDir."""
    if not any(key != "name" and value is not None for key, value in volume.items()):
        volume["emptyDir"] = {}
    for key, default in _VOLUME_SOURCE_DEFAULTS.items():
        if isinstance(source := volume.get(key), dict):
            default(source)


DEFAULTERS: dict[type, Callable[[Any], None]] = {core_v1.Pod: default_pod}
