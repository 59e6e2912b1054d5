"""The emulated containers of one pod: when each starts, exits and starts again, and the
pod status that shows it.

What a container's process does comes from its `RunPlan` (`drasim.common.container_runs`):
it exits `run_for` after it starts, with `exit_code`. The kubelet then acts as upstream's
(`computePodActions` and `computeInitContainerActions` in
`pkg/kubelet/kuberuntime/kuberuntime_manager.go`):

- init containers run one at a time, in order; the regular containers start once every
  regular init container has exited 0. A sidecar (an init container with `restartPolicy:
  Always`) starts in its turn and keeps running beside the others;
- an exited container starts again if `ContainerShouldRestart` says so (its own
  `restartPolicy`, else the pod's: Always, OnFailure on a non-zero code, Never), after
  CrashLoopBackOff (`backoff`); a regular init container that may not start again fails
  the pod;
- once every regular container has exited for good, the sidecars are stopped, and the
  phase (`pod_phase`, upstream `getPhase`) is Succeeded if all exited 0, else Failed;
- a pod running longer than `activeDeadlineSeconds` is killed: Failed, reason
  DeadlineExceeded.

`PodRun` is the runtime's memory of the pod (what a CRI runtime keeps), rebuilt from the
pod's status when a kubelet restarts; `pod_status` renders it as the kubelet's status
manager does (`convertToAPIContainerStatuses`, `pkg/kubelet/status/generate.go`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import msgspec

from drasim.common import tables
from drasim.common.api import core_v1, resources
from drasim.common.container_runs import RunPlan
from drasim.common.duration import format_go_duration
from drasim.kubelet.backoff import BackoffEntry, CrashLoopBackOff

__all__ = ["ContainerRun", "PodRun", "container_should_restart", "pod_phase", "sync"]

SUCCEEDED, FAILED = "Succeeded", "Failed"
COMPLETED, ERROR = "Completed", "Error"
CRASH_LOOP_BACK_OFF = "CrashLoopBackOff"
POD_INITIALIZING, CONTAINER_CREATING = "PodInitializing", "ContainerCreating"
DEADLINE_EXCEEDED = "DeadlineExceeded"
DEADLINE_MESSAGE = "Pod was active on the node longer than the specified deadline"
KILLED_EXIT_CODE = 137  # SIGKILL: what the runtime reports of a container it killed


def _parse(timestamp: str | None) -> datetime | None:
    return datetime.fromisoformat(timestamp) if timestamp else None


@dataclass
class ContainerRun:
    """One container: its current (or last) instance, and what came before."""

    name: str
    started_at: datetime | None = None
    finished_at: datetime | None = None
    exit_code: int = 0
    reason: str = ""
    restart_count: int = 0
    last: core_v1.ContainerStateTerminated | None = None  # the previous instance's end
    backoff: BackoffEntry | None = None
    backoff_message: str = ""  # while waiting out the backoff

    @property
    def running(self) -> bool:
        return self.started_at is not None and self.finished_at is None

    @property
    def exited(self) -> bool:
        return self.finished_at is not None

    def start(self, now: datetime) -> None:
        self.started_at, self.finished_at, self.backoff_message = now, None, ""

    def exit(self, at: datetime, exit_code: int, reason: str = "") -> None:
        self.finished_at, self.exit_code = at, exit_code
        self.reason = reason or (COMPLETED if exit_code == 0 else ERROR)

    def terminated(self, container_id: str) -> core_v1.ContainerStateTerminated:
        return core_v1.ContainerStateTerminated(
            exit_code=self.exit_code,
            reason=self.reason,
            started_at=tables.format_time(self.started_at),
            finished_at=tables.format_time(self.finished_at),
            container_id=container_id,
        )

    @classmethod
    def recover(cls, status: core_v1.ContainerStatus) -> ContainerRun:
        """The container as its last written status shows it (a kubelet restarted)."""
        run = cls(
            status.name,
            restart_count=int(status.restart_count),
            last=status.last_state.terminated,
        )
        state = status.state
        ended = state.terminated
        if state.waiting is not None and status.last_state.terminated is not None:
            ended, run.last = status.last_state.terminated, None  # waiting to start again
        if state.running is not None:
            run.started_at = _parse(state.running.started_at)
        elif ended is not None:
            run.started_at = _parse(ended.started_at)
            finished = _parse(ended.finished_at) or datetime.now(UTC)
            run.exit(finished, int(ended.exit_code), ended.reason)
        return run


@dataclass
class PodRun:
    """The runtime's memory of one pod."""

    started: datetime
    containers: dict[str, ContainerRun]
    phase: str = ""  # Succeeded or Failed once the pod has ended
    reason: str = ""
    message: str = ""
    # The kubelet's conditions as last rendered: their transition times persist.
    conditions: dict[str, core_v1.PodCondition] = field(default_factory=dict)

    @classmethod
    def recover(cls, pod: core_v1.Pod, now: datetime) -> PodRun:
        status = pod.status
        known = {
            s.name: ContainerRun.recover(s)
            for s in (*status.init_container_statuses, *status.container_statuses)
        }
        return cls(
            started=_parse(status.start_time) or now,
            containers={c.name: known.get(c.name) or ContainerRun(c.name)
                        for c in pod.spec.all_containers()},
            conditions={c.type: c for c in status.conditions if c.type in KUBELET_CONDITIONS},
        )  # fmt: skip


