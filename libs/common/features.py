"""The Kubernetes feature gates drasim knows, with each release's spec as upstream 1.37's
`pkg/features/kube_features.go` lists them, and the gate every service is given.

Every service takes `--feature-gates` (upstream's syntax) and `--emulated-version`;
`drasim up --feature-gates ... --kubernetes-version 1.35` hands both to all of them through
the launcher, so the cluster agrees on its gates as one built from one release would.

Honoured where upstream honours them:

- `DRAExtendedResource`: the apistore drops `DeviceClass.spec.extendedResourceName` and a
  pod's `status.extendedResourceClaimStatus` on write (unless already stored); the
  scheduler neither maps extended resources to classes nor makes special claims; the
  kubelet ignores `extendedResourceClaimStatus`.
- `DRAPrioritizedList`: the apistore drops requests' `firstAvailable`; the scheduler
  refuses a claim that has subrequests.
- `DRAAdminAccess`: the apistore drops `adminAccess` from requests and allocation
  results; the scheduler refuses to allocate a request asking for it.
- `DRAPartitionableDevices`: the apistore drops shared counters and what consumes them;
  the scheduler allocates no device consuming counters.
- `DRAConsumableCapacity`: the apistore drops capacity requests, request policies and
  shares; the scheduler refuses capacity requests and allocates every device exclusively.
- `DRADeviceTaints`: the apistore drops slices' taints and requests' tolerations; the
  device taint eviction controller does not run.
- `DRADeviceTaintRules`: the scheduler and the eviction controller ignore DeviceTaintRules
  (the apistore still serves them, as upstream's does: the gate does not decide that).
- `DRAResourceClaimGranularStatusAuthorization`: the apistore no longer asks writers of a
  claim's status for `resourceclaims/binding` (allocation, reservations) and
  `resourceclaims/driver` (device status) besides `resourceclaims/status`.
- `ReduceDefaultCrashLoopBackOffDecay`: the kubelet's CrashLoopBackOff starts at 1 s and
  stops at 60 s instead of 10 s and 5 min.

Registered with their defaults, not implemented by drasim beyond what the apistore drops
(`NOT_IMPLEMENTED`, said when set): DRADeviceBindingConditions,
DRAResourceClaimDeviceStatus. `DynamicResourceAllocation` is
registered for the dependencies; drasim always runs DRA, so it may not be turned off (only
1.34 would let upstream do so).
"""

from __future__ import annotations

from drasim.common import version
from drasim.common.featuregate import FeatureGate, FeatureGateError, FeatureSpec, PreRelease
from drasim.common.version import Version

__all__ = [
    "DRA_ADMIN_ACCESS",
    "DRA_EXTENDED_RESOURCE",
    "DRA_PRIORITIZED_LIST",
    "REDUCE_DEFAULT_CRASH_LOOP_BACK_OFF_DECAY",
    "KUBE_FEATURES",
    "NOT_IMPLEMENTED",
    "new_gate",
]

DYNAMIC_RESOURCE_ALLOCATION = "DynamicResourceAllocation"
DRA_ADMIN_ACCESS = "DRAAdminAccess"
DRA_CONSUMABLE_CAPACITY = "DRAConsumableCapacity"
DRA_DEVICE_BINDING_CONDITIONS = "DRADeviceBindingConditions"
DRA_DEVICE_TAINT_RULES = "DRADeviceTaintRules"
DRA_DEVICE_TAINTS = "DRADeviceTaints"
DRA_EXTENDED_RESOURCE = "DRAExtendedResource"
DRA_PARTITIONABLE_DEVICES = "DRAPartitionableDevices"
DRA_PRIORITIZED_LIST = "DRAPrioritizedList"
DRA_RESOURCE_CLAIM_DEVICE_STATUS = "DRAResourceClaimDeviceStatus"
DRA_RESOURCE_CLAIM_GRANULAR_STATUS_AUTHORIZATION = "DRAResourceClaimGranularStatusAuthorization"
REDUCE_DEFAULT_CRASH_LOOP_BACK_OFF_DECAY = "ReduceDefaultCrashLoopBackOffDecay"

ALPHA, BETA, GA = PreRelease.ALPHA, PreRelease.BETA, PreRelease.GA


def _at(release: str, default: bool, stage: PreRelease, *, locked: bool = False) -> FeatureSpec:
    return FeatureSpec(Version.parse(release), default, stage, lock_to_default=locked)


