"""resource.k8s.io/v1beta1 and v1beta2 beside the stored v1, as kubectl sees them: served
only when `--runtime-config` turns them on, converted on every path (writes, patches, reads,
watches, tables), discovered and explained per version."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest
import yaml

from drasim.common import runtime_config
from tests.http.conftest import Cluster, open_cluster

BETAS = "resource.k8s.io/v1beta1=true,resource.k8s.io/v1beta2=true"
V1BETA1_DEPRECATED = (
    "resource.k8s.io/v1beta1 ResourceClaim is deprecated in v1.35+, unavailable in v1.38+"
)

# A claim as written for a 1.32 cluster: the request's fields inline, no `exactly`.
V1BETA1_CLAIM = """\
apiVersion: resource.k8s.io/v1beta1
kind: ResourceClaim
metadata: {name: gpu-claim, namespace: default}
spec:
  devices:
    requests:
    - name: gpu
      deviceClassName: gpu.example.com
      selectors: [{cel: {expression: "device.attributes['gpu.example.com'].model == 'a100'"}}]
      tolerations: [{key: maintenance, operator: Exists, effect: NoSchedule}]
    - name: alt
      firstAvailable:
      - {name: big, deviceClassName: gpu.example.com, count: 2}
"""

# A slice as a 1.32 driver publishes it: the device's fields under `basic`.
V1BETA1_SLICE = """\
apiVersion: resource.k8s.io/v1beta1
kind: ResourceSlice
metadata: {name: node-0-gpu}
spec:
  driver: gpu.example.com
  nodeName: node-0
  pool: {name: node-0, generation: 1, resourceSliceCount: 1}
  devices:
  - name: gpu-0
    basic:
      attributes: {model: {string: a100}}
      capacity: {memory: {value: 40Gi}}
  - name: gpu-1
