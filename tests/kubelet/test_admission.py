"""Admission (upstream `pkg/kubelet/lifecycle/predicate.go`, `AdmissionCheck`) and
device-plugin allocation at admission."""

from __future__ import annotations

import pytest

from drasim.common import cluster_file
from drasim.common.quantity import parse_quantity
from drasim.drivers.device_plugin import DevicePlugin
from drasim.drivers.errors import PermanentError
from drasim.drivers.probe import EmulatedProbe
from drasim.kubelet import admission, device_manager
from tests.builders import make_pod

IMPLICIT = "deviceclass.resource.kubernetes.io/gpu.example.com"


NODE = {"cpu": "4", "memory": "16Gi", "pods": "3"}


@pytest.mark.parametrize(
    ("limits", "allocatable", "used", "pods", "want"),
    [
        ({"example.com/gpu": "1"}, {}, {}, 0, None),  # DRA-backed: not node capacity
        ({IMPLICIT: "2"}, {}, {}, 0, None),  # implicit names likewise
        ({"example.com/gpu": "1"}, {"example.com/gpu": "0"}, {}, 0, None),
        ({"example.com/gpu": "1"}, {"example.com/gpu": "2"}, {"example.com/gpu": "1"}, 1, None),
        (
            {"example.com/gpu": "1"},
            {"example.com/gpu": "2"},
            {"example.com/gpu": "2"},
            2,
            admission.Rejection(
                "OutOfexample.com/gpu",
                "Node didn't have enough resource: example.com/gpu, requested: 1, used: 2, "
                "capacity: 2",
            ),
        ),
        (
            {"cpu": "1500m"},
            {},
            {"cpu": "3"},
            1,
            admission.Rejection(
                "OutOfcpu",
                "Node didn't have enough resource: cpu, requested: 1500, used: 3000, "
                "capacity: 4000",
            ),
        ),
        (
            {},
            {},
            {},
            3,
            admission.Rejection(
                "OutOfpods",
                "Node didn't have enough resource: pods, requested: 1, used: 3, capacity: 3",
            ),
        ),
    ],
    ids=[
        "explicit-dra-name-absent",
        "implicit-dra-name-absent",
        "dra-name-zero",
        "device-plugin-fits",
        "device-plugin-full",
        "cpu-in-millicores",
        "too-many-pods",
    ],
)
def test_admission(
    limits: dict[str, str],
    allocatable: dict[str, str],
    used: dict[str, str],
    pods: int,
    want: admission.Rejection | None,
) -> None:
    node = {k: parse_quantity(v) for k, v in {**NODE, **allocatable}.items()}
    pod = make_pod("p").limits(limits).obj()
    requests = admission.counted_requests(pod, node)
    in_use = {k: parse_quantity(v) for k, v in used.items()}
    assert admission.fit(requests, allocatable=node, used=in_use, pods=pods) == want


def test_check_without_stripping_finds_a_missing_extended_resource_insufficient() -> None:
    """Upstream's `TestAdmissionCheck` (`pkg/scheduler/eventhandlers_test.go`): a node
    without `foo.com/bar`."""
    node = {k: parse_quantity(v) for k, v in NODE.items()}
    rejection = admission.fit(
        {"foo.com/bar": parse_quantity("1")}, allocatable=node, used={}, pods=0
    )
    assert rejection == admission.Rejection(
        "OutOffoo.com/bar",
        "Node didn't have enough resource: foo.com/bar, requested: 1, used: 0, capacity: 0",
    )


@pytest.fixture
def plugin() -> DevicePlugin:
    (node,) = [n for n in cluster_file.load().nodes if n.profile.name == "gpu-2"]
    probe = EmulatedProbe(node.profile)
    return DevicePlugin(
        resource_name="example.com/gpu", group="gpu", probe=probe, on_health_change=lambda: None
    )


def test_an_init_container_hands_its_devices_on_but_a_sidecar_keeps_them(
    plugin: DevicePlugin,
) -> None:
    gpu = {"example.com/gpu": "1"}
    pod = make_pod("p").init_container("init-con0", limits=gpu).container("con0", limits=gpu).obj()
    pod.metadata.uid = "uid-1"
    given = device_manager.allocate_pod(pod, {"example.com/gpu": plugin})
    assert given["init-con0"]["example.com/gpu"].device_ids == ["gpu-0"]
    assert given["con0"]["example.com/gpu"].device_ids == ["gpu-0"]

    pod = (
        make_pod("q")
        .init_container("sidecar-con0", sidecar=True, limits=gpu)
        .container("con0", limits=gpu)
        .obj()
    )
    pod.metadata.uid = "uid-2"
    with pytest.raises(PermanentError, match="Requested: 1, Available: 0"):
        device_manager.allocate_pod(pod, {"example.com/gpu": plugin})
    assert plugin.allocated("uid-2") == {}  # what it got before failing is given back

    plugin.release("uid-1")
    given = device_manager.allocate_pod(pod, {"example.com/gpu": plugin})
    assert given["sidecar-con0"]["example.com/gpu"].device_ids == ["gpu-0"]
    assert given["con0"]["example.com/gpu"].device_ids == ["gpu-1"]
