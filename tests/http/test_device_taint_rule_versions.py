"""DeviceTaintRule in resource.k8s.io/v1beta2 beside v1, as kube-apiserver v1.37.2 serves it
with `--runtime-config resource.k8s.io/v1beta2=true`: the published examples written for
v1beta2 apply unchanged, read back in both versions, and carry no deprecation warning (the
kind came to v1beta2 in 1.36, so 1.37 does not deprecate it there, while it does the other
kinds of v1beta2)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest

from drasim.common import features, runtime_config
from tests.http.conftest import Cluster, kubectl_for, open_cluster

V1BETA2_RULE = """\
apiVersion: resource.k8s.io/v1beta2
kind: DeviceTaintRule
metadata: {name: gpu-0-broken}
spec:
  deviceSelector: {driver: gpu.example.com, pool: dra-gpu-0, device: gpu-0}
  taint: {key: example.com/broken, value: "yes", effect: NoExecute}
"""
V1_RULE = V1BETA2_RULE.replace("resource.k8s.io/v1beta2", "resource.k8s.io/v1")


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


@pytest.fixture
async def emulating_1_36(fresh, certs, tmp_path, request) -> AsyncIterator[Cluster]:  # noqa: ANN001
    """A cluster emulating 1.36, serving what the test's parameter turns on."""
    served = runtime_config.parse(request.param)
    gate = features.new_gate(emulated="1.36")
    async with open_cluster(fresh, certs, tmp_path, runtime_config=served, features=gate) as c:
        yield c


@pytest.mark.parametrize("emulating_1_36", [""], indirect=True)
async def test_emulating_1_36_there_is_no_v1_rule(emulating_1_36: Cluster) -> None:
    """As kube-apiserver v1.37.2 with `--emulated-version=1.36`: DeviceTaintRule came to
    v1 in 1.37, so neither discovery nor the path has it, and kubectl knows no such kind."""
    kubectl = kubectl_for(emulating_1_36)
    listed = json.loads((await kubectl("get", "--raw", "/apis/resource.k8s.io/v1")).stdout)
    assert "devicetaintrules" not in {r["name"] for r in listed["resources"]}
    assert "resourceclaims" in {r["name"] for r in listed["resources"]}
    missing = await kubectl("get", "devicetaintrules", check=False)
    assert missing.returncode == 1
    assert 'the server doesn\'t have a resource type "devicetaintrules"' in missing.stderr
    raw = await kubectl("get", "--raw", "/apis/resource.k8s.io/v1/devicetaintrules", check=False)
    assert "NotFound" in raw.stderr or "not found" in raw.stderr.lower()


@pytest.mark.parametrize("emulating_1_36", ["resource.k8s.io/v1beta2=true"], indirect=True)
async def test_emulating_1_36_the_beta_serves_rules_with_the_gate_off(
    emulating_1_36: Cluster,
) -> None:
    """DRADeviceTaintRules is off by default in 1.36; the v1beta2 API serves the kind all
    the same (checked on kube-apiserver v1.37.2), and the v1 path still does not."""
    kubectl = kubectl_for(emulating_1_36)
    applied = await kubectl("apply", "-f", "-", input=V1BETA2_RULE)
    assert applied.stdout.strip() == "devicetaintrule.resource.k8s.io/gpu-0-broken created"
    got = await kubectl("get", "devicetaintrule", "gpu-0-broken", "-o", "jsonpath={.apiVersion}")
    assert got.stdout == "resource.k8s.io/v1beta2"
    v1 = await kubectl("get", "devicetaintrules.v1.resource.k8s.io", check=False)
    assert v1.returncode == 1


async def test_with_the_gates_off_1_37_still_serves_rules(
    fresh,
    certs,
    tmp_path,  # noqa: ANN001
) -> None:
    """DeviceTaintRule is a GA kind of v1 in 1.37: turning DRADeviceTaintRules off (and
    DRADeviceTaints, which it needs) leaves it served, as kube-apiserver v1.37.2 does;
    only the scheduler and the eviction controller stop reading rules."""
    gate = features.new_gate("DRADeviceTaintRules=false,DRADeviceTaints=false")
    async with open_cluster(fresh, certs, tmp_path, features=gate) as cluster:
        kubectl = kubectl_for(cluster)
        applied = await kubectl("apply", "-f", "-", input=V1_RULE)
        assert applied.stdout.strip() == "devicetaintrule.resource.k8s.io/gpu-0-broken created"
        listed = (await kubectl("get", "devicetaintrules", "-o", "name")).stdout.split()
        assert listed == ["devicetaintrule.resource.k8s.io/gpu-0-broken"]