"""


@pytest.fixture(params=[BETAS], ids=["betas-on"])
async def cluster(fresh, certs, tmp_path, request) -> AsyncIterator[Cluster]:  # noqa: ANN001
    """An apistore serving the betas (`--runtime-config`), with a kubeconfig for it."""
    served = runtime_config.parse(request.param)
    async with open_cluster(fresh, certs, tmp_path, runtime_config=served) as opened:
        yield opened


async def test_api_versions_lists_the_betas(kubectl) -> None:
    out = (await kubectl("api-versions")).stdout.split()
    assert [v for v in out if v.startswith("resource.k8s.io/")] == [
        "resource.k8s.io/v1",
        "resource.k8s.io/v1beta1",
        "resource.k8s.io/v1beta2",
    ]
    group = json.loads((await kubectl("get", "--raw", "/apis/resource.k8s.io")).stdout)
    assert [v["version"] for v in group["versions"]] == ["v1", "v1beta2", "v1beta1"]
    assert group["preferredVersion"] == {"groupVersion": "resource.k8s.io/v1", "version": "v1"}
    listed = json.loads((await kubectl("get", "--raw", "/apis/resource.k8s.io/v1beta1")).stdout)
    assert [r["name"] for r in listed["resources"]] == [
        "deviceclasses",
        "resourceslices",
        "resourceclaims",
        "resourceclaims/status",
        "resourceclaimtemplates",
    ]


async def test_v1beta1_claim_reads_back_in_every_version(kubectl) -> None:
    applied = await kubectl("apply", "-f", "-", input=V1BETA1_CLAIM)
    assert applied.stdout.strip() == "resourceclaim.resource.k8s.io/gpu-claim created"
    assert V1BETA1_DEPRECATED in applied.stderr

    def spec_in(version: str) -> dict:
        return json.loads(stdout[version])["spec"]["devices"]["requests"]

    stdout = {}
    for version in ("v1", "v1beta1", "v1beta2"):
        got = await kubectl("get", f"resourceclaims.{version}.resource.k8s.io", "gpu-claim",
                            "-o", "json")  # fmt: skip
        assert json.loads(got.stdout)["apiVersion"] == f"resource.k8s.io/{version}"
        stdout[version] = got.stdout
    exactly = {
        "deviceClassName": "gpu.example.com",
        "selectors": [
            {"cel": {"expression": "device.attributes['gpu.example.com'].model == 'a100'"}}
        ],
        "allocationMode": "ExactCount",
        "count": 1,
        "tolerations": [{"key": "maintenance", "operator": "Exists", "effect": "NoSchedule"}],
    }
    alternative = {
        "name": "alt",
        "firstAvailable": [
            {"name": "big", "deviceClassName": "gpu.example.com", "allocationMode": "ExactCount",
             "count": 2}
        ],
    }  # fmt: skip
    assert spec_in("v1") == [{"name": "gpu", "exactly": exactly}, alternative]
    assert spec_in("v1beta2") == spec_in("v1")
    # v1beta1 writes a request's class name even when empty, as upstream's.
    assert spec_in("v1beta1") == [
        {"name": "gpu", **exactly},
        {**alternative, "deviceClassName": ""},
    ]


async def test_v1beta1_slice_devices_move_out_of_basic(kubectl) -> None:
    await kubectl("apply", "-f", "-", input=V1BETA1_SLICE)
    got = json.loads((await kubectl("get", "resourceslices", "node-0-gpu", "-o", "json")).stdout)
    assert got["apiVersion"] == "resource.k8s.io/v1"
    assert got["spec"]["devices"] == [
        {
            "name": "gpu-0",
            "attributes": {"model": {"string": "a100"}},
            "capacity": {"memory": {"value": "40Gi"}},
        },
        {"name": "gpu-1"},
    ]
    back = await kubectl("get", "resourceslices.v1beta1.resource.k8s.io", "node-0-gpu", "-o",
                         "yaml")  # fmt: skip
    assert yaml.safe_load(back.stdout)["spec"]["devices"] == [
        {
            "name": "gpu-0",
            "basic": {
                "attributes": {"model": {"string": "a100"}},
                "capacity": {"memory": {"value": "40Gi"}},
            },
        },
        {"name": "gpu-1", "basic": {}},
    ]


async def test_server_side_apply_of_a_v1beta1_manifest(kubectl) -> None:
    first = await kubectl("apply", "--server-side", "-f", "-", input=V1BETA1_SLICE)
    assert first.stdout.strip() == "resourceslice.resource.k8s.io/node-0-gpu serverside-applied"
    changed = V1BETA1_SLICE.replace("{string: a100}", "{string: h100}")
    await kubectl("apply", "--server-side", "-f", "-", input=changed)
    got = json.loads((await kubectl("get", "resourceslices", "node-0-gpu", "-o", "json")).stdout)
    assert got["spec"]["devices"][0]["attributes"] == {"model": {"string": "h100"}}
    assert got["metadata"]["generation"] == 2


async def test_patches_apply_to_the_version_asked_for(kubectl) -> None:
    await kubectl("apply", "-f", "-", input=V1BETA1_SLICE)
    slice_ = "resourceslices.v1beta1.resource.k8s.io/node-0-gpu"

    async def devices() -> list[dict]:
        got = await kubectl("get", "resourceslices", "node-0-gpu", "-o", "json")
        return json.loads(got.stdout)["spec"]["devices"]

    replace = [{"op": "replace", "path": "/spec/devices/0/basic/attributes/model/string",
                "value": "h100"}]  # fmt: skip
    await kubectl("patch", slice_, "--type=json", "-p", json.dumps(replace))
    assert (await devices())[0]["attributes"] == {"model": {"string": "h100"}}
    strategic = {
        "spec": {"devices": [{"name": "gpu-0", "basic": {"attributes": {"x": {"int": 1}}}}]}
    }
    await kubectl("patch", slice_, "--type=strategic", "-p", json.dumps(strategic))
    assert await devices() == [{"name": "gpu-0", "attributes": {"x": {"int": 1}}}]
    merge = {"metadata": {"labels": {"team": "a"}}, "spec": {"devices": [{"name": "gpu-9"}]}}
    await kubectl("patch", slice_, "--type=merge", "-p", json.dumps(merge))
    assert await devices() == [{"name": "gpu-9"}]


async def test_a_body_of_another_version_is_refused(http) -> None:
    claim = yaml.safe_load(V1BETA1_CLAIM)
    path = "/apis/resource.k8s.io/{}/namespaces/default/resourceclaims"
    async with http.post(path.format("v1"), json=claim) as response:
        assert response.status == 400
        assert (await response.json())["message"] == (
            "the API version in the data (resource.k8s.io/v1beta1) does not match the "
            "expected API version (resource.k8s.io/v1)"
        )
    claim["apiVersion"] = "resource.k8s.io/v1"
    async with http.post(path.format("v1beta2"), json=claim) as response:
        assert response.status == 400
        assert response.headers["Warning"] == (
            '299 - "resource.k8s.io/v1beta2 ResourceClaim is deprecated in v1.36+, '
            'unavailable in v1.39+"'
        )
        assert (await response.json())["message"] == (
            "the API version in the data (resource.k8s.io/v1) does not match the "
            "expected API version (resource.k8s.io/v1beta2)"
        )


async def test_watch_in_v1beta1_sees_writes_made_in_v1(kubectl, http) -> None:
    await kubectl("apply", "-f", "-", input=V1BETA1_SLICE)
    path = "/apis/resource.k8s.io/v1beta1/resourceslices?watch=1&timeoutSeconds=20"
    async with http.get(path) as response:
        assert response.status == 200
        assert (
            V1BETA1_DEPRECATED.replace("ResourceClaim", "ResourceSlice")
            in (response.headers["Warning"])
        )
        added = json.loads(await response.content.readline())
        assert added["type"] == "ADDED"
        assert added["object"]["apiVersion"] == "resource.k8s.io/v1beta1"
        await kubectl("label", "resourceslices.v1.resource.k8s.io", "node-0-gpu", "seen=yes")
        modified = json.loads(await response.content.readline())
    assert modified["type"] == "MODIFIED"
    assert modified["object"]["apiVersion"] == "resource.k8s.io/v1beta1"
    assert modified["object"]["metadata"]["labels"] == {"seen": "yes"}
    assert modified["object"]["spec"]["devices"][1] == {"name": "gpu-1", "basic": {}}


async def test_tables_in_a_beta_version(kubectl) -> None:
    await kubectl("apply", "-f", "-", input=V1BETA1_CLAIM)
    got = await kubectl("get", "resourceclaims.v1beta1.resource.k8s.io")
    assert got.stdout.split("\n")[0].split() == ["NAME", "STATE", "AGE"]
    assert got.stdout.split("\n")[1].split()[:2] == ["gpu-claim", "pending"]
    whole = await kubectl("get", "--raw",
                          "/apis/resource.k8s.io/v1beta2/namespaces/default/resourceclaims"
                          "?includeObject=Object",
                          "--", )  # fmt: skip
    assert json.loads(whole.stdout)["apiVersion"] == "resource.k8s.io/v1beta2"


async def test_explain_per_version(kubectl) -> None:
    beta = await kubectl("explain", "resourceclaims.spec.devices.requests",
                         "--api-version=resource.k8s.io/v1beta1")  # fmt: skip
    assert "VERSION:    v1beta1" in beta.stdout
    fields = {line.split()[0] for line in beta.stdout.split("FIELDS:")[1].splitlines()
              if line.startswith("  ") and not line.startswith("    ")}  # fmt: skip
    assert {"deviceClassName", "count", "allocationMode", "firstAvailable", "name"} <= fields
    assert "exactly" not in fields
    basic = await kubectl("explain", "resourceslices.spec.devices.basic",
                          "--api-version=resource.k8s.io/v1beta1")  # fmt: skip
    assert "attributes\t<map[string]DeviceAttribute>" in basic.stdout
    v1 = await kubectl("explain", "resourceclaims.spec.devices.requests")
    assert "VERSION:    v1\n" in v1.stdout
    assert "exactly\t<ExactDeviceRequest>" in v1.stdout
    v1beta2 = await kubectl("explain", "resourceclaims.spec.devices.requests.exactly",
                            "--api-version=resource.k8s.io/v1beta2")  # fmt: skip
    assert "VERSION:    v1beta2" in v1beta2.stdout


@pytest.mark.parametrize("cluster", [""], ids=["betas-off"], indirect=True)
async def test_betas_off_by_default(kubectl, http) -> None:
    out = (await kubectl("api-versions")).stdout.split()
    assert [v for v in out if v.startswith("resource.k8s.io/")] == ["resource.k8s.io/v1"]
    async with http.get("/apis/resource.k8s.io/v1beta1/resourceclaims") as response:
        assert response.status == 404
        assert "Warning" not in response.headers
        assert (await response.json())["message"] == (
            "the server could not find the requested resource"
        )
    async with http.get("/apis/resource.k8s.io/v1beta2") as response:
        assert response.status == 404
    async with http.get("/openapi/v3") as response:
        paths = (await response.json())["paths"]
    assert [p for p in paths if p.startswith("apis/resource.k8s.io")] == ["apis/resource.k8s.io/v1"]
    # (Validation off: kubectl would look for CRDs and OpenAPI v2 first, which drasim lacks.)
    refused = await kubectl(
        "apply", "--validate=false", "-f", "-", input=V1BETA1_CLAIM, check=False
    )
    assert refused.returncode == 1
    assert 'no matches for kind "ResourceClaim" in version "resource.k8s.io/v1beta1"' in (
        refused.stderr
    )


async def test_v1beta1_writes_are_validated_as_v1(kubectl) -> None:
    """Upstream validates the converted object: error paths are v1's (as v1.37.2 prints)."""
    claim = """\
apiVersion: resource.k8s.io/v1beta1
kind: ResourceClaim
metadata: {name: bad1, namespace: default}
spec:
  devices:
    requests:
    - {name: gpu, deviceClassName: gpu.example.com, count: -1}
"""
    refused = await kubectl("apply", "-f", "-", input=claim, check=False)
    assert refused.stderr.splitlines()[1:] == [
        'The ResourceClaim "bad1" is invalid: spec.devices.requests[0].exactly.count: '
        "Invalid value: -1: must be greater than zero"
    ]
    # A field v1beta1 has at another place: the error names v1's.
    slice_ = V1BETA1_SLICE.replace("{value: 40Gi}", "{value: -1}")
    refused = await kubectl("apply", "-f", "-", input=slice_, check=False)
    assert "spec.devices[0].capacity[memory].value: Invalid value" in refused.stderr


