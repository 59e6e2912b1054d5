"""What the write path drops while a feature gate is off, as upstream's strategies do in
PrepareForCreate and PrepareForUpdate (no servers: one batch, as the writer runs it)."""

from __future__ import annotations

import re
from typing import Any

import msgspec
import pytest

from drasim.apistore.mutations import Batch
from drasim.apistore.request import Context
from drasim.common import codec, errors, features
from drasim.common.bus import messages
from drasim.common.featuregate import FeatureGate

# Labelled for admin access, so that claims asking for it may be created while it is on.
NAMESPACE = {
    "apiVersion": "v1",
    "kind": "Namespace",
    "metadata": {"name": "default", "labels": {"resource.kubernetes.io/admin-access": "true"}},
}
GPU_CLASS = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "DeviceClass",
    "metadata": {"name": "gpu.example.com"},
    "spec": {"extendedResourceName": "example.com/gpu"},
}


def gate(flag: str = "", release: str | None = None) -> FeatureGate:
    return features.new_gate(flag, emulated=release)


ER_OFF = gate("DRAExtendedResource=false", "1.36")


class Writes:
    """One batch with the gates given: create, update, status update, and what is stored."""

    def __init__(self, gates: FeatureGate, *stored: tuple[str, dict[str, Any]]) -> None:
        """`stored`: (resource, object) pairs already in the store."""
        loaded = {("namespaces", "", "default"): codec.encode(NAMESPACE)}
        for resource, obj in stored:
            meta = obj["metadata"]
            loaded[(resource, meta.get("namespace", ""), meta["name"])] = codec.encode(obj)
        self.batch = Batch(loaded, first_seq=100, features=gates)

    def create(self, resource: str, obj: dict[str, Any], namespace: str = "") -> dict[str, Any]:
        request = messages.Create(
            resource=resource, namespace=namespace, object=msgspec.Raw(codec.encode(obj))
        )
        return msgspec.json.decode(self.batch.apply(request, Context()))

    def update(
        self, resource: str, obj: dict[str, Any], namespace: str = "", subresource: str = ""
    ) -> dict[str, Any]:
        request = messages.Update(
            resource=resource,
            namespace=namespace,
            name=obj["metadata"]["name"],
            subresource=subresource,
            object=msgspec.Raw(codec.encode(obj)),
        )
        return msgspec.json.decode(self.batch.apply(request, Context()))


# What resource.k8s.io/v1 defaults a request to: written out, so stored equals sent.
ONE = {"allocationMode": "ExactCount", "count": 1}


def claim(*requests: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "c", "namespace": "default"},
        "spec": {"devices": {"requests": list(requests)}},
    }


def test_device_class_extended_resource_name_is_dropped_on_create_while_off() -> None:
    stored = Writes(ER_OFF).create("deviceclasses", GPU_CLASS)
    assert "extendedResourceName" not in stored["spec"]
    assert Writes(gate()).create("deviceclasses", GPU_CLASS)["spec"] == GPU_CLASS["spec"]


def test_a_stored_extended_resource_name_survives_updates_while_off() -> None:
    """Stored while the gate was on (a cluster downgraded): in use, so kept."""
    stored = Writes(gate()).create("deviceclasses", GPU_CLASS)
    stored["metadata"]["labels"] = {"team": "a"}
    updated = Writes(ER_OFF, ("deviceclasses", stored)).update("deviceclasses", stored)
    assert updated["metadata"]["labels"] == {"team": "a"}
    assert updated["spec"] == GPU_CLASS["spec"]
    # Added by an update while off: dropped, as on create.
    plain = Writes(ER_OFF).create("deviceclasses", {**GPU_CLASS, "spec": {}})
    asked = {**plain, "spec": GPU_CLASS["spec"]}
    updated = Writes(ER_OFF, ("deviceclasses", plain)).update("deviceclasses", asked)
    assert "extendedResourceName" not in updated["spec"]


