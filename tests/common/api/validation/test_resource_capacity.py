"""Validation of shared counters (KEP-4815) and request policies (KEP-5075) in ResourceSlices,
with upstream's paths and messages (`pkg/apis/resource/validation/validation.go`)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from drasim.common import codec
from drasim.common.api import resource_v1, validation

COUNTERS = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceSlice",
    "metadata": {"name": "worker-counters"},
    "spec": {
        "driver": "gpu.example.com",
        "nodeName": "worker",
        "pool": {"name": "worker", "generation": 1, "resourceSliceCount": 2},
        "sharedCounters": [{"name": "gpu-0", "counters": {"memory": {"value": "80Gi"}}}],
    },
}


def _device(**more: Any) -> dict[str, Any]:
    return {"name": "gpu-0-1g-0", **more}


def _slice(*devices: dict[str, Any]) -> dict[str, Any]:
    doc = copy.deepcopy(COUNTERS)
    doc["metadata"]["name"] = "worker-devices"
    del doc["spec"]["sharedCounters"]
    doc["spec"]["devices"] = list(devices)
    return doc


def _consumes(**counters: str) -> list[dict[str, Any]]:
    return [{"counterSet": "gpu-0", "counters": {k: {"value": v} for k, v in counters.items()}}]


def _shared(policy: dict[str, Any], value: str = "10") -> dict[str, Any]:
    return _device(
        allowMultipleAllocations=True,
        capacity={"bw": {"value": value, "requestPolicy": policy}},
    )


def _errors(doc: dict[str, Any]) -> list[tuple[str, str, str]]:
    obj = codec.convert(doc, resource_v1.ResourceSlice)
    return [
        (e.type.removeprefix("FieldValue"), e.field, e.message) for e in validation.validate(obj)
    ]


CASES = [
    ("counters-ok", COUNTERS, []),
    ("devices-consuming-ok", _slice(_device(consumesCounters=_consumes(memory="10Gi"))), []),
    ("counters-and-devices", {**COUNTERS, "spec": {**COUNTERS["spec"], "devices": [_device()]}},
     [("Invalid", "spec", "only one of `sharedCounters` or `devices` is allowed")]),
    ("nine-counter-sets", {**COUNTERS, "spec": {**COUNTERS["spec"], "sharedCounters": [
        {"name": f"s-{i}", "counters": {"c": {"value": "1"}}} for i in range(9)]}},
     [("TooMany", "spec.sharedCounters", "must have at most 8 items")]),
    ("counter-set-duplicate", {**COUNTERS, "spec": {**COUNTERS["spec"], "sharedCounters": [
        {"name": "s", "counters": {"c": {"value": "1"}}}] * 2}},
     [("Duplicate", "spec.sharedCounters[1]", "")]),
    ("counter-set-no-counters", {**COUNTERS, "spec": {**COUNTERS["spec"], "sharedCounters": [
        {"name": "s"}]}}, [("Required", "spec.sharedCounters[0].counters", "")]),
    ("counter-set-33-counters", {**COUNTERS, "spec": {**COUNTERS["spec"], "sharedCounters": [
        {"name": "s", "counters": {f"c-{i}": {"value": "1"} for i in range(33)}}]}},
     [("TooMany", "spec.sharedCounters[0].counters", "must have at most 32 items")]),
    ("65-devices-with-counters", _slice(*[
        {"name": f"d-{i}", "consumesCounters": _consumes(memory="1")} for i in range(65)]),
     [("TooMany", "spec.devices", "must have at most 64 items")]),
    ("three-consumptions", _slice(_device(consumesCounters=[
        {"counterSet": f"s-{i}", "counters": {"c": {"value": "1"}}} for i in range(3)])),
     [("TooMany", "spec.devices[0].consumesCounters", "must have at most 2 items")]),
    ("consumption-no-counter-set", _slice(_device(consumesCounters=[
        {"counters": {"c": {"value": "1"}}}])),
     [("Required", "spec.devices[0].consumesCounters[0].counterSet", "")]),
    ("policy-without-multi", _slice(_device(capacity={"bw": {
        "value": "10", "requestPolicy": {"default": "1"}}})),
     [("Forbidden", "spec.devices[0].capacity[bw].requestPolicy",
       "allowMultipleAllocations must be true")]),
    ("range-ok", _slice(_shared({"default": "2", "validRange": {"min": "2", "step": "2"}})), []),
    ("range-no-default", _slice(_shared({"validRange": {"min": "2"}})),
     [("Required", "spec.devices[0].capacity[bw].requestPolicy.default",
       "required when validRange is defined")]),
    ("range-off-step", _slice(_shared({"default": "3", "validRange": {"min": "2", "step": "2"}})),
     [("Invalid", "spec.devices[0].capacity[bw].requestPolicy.validRange.step",
       "value is not a multiple of a given step (2) from (2)")]),
    ("range-min-above-capacity", _slice(_shared(
        {"default": "20", "validRange": {"min": "20"}})),
     [("Invalid", "spec.devices[0].capacity[bw].requestPolicy.validRange.min",
       "min is larger than capacity value: 10")]),
    ("values-and-range", _slice(_shared(
        {"default": "2", "validValues": ["2"], "validRange": {"min": "2"}})),
     [("Forbidden", "spec.devices[0].capacity[bw].requestPolicy",
       'exactly one policy can be specified, cannot specify "validValues" and "validRange" '
       "at the same time")]),
    ("values-unsorted", _slice(_shared({"default": "2", "validValues": ["4", "2"]})),
     [("Invalid", "spec.devices[0].capacity[bw].requestPolicy.validValues[1]",
       "values must be sorted in ascending order")]),
    ("values-default-missing", _slice(_shared({"default": "3", "validValues": ["2", "4"]})),
     [("Invalid", "spec.devices[0].capacity[bw].requestPolicy.validValues",
       "default value is not valid according to the requestPolicy")]),
]  # fmt: skip


@pytest.mark.parametrize(("doc", "want"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_validate(doc: dict[str, Any], want: list[tuple[str, str, str]]) -> None:
    got = _errors(doc)
    assert [(t, f) for t, f, _ in got] == [(t, f) for t, f, _ in want]
    for (_, _, detail), (_, _, want_detail) in zip(got, want, strict=True):
        if want_detail:
            assert detail.endswith(want_detail)
