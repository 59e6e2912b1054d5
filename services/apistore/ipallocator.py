"""Service cluster IPs, allocated as upstream's IPAddress-based allocator does
(`pkg/registry/core/service/ipallocator/ipallocator.go`, GA since MultiCIDRServiceAllocator):
each address a Service holds is a networking.k8s.io/v1 IPAddress object named after it, so
an address is taken exactly when that object exists, and two Services never share one.

The writer reads rows before it applies a batch, so a create's candidate addresses are
drawn before (`candidates`, from the body alone) and their IPAddress rows read with the
batch; `allocate` then takes the requested address, or the first free candidate, and
returns the IPAddress to store with the Service. The IPAddress names the Service as its
owner, so the garbage collector releases the address in the batch that deletes the
Service.
"""

from __future__ import annotations

import ipaddress
import random
from collections.abc import Callable

import msgspec

from drasim.common import errors
from drasim.common.api import core_v1_app, meta_v1, networking_v1

__all__ = ["SERVICE_CIDR", "allocate", "candidates", "key"]

# kube-apiserver's `--service-cluster-ip-range` as kubeadm and kind set it.
SERVICE_CIDR = ipaddress.IPv4Network("10.96.0.0/12")
# Addresses drawn per create: the first one free is taken.
CANDIDATES = 16
MANAGED_BY = "ipallocator.k8s.io"


def _range_offset(network: ipaddress.IPv4Network) -> int:
    """KEP-3070: the low addresses kept for static allocation (`calculateRangeOffset`)."""
    size = network.num_addresses - 2
    return min(max(16, size // 16), 256) if size >= 16 else 0


_FIRST = int(SERVICE_CIDR.network_address) + 1
_LAST = int(SERVICE_CIDR.broadcast_address) - 1
_DYNAMIC_FIRST = _FIRST + _range_offset(SERVICE_CIDR)


class _SpecView(msgspec.Struct, rename="camel"):
    type: str = ""
    cluster_ip: str = msgspec.field(default="", name="clusterIP")
    cluster_ips: list[str] = msgspec.field(default_factory=list, name="clusterIPs")


class _ServiceView(msgspec.Struct):
    spec: _SpecView = msgspec.field(default_factory=_SpecView)


_decoder = msgspec.json.Decoder(_ServiceView)


def key(ip: str) -> tuple[str, str, str]:
    """The row of the IPAddress holding `ip`."""
    return ("ipaddresses", "", ip)


def _wanted(spec: _SpecView | core_v1_app.ServiceSpec) -> str:
    return spec.cluster_ip or (spec.cluster_ips[0] if spec.cluster_ips else "")


def candidates(body: bytes, draw: Callable[[int, int], int] = random.randint) -> list[str]:
    """The addresses a Service create may take: the one it asks for, or some drawn at
    random from the dynamic part of the range (upstream draws one and walks on)."""
    try:
        spec = _decoder.decode(body).spec
    except (msgspec.DecodeError, msgspec.ValidationError):
        return []  # the full decode refuses it
    if spec.type == "ExternalName":
        return []
    wanted = _wanted(spec)
    if wanted == core_v1_app.CLUSTER_IP_NONE:
        return []
    if wanted:
        return [wanted]
    return [str(ipaddress.IPv4Address(draw(_DYNAMIC_FIRST, _LAST))) for _ in range(CANDIDATES)]


def allocate(
    svc: core_v1_app.Service, taken: Callable[[str], bool], drawn: list[str]
) -> networking_v1.IPAddress | None:
    """Give `svc` its cluster IP and IP family fields as upstream's REST create does; the
    IPAddress to store with it, None when it takes no address. Raises `Invalid` naming
    `spec.clusterIPs` when the address asked for is taken or outside the range."""
    spec = svc.spec
    if spec.type == "ExternalName":
        return None
    spec.ip_family_policy = spec.ip_family_policy or "SingleStack"
    spec.ip_families = spec.ip_families or ["IPv4"]
    wanted = _wanted(spec)
    if wanted == core_v1_app.CLUSTER_IP_NONE:
        spec.cluster_ip, spec.cluster_ips = wanted, [wanted]
        return None
    if wanted:
        problem = _static_problem(wanted, taken)
        if problem:
            detail = f"failed to allocate IP {wanted}: {problem}"
            errs = [errors.field_invalid("spec.clusterIPs", spec.cluster_ips or [wanted], detail)]
            raise errors.invalid("Service", svc.metadata.name, errs)
        ip = wanted
    else:
        ip = next((c for c in drawn if not taken(c)), "")
        if not ip:
            detail = "failed to allocate IP: range is full"
            errs = [errors.field_invalid("spec.clusterIPs", spec.cluster_ips, detail)]
            raise errors.invalid("Service", svc.metadata.name, errs)
    spec.cluster_ip, spec.cluster_ips = ip, [ip]
    return _ip_address(ip, svc)


def _static_problem(ip: str, taken: Callable[[str], bool]) -> str:
    try:
        address = ipaddress.ip_address(ip)
    except ValueError:
        return "not a valid IP address"  # validation has said so already
    if address not in SERVICE_CIDR:
        return "the provided network does not match the current range"
    if not _FIRST <= int(address) <= _LAST:
        return (
            f"the provided IP ({ip}) is not in the valid range. The range of valid IPs is "
            f"{SERVICE_CIDR}"
        )
    return "provided IP is already allocated" if taken(ip) else ""


def _ip_address(ip: str, svc: core_v1_app.Service) -> networking_v1.IPAddress:
    meta = svc.metadata
    return networking_v1.IPAddress(
        metadata=meta_v1.ObjectMeta(
            name=ip,
            labels={
                "ipaddress.kubernetes.io/ip-family": "IPv4",
                "ipaddress.kubernetes.io/managed-by": MANAGED_BY,
            },
            owner_references=[
                meta_v1.OwnerReference(
                    api_version="v1", kind="Service", name=meta.name, uid=meta.uid
                )
            ],
        ),
        spec=networking_v1.IPAddressSpec(
            parent_ref=networking_v1.ParentReference(
                resource="services", namespace=meta.namespace, name=meta.name
            )
        ),
    )
