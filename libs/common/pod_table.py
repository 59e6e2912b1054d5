"""The READY, STATUS and RESTARTS cells of a pod, as upstream's `printPod`
(`pkg/printers/internalversion/printers.go`) computes them: `Init:0/1`, `Init:Error`,
`PodInitializing`, `CrashLoopBackOff`, `Completed`, `Error`, `NotReady`, `Terminating`,
and restarts as `2 (15s ago)`."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from drasim.common.api.resources import is_restartable_init_container

__all__ = ["PodCells", "pod_cells"]

NODE_UNREACHABLE_POD_REASON = "NodeLost"


@dataclass(frozen=True)
class PodCells:
    ready: str
    status: str
    restarts: str


def _later(current: str, candidate: str | None) -> str:
    return candidate if candidate and candidate > current else current


def pod_cells(pod: Any, now: datetime, since: Any) -> PodCells:
    """`since(timestamp, now)` is kubectl's "how long ago"."""
    status = pod.status
    reason = status.reason or status.phase or "Pending"
    if any(c.type == "PodScheduled" and c.reason == "SchedulingGated" for c in status.conditions):
        reason = "SchedulingGated"
    init_specs = {c.name: c for c in pod.spec.init_containers}
    total = len(pod.spec.containers) + sum(
        is_restartable_init_container(c) for c in pod.spec.init_containers
    )
    ready = restarts = sidecar_restarts = 0
    last_restart = last_sidecar_restart = ""  # RFC 3339 in UTC sorts as time
    initializing = False
    for i, container in enumerate(status.init_container_statuses):
        restarts += container.restart_count
        ended = container.last_state.terminated
        last_restart = _later(last_restart, ended.finished_at if ended else None)
        spec = init_specs.get(container.name)
        sidecar = spec is not None and is_restartable_init_container(spec)
        if sidecar:
            sidecar_restarts += container.restart_count
            last_sidecar_restart = _later(
                last_sidecar_restart, ended.finished_at if ended else None
            )
        state = container.state
        if state.terminated is not None and state.terminated.exit_code == 0:
            continue
        if sidecar and container.started:
            ready += container.ready
            continue
        if state.terminated is not None:
            terminated = state.terminated
            if terminated.reason:
                reason = "Init:" + terminated.reason
            elif getattr(terminated, "signal", 0):
                reason = f"Init:Signal:{terminated.signal}"
            else:
                reason = f"Init:ExitCode:{terminated.exit_code}"
        elif state.waiting is not None and state.waiting.reason not in ("", "PodInitializing"):
            reason = "Init:" + state.waiting.reason
        else:
            reason = f"Init:{i}/{len(pod.spec.init_containers)}"
        initializing = True
        break
    initialized = any(c.type == "Initialized" and c.status == "True" for c in status.conditions)
    if not initializing or initialized:
        restarts, last_restart = sidecar_restarts, last_sidecar_restart
        has_running = False
        error_reason = ""
        for container in reversed(status.container_statuses):
            restarts += container.restart_count
            ended = container.last_state.terminated
            last_restart = _later(last_restart, ended.finished_at if ended else None)
            state = container.state
            if state.waiting is not None and state.waiting.reason:
                reason = state.waiting.reason
            elif state.terminated is not None:
                terminated = state.terminated
                if terminated.reason:
                    reason = terminated.reason
                elif getattr(terminated, "signal", 0):
                    reason = f"Signal:{terminated.signal}"
                else:
                    reason = f"ExitCode:{terminated.exit_code}"
                if terminated.exit_code != 0:
                    error_reason = reason
            elif container.ready and state.running is not None:
                has_running = True
                ready += 1
        if reason == "Completed":
            pod_ready = any(c.type == "Ready" and c.status == "True" for c in status.conditions)
            if has_running and pod_ready:
                reason = "Running"
            elif error_reason:
                reason = error_reason
            elif has_running:
                reason = "NotReady"
    if pod.metadata.deletion_timestamp and status.reason == NODE_UNREACHABLE_POD_REASON:
        reason = "Unknown"
    elif pod.metadata.deletion_timestamp and status.phase not in ("Succeeded", "Failed"):
        reason = "Terminating"
    restarts_cell = str(restarts)
    if restarts and last_restart:
        restarts_cell = f"{restarts} ({since(last_restart, now)} ago)"
    return PodCells(f"{ready}/{total}", reason, restarts_cell)
