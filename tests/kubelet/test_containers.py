"""The emulated containers' timeline (upstream `computePodActions`, `getPhase`): runs and
exits, init containers in order, restarts with CrashLoopBackOff, the phase and status."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from drasim.common import container_runs
from drasim.common.api import core_v1
from drasim.kubelet import containers
from drasim.kubelet.backoff import CrashLoopBackOff
from tests.builders import make_pod

T0 = datetime(2026, 1, 1, tzinfo=UTC)
BACKOFF = CrashLoopBackOff(initial=10, maximum=40)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


class Runner:
    """One pod's containers, synced at chosen times as the kubelet's wake-ups would."""

    def __init__(self, pod: core_v1.Pod) -> None:
        self.pod = pod
        self.run = containers.PodRun.recover(pod, T0)
        self.plans = container_runs.plans(pod)

    def sync(self, seconds: float) -> float | None:
        due = containers.sync(self.pod, self.run, self.plans, BACKOFF, at(seconds))
        return (due - T0).total_seconds() if due is not None else None

    def status(self, seconds: float) -> core_v1.PodStatus:
        return containers.pod_status(
            self.pod, self.run, {}, host_ip="10.0.0.1", pod_ip="10.1.0.2", now=at(seconds)
        )

    def until_done(self) -> core_v1.PodStatus:
        """Sync at each due time until nothing is due; the final status."""
        now: float | None = 0.0
        last = 0.0
        while now is not None:
            last = now
            now = self.sync(now)
        return self.status(last)


def conditions(status: core_v1.PodStatus) -> dict[str, tuple[str, str]]:
    return {c.type: (c.status, c.reason) for c in status.conditions}


def test_without_annotations_containers_run_until_deleted() -> None:
    runner = Runner(make_pod("p").obj())
    assert runner.sync(0) is None
    status = runner.status(0)
    assert status.phase == "Running"
    [c] = status.container_statuses
    assert c.state.running is not None and c.ready and c.started
    assert conditions(status)["Ready"] == ("True", "")


def test_a_container_that_exits_0_succeeds_the_pod_and_unreadies_it() -> None:
    pod = make_pod("p").annotations({"drasim.io/run-for": "1s"}).restart_policy("Never").obj()
    runner = Runner(pod)
    assert runner.sync(0) == 1.0
    assert runner.status(0).phase == "Running"
    assert runner.sync(1.5) is None
    status = runner.status(1.5)
    assert status.phase == "Succeeded"
    [c] = status.container_statuses
    terminated = c.state.terminated
    assert terminated is not None
    assert (terminated.exit_code, terminated.reason) == (0, "Completed")
    assert terminated.started_at == "2026-01-01T00:00:00Z"
    assert terminated.finished_at == "2026-01-01T00:00:01Z"
    assert not c.ready and c.started is False
    assert conditions(status) == {
        "PodReadyToStartContainers": ("False", ""),
        "Initialized": ("True", "PodCompleted"),
        "ContainersReady": ("False", "PodCompleted"),
        "Ready": ("False", "PodCompleted"),
    }


def test_exit_1_with_never_fails_the_pod() -> None:
    pod = (
        make_pod("p")
        .annotations({"drasim.io/run-for": "2s", "drasim.io/exit-code": "1"})
        .restart_policy("Never")
        .obj()
    )
    status = Runner(pod).until_done()
    assert status.phase == "Failed"
    [c] = status.container_statuses
    assert c.state.terminated is not None
    assert (c.state.terminated.exit_code, c.state.terminated.reason) == (1, "Error")
    assert conditions(status)["Ready"] == ("False", "PodFailed")


def test_on_failure_restarts_with_crash_loop_back_off() -> None:
    pod = (
        make_pod("p")
        .annotations({"drasim.io/run-for": "1s", "drasim.io/exit-code": "1"})
        .restart_policy("OnFailure")
        .obj()
    )
    runner = Runner(pod)
    assert runner.sync(0) == 1
    # Exits at 1 and starts again at once: the first restart is immediate.
    assert runner.sync(1) == 2
    [c] = runner.status(1).container_statuses
    assert c.restart_count == 1 and c.state.running is not None
    assert c.last_state.terminated is not None and c.last_state.terminated.exit_code == 1
    # Exits at 2: waits 10 s from its finish.
    assert runner.sync(2) == 12
    status = runner.status(2)
    [c] = status.container_statuses
    assert status.phase == "Running"
    assert c.state.waiting is not None and c.state.waiting.reason == "CrashLoopBackOff"
    assert c.state.waiting.message == (
        "back-off 10s restarting failed container=con0 pod=p_default()"
    )
    assert c.last_state.terminated is not None and c.restart_count == 1
    assert conditions(status)["Ready"] == ("False", "ContainersNotReady")
    assert runner.sync(12) == 13
    assert runner.status(12).container_statuses[0].restart_count == 2
    assert runner.sync(13) == 33  # then 20 s


def test_on_failure_after_exit_0_succeeds() -> None:
    pod = make_pod("p").annotations({"drasim.io/run-for": "1s"}).restart_policy("OnFailure").obj()
    assert Runner(pod).until_done().phase == "Succeeded"


def test_always_restarts_even_exit_0() -> None:
    pod = make_pod("p").annotations({"drasim.io/run-for": "1s"}).obj()  # restartPolicy Always
    runner = Runner(pod)
    runner.sync(0)
    assert runner.sync(1) == 2
    assert runner.status(1).phase == "Running"
    assert runner.status(1).container_statuses[0].restart_count == 1


def test_init_containers_complete_in_order_before_the_containers_start() -> None:
    pod = (
        make_pod("p")
        .init_container("first")
        .init_container("second")
        .container("app")
        .annotations({"run-for.drasim.io/first": "2s", "run-for.drasim.io/second": "3s"})
        .restart_policy("Never")
        .obj()
    )
    runner = Runner(pod)
    assert runner.sync(0) == 2
    status = runner.status(0)
    assert status.phase == "Pending"
    first, second = status.init_container_statuses
    assert first.state.running is not None
    assert second.state.waiting is not None and second.state.waiting.reason == "PodInitializing"
    assert status.container_statuses[0].state.waiting.reason == "PodInitializing"
    assert conditions(status)["Initialized"] == ("False", "ContainersNotInitialized")
    assert runner.sync(2) == 5
    assert runner.status(2).init_container_statuses[1].state.running is not None
    assert runner.sync(5) is None  # app runs until deleted
    status = runner.status(5)
    assert status.phase == "Running"
    assert [s.state.terminated.reason for s in status.init_container_statuses] == [
        "Completed", "Completed",
    ]  # fmt: skip
    assert all(s.ready for s in status.init_container_statuses)
    assert conditions(status)["Initialized"] == ("True", "")


def test_a_failed_init_container_with_never_fails_the_pod() -> None:
    pod = (
        make_pod("p")
        .init_container("setup")
        .annotations({"exit-code.drasim.io/setup": "3"})
        .restart_policy("Never")
        .obj()
    )
    status = Runner(pod).until_done()
    assert status.phase == "Failed"
    [setup] = status.init_container_statuses
    assert setup.state.terminated is not None and setup.state.terminated.exit_code == 3
    assert status.container_statuses[0].state.waiting.reason == "PodInitializing"


def test_a_sidecar_runs_beside_the_containers_and_stops_after_them() -> None:
    pod = (
        make_pod("p")
        .init_container("proxy", sidecar=True)
        .container("app")
        .annotations({"drasim.io/run-for": "1s"})
        .restart_policy("Never")
        .obj()
    )
    runner = Runner(pod)
    assert runner.sync(0) == 1
    status = runner.status(0)
    assert status.phase == "Running"
    assert status.init_container_statuses[0].state.running is not None
    assert runner.sync(1) is None
    status = runner.status(1)
    assert status.phase == "Succeeded"
    assert status.init_container_statuses[0].state.terminated is not None


def test_active_deadline_fails_the_pod() -> None:
    pod = make_pod("p").restart_policy("Never").obj()
    pod.spec.active_deadline_seconds = 5
    runner = Runner(pod)
    assert runner.sync(0) == 5
    assert runner.sync(5) is None
    status = runner.status(5)
    assert (status.phase, status.reason) == ("Failed", "DeadlineExceeded")
    assert status.message == "Pod was active on the node longer than the specified deadline"
    assert status.container_statuses[0].state.terminated.exit_code == 137


def test_a_restarted_kubelet_recovers_the_timeline_from_the_status() -> None:
    pod = make_pod("p").annotations({"drasim.io/run-for": "10s"}).restart_policy("Never").obj()
    runner = Runner(pod)
    runner.sync(0)
    pod.status = runner.status(0)
    again = Runner(pod)
    assert again.sync(3) == 10
    assert again.sync(10) is None and again.run.phase == "Succeeded"


def test_the_phase_as_get_phase_computes_it() -> None:
    pod = make_pod("p").container("a").container("b").restart_policy("OnFailure").obj()
    ok = core_v1.ContainerState(terminated=core_v1.ContainerStateTerminated(exit_code=0))
    bad = core_v1.ContainerState(terminated=core_v1.ContainerStateTerminated(exit_code=2))
    running = core_v1.ContainerState(running=core_v1.ContainerStateRunning())

    def phase(a: core_v1.ContainerState, b: core_v1.ContainerState) -> str:
        statuses = [
            core_v1.ContainerStatus(name="a", state=a),
            core_v1.ContainerStatus(name="b", state=b),
        ]
        return containers.pod_phase(pod, [], statuses, initialized=True)

    assert phase(ok, ok) == "Succeeded"
    assert phase(ok, running) == "Running"
    assert phase(ok, bad) == "Running"  # OnFailure: b restarts
    pod.spec.restart_policy = "Never"
    assert phase(ok, bad) == "Failed"
    assert containers.pod_phase(pod, [], [], initialized=False) == "Pending"
