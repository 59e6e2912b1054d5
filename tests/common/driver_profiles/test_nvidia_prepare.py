"""NodePrepareResources of the NVIDIA GPU driver profiles: the CDI devices and environment a
container gets, and the driver's refusals of opaque configs, word for word as
kubernetes-sigs/dra-driver-nvidia-gpu@9593204 builds them (cmd/gpu-kubelet-plugin/
device_state.go, cdi.go, sharing.go; api/nvidia.com/resource/v1beta1/)."""

from __future__ import annotations

from typing import Any

import pytest

from drasim.common import codec
from drasim.common.api import resource_v1
from drasim.common.driver_profiles import PrepareError, PrepareRequest, nvidia_gpu

UID = "dab5ab50-d59a-42a6-af16-cfd4628c0f7a"
PROFILES = {p.name: p for p in nvidia_gpu.PROFILES}
WHERE = f"error preparing devices for claim gpu-test5/multiple-gpus:{UID}: prepare devices failed: "


def profile(name: str = "nvidia-dgx-h100", **options: Any) -> nvidia_gpu.NvidiaGpuProfile:
    cls = PROFILES[name]
    return cls(codec.convert(options, cls.Options))


def claim(results: dict[str, str], config: list[dict[str, Any]] | None = None) -> PrepareRequest:
    """A claim allocated `request → device` on node-0, with opaque `config` from the claim."""
    allocated = [
        {"request": r, "driver": "gpu.nvidia.com", "pool": "node-0", "device": d}
        for r, d in results.items()
    ]
    obj = codec.convert(
        {
            "metadata": {"name": "multiple-gpus", "namespace": "gpu-test5", "uid": UID},
            "spec": {"devices": {"requests": [{"name": r} for r in results]}},
            "status": {"allocation": {"devices": {"results": allocated, "config": config or []}}},
        },
        resource_v1.ResourceClaim,
    )
    results_ = obj.status.allocation.devices.results  # type: ignore[union-attr]
    return PrepareRequest(node="node-0", claim=obj, results=results_)


def gpu_config(requests: list[str], sharing: dict[str, Any], source: str = "FromClaim") -> dict:
    return {
        "source": source,
        "requests": requests,
        "opaque": {
            "driver": "gpu.nvidia.com",
            "parameters": {
                "apiVersion": "resource.nvidia.com/v1beta1",
                "kind": "GpuConfig",
                "sharing": sharing,
            },
        },
    }


def test_each_device_gets_its_claim_scoped_cdi_device_and_no_visible_devices_variable() -> None:
    got = profile().prepare(claim({"gpu": "gpu-3", "mig": "gpu-1-mig-1g10gb-19-0"}))
    assert [(d.result.device, d.cdi_device_ids) for d in got.devices] == [
        ("gpu-3", [f"k8s.gpu.nvidia.com/claim={UID}-gpu-3"]),
        ("gpu-1-mig-1g10gb-19-0", [f"k8s.gpu.nvidia.com/claim={UID}-gpu-1-mig-1g10gb-19-0"]),
    ]
    assert got.cdi_edits == {
        f"k8s.gpu.nvidia.com/claim={UID}-gpu-3": {"NVIDIA_VISIBLE_DEVICES": "void"},
        f"k8s.gpu.nvidia.com/claim={UID}-gpu-1-mig-1g10gb-19-0": {"NVIDIA_VISIBLE_DEVICES": "void"},
    }


