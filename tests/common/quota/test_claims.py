"""The ResourceClaim evaluator, case by case as upstream's `resource_claims_test.go`."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from drasim.common import codec
from drasim.common.api import core_v1, resource_v1
from drasim.common.quota import claims, extended_resource_cache
from tests.builders import make_pod

IMPLICIT = "deviceclass.resource.kubernetes.io/gpu"
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _exact(count: int = 1, mode: str = "ExactCount", cls: str = "gpu", **more: Any) -> dict:
    return {"exactly": {"deviceClassName": cls, "allocationMode": mode, "count": count, **more}}


def _claim(
    *requests: dict, name: str = "foo", owner: str = "", created: str | None = None
) -> resource_v1.ResourceClaim:
    meta: dict[str, Any] = {"name": name, "namespace": "ns"}
    if created:
        meta["creationTimestamp"] = created
    if owner:
        meta["annotations"] = {resource_v1.EXTENDED_RESOURCE_CLAIM_ANNOTATION: "true"}
        meta["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "Pod", "name": owner, "uid": "uid", "controller": True}
        ]
    reqs = [{"name": f"request-{i}", **r} for i, r in enumerate(requests)]
    obj = {"metadata": meta, "spec": {"devices": {"requests": reqs}}}
    return codec.convert(obj, resource_v1.ResourceClaim)


def _pod(name: str, claim: str | None, *, init: dict | None = None, main: dict | None = None):
    builder = make_pod(name, "ns")
    if init:
        builder.init_container("init", requests=init)
    builder.container("con0", **({"requests": main} if main else {}))
    pod = builder.obj()
    pod.metadata.uid = "uid"
    if claim is not None:
        pod.status.extended_resource_claim_status = core_v1.PodExtendedResourceClaimStatus(
            resource_claim_name=claim
        )
    return pod


PODS = {
    "pod-implicit": _pod("pod-implicit", "foo", main={IMPLICIT: "1"}),
    "pod-explicit": _pod("pod-explicit", "foo", init={"example.com/gpu": "1"}),
    "pod-hybrid": _pod(
        "pod-hybrid",
        "foo",
        init={"example.com/gpu": "1", IMPLICIT: "1"},
        main={"example.com/gpu": "1", IMPLICIT: "1"},
    ),
    "pod-nil-status": _pod(
        "pod-nil-status", None, init={"example.com/gpu": "1"}, main={IMPLICIT: "1"}
    ),
}


def _evaluator(
    *, mapped: bool = True, others: list[tuple[str, str]] = (), gate: bool = True
) -> claims.ClaimEvaluator:
    cache = extended_resource_cache()
    if mapped:
        cls = codec.convert(
            {"metadata": {"name": "gpu"}, "spec": {"extendedResourceName": "example.com/gpu"}},
            resource_v1.DeviceClass,
        )
        cache.on_add(cls)
    return claims.ClaimEvaluator(
        classes=cache,
        pod_of=lambda ns, name: PODS.get(name),
        owned_claims=lambda ns, uid: others,
        clock=lambda: NOW,
        extended_resources=gate,
    )


COUNT = "count/resourceclaims.resource.k8s.io"
DEVICES = "gpu.deviceclass.resource.k8s.io/devices"
R_IMPLICIT = "requests.deviceclass.resource.kubernetes.io/gpu"
R_EXPLICIT = "requests.example.com/gpu"

CASES = [
    # (id, claim, evaluator options, expected usage)
    ("implicit-special", _claim(_exact(), owner="pod-implicit"), {},
     {COUNT: 1, DEVICES: 1, R_EXPLICIT: 1}),
    ("explicit-special", _claim(_exact(), owner="pod-explicit"), {},
     {COUNT: 1, DEVICES: 1, R_IMPLICIT: 1}),
    ("hybrid-special", _claim(_exact(), _exact(), owner="pod-hybrid"), {},
     {COUNT: 1, DEVICES: 2, R_IMPLICIT: 1, R_EXPLICIT: 1}),
    ("nil-status-oldest", _claim(_exact(), _exact(), name="foo-copy", owner="pod-nil-status"), {},
     {COUNT: 1, DEVICES: 2, R_IMPLICIT: 1, R_EXPLICIT: 1}),
    # Another special claim of the pod made at the same time, with a smaller name: this one
    # is not the pod's, so it is charged in full.
    ("nil-status-not-oldest",
     _claim(_exact(), _exact(), name="foo-copy", owner="pod-nil-status"),
     {"others": [("foo", None)]},
     {COUNT: 1, DEVICES: 2, R_IMPLICIT: 2, R_EXPLICIT: 2}),
    # The pod names another claim: a look-alike is charged in full.
    ("status-names-another", _claim(_exact(), name="bar", owner="pod-implicit"), {},
     {COUNT: 1, DEVICES: 1, R_IMPLICIT: 1, R_EXPLICIT: 1}),
    # Owned by a pod that does not exist.
    ("owner-missing", _claim(_exact(), owner="no-such-pod"), {},
     {COUNT: 1, DEVICES: 1, R_IMPLICIT: 1, R_EXPLICIT: 1}),
    ("simple-unmapped", _claim(_exact()), {"mapped": False},
     {COUNT: 1, DEVICES: 1, R_IMPLICIT: 1}),
    ("simple-mapped", _claim(_exact()), {}, {COUNT: 1, DEVICES: 1, R_IMPLICIT: 1, R_EXPLICIT: 1}),
    ("many-requests", _claim(*[_exact()] * 5), {"mapped": False},
     {COUNT: 1, DEVICES: 5, R_IMPLICIT: 5}),
    ("count", _claim(_exact(5)), {"mapped": False}, {COUNT: 1, DEVICES: 5, R_IMPLICIT: 5}),
    ("count-unset-is-one", _claim({"exactly": {"deviceClassName": "gpu"}}), {"mapped": False},
     {COUNT: 1, DEVICES: 1, R_IMPLICIT: 1}),
    ("all", _claim(_exact(mode="All", count=0)), {"mapped": False},
     {COUNT: 1, DEVICES: 32, R_IMPLICIT: 32}),
    ("unknown-mode", _claim(_exact(mode="future-mode")), {"mapped": False},
     {COUNT: 1, DEVICES: 0}),
    # Administrative access is not exempt from quota.
    # With DRAExtendedResource off, only devices are charged and the names are not matched.
    ("gate-off", _claim(_exact(), owner="pod-implicit"), {"gate": False}, {COUNT: 1, DEVICES: 1}),
    ("admin", _claim(_exact(adminAccess=True)), {"mapped": False},
     {COUNT: 1, DEVICES: 1, R_IMPLICIT: 1}),
    ("prioritized-list", _claim({"firstAvailable": [
        {"name": "a", "deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 2},
        {"name": "b", "deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 1},
    ]}), {"mapped": False}, {COUNT: 1, DEVICES: 2, R_IMPLICIT: 2}),
    ("prioritized-list-all", _claim({"firstAvailable": [
        {"name": "a", "deviceClassName": "gpu", "count": 1},
        {"name": "b", "deviceClassName": "gpu", "allocationMode": "All"},
    ]}), {"mapped": False}, {COUNT: 1, DEVICES: 32, R_IMPLICIT: 32}),
    ("prioritized-list-classes", _claim({"firstAvailable": [
        {"name": "a", "deviceClassName": "gpu", "count": 1},
        {"name": "b", "deviceClassName": "tpu", "allocationMode": "All"},
    ]}), {"mapped": False}, {
        COUNT: 1, DEVICES: 1, R_IMPLICIT: 1,
        "tpu.deviceclass.resource.k8s.io/devices": 32,
        "requests.deviceclass.resource.kubernetes.io/tpu": 32,
    }),
]  # fmt: skip


@pytest.mark.parametrize(
    ("claim", "options", "want"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_usage(claim: resource_v1.ResourceClaim, options: dict, want: dict[str, int]) -> None:
    usage = _evaluator(**options).usage(claim)
    assert {name: str(q) for name, q in usage.items()} == {n: str(v) for n, v in want.items()}


def test_older_special_claim_takes_the_pods_share() -> None:
    """Of two claims the pod controls while it names none, the older one is the pod's."""
    later = _claim(_exact(), name="a", owner="pod-nil-status", created="2026-01-01T00:00:05Z")
    evaluator = _evaluator(others=[("z", "2026-01-01T00:00:01Z")])
    assert str(evaluator.usage(later)[R_IMPLICIT]) == "1"  # full: 1 device, no subtraction
    earlier = _claim(_exact(), name="z", owner="pod-nil-status", created="2026-01-01T00:00:01Z")
    evaluator = _evaluator(others=[("a", "2026-01-01T00:00:05Z")])
    assert R_IMPLICIT not in evaluator.usage(earlier)  # the pod's own request covers it


MATCHING = [
    ("supported", [COUNT, DEVICES, R_EXPLICIT, R_IMPLICIT],
     [COUNT, DEVICES, R_EXPLICIT, R_IMPLICIT]),
    ("unsupported", ["resourceclaims", "storage", "ephemeral-storage",
                     "bronze.deviceclass.resource.k8s.io/storage",
                     "gpu.storage.k8s.io/requests.storage"], []),
    # A name no class maps, and the implicit name of a class without an explicit one.
    ("unmapped",
     ["requests.example.com/tpu", "requests.deviceclass.resource.kubernetes.io/tpu"], []),
]  # fmt: skip


@pytest.mark.parametrize(("names", "want"), [m[1:] for m in MATCHING], ids=[m[0] for m in MATCHING])
def test_matching_resources(names: list[str], want: list[str]) -> None:
    assert _evaluator().matching_resources(names) == sorted(want)


def test_gate_off_matches_no_extended_resource_name() -> None:
    names = [COUNT, DEVICES, R_EXPLICIT, R_IMPLICIT]
    assert _evaluator(gate=False).matching_resources(names) == sorted([COUNT, DEVICES])