KUBE_FEATURES: dict[str, tuple[FeatureSpec, ...]] = {
    DYNAMIC_RESOURCE_ALLOCATION: (
        _at("1.26", False, ALPHA),
        _at("1.32", False, BETA),
        _at("1.34", True, GA),
        _at("1.35", True, GA, locked=True),
    ),
    DRA_ADMIN_ACCESS: (
        _at("1.32", False, ALPHA),
        _at("1.34", True, BETA),
        _at("1.36", True, GA, locked=True),
    ),
    DRA_CONSUMABLE_CAPACITY: (_at("1.34", False, ALPHA), _at("1.36", True, BETA)),
    DRA_DEVICE_BINDING_CONDITIONS: (_at("1.34", False, ALPHA), _at("1.36", True, BETA)),
    DRA_DEVICE_TAINT_RULES: (
        _at("1.35", False, ALPHA),
        _at("1.36", False, BETA),
        _at("1.37", True, GA),  # locked from 1.38
    ),
    DRA_DEVICE_TAINTS: (
        _at("1.33", False, ALPHA),
        _at("1.36", True, BETA),
        _at("1.37", True, GA),  # locked from 1.38
    ),
    DRA_EXTENDED_RESOURCE: (
        _at("1.34", False, ALPHA),
        _at("1.36", True, BETA),
        _at("1.37", True, GA, locked=True),
    ),
    DRA_PARTITIONABLE_DEVICES: (_at("1.33", False, ALPHA), _at("1.36", True, BETA)),
    DRA_PRIORITIZED_LIST: (
        _at("1.33", False, ALPHA),
        _at("1.34", True, BETA),
        _at("1.36", True, GA),
        _at("1.37", True, GA, locked=True),
    ),
    DRA_RESOURCE_CLAIM_DEVICE_STATUS: (
        _at("1.32", False, ALPHA),
        _at("1.33", True, BETA),
        _at("1.37", True, GA, locked=True),
    ),
    DRA_RESOURCE_CLAIM_GRANULAR_STATUS_AUTHORIZATION: (_at("1.36", True, BETA),),
    REDUCE_DEFAULT_CRASH_LOOP_BACK_OFF_DECAY: (_at("1.33", False, ALPHA),),
}

DEPENDENCIES: dict[str, tuple[str, ...]] = {
    DRA_ADMIN_ACCESS: (DYNAMIC_RESOURCE_ALLOCATION,),
    DRA_CONSUMABLE_CAPACITY: (DYNAMIC_RESOURCE_ALLOCATION,),
    DRA_DEVICE_BINDING_CONDITIONS: (DYNAMIC_RESOURCE_ALLOCATION, DRA_RESOURCE_CLAIM_DEVICE_STATUS),
    DRA_DEVICE_TAINT_RULES: (DRA_DEVICE_TAINTS,),
    DRA_DEVICE_TAINTS: (DYNAMIC_RESOURCE_ALLOCATION,),
    DRA_EXTENDED_RESOURCE: (DYNAMIC_RESOURCE_ALLOCATION,),
    DRA_PARTITIONABLE_DEVICES: (DYNAMIC_RESOURCE_ALLOCATION,),
    DRA_PRIORITIZED_LIST: (DYNAMIC_RESOURCE_ALLOCATION,),
    DRA_RESOURCE_CLAIM_GRANULAR_STATUS_AUTHORIZATION: (
        DYNAMIC_RESOURCE_ALLOCATION,
        DRA_RESOURCE_CLAIM_DEVICE_STATUS,
    ),
}

NOT_IMPLEMENTED = frozenset(
    {
        DRA_DEVICE_BINDING_CONDITIONS,
        DRA_RESOURCE_CLAIM_DEVICE_STATUS,
    }
)


def new_gate(flag: str = "", *, emulated: str | None = None) -> FeatureGate:
    """The gates of release `emulated` (None: 1.37) with `flag` applied: FeatureGateError
    or `version.VersionError` with upstream's message when either cannot be honoured."""
    effective = version.effective_version(emulated)
    gate = FeatureGate(KUBE_FEATURES, DEPENDENCIES, effective).set(flag)
    if not gate.enabled(DYNAMIC_RESOURCE_ALLOCATION):
        raise FeatureGateError(
            f"drasim always runs dynamic resource allocation: {DYNAMIC_RESOURCE_ALLOCATION} "
            "cannot be false"
        )
    return gate


DEFAULT = new_gate()
"""1.37's gates, none set: what a component has unless told otherwise."""
