"""reference.normalize: what the differential runner compares, without any cluster."""

from __future__ import annotations

from typing import Any

import pytest

from reference import normalize

POOLS = {"dra-gpu-0": "dra-gpu", "dp-gpu-0": "dp-gpu"}


def test_flatten_keeps_empty_containers_as_leaves() -> None:
    assert normalize.flatten({"a": {"b": [1, {"c": 2}]}, "d": [], "e": {}}) == {
        "a.b[0]": 1,
        "a.b[1].c": 2,
        "d": [],
        "e": {},
    }


def test_stored_objects_lose_identities_time_values_and_kubelet_fields() -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "p",
            "uid": "u",
            "resourceVersion": "7",
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "generation": 1,
            "managedFields": [{}],
            "annotations": {normalize.LAST_APPLIED: "{}"},
            "ownerReferences": [{"kind": "ReplicaSet", "name": "rs", "uid": "x"}],
        },
        "status": {
            "phase": "Pending",
            "podIP": "10.0.0.2",
            "conditions": [{"type": "PodScheduled", "lastTransitionTime": "t", "status": "True"}],
        },
    }
    assert normalize.normalize_stored(pod) == {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "p",
            "generation": 1,
            "ownerReferences": [{"kind": "ReplicaSet", "name": "rs"}],
        },
        "status": {
            "phase": "Pending",
            "conditions": [
                {"type": "PodScheduled", "lastTransitionTime": "<time>", "status": "True"}
            ],
        },
    }
    assert pod["metadata"]["uid"] == "u", "the input is left alone"


def test_refusal_sorts_causes() -> None:
    status = {
        "reason": "Invalid",
        "message": 'DeviceClass.resource.k8s.io "x" is invalid: ...',
        "details": {
            "causes": [
                {"field": "spec.b", "reason": "FieldValueInvalid", "message": "b"},
                {"field": "spec.a", "reason": "FieldValueRequired", "message": "a"},
            ]
        },
    }
    found = normalize.normalize_refusal(422, status)
    assert found["refused.code"] == 422
    assert found["refused.causes[0].field"] == "spec.a"
    assert found["refused.causes[1].message"] == "b"


def test_generated_names_become_placeholders_everywhere() -> None:
    objects: list[dict[str, Any]] = [
        {
            "metadata": {
                "name": "demo-6fc5f567b9-pfmb8",
                "generateName": "demo-6fc5f567b9-",
                "labels": {"pod-template-hash": "6fc5f567b9"},
            }
        },
        {
            "metadata": {
                "name": "demo-6fc5f567b9-pfmb8-extended-resources-x7k2p",
                "generateName": "demo-6fc5f567b9-pfmb8-extended-resources-",
            }
        },
    ]
    names = normalize.name_placeholders(objects)
    text = "claim demo-6fc5f567b9-pfmb8-extended-resources-x7k2p of demo-6fc5f567b9-pfmb8"
    assert normalize.replace_names({"m": text}, names) == {
        "m": "claim demo-<hash>-*-extended-resources-* of demo-<hash>-*"
    }


@pytest.mark.parametrize(
    ("owner", "labels", "want"),
    [
        ([], {}, "Pod/p"),
        (
            [{"kind": "ReplicaSet", "name": "demo-abc", "controller": True}],
            {"pod-template-hash": "abc"},
            "Deployment/demo",
        ),
        ([{"kind": "ReplicaSet", "name": "solo", "controller": True}], {}, "ReplicaSet/solo"),
    ],
    ids=["standalone", "deployment", "replicaset"],
)
def test_owner_group(owner: list[dict[str, Any]], labels: dict[str, str], want: str) -> None:
    pod = {"metadata": {"name": "p", "ownerReferences": owner, "labels": labels}}
    assert normalize.owner_group(pod) == want