def test_first_available_is_dropped_before_validation_while_off() -> None:
    """Upstream drops in PrepareForCreate, before Validate: a request with only
    subrequests then has neither `exactly` nor `firstAvailable`."""
    prioritized = {
        "name": "gpu",
        "firstAvailable": [
            {"name": "big", "deviceClassName": "big.example.com", **ONE},
            {"name": "small", "deviceClassName": "small.example.com", **ONE},
        ],
    }
    off = Writes(gate("DRAPrioritizedList=false", "1.35"))
    with pytest.raises(errors.ApiError) as refused:
        off.create("resourceclaims", claim(prioritized), "default")
    assert refused.value.code == 422
    assert [c.field for c in refused.value.causes] == ["spec.devices.requests[0]"]
    stored = Writes(gate()).create("resourceclaims", claim(prioritized), "default")
    assert stored["spec"]["devices"]["requests"] == [prioritized]


def test_admin_access_is_dropped_from_requests_and_results_while_off() -> None:
    request = {"name": "gpu", "exactly": {"deviceClassName": "gpu", **ONE, "adminAccess": True}}
    off_gates = gate("DRAAdminAccess=false", "1.35")
    stored = Writes(off_gates).create("resourceclaims", claim(request), "default")
    assert stored["spec"]["devices"]["requests"] == [
        {"name": "gpu", "exactly": {"deviceClassName": "gpu", **ONE}}
    ]
    result = {"request": "gpu", "driver": "d", "pool": "p", "device": "x", "adminAccess": True}
    asked = {**stored, "status": {"allocation": {"devices": {"results": [result]}}}}
    allocated = Writes(off_gates, ("resourceclaims", stored)).update(
        "resourceclaims", asked, "default", subresource="status"
    )
    assert allocated["status"]["allocation"]["devices"]["results"] == [
        {k: v for k, v in result.items() if k != "adminAccess"}
    ]
    # On (1.35's default), both stay.
    on = Writes(gate(release="1.35")).create("resourceclaims", claim(request), "default")
    assert on["spec"]["devices"]["requests"] == [request]


def test_the_pods_special_claim_status_is_dropped_while_off_unless_already_there() -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default"},
        "spec": {
            "containers": [
                {"name": "c", "image": "i", "resources": {"limits": {"example.com/gpu": "1"}}}
            ]
        },
    }
    stored = Writes(ER_OFF).create("pods", pod, "default")
    special = {
        "resourceClaimName": "p-extended-resources-abcde",
        "requestMappings": [
            {"containerName": "c", "resourceName": "example.com/gpu", "requestName": "r0"}
        ],
    }
    asked = {**stored, "status": {**stored["status"], "extendedResourceClaimStatus": special}}
    updated = Writes(ER_OFF, ("pods", stored)).update("pods", asked, "default", "status")
    assert "extendedResourceClaimStatus" not in updated["status"]
    kept = Writes(gate(), ("pods", stored)).update("pods", asked, "default", "status")
    assert kept["status"]["extendedResourceClaimStatus"] == special
    # Written while on, it stays through later status updates while off.
    kept["status"]["message"] = "later"
    again = Writes(ER_OFF, ("pods", kept)).update("pods", kept, "default", "status")
    assert again["status"]["extendedResourceClaimStatus"] == special


def test_device_taints_are_dropped_from_slices_while_off() -> None:
    """DRADeviceTaints is GA in 1.37 but not locked: it may be turned off."""
    slice_ = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": "s"},
        "spec": {
            "driver": "gpu.example.com",
            "nodeName": "n",
            "pool": {"name": "n", "resourceSliceCount": 1},
            "devices": [{"name": "gpu-0", "taints": [{"key": "k", "effect": "NoSchedule"}]}],
        },
    }
    off = gate("DRADeviceTaintRules=false,DRADeviceTaints=false")
    assert Writes(off).create("resourceslices", slice_)["spec"]["devices"] == [{"name": "gpu-0"}]
    on = Writes(gate()).create("resourceslices", slice_)
    (taint,) = on["spec"]["devices"][0]["taints"]
    # Kept, and stamped with the time it was added (upstream's `SetDefaults_DeviceTaint`).
    assert taint == {"key": "k", "effect": "NoSchedule", "timeAdded": taint["timeAdded"]}
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", taint["timeAdded"])
