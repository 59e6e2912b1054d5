"""The objects of the verdict-reuse histories (`verdict_history`), as Kubernetes JSON: nodes,
devices and their slices, DeviceClasses, the pods' specs and their user claims; and
`overcommitted`, the check that what was allocated along a history fits the devices.

Which DRA features a history's devices and pods use is its `Features`: partitions and
shares (KEP-4815, KEP-5075), a perDeviceNodeSelection pool, binding conditions (KEP-5007)
and user claims with admin access (KEP-5018). Device taints (KEP-5055) are always in.
"""

from __future__ import annotations

import collections
import dataclasses
import random
from collections.abc import Iterable, Mapping
from typing import Any

from drasim.common.api import resource_v1

DRIVER = "test-driver.cdi.k8s.io"
NIC_DRIVER = "nic.example.com"
NIC = "example.com/nic"
DEVICE_PLUGIN_NODE = "dp-0"
NOTHING = 'device.driver == "nobody.example.com"'
CLASSES = {
    # class name -> (extended resource name, selector)
    "class-0": ("example.com/gpu-0", f'device.driver == "{DRIVER}"'),
    "class-1": (
        "example.com/gpu-1",
        f'device.driver == "{DRIVER}" && device.attributes["{DRIVER}"].index < 2',
    ),
    "class-2": ("example.com/gpu-2", f'device.driver == "{DRIVER}"'),
    # No class at first: added (and removed) as the history goes.
    "class-3": ("example.com/gpu-3", f'device.driver == "{DRIVER}"'),
    "nic-class": (NIC, f'device.driver == "{NIC_DRIVER}"'),
}
EXTENDED = [name for name, _ in CLASSES.values()]
# The binding conditions of devices that have them, and the failure condition.
ATTACHED = "example.com/attached"
ATTACH_FAILED = "example.com/attach-failed"
# A pod spec's user claim: the pod's `spec.resourceClaims[].name`; each pod gets a claim of
# its own made from the spec's `CLAIM_SPEC_KEY` entry.
POD_CLAIM = "user"
CLAIM_SPEC_KEY = "x-claim-spec"

DeviceID = tuple[str, str, str]


@dataclasses.dataclass(frozen=True)
class Features:
    """What a history's devices and pods use besides plain devices, device taints and the
    special claim."""

    partitions: bool = False  # devices consuming counters, shared devices with capacity
    per_device_slice: bool = False  # a perDeviceNodeSelection pool
    binding_conditions: bool = False  # devices with binding conditions, bindsToNode
    user_claims: bool = False  # pods with a claim of their own, most with adminAccess


