"""`helm template` output of real charts applies with kubectl, as on a real cluster: a
chart of our own with every kind an application ships (its CRDs first, as helm installs
them). The rendered output is committed beside the chart; where a `helm` binary is on
PATH it is rendered again and must match, so the fixture never goes stale."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pytest

from drasim.common.api import registry

CHARTS = Path(__file__).parents[1] / "charts"
APP_BUNDLE = CHARTS / "app-bundle"
HELM = shutil.which("helm")
# The driver chart's DaemonSet is served once apps/v1 daemonsets are (issue #19's workloads).
SERVES_DAEMONSETS = any(r.plural == "daemonsets" for r in registry.RESOURCES)


async def _helm(*args: str) -> str:
    assert HELM is not None
    process = await asyncio.create_subprocess_exec(
        HELM, *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 0, err.decode()
    return out.decode()


@pytest.mark.skipif(HELM is None, reason="helm is not installed on this machine")
async def test_the_committed_rendering_is_what_helm_renders():
    assert (
        await _helm("template", "gpu-app", str(APP_BUNDLE))
        == (CHARTS / "app-bundle.rendered.yaml").read_text()
    )
    assert (
        await _helm("show", "crds", str(APP_BUNDLE))
        == (CHARTS / "app-bundle.crds.yaml").read_text()
    )


async def test_the_app_bundle_applies_and_reapplies_unchanged(kubectl):
    crds = await kubectl("apply", "-f", str(CHARTS / "app-bundle.crds.yaml"))
    assert crds.stdout.strip() == (
        "customresourcedefinition.apiextensions.k8s.io/gpubenchmarks.bench.example.com created"
    )
    await kubectl("wait", "--for=condition=Established", "--timeout=10s",
                  "crd/gpubenchmarks.bench.example.com")  # fmt: skip
    rendered = str(CHARTS / "app-bundle.rendered.yaml")
    applied = await kubectl("apply", "-f", rendered)
    assert applied.stdout.splitlines() == [
        "namespace/gpu-team created",
        "poddisruptionbudget.policy/gpu-app created",
        "serviceaccount/gpu-app-runner created",
        "secret/gpu-app-credentials created",
        "configmap/gpu-app-config created",
        "persistentvolumeclaim/gpu-app-results created",
        "role.rbac.authorization.k8s.io/gpu-app-reader created",
        "rolebinding.rbac.authorization.k8s.io/gpu-app-reader created",
        "service/gpu-app created",
        "service/gpu-app-headless created",
        "deployment.apps/gpu-app created",
        "gpubenchmark.bench.example.com/gpu-app-nightly created",
        "resourceclaimtemplate.resource.k8s.io/gpu-app-gpu created",
    ]
    listed = await kubectl("get", "gb,svc,pvc", "-n", "gpu-team", "-o", "json")
    items = {(i["kind"], i["metadata"]["name"]): i for i in json.loads(listed.stdout)["items"]}
    assert items[("GPUBenchmark", "gpu-app-nightly")]["spec"] == {"model": "A100", "gpus": 1}
    assert items[("Service", "gpu-app-headless")]["spec"]["clusterIP"] == "None"
    assert items[("PersistentVolumeClaim", "gpu-app-results")]["status"]["phase"] == "Bound"
    # `helm upgrade` of the same values changes nothing: neither does applying it again.
    diff = await kubectl("diff", "-f", rendered, check=False)
    assert diff.returncode == 0, diff.stdout
    again = await kubectl("apply", "--server-side", "-f", rendered)
    assert len(again.stdout.splitlines()) == 13


@pytest.mark.skipif(not SERVES_DAEMONSETS, reason="apps/v1 daemonsets are not served yet")
async def test_the_dra_example_driver_chart_applies(kubectl):
    """kubernetes-sigs/dra-example-driver's chart as `helm template` renders it (the command
    is in the fixture's header): its ServiceAccount, RBAC, metrics Service, DaemonSet,
    DeviceClass and ResourceSlice admission policy."""
    await kubectl("create", "namespace", "dra-example-driver")
    rendered = str(CHARTS / "dra-example-driver.rendered.yaml")
    applied = await kubectl("apply", "-f", rendered)
    assert applied.stdout.splitlines() == [
        "serviceaccount/dra-example-driver-service-account created",
        "clusterrole.rbac.authorization.k8s.io/dra-example-driver-role created",
        "clusterrolebinding.rbac.authorization.k8s.io/dra-example-driver-role-binding created",
        "service/dra-example-driver-kubeletplugin-metrics created",
        "daemonset.apps/dra-example-driver-kubeletplugin created",
        "deviceclass.resource.k8s.io/gpu.example.com created",
        "validatingadmissionpolicy.admissionregistration.k8s.io/"
        "resourceslices-policy-dra-example-driver created",
        "validatingadmissionpolicybinding.admissionregistration.k8s.io/"
        "resourceslices-policy-dra-example-driver created",
    ]
    diff = await kubectl("diff", "-f", rendered, check=False)
    assert diff.returncode == 0, diff.stdout