def container_should_restart(
    container: core_v1.Container, spec: core_v1.PodSpec, exit_code: int
) -> bool:
    """Upstream `ContainerShouldRestart` (ContainerRestartRules on, without rules): the
    container's own restart policy, else the pod's (Always when unset)."""
    policy = container.restart_policy or spec.restart_policy or "Always"
    return policy == "Always" or (policy == "OnFailure" and exit_code != 0)


def sync(
    pod: core_v1.Pod,
    run: PodRun,
    plans: Mapping[str, RunPlan],
    backoff: CrashLoopBackOff,
    now: datetime,
) -> datetime | None:
    """Bring `run` to `now`; return when something is next due (None: nothing will be)."""
    if run.phase:
        return None
    spec = pod.spec
    deadline = (
        run.started + timedelta(seconds=spec.active_deadline_seconds)
        if spec.active_deadline_seconds is not None
        else None
    )
    for _ in range(2 * len(run.containers) + 2):  # each pass starts or ends something
        _exit_due(run, plans, min(now, deadline) if deadline is not None else now)
        if deadline is not None and deadline <= now:
            _stop_running(run, deadline, KILLED_EXIT_CODE, ERROR)
            run.phase, run.reason, run.message = FAILED, DEADLINE_EXCEEDED, DEADLINE_MESSAGE
            return None
        before = _fingerprint(run)
        if _sync_init_containers(pod, run, backoff, now):
            for container in spec.containers:
                _sync_container(pod, container, run.containers[container.name], backoff, now)
        if _all_regular_done(pod, run):
            _stop_running(run, now, 0, COMPLETED)  # the sidecars
        phase = pod_phase(pod, *_statuses(pod, run, {}), initialized=_any_regular_started(pod, run))
        if phase in (SUCCEEDED, FAILED):
            _stop_running(run, now, 0, COMPLETED)  # sidecars of a pod whose init failed
            run.phase = phase
            return None
        if _fingerprint(run) == before:
            break
    return _next_due(run, plans, deadline)


def _fingerprint(run: PodRun) -> list[tuple[object, ...]]:
    return [(c.started_at, c.finished_at, c.restart_count, c.backoff_message)
            for c in run.containers.values()]  # fmt: skip


def _exit_due(run: PodRun, plans: Mapping[str, RunPlan], now: datetime) -> None:
    for c in run.containers.values():
        plan = plans.get(c.name, RunPlan())
        if c.running and plan.run_for is not None:
            assert c.started_at is not None
            end = c.started_at + timedelta(seconds=plan.run_for)
            if end <= now:
                c.exit(end, plan.exit_code)