def node_dict(name: str, rng: random.Random) -> dict[str, Any]:
    allocatable = {"cpu": "4", "memory": "8Gi", "pods": "8"}
    if name == DEVICE_PLUGIN_NODE:
        allocatable["example.com/gpu-0"] = "2"  # a device plugin's: NodeResourcesFit's path
    return {
        "metadata": {
            "name": name,
            "uid": f"uid-{name}",
            "labels": {"kubernetes.io/hostname": name, "zone": rng.choice("ab")},
        },
        "spec": {},
        "status": {
            "capacity": dict(allocatable),
            "allocatable": allocatable,
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def device(index: int, rng: random.Random, features: Features) -> dict[str, Any]:
    found: dict[str, Any] = {"name": f"dev-{index}", "attributes": {"index": {"int": index}}}
    if rng.random() < 0.1:  # unusable for pods, which tolerate no device taint
        found["taints"] = [{"key": "broken", "value": "yes", "effect": "NoSchedule"}]
    if features.partitions:
        roll = rng.random()
        if roll < 0.4:
            found["consumesCounters"] = [{"counterSet": "gpu", "counters": {"mem": {"value": "1"}}}]
        elif roll < 0.6:
            found["allowMultipleAllocations"] = True
            found["capacity"] = {
                "bw": {"value": "3", "requestPolicy": {"default": "1", "validRange": {"min": "1"}}}
            }
    if features.binding_conditions and rng.random() < 0.35:
        found["bindingConditions"] = [ATTACHED]
        found["bindingFailureConditions"] = [ATTACH_FAILED]
        if rng.random() < 0.5:
            found["bindsToNode"] = True
    return found


def devices(count: int, rng: random.Random, features: Features) -> list[dict[str, Any]]:
    return [device(i, rng, features) for i in range(count)]


def slice_dict(
    name: str, driver: str, pool: str, devices: list[dict[str, Any]], **placement: Any
) -> dict[str, Any]:
    """A one-slice pool; `placement` is `nodeName`, `allNodes`, `nodeSelector` or
    `perDeviceNodeSelection`. A counter set holding 2 of "mem" when a device consumes it."""
    found = {
        "metadata": {"name": name, "resourceVersion": "1"},
        "spec": {
            "driver": driver,
            "pool": {"name": pool, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
            **placement,
        },
    }
    if counters := shared_counters(devices):
        found["spec"]["sharedCounters"] = counters
    return found


def shared_counters(devices: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The pool's counter sets: one holding 2 of "mem" when a device consumes it."""
    if any(d.get("consumesCounters") for d in devices):
        return [{"name": "gpu", "counters": {"mem": {"value": "2"}}}]
    return []


def class_dict(name: str, selector: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "resourceVersion": "1"},
        "spec": {
            "selectors": [{"cel": {"expression": selector}}],
            "extendedResourceName": CLASSES[name][0],
        },
    }


def random_pod_spec(rng: random.Random, features: Features) -> dict[str, Any]:
    """One of the specs the history's pods share: extended resources (DRA-served,
    device-plugin-served, unmapped or shared-pool), maybe cpu and memory, maybe an init
    container; or cpu alone. With user claims, some specs also have a claim of the pod's
    own (`claim_dict`), most of them asking for admin access. Some tolerate the
    `dedicated` taint or cordoned nodes, some select a zone (what nodes change, see
    `Cluster.update_node`), so that pods differ in what each plugin signs."""

    def container(name: str) -> dict[str, Any]:
        requests: dict[str, str] = {}
        limits: dict[str, str] = {}
        for resource in rng.sample(EXTENDED, k=rng.choice([1, 1, 1, 2])):
            count = str(rng.randint(1, 3) if resource != NIC else 1)
            requests[resource] = limits[resource] = count
        if rng.random() < 0.5:
            requests["cpu"] = rng.choice(["500m", "1", "1500m"])
        if rng.random() < 0.3:
            requests["memory"] = rng.choice(["1Gi", "3Gi"])
        return {
            "name": name,
            "image": "pause",
            "resources": {"requests": requests, "limits": limits},
        }

    if rng.random() < 0.15:
        cpu = rng.choice(["1", "2"])
        return {
            "containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": cpu}}}]
        }
    spec: dict[str, Any] = {"containers": [container("c")]}
    if rng.random() < 0.2:
        spec["containers"].append(container("d"))
    if rng.random() < 0.3:
        spec["tolerations"] = [
            rng.choice(
                [
                    {"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"},
                    {"key": "node.kubernetes.io/unschedulable", "operator": "Exists"},
                ]
            )
        ]
    if rng.random() < 0.25:
        spec["nodeSelector"] = {"zone": rng.choice("ab")}
    if rng.random() < 0.25:
        spec["initContainers"] = [container("init")]
    if features.user_claims and rng.random() < 0.25:
        spec["containers"][0]["resources"]["claims"] = [{"name": POD_CLAIM}]
        if rng.random() < 0.3:  # the claim alone, no extended resource beside it
            spec["containers"][0]["resources"]["requests"] = {}
            spec["containers"][0]["resources"]["limits"] = {}
        admin = rng.random() < 0.7
        exactly: dict[str, Any] = {"deviceClassName": rng.choice(["class-0", "nic-class"])}
        if admin:
            exactly["adminAccess"] = True
            if rng.random() < 0.5:
                exactly["allocationMode"] = "All"
        spec[CLAIM_SPEC_KEY] = {"devices": {"requests": [{"name": "r", "exactly": exactly}]}}
    return spec


