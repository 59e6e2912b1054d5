"""Extended-resource names (upstream `IsExtendedResourceName`, `IsDRAExtendedResourceName`)
and effective pod requests (upstream `PodRequests`)."""

from __future__ import annotations

from typing import Any

import pytest

from drasim.common import codec
from drasim.common.api import core_v1, resources
from drasim.common.quantity import Quantity, parse_quantity

NAME_CASES = [
    # (name, is extended resource name, is DRA-capable)
    ("example.com/gpu", True, True),
    ("example.com/GPU_x.1", True, True),
    ("gpu.example.com/device", True, True),
    ("cpu", False, False),
    ("memory", False, False),
    ("hugepages-2Mi", False, False),
    ("kubernetes.io/gpu", False, False),
    ("example.kubernetes.io/gpu", False, False),
    ("deviceclass.resource.kubernetes.io/gpu", False, True),
    ("deviceclass.resource.kubernetes.io/" + "c" * 200, False, True),
    ("requests.example.com/gpu", False, False),
    ("Example.com/gpu", False, False),
    ("example.com/", False, False),
    ("/gpu", False, False),
    ("example.com/gpu/x", False, False),
    ("example.com/-gpu", False, False),
    ("example.com/" + "g" * 63, True, True),
    ("example.com/" + "g" * 64, False, False),
    # `requests.` + prefix must stay a DNS subdomain of at most 253 characters.
    ("a" * 244 + "/gpu", True, True),
    ("a" * 245 + "/gpu", False, False),
]


@pytest.mark.parametrize(
    ("name", "extended", "dra_capable"), NAME_CASES, ids=[c[0][:60] for c in NAME_CASES]
)
def test_resource_names(name: str, extended: bool, dra_capable: bool) -> None:
    assert resources.is_extended_resource_name(name) is extended
    assert resources.is_dra_capable_name(name) is dra_capable


def _container(name: str, requests: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"name": name, "image": "img"}
    if requests is not None:
        body["resources"] = {"requests": requests}
    return body | extra


def _sidecar(name: str, requests: dict[str, Any]) -> dict[str, Any]:
    return _container(name, requests, restartPolicy="Always")


def _pod(
    containers: list[dict[str, Any]],
    init: list[dict[str, Any]] | None = None,
    **spec: Any,
) -> core_v1.Pod:
    body = {"containers": containers, "initContainers": init or []} | spec
    return codec.convert({"metadata": {"name": "p"}, "spec": body}, core_v1.Pod)


def _q(values: dict[str, str | int]) -> dict[str, Quantity]:
    return {k: parse_quantity(v) for k, v in values.items()}


POD_REQUEST_CASES = [
    ("no-containers-requests", _pod([_container("c")]), {}),
    ("one-container", _pod([_container("c", {"cpu": "1", "example.com/gpu": 1})]),
     {"cpu": "1", "example.com/gpu": 1}),
    ("containers-add-up", _pod([_container("a", {"cpu": "500m"}), _container("b", {"cpu": "1"})]),
     {"cpu": "1500m"}),
    ("init-larger-wins",
     _pod([_container("c", {"example.com/gpu": 1})], [_container("i", {"example.com/gpu": 3})]),
     {"example.com/gpu": 3}),
    ("init-smaller-ignored",
     _pod([_container("c", {"example.com/gpu": 2})], [_container("i", {"example.com/gpu": 1})]),
     {"example.com/gpu": 2}),
    ("init-only-resource-counts",
     _pod([_container("c", {"cpu": "1"})], [_container("i", {"example.com/gpu": 2})]),
     {"cpu": "1", "example.com/gpu": 2}),
    ("sidecar-adds-to-containers",
     _pod([_container("c", {"example.com/gpu": 1})], [_sidecar("s", {"example.com/gpu": 1})]),
     {"example.com/gpu": 2}),
    # KEP-753: an init container runs beside the sidecars started before it, not after it.
    ("init-after-sidecar",
     _pod([_container("c", {"example.com/gpu": 1})],
          [_sidecar("s", {"example.com/gpu": 1}), _container("i", {"example.com/gpu": 2})]),
     {"example.com/gpu": 3}),
    ("init-before-sidecar",
     _pod([_container("c", {"example.com/gpu": 1})],
          [_container("i", {"example.com/gpu": 2}), _sidecar("s", {"example.com/gpu": 1})]),
     {"example.com/gpu": 2}),
    # The pod of upstream's "three init containers, one sidecar, one regular container"
    # (`Test_createRequestsAndMappings_requests`): init-con0, sidecar, init-con2, con0.
    ("a7",
     _pod([_container("con0", {"example.com/gpu": 1})],
          [_container("init-con0", {"example.com/gpuinit": 1}),
           _sidecar("sidecar-con1", {"example.com/gpuinit": 1}),
           _container("init-con2", {"example.com/gpuinit": 2})]),
     {"example.com/gpu": 1, "example.com/gpuinit": 3}),
    ("limits-default-requests",
     _pod([{"name": "c", "image": "i",
            "resources": {"limits": {"example.com/gpu": 2, "cpu": "1"},
                          "requests": {"cpu": "500m"}}}]),
     {"example.com/gpu": 2, "cpu": "500m"}),
    ("overhead-added",
     _pod([_container("c", {"cpu": "1"})], overhead={"cpu": "250m", "memory": "64Mi"}),
     {"cpu": "1250m", "memory": "64Mi"}),
    ("ephemeral-ignored",
     _pod([_container("c", {"cpu": "1"})],
          ephemeralContainers=[_container("debug", {"cpu": "2"})]),
     {"cpu": "1"}),
    ("zero-kept",
     _pod([_container("c", {"example.com/gpu": 0})]),
     {"example.com/gpu": 0}),
]  # fmt: skip


