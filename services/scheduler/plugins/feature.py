"""The feature gates plugins read, copied once from the scheduler's gate (upstream
`pkg/scheduler/framework/plugins/feature/feature.go`): factories get them through the
Handle, so a plugin never asks a gate itself."""

from __future__ import annotations

from dataclasses import dataclass

from drasim.common import features
from drasim.common.featuregate import FeatureGate

__all__ = ["DEFAULT_FEATURES", "Features"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Features:
    """Default: Kubernetes 1.37's, where all are on."""

    enable_dra_extended_resource: bool = True
    enable_dra_prioritized_list: bool = True
    enable_dra_admin_access: bool = True
    enable_dra_partitionable_devices: bool = True
    enable_dra_consumable_capacity: bool = True
    enable_dra_device_binding_conditions: bool = True
    enable_dra_resource_claim_device_status: bool = True

    @classmethod
    def from_gate(cls, gate: FeatureGate) -> Features:
        """Upstream `NewSchedulerFeaturesFromGates`, for the gates drasim's plugins honour."""
        return cls(
            enable_dra_extended_resource=gate.enabled(features.DRA_EXTENDED_RESOURCE),
            enable_dra_prioritized_list=gate.enabled(features.DRA_PRIORITIZED_LIST),
            enable_dra_admin_access=gate.enabled(features.DRA_ADMIN_ACCESS),
            enable_dra_partitionable_devices=gate.enabled(features.DRA_PARTITIONABLE_DEVICES),
            enable_dra_consumable_capacity=gate.enabled(features.DRA_CONSUMABLE_CAPACITY),
            enable_dra_device_binding_conditions=gate.enabled(
                features.DRA_DEVICE_BINDING_CONDITIONS
            ),
            enable_dra_resource_claim_device_status=gate.enabled(
                features.DRA_RESOURCE_CLAIM_DEVICE_STATUS
            ),
        )

    @property
    def device_binding_and_status(self) -> bool:
        """Binding conditions need both gates (upstream `DeviceBindingAndStatus`)."""
        return (
            self.enable_dra_device_binding_conditions
            and self.enable_dra_resource_claim_device_status
        )


DEFAULT_FEATURES = Features()
