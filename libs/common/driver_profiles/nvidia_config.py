"""The NVIDIA driver's opaque device configuration (`resource.nvidia.com/v1beta1`).

Claims and DeviceClasses pass `GpuConfig` and `MigDeviceConfig` (sharing: TimeSlicing or
MPS) to the driver; its kubelet plugin decodes them strictly, normalizes, validates and
applies them in NodePrepareResources, and a bad one fails the claim with the message built
here, word for word as api/nvidia.com/resource/v1beta1 (sharing.go, validate.go,
gpuconfig.go, migconfig.go) and cmd/gpu-kubelet-plugin/device_state.go build it.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from drasim.common.quantity import Quantity, parse_quantity

__all__ = [
    "API_VERSION",
    "ConfigError",
    "GpuConfig",
    "MigDeviceConfig",
    "decode",
    "mps_env",
    "validate",
]

API_VERSION = "resource.nvidia.com/v1beta1"
TIME_SLICING = "TimeSlicing"
MPS = "MPS"
_INTERVALS = ("Default", "Short", "Medium", "Long")
_KINDS = ("GpuConfig", "MigDeviceConfig", "VfioDeviceConfig")


class ConfigError(Exception):
    """A config the plugin refuses; the message is the driver's."""


class _Strict(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, rename="camel"):
    pass


class TimeSlicingConfig(_Strict):
    interval: str | None = None


class MpsConfig(_Strict):
    default_active_thread_percentage: int | None = None
    default_pinned_device_memory_limit: str | None = None
    default_per_device_pinned_memory_limit: dict[str, str] = {}
    multi_user: bool | None = None


class Sharing(_Strict):
    strategy: str = ""
    time_slicing_config: TimeSlicingConfig | None = None
    mps_config: MpsConfig | None = None


class MigDeviceSharing(_Strict):
    """No time-slicing settings: they cannot be set on a MIG device."""

    strategy: str = ""
    mps_config: MpsConfig | None = None


class GpuConfig(_Strict):
    api_version: str = API_VERSION
    kind: Literal["GpuConfig"] = "GpuConfig"
    sharing: Sharing | None = None


class MigDeviceConfig(_Strict):
    api_version: str = API_VERSION
    kind: Literal["MigDeviceConfig"] = "MigDeviceConfig"
    sharing: MigDeviceSharing | None = None


class VfioDeviceConfig(_Strict):
    api_version: str = API_VERSION
    kind: Literal["VfioDeviceConfig"] = "VfioDeviceConfig"
    iommu: dict[str, Any] | None = None


Config = GpuConfig | MigDeviceConfig | VfioDeviceConfig


def decode(parameters: Any) -> Config:
    """The strict decoder's reading of `parameters` (apimachinery's messages)."""
    if not isinstance(parameters, dict):
        raise ConfigError("couldn't get version/kind; json parse error: not a JSON object")
    api_version, kind = parameters.get("apiVersion", ""), parameters.get("kind", "")
    if not kind:
        raw = msgspec.json.encode(parameters).decode()
        raise ConfigError(f"Object 'Kind' is missing in '{raw}'")
    if api_version != API_VERSION or kind not in _KINDS:
        group_version = api_version or "v1"
        raise ConfigError(
            f'no kind "{kind}" is registered for version "{group_version}" in scheme '
            '"pkg/runtime/scheme.go:100"'
        )
    type_ = {"GpuConfig": GpuConfig, "MigDeviceConfig": MigDeviceConfig}.get(kind, VfioDeviceConfig)
    try:
        return msgspec.convert(parameters, type_)
    except msgspec.ValidationError as exc:
        raise ConfigError(f"strict decoding error: {_strict_message(exc)}") from exc


def _strict_message(exc: msgspec.ValidationError) -> str:
    text = str(exc)
    if text.startswith("Object contains unknown field"):
        field, _, path = text.removeprefix("Object contains unknown field ").partition(" - at ")
        prefix = path.removeprefix("`$").removesuffix("`").lstrip(".")
        name = field.strip("`")
        return f'unknown field "{prefix + "." if prefix else ""}{name}"'
    return text


