"""pods/log without kubectl's own defaulting: the kubelet's errors."""

from __future__ import annotations

import pytest

from drasim.apistore.http import logs
from drasim.common import codec, container_devices, errors
from drasim.common.api import core_v1
from tests.builders import make_pod


def test_a_pod_of_several_containers_needs_one_named() -> None:
    pod = make_pod("p").container("a").container("b").init_container("setup").obj()
    with pytest.raises(errors.BadRequest) as refused:
        logs.container_log(pod)
    assert refused.value.message == (
        "a container name must be specified for pod p, choose one of: [a b] "
        "or one of the init containers: [setup]"
    )
    with pytest.raises(errors.BadRequest, match="container c is not valid for pod p"):
        logs.container_log(pod, "c")


def test_the_default_container_annotation_names_it() -> None:
    pod = make_pod("p").container("a").container("b").obj()
    pod.metadata.annotations = {"kubectl.kubernetes.io/default-container": "b"}
    with pytest.raises(errors.BadRequest, match='container "b" in pod "p" is waiting to start'):
        logs.container_log(pod)


def _ran(pod_status_json: dict) -> core_v1.Pod:
    pod = make_pod("p").container("app").obj()
    pod.spec.node_name = "n1"
    pod.status = codec.convert(pod_status_json, core_v1.PodStatus)
    return pod


ENDED = {"exitCode": 1, "reason": "Error", "startedAt": "2026-01-01T00:00:00Z",
         "finishedAt": "2026-01-01T00:00:05Z", "containerID": "drasim://u/app"}  # fmt: skip


def test_an_exited_container_tells_its_exit_code() -> None:
    pod = _ran({"containerStatuses": [{"name": "app", "state": {"terminated": ENDED}}]})
    text = logs.container_log(pod)
    assert text.splitlines()[-1] == "drasim: exited with code 1 (Error) at 2026-01-01T00:00:05Z"
    assert logs.read_log(pod).ended


def test_crash_loop_back_off_shows_the_instance_that_ended_and_previous_it() -> None:
    waiting = {"waiting": {"reason": "CrashLoopBackOff"}}
    pod = _ran(
        {"containerStatuses": [
            {"name": "app", "state": waiting, "lastState": {"terminated": ENDED}, "restartCount": 1}
        ]}
    )  # fmt: skip
    assert logs.container_log(pod).splitlines()[-1].startswith("drasim: exited with code 1")
    assert logs.container_log(pod, previous=True) == logs.container_log(pod)


def test_previous_without_a_restart_is_not_found() -> None:
    pod = _ran({"containerStatuses": [{"name": "app", "state": {"running": {}}}]})
    assert not logs.read_log(pod).ended
    with pytest.raises(errors.BadRequest) as refused:
        logs.container_log(pod, previous=True)
    assert refused.value.message == 'previous terminated container "app" in pod "p" not found'


def _exporting(command: list[str], args: list[str], env: dict[str, str]) -> core_v1.Pod:
    pod = _ran({"containerStatuses": [{"name": "app", "state": {"running": {}}}]})
    pod.spec.containers[0].command = command
    pod.spec.containers[0].args = args
    pod.spec.containers[0].env = [core_v1.EnvVar(name="MODE", value='say "hi" $x')]
    pod.metadata.annotations = {
        container_devices.CONTAINER_DEVICES_ANNOTATION: container_devices.encode_container_devices(
            {"app": container_devices.ContainerDevices(cdi_devices=["k8s.x/gpu=a"], env=env)}
        )
    }
    return pod


def test_a_container_running_export_prints_its_environment_as_bash_does() -> None:
    """The DRA drivers' demo containers run `export; sleep`: their log is the environment,
    which the demos' `kubectl logs ... | grep GPU_DEVICE` read."""
    env = {"GPU_DEVICE_3": "gpu-3", "DRA_ADMIN_ACCESS": "false"}
    pod = _exporting(["bash", "-c"], ["export; trap 'exit 0' TERM; sleep 9999 & wait"], env)
    lines = logs.container_log(pod).splitlines()
    assert lines[1:] == [
        "CDI device k8s.x/gpu=a",
        'declare -x DRA_ADMIN_ACCESS="false"',
        'declare -x GPU_DEVICE_3="gpu-3"',
        'declare -x HOSTNAME="p"',
        'declare -x MODE="say \\"hi\\" \\$x"',
    ]
    quiet = logs.container_log(_exporting(["sleep"], ["9999"], env)).splitlines()
    assert quiet[1:] == [
        "CDI device k8s.x/gpu=a",
        "env DRA_ADMIN_ACCESS=false",
        "env GPU_DEVICE_3=gpu-3",
    ]
