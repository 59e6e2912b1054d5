"""The special claim: request naming and mappings (upstream
`Test_createRequestsAndMappings_requests` and `_mappings`, ids A1-A9), its constants and
the claim helpers (upstream `findExtendedResourceClaim`, `preFilterExtendedResources`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest

from drasim.common.api import core_v1, meta_v1, resource_v1
from drasim.common.quantity import parse_quantity
from drasim.scheduler.plugins.dynamic_resources import extended
from tests.builders import PodBuilder, make_pod

GPU = "example.com/gpu"
GPU1 = "example.com/gpu1"
GPU_INIT = "example.com/gpuinit"
IMPLICIT_INIT = "deviceclass.resource.kubernetes.io/classInit"


def device_class(name: str) -> resource_v1.DeviceClass:
    return resource_v1.DeviceClass(metadata=meta_v1.ObjectMeta(name=name))


CLASSES = {
    GPU: device_class("class"),
    GPU1: device_class("class1"),
    GPU_INIT: device_class("classInit"),
    IMPLICIT_INIT: device_class("classInit"),
}


Resolve = Callable[[str], resource_v1.DeviceClass | None]


def only(*names: str) -> Resolve:
    """A resolver that knows only these names (the others have no DeviceClass)."""
    return lambda name: CLASSES[name] if name in names else None


def resolve_all(name: str) -> resource_v1.DeviceClass | None:
    return CLASSES.get(name)


def req(**quantities: str) -> dict[str, dict[str, str]]:
    return {"requests": quantities}


@dataclass
class Case:
    id: str
    pod: PodBuilder
    want_requests: list[tuple[str, str, int]]  # (name, class, count)
    want_mappings: list[tuple[str, str, str]]  # (container, resource, request)
    resolve: Resolve = resolve_all
    dra_names: set[str] | None = None


CASES = [
    Case("A1-no-resources", make_pod("my-pod").container("con0"), [], []),
    Case(
        "A2-one-of-two-mapped",
        make_pod("my-pod").container("con0", requests={GPU: "1", GPU1: "2"}),
        [("container-0-request-0", "class", 1)],
        [("con0", GPU, "container-0-request-0")],
        resolve=only(GPU),
    ),
    Case(
        "A3-both-mapped",
        make_pod("my-pod").container("con0", requests={GPU: "1", GPU1: "2"}),
        [("container-0-request-0", "class", 1), ("container-0-request-1", "class1", 2)],
        [("con0", GPU, "container-0-request-0"), ("con0", GPU1, "container-0-request-1")],
    ),
    Case(
        "A4-two-containers",
        make_pod("my-pod")
        .container("con0", **req(**{GPU: "1"}))
        .container("con1", **req(**{GPU1: "2"})),
        [("container-0-request-0", "class", 1), ("container-1-request-0", "class1", 2)],
        [("con0", GPU, "container-0-request-0"), ("con1", GPU1, "container-1-request-0")],
    ),
    Case(
        "A5-init-and-regular",
        make_pod("my-pod")
        .init_container("init-con0", **req(**{GPU_INIT: "2"}))
        .container("con0", **req(**{GPU: "1"})),
        [("container-0-request-0", "classInit", 2), ("container-1-request-0", "class", 1)],
        [("con0", GPU, "container-1-request-0"), ("init-con0", GPU_INIT, "container-0-request-0")],
    ),
    Case(
        "A6-largest-init-request-kept",
        make_pod("my-pod")
        .init_container("init-con0", **req(**{GPU_INIT: "1"}))
        .init_container("init-con1", **req(**{GPU_INIT: "2"}))
        .container("con0", **req(**{GPU: "1"})),
        [("container-1-request-0", "classInit", 2), ("container-2-request-0", "class", 1)],
        [
            ("con0", GPU, "container-2-request-0"),
            ("init-con0", GPU_INIT, "container-1-request-0"),
            ("init-con1", GPU_INIT, "container-1-request-0"),
        ],
    ),
    Case(
        "A7-init-reuses-later-sidecar",
        make_pod("my-pod")
        .init_container("init-con0", **req(**{GPU_INIT: "1"}))
        .init_container("sidecar-con1", sidecar=True, **req(**{GPU_INIT: "1"}))
        .init_container("init-con2", **req(**{GPU_INIT: "2"}))
        .container("con0", **req(**{GPU: "1"})),
        [
            ("container-1-request-0", "classInit", 1),
            ("container-2-request-0", "classInit", 2),
            ("container-3-request-0", "class", 1),
        ],
        [
            ("con0", GPU, "container-3-request-0"),
            ("sidecar-con1", GPU_INIT, "container-1-request-0"),
            ("init-con0", GPU_INIT, "container-1-request-0"),
            ("init-con2", GPU_INIT, "container-2-request-0"),
        ],
    ),
    Case(
        "A8-implicit-and-explicit-name-one-class",
        make_pod("my-pod").init_container(
            "init-con0", **req(**{GPU_INIT: "1", IMPLICIT_INIT: "2"})
        ),
        [("container-0-request-0", "classInit", 2), ("container-0-request-1", "classInit", 1)],
        [
            ("init-con0", IMPLICIT_INIT, "container-0-request-0"),
            ("init-con0", GPU_INIT, "container-0-request-1"),
        ],
    ),
    Case(
        "A9-names-never-merged",
        make_pod("my-pod")
        .init_container("init-con0", **req(**{GPU_INIT: "1"}))
        .init_container("init-con1", **req(**{IMPLICIT_INIT: "2"}))
        .container("con0", **req(**{GPU: "1"})),
        [
            ("container-0-request-0", "classInit", 1),
            ("container-1-request-0", "classInit", 2),
            ("container-2-request-0", "class", 1),
        ],
        [
            ("init-con1", IMPLICIT_INIT, "container-1-request-0"),
            ("con0", GPU, "container-2-request-0"),
            ("init-con0", GPU_INIT, "container-0-request-0"),
        ],
    ),
    Case(
        "index-counts-all-request-keys",
        make_pod("my-pod").container("con0", requests={"cpu": "1", "memory": "1Gi", GPU: "1"}),
        [("container-0-request-1", "class", 1)],
        [("con0", GPU, "container-0-request-1")],
    ),
    Case(
        "limits-default-requests",
        make_pod("my-pod").container("con0", limits={"cpu": "1", GPU: "2"}),
        [("container-0-request-1", "class", 2)],
        [("con0", GPU, "container-0-request-1")],
    ),
    Case(
        "zero-and-fractional-ignored",
        make_pod("my-pod")
        .container("con0", **req(**{GPU: "0"}))
        .container("con1", **req(**{GPU: "500m"})),
        [],
        [],
    ),
    Case(
        "unmapped-names-ignored",
        make_pod("my-pod").container("con0", requests={"example.com/fpga": "1", GPU: "1"}),
        [("container-0-request-1", "class", 1)],
        [("con0", GPU, "container-0-request-1")],
    ),
    Case(
        "dra-names-restrict-to-node",
        make_pod("my-pod").container("con0", requests={GPU: "1", GPU1: "2"}),
        [("container-0-request-1", "class1", 2)],
        [("con0", GPU1, "container-0-request-1")],
        dra_names={GPU1},
    ),
    Case(
        "init-partly-covered-by-later-container",
        make_pod("my-pod")
        .init_container("init-con0", **req(**{GPU_INIT: "3"}))
        .container("con0", **req(**{GPU_INIT: "1"})),
        [("container-0-request-0", "classInit", 2), ("container-1-request-0", "classInit", 1)],
        [
            ("con0", GPU_INIT, "container-1-request-0"),
            ("init-con0", GPU_INIT, "container-1-request-0"),
            ("init-con0", GPU_INIT, "container-0-request-0"),
        ],
    ),
    Case(
        "first-of-equal-init-requests-kept",
        make_pod("my-pod")
        .init_container("init-con0", **req(**{GPU_INIT: "3"}))
        .init_container("init-con1", **req(**{GPU_INIT: "1"}))
        .init_container("init-con2", **req(**{GPU_INIT: "3"})),
        [("container-0-request-0", "classInit", 3)],
        [
            ("init-con0", GPU_INIT, "container-0-request-0"),
            ("init-con1", GPU_INIT, "container-0-request-0"),
            ("init-con2", GPU_INIT, "container-0-request-0"),
        ],
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_device_requests_for_pod(case: Case) -> None:
    requests, mappings = extended.device_requests_for_pod(
        case.pod.obj(), case.resolve, case.dra_names
    )
    assert [(r.name, r.exactly.device_class_name, r.exactly.count) for r in requests] == (
        case.want_requests
    )
    assert [(m.container_name, m.resource_name, m.request_name) for m in mappings] == (
        case.want_mappings
    )


def test_requests_are_plain_exact_count() -> None:
    """Nothing but class, mode and count (upstream `createResourceRequestAndMappings`)."""
    pod = make_pod("my-pod").container("con0", requests={GPU: "2"}).obj()
    (request,), _ = extended.device_requests_for_pod(pod, resolve_all)
    assert request == resource_v1.DeviceRequest(
        name="container-0-request-0",
        exactly=resource_v1.ExactDeviceRequest(
            device_class_name="class", allocation_mode="ExactCount", count=2
        ),
    )


def test_ephemeral_containers_never_get_devices() -> None:
    pod = make_pod("my-pod").container("con0").obj()
    pod.spec.ephemeral_containers = [
        core_v1.EphemeralContainer(
            name="debug",
            resources=core_v1.ResourceRequirements(requests={GPU: parse_quantity("1")}),
        )
    ]
    assert extended.device_requests_for_pod(pod, resolve_all, {GPU}) == ([], [])


def test_constants() -> None:
    assert resource_v1.EXTENDED_RESOURCE_CLAIM_ANNOTATION == (
        "resource.kubernetes.io/extended-resource-claim"
    )
    assert resource_v1.EXTENDED_RESOURCE_CLAIM_ANNOTATION_VALUE == "true"
    assert resource_v1.DELETE_PROTECTION_FINALIZER == "resource.kubernetes.io/delete-protection"
    assert extended.SPECIAL_CLAIM_IN_MEMORY_NAME == "<extended-resources>"
    assert extended.SPECIAL_CLAIM_GENERATE_NAME_SUFFIX == "-extended-resources-"


def my_pod() -> core_v1.Pod:
    pod = make_pod("my-pod", "ns").container("con0", requests={GPU: "1"}).obj()
    pod.metadata.uid = "1234"
    return pod


def test_new_special_claim() -> None:
    """In-memory name, generateName, controller owner reference, annotation (upstream
    `preFilterExtendedResources`)."""
    pod = my_pod()
    claim = extended.new_special_claim(pod)
    assert claim.metadata.name == "<extended-resources>"
    assert claim.metadata.generate_name == "my-pod-extended-resources-"
    assert claim.metadata.namespace == "ns"
    assert claim.metadata.annotations == {"resource.kubernetes.io/extended-resource-claim": "true"}
    assert claim.metadata.owner_references == [
        meta_v1.OwnerReference(
            api_version="v1", kind="Pod", name="my-pod", uid="1234", controller=True
        )
    ]
    assert claim.metadata.uid
    assert claim.metadata.uid != extended.new_special_claim(pod).metadata.uid
    assert claim.spec == resource_v1.ResourceClaimSpec()
    assert extended.is_special_claim_for(claim, pod)


def claim_with(annotation: str | None, ref: meta_v1.OwnerReference) -> resource_v1.ResourceClaim:
    annotations = (
        {} if annotation is None else {resource_v1.EXTENDED_RESOURCE_CLAIM_ANNOTATION: annotation}
    )
    return resource_v1.ResourceClaim(
        metadata=meta_v1.ObjectMeta(
            name="my-pod-extended-resources-abcde",
            namespace="ns",
            annotations=annotations,
            owner_references=[ref],
        )
    )


OWNER = meta_v1.OwnerReference(
    api_version="v1", kind="Pod", name="my-pod", uid="1234", controller=True
)
SPECIAL_CLAIM_CASES = [
    ("special", claim_with("true", OWNER), True),
    ("no-annotation", claim_with(None, OWNER), False),
    ("annotation-is-pod-name", claim_with("my-pod", OWNER), False),
    (
        "other-uid",
        claim_with("true", meta_v1.OwnerReference(name="my-pod", uid="9", controller=True)),
        False,
    ),
    (
        "other-name",
        claim_with("true", meta_v1.OwnerReference(name="pod2", uid="1234", controller=True)),
        False,
    ),
    (
        "not-controller",
        claim_with("true", meta_v1.OwnerReference(name="my-pod", uid="1234")),
        False,
    ),
]


@pytest.mark.parametrize(
    ("claim", "want"),
    [(c, w) for _, c, w in SPECIAL_CLAIM_CASES],
    ids=[i for i, _, _ in SPECIAL_CLAIM_CASES],
)
def test_is_special_claim_for(claim: resource_v1.ResourceClaim, want: bool) -> None:
    assert extended.is_special_claim_for(claim, my_pod()) is want
