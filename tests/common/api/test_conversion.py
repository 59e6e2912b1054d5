"""Conversion of resource.k8s.io objects between v1 and v1beta1/v1beta2, compared with
upstream's rules (`pkg/apis/resource/v1beta1/conversion.go`): round trips keep every field,
v1beta1's `basic` and inline request fields move where v1 has them."""

from __future__ import annotations

import copy
from typing import Any

import msgspec
import pytest

from drasim.common import codec
from drasim.common.api import registry, resource_v1
from drasim.common.api.conversion import resource_v1beta1 as v1beta1
from drasim.common.api.conversion import resource_v1beta2 as v1beta2

_SELECTOR = {"cel": {"expression": "device.driver == 'gpu.example.com'"}}
_TOLERATION = {"key": "k", "operator": "Equal", "value": "v", "effect": "NoExecute",
               "tolerationSeconds": 30}  # fmt: skip
_NODE_SELECTOR = {
    "nodeSelectorTerms": [
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
    ]
}
# A device with every field v1 has (the node fields as perDeviceNodeSelection allows).
V1_DEVICE = {
    "name": "gpu-0",
    "attributes": {"model": {"string": "a100"}, "index": {"int": 0}, "fast": {"bool": True},
                   "driverVersion": {"version": "1.2.3"}},
    "capacity": {"memory": {"value": "40Gi", "requestPolicy": {"default": "1Gi"}}},
    "consumesCounters": [{"counterSet": "gpu-0-counters", "counters": {"mem": {"value": "40Gi"}}}],
    "nodeName": "node-0",
    "nodeSelector": _NODE_SELECTOR,
    "allNodes": True,
    "taints": [{"key": "k", "value": "v", "effect": "NoSchedule",
                "timeAdded": "2026-01-01T00:00:00Z"}],
    "bindsToNode": True,
    "bindingConditions": ["Attached"],
    "bindingFailureConditions": ["Failed"],
    "allowMultipleAllocations": True,
}  # fmt: skip
V1_SLICE = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceSlice",
    "metadata": {"name": "s", "labels": {"a": "b"}},
    "spec": {
        "driver": "gpu.example.com",
        "pool": {"name": "p", "generation": 2, "resourceSliceCount": 1},
        "perDeviceNodeSelection": True,
        "devices": [V1_DEVICE, {"name": "bare"}],
        "sharedCounters": [{"name": "gpu-0-counters", "counters": {"mem": {"value": "80Gi"}}}],
    },
}
V1_EXACTLY = {
    "deviceClassName": "gpu.example.com",
    "selectors": [_SELECTOR],
    "allocationMode": "ExactCount",
    "count": 2,
    "adminAccess": False,
    "tolerations": [_TOLERATION],
    "capacity": {"requests": {"memory": "10Gi"}},
}
V1_SUBREQUEST = {"name": "small", "deviceClassName": "gpu.example.com", "selectors": [_SELECTOR],
                 "allocationMode": "All", "tolerations": [_TOLERATION],
                 "capacity": {"requests": {"memory": "1Gi"}}}  # fmt: skip
V1_CLAIM_SPEC = {
    "devices": {
        "requests": [
            {"name": "gpu", "exactly": V1_EXACTLY},
            {"name": "alt", "firstAvailable": [V1_SUBREQUEST]},
        ],
        "constraints": [{"requests": ["gpu"], "matchAttribute": "gpu.example.com/model"}],
        "config": [{"requests": ["gpu"],
                    "opaque": {"driver": "gpu.example.com", "parameters": {"a": 1}}}],
    }
}  # fmt: skip
V1_CLAIM = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceClaim",
    "metadata": {"name": "c", "namespace": "default"},
    "spec": V1_CLAIM_SPEC,
    "status": {
        "allocation": {
            "devices": {
                "results": [{"request": "gpu", "driver": "gpu.example.com", "pool": "p",
                             "device": "gpu-0", "adminAccess": False, "tolerations": [_TOLERATION],
                             "bindingConditions": ["Attached"], "shareID": "abc",
                             "consumedCapacity": {"memory": "10Gi"}}],
                "config": [{"source": "FromClaim", "requests": ["gpu"],
                            "opaque": {"driver": "gpu.example.com", "parameters": {"a": 1}}}],
            },
            "nodeSelector": _NODE_SELECTOR,
            "allocationTimestamp": "2026-01-01T00:00:00Z",
        },
        "reservedFor": [{"resource": "pods", "name": "p", "uid": "u"}],
        "devices": [{"driver": "gpu.example.com", "pool": "p", "device": "gpu-0",
                     "conditions": [{"type": "Ready", "status": "True", "reason": "R",
                                     "lastTransitionTime": "2026-01-01T00:00:00Z"}],
                     "data": {"x": 1}, "networkData": {"interfaceName": "eth0"}}],
    },
}  # fmt: skip
V1_TEMPLATE = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceClaimTemplate",
    "metadata": {"name": "t", "namespace": "default"},
    "spec": {"metadata": {"labels": {"x": "y"}}, "spec": V1_CLAIM_SPEC},
}
V1_CLASS = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "DeviceClass",
    "metadata": {"name": "gpu.example.com"},
    "spec": {"selectors": [_SELECTOR], "extendedResourceName": "example.com/gpu",
             "config": [{"opaque": {"driver": "gpu.example.com", "parameters": {"b": 2}}}]},
}  # fmt: skip
OBJECTS = [V1_SLICE, V1_CLAIM, V1_TEMPLATE, V1_CLASS]