def feature_specs(features: Features) -> list[dict[str, Any]]:
    """Specs every history of these features has besides its random ones, so that each
    feature is reached whatever the seed: a pod asking for a NIC (the perDeviceNodeSelection
    pool), pods with a user claim asking for admin access to all of a class's devices or
    to one NIC, beside extended resources, and two with a plain user claim, one of them
    with nothing else."""

    def pod(limits: dict[str, str], claim: dict[str, Any] | None = None) -> dict[str, Any]:
        resources: dict[str, Any] = {"requests": limits, "limits": limits}
        spec: dict[str, Any] = {
            "containers": [{"name": "c", "image": "pause", "resources": resources}]
        }
        if claim is not None:
            resources["claims"] = [{"name": POD_CLAIM}]
            spec[CLAIM_SPEC_KEY] = {"devices": {"requests": [{"name": "r", "exactly": claim}]}}
        return spec

    specs = []
    if features.per_device_slice:
        specs.append(pod({NIC: "1"}))
    if features.user_claims:
        admin = {"adminAccess": True}
        specs += [
            pod(
                {"example.com/gpu-0": "1"},
                {"deviceClassName": "class-0", "allocationMode": "All", **admin},
            ),
            pod({"example.com/gpu-2": "2"}, {"deviceClassName": "nic-class", **admin}),
            pod({"example.com/gpu-0": "1"}, {"deviceClassName": "class-1"}),
            pod({}, {"deviceClassName": "class-0"}),  # as a claims-mode Job's pods
        ]
    return specs


def claim_dict(name: str, uid: str, spec: dict[str, Any]) -> dict[str, Any]:
    """The user claim of one pod, made by the user before the pod."""
    meta = {"name": name, "namespace": "default", "uid": uid, "resourceVersion": "1"}
    return {"metadata": meta, "spec": spec}


def pod_dict(name: str, uid: str, spec: dict[str, Any], claim_name: str) -> dict[str, Any]:
    """A pod of `spec`; one with a claim spec names its claim `claim_name`."""
    spec = dict(spec)
    if spec.pop(CLAIM_SPEC_KEY, None) is not None:
        spec["resourceClaims"] = [{"name": POD_CLAIM, "resourceClaimName": claim_name}]
    meta = {"name": name, "namespace": "default", "uid": uid, "resourceVersion": "1"}
    return {"metadata": meta, "spec": spec}


# --- over-commitment -----------------------------------------------------------------------


def overcommitted(
    slices: Iterable[resource_v1.ResourceSlice],
    held: Iterable[tuple[Mapping[tuple[str, str], int], resource_v1.AllocationResult]],
) -> list[str]:
    """What the allocations `held` take beyond what the slices' devices have: a device
    given to two claims, or given whole and shared, shares consuming more capacity than the
    device has, devices of a counter set consuming more than it holds. Each allocation
    comes with the pool generations it was made on; only allocations made on a pool's
    current generation count (a driver republishing allocated devices differently is
    outside the allocator's promise, upstream's too). Admin access takes nothing."""
    pools = {(s.spec.driver, s.spec.pool.name): s for s in slices}
    owners: collections.Counter[DeviceID] = collections.Counter()
    shares: dict[DeviceID, list[resource_v1.DeviceRequestAllocationResult]] = {}
    for generations, allocation in held:
        for r in allocation.devices.results:
            current = pools.get((r.driver, r.pool))
            if r.admin_access or current is None:
                continue
            if generations.get((r.driver, r.pool)) != current.spec.pool.generation:
                continue
            if r.share_id is None:
                owners[(r.driver, r.pool, r.device)] += 1
            else:
                shares.setdefault((r.driver, r.pool, r.device), []).append(r)
    problems = [f"{d} allocated {n} times" for d, n in owners.items() if n > 1]
    problems += [f"{d} allocated whole and shared" for d in shares if d in owners]
    consumed: collections.Counter[tuple[str, str, str, str]] = collections.Counter()
    for (driver, pool), s in pools.items():
        by_name = {d.name: d for d in s.spec.devices}
        for name, device in by_name.items():
            taken = shares.get((driver, pool, name), [])
            for capacity_name, capacity in device.capacity.items():
                total = sum(
                    r.consumed_capacity[capacity_name].value
                    for r in taken
                    if capacity_name in r.consumed_capacity
                )
                if total > capacity.value.value:
                    problems.append(f"{(driver, pool, name)}: {total} of {capacity_name}")
            if (driver, pool, name) in owners or taken:
                for c in device.consumes_counters:
                    for counter, amount in c.counters.items():
                        consumed[(driver, pool, c.counter_set, counter)] += amount.value.value
        for counter_set in s.spec.shared_counters:
            for counter, amount in counter_set.counters.items():
                total = consumed[(driver, pool, counter_set.name, counter)]
                if total > amount.value.value:
                    problems.append(f"{(driver, pool, counter_set.name)}: {total} of {counter}")
    return problems
