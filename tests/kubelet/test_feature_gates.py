"""With DRAExtendedResource off, the kubelet's nodes see pods without their special claim's
status, as upstream's kubelet ignores it then (no servers needed)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import cast

from drasim.common import features
from drasim.common.api import core_v1
from drasim.common.client import ApiClient
from drasim.kubelet.run import KubeletProcess
from tests.builders import make_pod

SPECIAL = core_v1.PodExtendedResourceClaimStatus(
    resource_claim_name="p-extended-resources-abcde",
    request_mappings=[
        core_v1.ContainerExtendedResourceRequest(
            container_name="c", resource_name="example.com/gpu", request_name="r0"
        )
    ],
)


def kubelet(flag: str, release: str | None = None) -> KubeletProcess:
    """A process hosting no node: enough to see what its nodes would be handed."""
    api = cast(ApiClient, SimpleNamespace(bus=SimpleNamespace(prefix="t"), timeout=1.0))
    gates = features.new_gate(flag, emulated=release)
    return KubeletProcess(api=api, nodes=[], features=gates)


def test_nodes_see_no_special_claim_while_the_gate_is_off() -> None:
    pod = make_pod("p").limits({"example.com/gpu": "1"}).obj()
    pod.status.extended_resource_claim_status = SPECIAL
    seen = kubelet("DRAExtendedResource=false", "1.36")._as_gated(pod)
    assert seen.status.extended_resource_claim_status is None
    assert seen.spec == pod.spec
    assert pod.status.extended_resource_claim_status == SPECIAL  # the informer's copy stays
    assert kubelet("")._as_gated(pod) is pod
