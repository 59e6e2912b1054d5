"""Defaulting of resource.k8s.io/v1 ResourceClaims and ResourceClaimTemplates, as upstream's
`pkg/apis/resource/v1/defaults.go` and `SetObjectDefaults_ResourceClaim` /
`_ResourceClaimTemplate`: a request asks for exactly one device unless it says otherwise,
and a toleration without an operator matches its value exactly.

Upstream also stamps `timeAdded` on the device taints of ResourceSlices; that is left out
here, since drasim's DRA driver shims compare the slices they publish with what is stored.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from drasim.common.api import resource_v1

__all__ = ["DEFAULTERS", "default_device_claim"]

_EXACT_COUNT = resource_v1.ALLOCATION_MODE_EXACT_COUNT
_EQUAL = "Equal"


def default_device_claim(claim: resource_v1.DeviceClaim) -> None:
    """`SetDefaults_ExactDeviceRequest` and `SetDefaults_DeviceSubRequest` for each request
    and alternative, and `Equal` for their tolerations' operators."""
    for request in claim.requests:
        asks = [request.exactly] if request.exactly is not None else []
        for ask in [*asks, *request.first_available]:
            if not ask.allocation_mode:
                ask.allocation_mode = _EXACT_COUNT
            if ask.allocation_mode == _EXACT_COUNT and ask.count == 0:
                ask.count = 1
            for toleration in ask.tolerations:
                if not toleration.operator:
                    toleration.operator = _EQUAL


def _default_claim(claim: resource_v1.ResourceClaim) -> None:
    default_device_claim(claim.spec.devices)


def _default_template(template: resource_v1.ResourceClaimTemplate) -> None:
    default_device_claim(template.spec.spec.devices)


DEFAULTERS: dict[type, Callable[[Any], None]] = {
    resource_v1.ResourceClaim: _default_claim,
    resource_v1.ResourceClaimTemplate: _default_template,
}
