"""The cluster IP allocator's pure rules: which addresses a create may take and which it
is refused, as upstream's IPAddress allocator answers."""

from __future__ import annotations

import ipaddress

import msgspec
import pytest

from drasim.apistore import ipallocator
from drasim.common import errors
from drasim.common.api import core_v1_app


def _service(**spec: object) -> core_v1_app.Service:
    svc = core_v1_app.Service(spec=core_v1_app.ServiceSpec(**spec))  # type: ignore[arg-type]
    svc.metadata.name, svc.metadata.namespace, svc.metadata.uid = "web", "default", "u1"
    return svc


def _body(**spec: object) -> bytes:
    return msgspec.json.encode({"spec": spec})


def test_candidates_are_drawn_from_the_dynamic_part_of_the_range():
    drawn = ipallocator.candidates(_body(), draw=lambda low, high: low)
    assert len(drawn) == ipallocator.CANDIDATES
    # KEP-3070: the first 256 addresses of a /12 are kept for static allocation.
    assert drawn[0] == "10.96.1.1"
    high = ipallocator.candidates(_body(), draw=lambda low, high: high)
    assert high[0] == "10.111.255.254"
    for ip in ipallocator.candidates(_body()):
        assert ipaddress.ip_address(ip) in ipallocator.SERVICE_CIDR


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"clusterIP": "10.96.0.10"}, ["10.96.0.10"]),
        ({"clusterIPs": ["10.96.0.11"]}, ["10.96.0.11"]),
        ({"clusterIP": "None"}, []),
        ({"type": "ExternalName", "externalName": "example.com"}, []),
    ],
    ids=["clusterIP", "clusterIPs", "headless", "external-name"],
)
def test_candidates_of_a_service_that_names_its_address(spec, expected):
    assert ipallocator.candidates(_body(**spec)) == expected


def test_allocate_takes_the_first_free_candidate_and_makes_its_ipaddress():
    svc = _service()
    taken = {"10.96.1.1"}
    held = ipallocator.allocate(svc, taken.__contains__, ["10.96.1.1", "10.96.1.2"])
    assert svc.spec.cluster_ip == "10.96.1.2" and svc.spec.cluster_ips == ["10.96.1.2"]
    assert (svc.spec.ip_families, svc.spec.ip_family_policy) == (["IPv4"], "SingleStack")
    assert held is not None and held.metadata.name == "10.96.1.2"
    assert held.metadata.labels["ipaddress.kubernetes.io/managed-by"] == "ipallocator.k8s.io"
    assert held.spec.parent_ref == ipallocator.networking_v1.ParentReference(
        resource="services", namespace="default", name="web"
    )


@pytest.mark.parametrize(
    ("ip", "taken", "message"),
    [
        ("10.96.0.10", True, "failed to allocate IP 10.96.0.10: provided IP is already allocated"),
        (
            "10.200.0.1",
            False,
            "failed to allocate IP 10.200.0.1: the provided network does not match the "
            "current range",
        ),
    ],
    ids=["taken", "outside"],
)
def test_a_requested_address_is_refused(ip, taken, message):
    svc = _service(cluster_ip=ip)
    with pytest.raises(errors.Invalid) as refused:
        ipallocator.allocate(svc, lambda _ip: taken, [ip])
    assert (
        str(refused.value)
        == f'Service "web" is invalid: spec.clusterIPs: Invalid value: ["{ip}"]: {message}'
    )


def test_a_full_range_is_refused():
    with pytest.raises(errors.Invalid, match="failed to allocate IP: range is full"):
        ipallocator.allocate(_service(), lambda _ip: True, ["10.96.1.1"])


def test_headless_and_external_name_services_take_no_address():
    headless = _service(cluster_ip="None")
    assert ipallocator.allocate(headless, lambda _ip: False, []) is None
    assert headless.spec.cluster_ips == ["None"]
    external = _service(type="ExternalName", external_name="example.com")
    assert ipallocator.allocate(external, lambda _ip: False, []) is None
    assert external.spec.cluster_ips == [] and external.spec.ip_families == []