def validate(config: Config, gates: dict[str, bool]) -> Config:
    """`Normalize` then `Validate`: the config with its implied defaults, or ConfigError."""
    sharing = config.sharing if not isinstance(config, VfioDeviceConfig) else None
    if sharing is None:
        return config
    time_slicing = gates.get("TimeSlicingSettings") and sharing.strategy == TIME_SLICING
    if time_slicing and isinstance(sharing, Sharing) and sharing.time_slicing_config is None:
        sharing.time_slicing_config = TimeSlicingConfig(interval="Default")
    if gates.get("MPSSupport") and sharing.strategy == MPS and sharing.mps_config is None:
        sharing.mps_config = MpsConfig()
    _validate_strategy(sharing.strategy, gates)
    if time_slicing:
        if isinstance(sharing, Sharing):
            _validate_interval(sharing.time_slicing_config)
        return config
    if gates.get("MPSSupport") and sharing.strategy == MPS:
        _validate_mps(sharing.mps_config)
        return config
    kind = "GPU" if isinstance(config, GpuConfig) else "MIG device"
    raise ConfigError(f"invalid {kind} sharing settings: {sharing}")


def _validate_strategy(strategy: str, gates: dict[str, bool]) -> None:
    for name, gate in ((TIME_SLICING, "TimeSlicingSettings"), (MPS, "MPSSupport")):
        if strategy == name:
            if gates.get(gate):
                return
            raise ConfigError(
                f'"{name}" is selected as the GPU sharing strategy, but the "{gate}" '
                "feature gate is not enabled"
            )
    raise ConfigError(
        f"unknown GPU sharing strategy: {strategy}, supported GPU sharing strategies: "
        f"{TIME_SLICING}, {MPS}"
    )


def _validate_interval(config: TimeSlicingConfig | None) -> None:
    interval = config.interval if config is not None else None
    if interval not in _INTERVALS:
        raise ConfigError(
            f"unknown time-slice interval: {interval or ''}, supported time-slice intervals: "
            + ", ".join(_INTERVALS)
        )


def _validate_mps(config: MpsConfig | None) -> None:
    percentage = config.default_active_thread_percentage if config is not None else None
    if percentage is not None and percentage < 0:
        raise ConfigError("active thread percentage must not be negative")
    if percentage is not None and percentage > 100:
        raise ConfigError("active thread percentage must not be greater than 100")


def sharing_conflict(config: Config) -> str | None:
    """What `GetTimeSlicingConfig`/`GetMpsConfig` refuse when the config is applied: the
    other strategy's settings given too."""
    sharing = config.sharing if isinstance(config, GpuConfig) else None
    if sharing is None:
        return None
    if sharing.strategy == TIME_SLICING and sharing.mps_config is not None:
        return f"cannot use MpsConfig with the '{TIME_SLICING}' strategy"
    if sharing.strategy == MPS and sharing.time_slicing_config is not None:
        return f"cannot use TimeSlicingConfig with the '{MPS}' strategy"
    return None


def mps_pinned_limits(config: MpsConfig, uuids: list[str]) -> dict[str, str]:
    """`MpsPerDevicePinnedMemoryLimit.Normalize`: the limit per device UUID in megabytes
    (`10240M`), the default first, then per device index or UUID."""
    limits: dict[str, str] = {}
    if config.default_pinned_device_memory_limit is not None and uuids:
        default = _megabytes(config.default_pinned_device_memory_limit)
        if default is None:
            limit = config.default_pinned_device_memory_limit
            raise ConfigError(f"invalid limit: default value set too low: {limit}")
        limits = dict.fromkeys(uuids, default)
    for key, value in config.default_per_device_pinned_memory_limit.items():
        if key in uuids:
            device = key
        elif key.lstrip("-").isdigit():
            index = int(key)
            if not 0 <= index < len(uuids):
                raise ConfigError(f"invalid device: invalid device index: {index}")
            device = uuids[index]
        else:
            raise ConfigError(f"invalid device: unable to parse key as an integer: {key}")
        megabytes = _megabytes(value)
        if megabytes is None:
            raise ConfigError(f"invalid limit: value set too low: {key}: {value}")
        limits[device] = megabytes
    return limits


def _megabytes(text: str) -> str | None:
    quantity: Quantity = parse_quantity(text)
    value = quantity.int_value() // 1024 // 1024
    return f"{value}M" if value > 0 else None


def mps_env() -> dict[str, str]:
    """What the MPS control daemon's CDI edits give each container (`GetCDIContainerEdits`)."""
    return {"CUDA_MPS_PIPE_DIRECTORY": "/tmp/nvidia-mps"}
