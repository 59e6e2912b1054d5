"""pods/log: what `kubectl logs` shows of an emulated container.

Emulated containers run no process, so there is no output to keep. What a GPU workload's
first lines would show is what it was given, and that is recorded on the pod: per container
its devices and their health (`status.*ContainerStatuses[].allocatedResourcesStatus`) and
the CDI ids and environment the runtime gave it (the kubelet's annotation
`drasim.io/container-devices`). The log is those lines, built from the pod as it is now.
Errors are the kubelet's: a container must be named when the pod has several, and one that
has not started has no log. With `follow` the stream stays open after those lines, as for a
running container that prints nothing more, until the pod ends (deleted or terminal) or
the client goes. A container that has exited says so in its last line, with its exit code;
its log, and with `previous` that of the instance before it, stays readable as the
kubelet keeps it.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from dataclasses import dataclass

import msgspec
from aiohttp import web

from drasim.apistore.http import keys
from drasim.common import errors, watch
from drasim.common.api import core_v1
from drasim.common.container_devices import (
    CONTAINER_DEVICES_ANNOTATION,
    ContainerDevices,
    decode_container_devices,
)

DEFAULT_CONTAINER_ANNOTATION = "kubectl.kubernetes.io/default-container"


def container_log(
    pod: core_v1.Pod, container: str = "", tail_lines: int | None = None, previous: bool = False
) -> str:
    """The log text of one container of `pod` (its only or default one if not named)."""
    return read_log(pod, container, tail_lines, previous).text


@dataclass(frozen=True)
class ContainerLog:
    text: str
    ended: bool  # the instance has exited: nothing more will come


def read_log(
    pod: core_v1.Pod, container: str = "", tail_lines: int | None = None, previous: bool = False
) -> ContainerLog:
    """The log of one container's current instance, or with `previous` of the one before
    (upstream `validateContainerLogStatus` picks the instance)."""
    name = pod.metadata.name
    regular = [c.name for c in pod.spec.containers]
    init = [c.name for c in pod.spec.init_containers]
    if not container:
        container = pod.metadata.annotations.get(DEFAULT_CONTAINER_ANNOTATION, "")
    if not container:
        if len(regular) != 1:
            choice = f"choose one of: [{' '.join(regular)}]"
            if init:
                choice += f" or one of the init containers: [{' '.join(init)}]"
            raise errors.BadRequest(f"a container name must be specified for pod {name}, {choice}")
        container = regular[0]
    statuses = {
        s.name: s for s in [*pod.status.init_container_statuses, *pod.status.container_statuses]
    }
    if container not in regular and container not in init:
        raise errors.BadRequest(f"container {container} is not valid for pod {name}")
    status = statuses.get(container)
    ended = _instance(name, container, status, previous)
    lines = [
        f"drasim: emulated container {container} of pod {pod.metadata.namespace}/{name} "
        f"on node {pod.spec.node_name} (no process runs; these lines are what it was given)"
    ]
    for resource in status.allocated_resources_status:
        devices = ", ".join(f"{h.resource_id} ({h.health})" for h in resource.resources)
        lines.append(f"resource {resource.name}: {devices}")
    given = _container_devices(pod).get(container, ContainerDevices())
    lines += [f"CDI device {cdi_device}" for cdi_device in given.cdi_devices]
    spec = next(c for c in [*pod.spec.containers, *pod.spec.init_containers] if c.name == container)
    if _runs_export(spec):
        lines += _exported(pod, spec, given.env)
    else:
        lines += [f"env {key}={value}" for key, value in sorted(given.env.items())]
    if ended is not None:
        lines.append(
            f"drasim: exited with code {ended.exit_code} ({ended.reason or 'Error'}) "
            f"at {ended.finished_at}"
        )
    if tail_lines is not None:
        lines = lines[-tail_lines:] if tail_lines > 0 else []
    return ContainerLog("".join(line + "\n" for line in lines), ended is not None)


def _runs_export(container: core_v1.Container) -> bool:
    """The container's shell runs `export` with no arguments, as the DRA drivers' demo
    containers do (`bash -c "export; sleep 9999"`) to show what they were given."""
    script = " ".join([*container.command, *container.args])
    commands = (_SHELL_C.sub("", part.strip()) for part in re.split(r"[;&|\n]", script))
    return any(command.strip() == "export" for command in commands)


_SHELL_C = re.compile(r"^\S*\b(?:ba)?sh\s+-c\s+")  # `bash -c <script>`: the script


def _exported(
    pod: core_v1.Pod, container: core_v1.Container, devices_env: dict[str, str]
) -> list[str]:
    """What bash's `export` prints: `declare -x NAME="value"`, sorted by name, for the
    container's environment (its own literal `env`, then what its devices' CDI specs set,
    and the pod's hostname)."""
    env = {"HOSTNAME": pod.spec.hostname or pod.metadata.name}
    env.update({e.name: e.value for e in container.env if e.value_from is None})
    env.update(devices_env)
    return [f'declare -x {name}="{_bash_quoted(value)}"' for name, value in sorted(env.items())]