def _stored(obj: dict[str, Any]) -> dict[str, Any]:
    """The object as the stored type writes it (what conversion reads)."""
    info = registry.by_kind(obj["kind"])
    return msgspec.json.decode(codec.encode(codec.convert(obj, info.type)))


def _without_empty_class_names(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _without_empty_class_names(v) for k, v in obj.items()
                if (k, v) != ("deviceClassName", "")}  # fmt: skip
    if isinstance(obj, list):
        return [_without_empty_class_names(v) for v in obj]
    return obj


def test_every_field_of_the_samples_is_known_to_v1() -> None:
    """The samples lose nothing to v1's types, so the round trips below check them all."""
    for obj in OBJECTS:
        assert _stored(obj) == obj


@pytest.mark.parametrize("obj", OBJECTS, ids=lambda o: o["kind"])
@pytest.mark.parametrize("conversion", [v1beta1, v1beta2], ids=["v1beta1", "v1beta2"])
def test_v1_round_trip_keeps_everything(conversion: Any, obj: dict[str, Any]) -> None:
    original = copy.deepcopy(obj)
    served = conversion.from_storage(obj["kind"], obj)
    assert served["apiVersion"] == conversion.GROUP_VERSION
    # The served form is one its own types read without loss (but for the empty class name
    # v1beta1 writes, which its type leaves out as it leaves out every empty value).
    type_ = conversion.TYPES.get(obj["kind"], registry.by_kind(obj["kind"]).type)
    read = msgspec.json.decode(codec.encode(codec.convert(served, type_)))
    assert read == _without_empty_class_names(served)
    assert _stored(conversion.to_storage(obj["kind"], served)) == obj
    assert obj == original  # the input is left alone


def test_v1beta1_shapes() -> None:
    slice_ = v1beta1.from_storage("ResourceSlice", V1_SLICE)
    device = slice_["spec"]["devices"][0]
    assert device == {"name": "gpu-0", "basic": {k: v for k, v in V1_DEVICE.items()
                                                 if k != "name"}}  # fmt: skip
    assert slice_["spec"]["devices"][1] == {"name": "bare", "basic": {}}
    claim = v1beta1.from_storage("ResourceClaim", V1_CLAIM)
    assert claim["spec"]["devices"]["requests"] == [
        {"name": "gpu", **V1_EXACTLY},
        {"name": "alt", "deviceClassName": "", "firstAvailable": [V1_SUBREQUEST]},
    ]
    assert claim["status"] == V1_CLAIM["status"]


@pytest.mark.parametrize(
    ("request_", "exactly"),
    [
        ({"name": "r", "deviceClassName": "c"}, {"deviceClassName": "c"}),
        # Any field Go sees as set makes `exactly`, even one that is empty.
        ({"name": "r", "selectors": []}, {"selectors": []}),
        ({"name": "r", "adminAccess": False}, {"adminAccess": False}),
        ({"name": "r", "count": 2}, {"count": 2}),
        ({"name": "r", "capacity": {}}, {"capacity": {}}),
        # Zero values and nulls do not.
        ({"name": "r", "deviceClassName": "", "count": 0}, None),
        ({"name": "r", "tolerations": None}, None),
        ({"name": "r", "firstAvailable": [{"name": "a", "deviceClassName": "c"}]}, None),
    ],
    ids=["class", "empty-selectors", "admin-false", "count", "empty-capacity", "zeros",
         "null", "first-available"],
)  # fmt: skip
def test_v1beta1_request_gets_exactly_as_upstream(
    request_: dict[str, Any], exactly: dict[str, Any] | None
) -> None:
    claim = {"kind": "ResourceClaim", "spec": {"devices": {"requests": [request_]}}}
    converted = v1beta1.to_storage("ResourceClaim", claim)["spec"]["devices"]["requests"][0]
    assert converted.get("exactly") == exactly
    assert not set(converted) & (v1beta1.resource_v1beta1.EXACT_REQUEST_FIELDS - {"name"})


def test_v1beta1_fields_v1_has_elsewhere_are_dropped() -> None:
    """v1's places are unknown in v1beta1: a v1beta1 body using them loses them."""
    slice_ = {
        "kind": "ResourceSlice",
        "spec": {
            "nodeName": "",
            "allNodes": False,
            "devices": [{"name": "d", "attributes": {"a": {"int": 1}},
                         "basic": {"name": "other", "capacity": {"c": {"value": "1"}}}},
                        {"name": "e"}],
        },
    }  # fmt: skip
    converted = v1beta1.to_storage("ResourceSlice", slice_)
    assert converted["spec"] == {
        "devices": [{"name": "d", "capacity": {"c": {"value": "1"}}}, {"name": "e"}]
    }
    claim = {"kind": "ResourceClaim", "spec": {"devices": {"requests": [
        {"name": "r", "exactly": {"deviceClassName": "x"}}]}}}  # fmt: skip
    assert v1beta1.to_storage("ResourceClaim", claim)["spec"]["devices"]["requests"] == [
        {"name": "r"}
    ]


def test_a_field_added_to_v1_moves_with_the_others() -> None:
    """BasicDevice and the inline request fields are read off v1's types."""
    device_fields = {f.encode_name for f in msgspec.structs.fields(resource_v1.Device)}
    assert device_fields - {"name"} == v1beta1.resource_v1beta1.BASIC_DEVICE_FIELDS
    exact_fields = {f.encode_name for f in msgspec.structs.fields(resource_v1.ExactDeviceRequest)}
    request_fields = {
        f.encode_name for f in msgspec.structs.fields(v1beta1.resource_v1beta1.DeviceRequest)
    }
    assert request_fields == exact_fields | {"name", "firstAvailable"}
