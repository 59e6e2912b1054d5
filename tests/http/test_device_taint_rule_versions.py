"""DeviceTaintRule in resource.k8s.io/v1beta2 beside v1, as kube-apiserver v1.37.2 serves it
with `--runtime-config resource.k8s.io/v1beta2=true`: the published examples written for
v1beta2 apply unchanged, read back in both versions, and carry no deprecation warning (the
kind came to v1beta2 in 1.36, so 1.37 does not deprecate it there, while it does the other
kinds of v1beta2)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest

from drasim.common import runtime_config
from tests.http.conftest import Cluster, open_cluster

V1BETA2_RULE = """\
apiVersion: resource.k8s.io/v1beta2
kind: DeviceTaintRule
metadata: {name: gpu-0-broken}
spec:
  deviceSelector: {driver: gpu.example.com, pool: dra-gpu-0, device: gpu-0}
  taint: {key: example.com/broken, value: "yes", effect: NoExecute}
"""


@pytest.fixture
async def cluster(fresh, certs, tmp_path) -> AsyncIterator[Cluster]:  # noqa: ANN001
    served = runtime_config.parse("resource.k8s.io/v1beta2=true")
    async with open_cluster(fresh, certs, tmp_path, runtime_config=served) as opened:
        yield opened


async def test_a_v1beta2_rule_applies_unchanged_and_reads_back_in_both_versions(kubectl) -> None:
    applied = await kubectl("apply", "-f", "-", input=V1BETA2_RULE)
    assert applied.stdout.strip() == "devicetaintrule.resource.k8s.io/gpu-0-broken created"
    assert applied.stderr == ""
    read = {}
    for version in ("v1", "v1beta2"):
        got = await kubectl(
            "get", f"devicetaintrules.{version}.resource.k8s.io", "gpu-0-broken", "-o", "json"
        )
        assert got.stderr == ""
        read[version] = json.loads(got.stdout)
        assert read[version]["apiVersion"] == f"resource.k8s.io/{version}"
    assert read["v1"]["spec"] == read["v1beta2"]["spec"]
    assert read["v1"]["spec"]["taint"]["effect"] == "NoExecute"
    listed = json.loads((await kubectl("get", "--raw", "/apis/resource.k8s.io/v1beta2")).stdout)
    assert {"devicetaintrules", "devicetaintrules/status"} <= {
        r["name"] for r in listed["resources"]
    }
    # The other kinds of v1beta2 are deprecated in 1.37, as upstream warns.
    claims = await kubectl("get", "resourceclaims.v1beta2.resource.k8s.io")
    assert "resource.k8s.io/v1beta2 ResourceClaim is deprecated in v1.36+" in claims.stderr