def _stop_running(run: PodRun, at: datetime, exit_code: int, reason: str) -> None:
    for c in run.containers.values():
        if c.running:
            c.exit(at, exit_code, reason)
        c.backoff_message = ""


def _sync_init_containers(
    pod: core_v1.Pod, run: PodRun, backoff: CrashLoopBackOff, now: datetime
) -> bool:
    """Start, or start again, the init containers whose turn it is; True once every
    regular init container has completed (`computeInitContainerActions`)."""
    for container in pod.spec.init_containers:
        c = run.containers[container.name]
        if resources.is_restartable_init_container(container):
            if c.started_at is None:
                c.start(now)
            elif c.exited:
                _restart(pod, c, backoff, now)
            continue
        if c.started_at is None:
            c.start(now)
            return False
        if c.running:
            return False
        if c.exit_code == 0:
            continue
        if container_should_restart(container, pod.spec, c.exit_code):
            _restart(pod, c, backoff, now)
        return False  # restarting, or failed for good: `pod_phase` tells which
    return True


def _sync_container(
    pod: core_v1.Pod,
    container: core_v1.Container,
    c: ContainerRun,
    backoff: CrashLoopBackOff,
    now: datetime,
) -> None:
    if c.started_at is None:
        c.start(now)
    elif c.exited and container_should_restart(container, pod.spec, c.exit_code):
        _restart(pod, c, backoff, now)


def _restart(pod: core_v1.Pod, c: ContainerRun, backoff: CrashLoopBackOff, now: datetime) -> None:
    """Start an exited container again, unless it must wait out its backoff (`doBackOff`)."""
    assert c.finished_at is not None
    if backoff.in_backoff_since(c.backoff, c.finished_at, now):
        assert c.backoff is not None
        meta = pod.metadata
        c.backoff_message = (
            f"back-off {format_go_duration(c.backoff.delay)} restarting failed "
            f"container={c.name} pod={meta.name}_{meta.namespace}({meta.uid})"
        )
        return
    c.backoff = backoff.next(c.backoff, c.finished_at, now)
    c.last = c.terminated(container_id(pod, c))
    c.restart_count += 1
    c.start(now)


def _all_regular_done(pod: core_v1.Pod, run: PodRun) -> bool:
    """Every regular container exited and will not start again."""
    for container in pod.spec.containers:
        c = run.containers[container.name]
        if not c.exited or container_should_restart(container, pod.spec, c.exit_code):
            return False
    return bool(pod.spec.containers)


def _any_regular_started(pod: core_v1.Pod, run: PodRun) -> bool:
    return any(run.containers[c.name].started_at is not None for c in pod.spec.containers)


def _next_due(
    run: PodRun, plans: Mapping[str, RunPlan], deadline: datetime | None
) -> datetime | None:
    due = [deadline] if deadline is not None else []
    for c in run.containers.values():
        plan = plans.get(c.name, RunPlan())
        if c.running and plan.run_for is not None:
            assert c.started_at is not None
            due.append(c.started_at + timedelta(seconds=plan.run_for))
        elif c.backoff_message and c.backoff is not None and c.finished_at is not None:
            due.append(c.finished_at + timedelta(seconds=c.backoff.delay))
    return min(due, default=None)


# --- the pod status -----------------------------------------------------------------------

KUBELET_CONDITIONS = ("PodReadyToStartContainers", "Initialized", "ContainersReady", "Ready")


def container_id(pod: core_v1.Pod, c: ContainerRun) -> str:
    """One id per instance of the container."""
    suffix = f"/{c.restart_count}" if c.restart_count else ""
    return f"drasim://{pod.metadata.uid}/{c.name}{suffix}"


