"""The node's Container Device Interface specs (what `/var/run/cdi` holds on a real node).

Drivers register, per CDI device id, the edits a container gets with that device; the
container runtime resolves the ids the kubelet passes it. The DRA driver shim sets the
environment upstream's e2e test driver sets (`nodePrepareResource` in
`test/e2e/dra/test-driver/app/kubeletplugin.go`).
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["Registry", "device_id"]


def device_id(vendor: str, device_class: str, name: str) -> str:
    """A fully qualified CDI device name: `vendor/class=name` (`gpu.example.com/gpu=...`)."""
    return f"{vendor}/{device_class}={name}"


class Registry:
    """CDI device id → environment it injects."""

    def __init__(self) -> None:
        self._env: dict[str, dict[str, str]] = {}

    def add(self, device: str, env: dict[str, str]) -> None:
        self._env[device] = env

    def remove(self, device: str) -> None:
        self._env.pop(device, None)

    def env(self, devices: Iterable[str]) -> dict[str, str]:
        """The combined environment of `devices`; an unknown id adds nothing."""
        found: dict[str, str] = {}
        for device in devices:
            found.update(self._env.get(device, {}))
        return found