def test_pod_outcome_bound_and_pending() -> None:
    bound = {
        "spec": {"nodeName": "dra-gpu-0"},
        "status": {
            "extendedResourceClaimStatus": {
                "resourceClaimName": "p-extended-resources-abcde",
                "requestMappings": [
                    {
                        "containerName": "c",
                        "resourceName": "example.com/gpu",
                        "requestName": "container-0-request-0",
                    }
                ],
            }
        },
    }
    mapping = "c example.com/gpu → container-0-request-0"
    assert normalize.normalize_pod_outcome(bound, POOLS) == {
        "bound": True,
        "pool": "dra-gpu",
        "extendedResourceClaimStatus.resourceClaimName": "p-extended-resources-abcde",
        "extendedResourceClaimStatus.requestMappings[0]": mapping,
    }
    pending = {
        "spec": {},
        "status": {
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": "0/2",
                }
            ]
        },
    }
    assert normalize.normalize_pod_outcome(pending, POOLS) == {
        "bound": False,
        "PodScheduled.status": "False",
        "PodScheduled.reason": "Unschedulable",
        "PodScheduled.message": "0/2",
    }


def _claim(devices: list[str], *, special: bool = True) -> dict[str, Any]:
    return {
        "metadata": {
            "name": "c",
            "annotations": {normalize.EXTENDED_RESOURCE_CLAIM_ANNOTATION: "true"}
            if special
            else {},
        },
        "status": {
            "allocation": {
                "devices": {
                    "results": [
                        {
                            "request": "r",
                            "driver": "gpu.example.com",
                            "pool": "dra-gpu-0",
                            "device": d,
                        }
                        for d in devices
                    ]
                },
                "nodeSelector": {
                    "nodeSelectorTerms": [
                        {
                            "matchFields": [
                                {"key": "metadata.name", "operator": "In", "values": ["dra-gpu-0"]}
                            ]
                        }
                    ]
                },
            },
            "reservedFor": [{"resource": "pods", "name": "p", "uid": "u"}],
        },
    }


def test_claims_reduce_to_pools_not_device_names() -> None:
    a = normalize.normalize_claim(_claim(["gpu-0", "gpu-1"]), POOLS)
    b = normalize.normalize_claim(_claim(["gpu-5", "gpu-3"]), POOLS)
    assert a == b
    assert a["status"]["allocation"]["devices"]["results"] == [
        "r gpu.example.com/dra-gpu",
        "r gpu.example.com/dra-gpu",
    ]
    assert a["status"]["allocation"]["nodeSelector"] == {"node in pool": "dra-gpu"}
    assert a["status"]["reservedFor"] == ["pods/p"]
    assert normalize.is_special_claim(_claim([]))
    assert not normalize.is_special_claim(_claim([], special=False))


def test_allocation_counts_find_double_use() -> None:
    claims = [_claim(["gpu-0", "gpu-1"]), _claim(["gpu-1"])]
    assert normalize.allocation_counts(claims, POOLS) == {
        "devices gpu.example.com/dra-gpu": 3,
        "devices held twice": 1,
    }


def test_events_by_kind_and_reason_without_the_kubelet() -> None:
    events = [
        {
            "involvedObject": {"kind": "Pod"},
            "reason": "Scheduled",
            "type": "Normal",
            "reportingComponent": "default-scheduler",
        },
        {
            "involvedObject": {"kind": "Pod"},
            "reason": "Started",
            "type": "Normal",
            "source": {"component": "kubelet"},
        },
        {
            "involvedObject": {"kind": "ReplicaSet"},
            "reason": "SuccessfulCreate",
            "type": "Normal",
            "source": {"component": "replicaset-controller"},
        },
    ]
    assert normalize.event_reasons(events) == {
        "Pod Scheduled": "Normal from default-scheduler",
        "ReplicaSet SuccessfulCreate": "Normal from replicaset-controller",
    }


def test_quota_fields() -> None:
    quota = {"status": {"hard": {"pods": "10"}, "used": {"pods": "2"}}}
    assert normalize.quota_fields(quota) == {"hard.pods": "10", "used.pods": "2"}