def _container_status(
    pod: core_v1.Pod,
    container: core_v1.Container,
    c: ContainerRun,
    *,
    init: bool,
    resource_status: list[core_v1.ResourceStatus],
) -> core_v1.ContainerStatus:
    """Upstream `convertToAPIContainerStatuses` of one container, with its readiness as the
    probe manager sets it without probes: a running container or sidecar is ready, a regular
    init container once it has exited 0."""
    status = core_v1.ContainerStatus(
        name=container.name,
        image=container.image,
        ready=False,
        restart_count=c.restart_count,
        allocated_resources_status=resource_status,
    )
    if c.started_at is None:
        reason = POD_INITIALIZING if pod.spec.init_containers else CONTAINER_CREATING
        status.state = core_v1.ContainerState(waiting=core_v1.ContainerStateWaiting(reason=reason))
        status.started = False
        return status
    status.image_id = f"drasim://{container.image}"
    status.container_id = container_id(pod, c)
    if c.last is not None:
        status.last_state = core_v1.ContainerState(terminated=c.last)
    if c.backoff_message:
        status.state = core_v1.ContainerState(
            waiting=core_v1.ContainerStateWaiting(
                reason=CRASH_LOOP_BACK_OFF, message=c.backoff_message
            )
        )
        status.last_state = core_v1.ContainerState(terminated=c.terminated(status.container_id))
        status.started = False
    elif c.running:
        status.state = core_v1.ContainerState(
            running=core_v1.ContainerStateRunning(started_at=tables.format_time(c.started_at))
        )
        status.started = True
        status.ready = not init  # a regular init container is ready once it has completed
    else:
        status.state = core_v1.ContainerState(terminated=c.terminated(status.container_id))
        status.ready = init and c.exit_code == 0
        status.started = False
    return status


def _statuses(
    pod: core_v1.Pod, run: PodRun, resource_status: Mapping[str, list[core_v1.ResourceStatus]]
) -> tuple[list[core_v1.ContainerStatus], list[core_v1.ContainerStatus]]:
    """(init container statuses, container statuses)."""
    return (
        [
            _container_status(pod, c, run.containers[c.name], init=not
                              resources.is_restartable_init_container(c),
                              resource_status=resource_status.get(c.name, []))
            for c in pod.spec.init_containers
        ],
        [
            _container_status(pod, c, run.containers[c.name], init=False,
                              resource_status=resource_status.get(c.name, []))
            for c in pod.spec.containers
        ],
    )  # fmt: skip


def pod_phase(
    pod: core_v1.Pod,
    init_statuses: list[core_v1.ContainerStatus],
    statuses: list[core_v1.ContainerStatus],
    *,
    initialized: bool,
) -> str:
    """Upstream `getPhase` (`pkg/kubelet/kubelet_pods.go`) with ContainerRestartRules on, as
    1.37 has it."""
    spec = pod.spec
    by_name = {s.name: s for s in (*init_statuses, *statuses)}
    pending_init = pending_sidecars = failed_init_for_good = 0
    for container in spec.init_containers:
        s = by_name.get(container.name)
        sidecar = resources.is_restartable_init_container(container)
        if s is None:
            pending_init += not sidecar  # a sidecar without status counts as unknown below
            continue
        ended = s.state.terminated or (
            s.last_state.terminated if s.state.waiting is not None else None
        )
        if sidecar:
            not_started = s.state.running is not None and not s.started
            pending_sidecars += not_started or (s.state.waiting is not None and ended is None)
        elif s.state.running is not None or ended is None:
            pending_init += 1
        elif ended.exit_code != 0 and not container_should_restart(
            container, spec, ended.exit_code
        ):
            failed_init_for_good += 1
    unknown = running = waiting = stopped = stopped_for_good = succeeded = 0
    for container in spec.init_containers:
        s = by_name.get(container.name)
        if not resources.is_restartable_init_container(container):
            continue
        if s is None:
            unknown += 1
        elif s.state.running is not None:
            running += 1
        elif s.state.waiting is not None and s.last_state.terminated is None:
            waiting += 1
    for container in spec.containers:
        s = by_name.get(container.name)
        if s is None:
            unknown += 1
        elif s.state.running is not None:
            running += 1
        elif s.state.terminated is not None or (
            s.state.waiting is not None and s.last_state.terminated is not None
        ):
            ended = s.state.terminated or s.last_state.terminated
            assert ended is not None
            stopped += 1
            if not container_should_restart(container, spec, ended.exit_code):
                stopped_for_good += 1
            if s.state.terminated is not None and ended.exit_code == 0:
                succeeded += 1
        else:
            waiting += 1
    if failed_init_for_good:
        return FAILED
    if pending_init or (pending_sidecars and not initialized) or waiting:
        return "Pending"
    if running and not unknown:
        return "Running"
    if not running and stopped and not unknown:
        if stopped != stopped_for_good:
            return "Running"
        return SUCCEEDED if stopped == succeeded else FAILED
    return "Pending"