@pytest.mark.parametrize(
    ("pod", "want"),
    [c[1:] for c in POD_REQUEST_CASES],
    ids=[c[0] for c in POD_REQUEST_CASES],
)
def test_pod_requests(pod: core_v1.Pod, want: dict[str, str | int]) -> None:
    assert resources.pod_requests(pod) == _q(want)


def test_pod_requests_keeps_canonical_formats() -> None:
    pod = _pod([_container("a", {"memory": "1Gi"}), _container("b", {"memory": "512Mi"})])
    assert str(resources.pod_requests(pod)["memory"]) == "1536Mi"


@pytest.mark.parametrize(
    ("container", "want"),
    [
        (core_v1.Container(name="c"), {}),
        (
            core_v1.Container(
                name="c",
                resources=core_v1.ResourceRequirements(limits=_q({"example.com/gpu": 1})),
            ),
            {"example.com/gpu": 1},
        ),
        (
            core_v1.Container(
                name="c",
                resources=core_v1.ResourceRequirements(
                    limits=_q({"cpu": "2", "memory": "1Gi"}), requests=_q({"cpu": "1"})
                ),
            ),
            {"cpu": "1", "memory": "1Gi"},
        ),
    ],
    ids=["nothing", "limit-only", "request-wins-over-limit"],
)
def test_container_requests(container: core_v1.Container, want: dict[str, str | int]) -> None:
    assert resources.container_requests(container) == _q(want)


def test_restartable_init_container() -> None:
    pod = _pod(
        [_container("c")], [_sidecar("s", {}), _container("i", {}, restartPolicy="OnFailure")]
    )
    assert [resources.is_restartable_init_container(c) for c in pod.spec.init_containers] == [
        True,
        False,
    ]


def test_same_request_inputs() -> None:
    """Equal inputs of `pod_requests` (the fields it reads) mean equal requests; a change of
    any of them counts, other fields do not."""
    init = [_container("i", {"cpu": "500m"})]
    base = _pod([_container("c", {"cpu": "1"})], init)
    running = _pod([_container("c", {"cpu": "1"})], init)
    running.status.phase = "Running"
    running.spec.node_name = "worker"
    assert resources.same_request_inputs(base, running)
    changed = [
        _pod([_container("c", {"cpu": "2"})], init),
        _pod([_container("c", {"cpu": "1"})], [_sidecar("i", {"cpu": "500m"})]),
        _pod([_container("c", {"cpu": "1"})], init, overhead={"cpu": "1"}),
    ]
    for other in changed:
        assert not resources.same_request_inputs(base, other)
        assert resources.pod_requests(base) != resources.pod_requests(other)