async def test_status_written_in_v1beta1(kubectl) -> None:
    await kubectl("apply", "-f", "-", input=V1BETA1_CLAIM)
    allocation = {
        "devices": {
            "results": [
                {"request": "gpu", "driver": "gpu.example.com", "pool": "node-0", "device": "gpu-0"}
            ]
        }
    }
    await kubectl("patch", "resourceclaims.v1beta1.resource.k8s.io", "gpu-claim",
                  "--subresource=status", "--type=merge",
                  "-p", json.dumps({"status": {"allocation": allocation}}))  # fmt: skip
    got = json.loads((await kubectl("get", "resourceclaims", "gpu-claim", "-o", "json")).stdout)
    assert got["status"]["allocation"]["devices"]["results"] == allocation["devices"]["results"]
    table = await kubectl("get", "resourceclaims.v1beta1.resource.k8s.io", "gpu-claim")
    assert table.stdout.split("\n")[1].split()[:2] == ["gpu-claim", "allocated"]


async def test_apply_again_and_edit_in_v1beta1(kubectl) -> None:
    """Client-side apply computes its patch from the v1beta1 object and OpenAPI document;
    a replace (kubectl edit, replace) sends the v1beta1 object back whole."""
    await kubectl("apply", "-f", "-", input=V1BETA1_SLICE)
    # "configured" as v1.37.2 says: the live device without attributes reads `basic: {}`,
    # which the manifest lacks, and devices are an atomic list.
    again = await kubectl("apply", "-f", "-", input=V1BETA1_SLICE)
    assert again.stdout.strip() == "resourceslice.resource.k8s.io/node-0-gpu configured"
    changed = await kubectl("apply", "-f", "-", input=V1BETA1_SLICE.replace("a100", "h100"))
    assert changed.stdout.strip() == "resourceslice.resource.k8s.io/node-0-gpu configured"
    read = await kubectl("get", "resourceslices.v1beta1.resource.k8s.io", "node-0-gpu", "-o",
                         "json")  # fmt: skip
    current = json.loads(read.stdout)
    current["spec"]["devices"][1]["basic"] = {"attributes": {"model": {"string": "t4"}}}
    await kubectl("replace", "-f", "-", input=json.dumps(current))
    got = json.loads((await kubectl("get", "resourceslices", "node-0-gpu", "-o", "json")).stdout)
    assert [d.get("attributes") for d in got["spec"]["devices"]] == [
        {"model": {"string": "h100"}},
        {"model": {"string": "t4"}},
    ]


async def test_device_taint_rules_in_v1beta2_only_and_not_deprecated(http) -> None:
    """DeviceTaintRule came to v1beta2 in 1.36 and is not deprecated there yet in 1.37;
    v1beta1 never had it."""
    async with http.get("/apis/resource.k8s.io/v1beta2/devicetaintrules") as response:
        assert response.status == 200
        assert "Warning" not in response.headers
        assert (await response.json())["apiVersion"] == "resource.k8s.io/v1beta2"
    async with http.get("/apis/resource.k8s.io/v1beta1/devicetaintrules") as response:
        assert response.status == 404
    async with http.get("/apis/resource.k8s.io/v1beta2/resourceclaims") as response:
        assert response.headers["Warning"] == (
            '299 - "resource.k8s.io/v1beta2 ResourceClaim is deprecated in v1.36+, '
            'unavailable in v1.39+"'
        )