def pod_status(
    pod: core_v1.Pod,
    run: PodRun,
    resource_status: Mapping[str, list[core_v1.ResourceStatus]],
    *,
    host_ip: str,
    pod_ip: str,
    now: datetime,
) -> core_v1.PodStatus:
    """The pod's status as the kubelet writes it: phase, containers and conditions."""
    init_statuses, statuses = _statuses(pod, run, resource_status)
    phase = run.phase or pod_phase(
        pod, init_statuses, statuses, initialized=_any_regular_started(pod, run)
    )
    _render_conditions(pod, run, init_statuses, statuses, phase, now)
    conditions = [c for c in pod.status.conditions if c.type not in KUBELET_CONDITIONS]
    conditions += [run.conditions[kind] for kind in KUBELET_CONDITIONS]
    return msgspec.structs.replace(
        pod.status,
        phase=phase,
        reason=run.reason or pod.status.reason,
        message=run.message or pod.status.message,
        conditions=conditions,
        host_ip=host_ip,
        host_ips=[core_v1.HostIP(ip=host_ip)],
        pod_ip=pod_ip,
        pod_ips=[core_v1.PodIP(ip=pod_ip)],
        start_time=tables.format_time(run.started),
        init_container_statuses=init_statuses,
        container_statuses=statuses,
    )


def _render_conditions(
    pod: core_v1.Pod,
    run: PodRun,
    init_statuses: list[core_v1.ContainerStatus],
    statuses: list[core_v1.ContainerStatus],
    phase: str,
    now: datetime,
) -> None:
    """Upstream `status/generate.go`; a condition keeps its transition time while its
    status stays."""
    terminal = phase in (SUCCEEDED, FAILED)
    by_name = {s.name: s for s in (*init_statuses, *statuses)}
    init_names = {s.name for s in init_statuses}
    done_reason = "PodCompleted" if phase == SUCCEEDED else "PodFailed"
    # Initialized
    incomplete = [
        c.name for c in pod.spec.init_containers
        if not (by_name[c.name].started if resources.is_restartable_init_container(c)
                else by_name[c.name].ready)
    ]  # fmt: skip
    if phase == SUCCEEDED:
        initialized = ("True", "PodCompleted", "")
    elif _any_regular_started(pod, run) or not incomplete:
        initialized = ("True", "", "")
    else:
        message = f"containers with incomplete status: [{' '.join(incomplete)}]"
        initialized = ("False", "ContainersNotInitialized", message)
    # ContainersReady, and Ready (no readiness gates)
    unready = [
        c.name for c in (*pod.spec.init_containers, *pod.spec.containers)
        if not by_name[c.name].ready
        and (c.name not in init_names or resources.is_restartable_init_container(c))
    ]  # fmt: skip
    if terminal:
        ready = ("False", done_reason, "")
    elif unready:
        ready = (
            "False",
            "ContainersNotReady",
            f"containers with unready status: [{' '.join(unready)}]",
        )
    else:
        ready = ("True", "", "")
    wanted = {
        "PodReadyToStartContainers": ("False", "", "") if terminal else ("True", "", ""),
        "Initialized": initialized,
        "ContainersReady": ready,
        "Ready": ready,
    }
    for kind, (status, reason, message) in wanted.items():
        previous = run.conditions.get(kind)
        at = tables.format_time(now)
        if previous is not None and previous.status == status:
            at = previous.last_transition_time or at
        run.conditions[kind] = core_v1.PodCondition(
            type=kind, status=status, reason=reason, message=message, last_transition_time=at
        )