def test_gpu_test5_time_slicing_and_mps_with_the_gates_on() -> None:
    """demo/specs/quickstart/v1/gpu-test5.yaml's claim: MPS adds its pipe directory."""
    gates = {"TimeSlicingSettings": True, "MPSSupport": True}
    config = [
        gpu_config(
            ["ts-gpu"], {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Long"}}
        ),
        gpu_config(
            ["mps-gpu"],
            {
                "strategy": "MPS",
                "mpsConfig": {
                    "defaultActiveThreadPercentage": 50,
                    "defaultPinnedDeviceMemoryLimit": "10Gi",
                },
            },
        ),
    ]
    got = profile(featureGates=gates).prepare(
        claim({"ts-gpu": "gpu-0", "mps-gpu": "gpu-1"}, config)
    )
    assert got.cdi_edits == {
        f"k8s.gpu.nvidia.com/claim={UID}-gpu-0": {"NVIDIA_VISIBLE_DEVICES": "void"},
        f"k8s.gpu.nvidia.com/claim={UID}-gpu-1": {
            "CUDA_MPS_PIPE_DIRECTORY": "/tmp/nvidia-mps",
            "NVIDIA_VISIBLE_DEVICES": "void",
        },
    }


@pytest.mark.parametrize(
    ("options", "config", "message"),
    [
        (
            {},
            [gpu_config(["ts-gpu"], {"strategy": "TimeSlicing"})],
            'error validating GPU config: "TimeSlicing" is selected as the GPU sharing '
            'strategy, but the "TimeSlicingSettings" feature gate is not enabled',
        ),
        (
            {"featureGates": {"TimeSlicingSettings": True}},
            [gpu_config(["ts-gpu"], {"strategy": "Exclusive"})],
            "error validating GPU config: unknown GPU sharing strategy: Exclusive, supported "
            "GPU sharing strategies: TimeSlicing, MPS",
        ),
        (
            {"featureGates": {"TimeSlicingSettings": True}},
            [
                gpu_config(
                    [], {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Tiny"}}
                )
            ],
            "error validating GPU config: unknown time-slice interval: Tiny, supported "
            "time-slice intervals: Default, Short, Medium, Long",
        ),
        (
            {"featureGates": {"MPSSupport": True}},
            [
                gpu_config(
                    [], {"strategy": "MPS", "mpsConfig": {"defaultActiveThreadPercentage": 101}}
                )
            ],
            "error validating GPU config: active thread percentage must not be greater than 100",
        ),
        (
            {"featureGates": {"TimeSlicingSettings": True}},
            [gpu_config([], {"strategy": "TimeSlicing", "mpsConfig": {}})],
            "error applying config: error getting timeslice config for requests '[ts-gpu]' in "
            f"claim '{UID}': cannot use MpsConfig with the 'TimeSlicing' strategy",
        ),
        (
            {"featureGates": {"MPSSupport": True, "DynamicMIG": True}},
            [gpu_config([], {"strategy": "MPS"})],
            "error applying config: MPS is not yet supported when using "
            "featureGates.DynamicMIG=true",
        ),
        (
            {"featureGates": {"MPSSupport": True}},
            [
                gpu_config(
                    [], {"strategy": "MPS", "mpsConfig": {"defaultPinnedDeviceMemoryLimit": "1Ki"}}
                )
            ],
            "error applying config: error starting MPS control daemon: invalid limit: default "
            "value set too low: 1Ki",
        ),
        (
            {},
            [gpu_config([], {"strategy": "TimeSlicing", "interval": "Long"})],
            "error getting opaque device configs: error decoding config parameters: strict "
            'decoding error: unknown field "sharing.interval"',
        ),
        (
            {},
            [
                {
                    "source": "FromClaim",
                    "opaque": {
                        "driver": "gpu.nvidia.com",
                        "parameters": {
                            "apiVersion": "resource.nvidia.com/v1beta1",
                            "kind": "GPUConfig",
                        },
                    },
                }
            ],
            "error getting opaque device configs: error decoding config parameters: no kind "
            '"GPUConfig" is registered for version "resource.nvidia.com/v1beta1" in scheme '
            '"pkg/runtime/scheme.go:100"',
        ),
    ],
    ids=[
        "gate-off",
        "unknown-strategy",
        "unknown-interval",
        "thread-percentage",
        "mps-config-with-time-slicing",
        "mps-with-dynamic-mig",
        "pinned-limit-too-low",
        "unknown-field",
        "unknown-kind",
    ],
)
def test_a_bad_config_fails_the_claim_with_the_drivers_message(
    options: dict, config: list, message: str
) -> None:
    with pytest.raises(PrepareError) as err:
        profile(**options).prepare(claim({"ts-gpu": "gpu-0"}, config))
    assert str(err.value) == WHERE + message


def test_a_gpu_config_for_a_mig_device_is_refused() -> None:
    config = [gpu_config(["mig"], {"strategy": "TimeSlicing"})]
    request = claim({"mig": "gpu-0-mig-1g10gb-19-0"}, config)
    with pytest.raises(PrepareError) as err:
        profile().prepare(request)
    assert str(err.value) == WHERE + (
        'cannot apply GpuConfig to device "gpu-0-mig-1g10gb-19-0" of type "mig" (request: mig)'
    )


def test_claim_configs_win_over_class_configs_and_other_drivers_configs_are_skipped() -> None:
    gates = {"MPSSupport": True, "TimeSlicingSettings": True}
    other = {"source": "FromClaim", "opaque": {"driver": "gpu.example.com", "parameters": {"x": 1}}}
    config = [
        gpu_config([], {"strategy": "TimeSlicing"}, source="FromClaim"),
        gpu_config([], {"strategy": "MPS"}, source="FromClass"),
        other,
    ]
    got = profile(featureGates=gates).prepare(claim({"gpu": "gpu-2"}, config))
    assert got.cdi_edits == {
        f"k8s.gpu.nvidia.com/claim={UID}-gpu-2": {"NVIDIA_VISIBLE_DEVICES": "void"}
    }