def _bash_quoted(value: str) -> str:
    return re.sub(r'(["\\$`])', r"\\\1", value)


def _instance(
    pod: str, container: str, status: core_v1.ContainerStatus | None, previous: bool
) -> core_v1.ContainerStateTerminated | None:
    """How the instance whose log is asked for ended (None: it runs), or BadRequest."""
    last = status.last_state.terminated if status is not None else None
    if previous:
        if last is None or not last.container_id:
            raise errors.BadRequest(
                f'previous terminated container "{container}" in pod "{pod}" not found'
            )
        return last
    if status is not None and status.state.running is not None:
        return None
    if status is not None and status.state.terminated is not None:
        return status.state.terminated
    if last is not None:
        return last  # waiting to start again: the log of the instance that ended
    waiting = status.state.waiting if status is not None else None
    reason = waiting.reason if waiting is not None and waiting.reason else "ContainerCreating"
    raise errors.BadRequest(f'container "{container}" in pod "{pod}" is waiting to start: {reason}')


def _container_devices(pod: core_v1.Pod) -> dict[str, ContainerDevices]:
    """What the kubelet recorded; nothing if it recorded nothing readable."""
    text = pod.metadata.annotations.get(CONTAINER_DEVICES_ANNOTATION, "")
    try:
        return decode_container_devices(text) if text else {}
    except (msgspec.DecodeError, msgspec.ValidationError):
        return {}


class _UidView(msgspec.Struct):
    uid: str = ""


class _PhaseView(msgspec.Struct):
    phase: str = ""


class _PodView(msgspec.Struct):
    """What `follow` reads of each pod event: whose it is and whether it ended."""

    metadata: _UidView = msgspec.field(default_factory=_UidView)
    status: _PhaseView = msgspec.field(default_factory=_PhaseView)


_pod_view_decoder = msgspec.json.Decoder(_PodView)


async def follow(request: web.Request, pod: core_v1.Pod, text: str) -> web.StreamResponse:
    """Send `text`, then hold the stream open until `pod` is deleted or terminal."""
    response = web.StreamResponse(headers={"Content-Type": "text/plain"})
    await response.prepare(request)
    await response.write(text.encode())
    task = asyncio.current_task()
    assert task is not None
    watches = request.app[keys.WATCHES]  # ended with the server, as watches are
    watches.add(task)
    events = watch.watch_raw(
        request.app[keys.BUS],
        "pods",
        resource_version=int(pod.metadata.resource_version),
        node=pod.spec.node_name or None,
    )
    try:
        async with contextlib.aclosing(events):
            async for _, event in events:
                view = _pod_view_decoder.decode(event.object)
                if view.metadata.uid != pod.metadata.uid:
                    continue
                if event.type == "DELETED" or view.status.phase in ("Succeeded", "Failed"):
                    break
    except errors.Expired:
        pass  # history gone: end, as a log stream whose container went away
    finally:
        watches.discard(task)
    with contextlib.suppress(ConnectionError):
        await response.write_eof()
    return response
