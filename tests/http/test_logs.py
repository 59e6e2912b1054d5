"""pods/log without kubectl's own defaulting: the kubelet's errors."""

from __future__ import annotations

import pytest

from drasim.apistore.http import logs
from drasim.common import errors
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
