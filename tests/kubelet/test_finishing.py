"""Pods whose containers finish (`drasim.io/run-for`, `drasim.io/exit-code`): the kubelet
writes their end as upstream's does, restarts by `restartPolicy`, and gives their devices
back once the pod has ended, so the next pod gets them."""

from __future__ import annotations

from drasim.common.api import core_v1
from drasim.common.client import ApiClient
from drasim.kubelet.backoff import CrashLoopBackOff
from tests.builders import make_pod
from tests.kubelet.conftest import DP_NODE, DRA_NODE, StartKubelet
from tests.kubelet.scheduling import schedule_with_dra
from tests.kubelet.test_pods import resource_status, running
from tests.kubelet.waiting import wait_for

FAST = CrashLoopBackOff(initial=0.2, maximum=1.0)


def phase_is(phase: str):
    return lambda p: p is not None and p.status.phase == phase


async def test_a_finished_pod_gives_its_device_plugin_devices_to_the_next(
    api: ApiClient, start_kubelet: StartKubelet
) -> None:
    await start_kubelet(DP_NODE)
    pod = (
        make_pod("short")
        .limits({"example.com/gpu": "2"})
        .annotations({"drasim.io/run-for": "500ms"})
        .restart_policy("Never")
        .node(DP_NODE)
        .obj()
    )
    await api.create(pod)
    done = await wait_for(api, core_v1.Pod, "short", phase_is("Succeeded"), namespace="default")
    assert done is not None
    [status] = done.status.container_statuses
    assert status.state.terminated is not None
    assert (status.state.terminated.exit_code, status.state.terminated.reason) == (0, "Completed")
    assert not status.ready
    ready = next(c for c in done.status.conditions if c.type == "Ready")
    assert (ready.status, ready.reason) == ("False", "PodCompleted")

    # Both GPUs are free again: a pod asking for both is admitted, not OutOfexample.com/gpu.
    await api.create(make_pod("next").limits({"example.com/gpu": "2"}).node(DP_NODE).obj())
    following = await wait_for(api, core_v1.Pod, "next", running, namespace="default")
    assert following is not None
    assert resource_status(following)["con0"] == {"example.com/gpu": ["gpu-0", "gpu-1"]}


async def test_a_failed_pod_unprepares_its_special_claim(
    api: ApiClient, start_kubelet: StartKubelet
) -> None:
    kubelet = await start_kubelet(DRA_NODE)
    pod = (
        make_pod("fails")
        .limits({"example.com/gpu": "1"})
        .annotations({"drasim.io/run-for": "200ms", "drasim.io/exit-code": "2"})
        .restart_policy("Never")
        .obj()
    )
    await schedule_with_dra(
        api,
        pod,
        DRA_NODE,
        mappings=[("con0", "example.com/gpu", "container-0-request-0")],
        results=[("container-0-request-0", "gpu-0")],
    )
    await wait_for(api, core_v1.Pod, "fails", running, namespace="default")
    agent = kubelet.agents[DRA_NODE]
    assert agent.dra.claims  # prepared while it runs
    failed = await wait_for(api, core_v1.Pod, "fails", phase_is("Failed"), namespace="default")
    assert failed is not None
    terminated = failed.status.container_statuses[0].state.terminated
    assert terminated is not None and (terminated.exit_code, terminated.reason) == (2, "Error")
    assert not agent.dra.claims
    assert not any(agent.drivers["gpu.example.com"].prepared_devices().values())


async def test_on_failure_restarts_and_counts(api: ApiClient, start_kubelet: StartKubelet) -> None:
    await start_kubelet(DP_NODE, crash_loop_backoff=FAST)
    pod = (
        make_pod("flaky")
        .annotations({"drasim.io/run-for": "100ms", "drasim.io/exit-code": "1"})
        .restart_policy("OnFailure")
        .node(DP_NODE)
        .obj()
    )
    await api.create(pod)
    restarted = await wait_for(
        api,
        core_v1.Pod,
        "flaky",
        lambda p: (
            p is not None and p.status.container_statuses[0].restart_count >= 3
            if p is not None and p.status.container_statuses
            else False
        ),
        namespace="default",
    )
    assert restarted is not None
    assert restarted.status.phase == "Running"
    [status] = restarted.status.container_statuses
    last = status.last_state.terminated
    assert last is not None and (last.exit_code, last.reason) == (1, "Error")


async def test_init_containers_complete_before_the_container_starts(
    api: ApiClient, start_kubelet: StartKubelet
) -> None:
    await start_kubelet(DP_NODE)
    pod = (
        make_pod("staged")
        .init_container("setup")
        .container("app")
        .annotations({"run-for.drasim.io/setup": "300ms", "run-for.drasim.io/app": "300ms"})
        .restart_policy("Never")
        .node(DP_NODE)
        .obj()
    )
    await api.create(pod)
    initializing = await wait_for(
        api,
        core_v1.Pod,
        "staged",
        lambda p: (
            p is not None
            and bool(p.status.init_container_statuses)
            and p.status.init_container_statuses[0].state.running is not None
        ),
        namespace="default",
    )
    assert initializing is not None
    assert initializing.status.phase == "Pending"
    assert initializing.status.container_statuses[0].state.waiting.reason == "PodInitializing"
    done = await wait_for(api, core_v1.Pod, "staged", phase_is("Succeeded"), namespace="default")
    assert done is not None
    setup = done.status.init_container_statuses[0].state.terminated
    app = done.status.container_statuses[0].state.terminated
    assert setup is not None and app is not None
    assert setup.finished_at <= app.started_at
