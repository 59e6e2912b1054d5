"""kubectl against the apistore's HTTP API, as a user runs it: the KEP's manifests apply
unchanged and every command prints what it prints against a real cluster."""

from __future__ import annotations

import asyncio
import contextlib
import json

import pytest
import yaml

from drasim.common.api import apps_v1, core_v1, policy_v1
from tests.builders import KEP_DEVICE_CLASS_YAML, make_claim, make_node, make_pod
from tests.http.conftest import KUBECTL, TOKEN, kubectl_env

DEVICE_CLASS = KEP_DEVICE_CLASS_YAML
DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: gpu-deployment
  labels:
    app: gpu-app
spec:
  replicas: 2
  selector:
    matchLabels:
      app: gpu-app
  template:
    metadata:
      labels:
        app: gpu-app
    spec:
      containers:
      - name: app
        image: registry.k8s.io/pause:3.10
        resources:
          limits:
            example.com/gpu: 1
"""
EXTENDED_RESOURCE_CLAIM_STATUS = {
    "requestMappings": [
        {
            "containerName": "con0",
            "resourceName": "example.com/gpu",
            "requestName": "container-0-request-0",
        }
    ],
    "resourceClaimName": "gpu-pod-extended-resources-x7k2p",
}


async def test_apply_kep_manifests_then_get_and_reapply(kubectl):
    manifests = DEVICE_CLASS + "---\n" + DEPLOYMENT
    applied = await kubectl("apply", "-f", "-", input=manifests)
    assert applied.stdout.splitlines() == [
        "deviceclass.resource.k8s.io/gpu.example.com created",
        "deployment.apps/gpu-deployment created",
    ]
    classes = await kubectl("get", "deviceclasses")
    assert classes.stdout.splitlines()[0].split() == ["NAME", "AGE"]
    assert classes.stdout.splitlines()[1].startswith("gpu.example.com ")
    spec = await kubectl("get", "deviceclass", "gpu.example.com", "-o", "jsonpath={.spec}")
    assert json.loads(spec.stdout)["extendedResourceName"] == "example.com/gpu"
    again = await kubectl("apply", "-f", "-", input=manifests)
    assert "deviceclass.resource.k8s.io/gpu.example.com unchanged" in again.stdout
    changed = await kubectl(
        "apply", "-f", "-", input=DEPLOYMENT.replace("replicas: 2", "replicas: 4")
    )
    assert changed.stdout.strip() == "deployment.apps/gpu-deployment configured"
    replicas = await kubectl("get", "deploy", "gpu-deployment", "-o", "jsonpath={.spec.replicas}")
    assert replicas.stdout == "4"


async def test_server_side_apply(kubectl):
    first = await kubectl("apply", "--server-side", "-f", "-", input=DEPLOYMENT)
    assert first.stdout.strip() == "deployment.apps/gpu-deployment serverside-applied"
    scaled = DEPLOYMENT.replace("replicas: 2", "replicas: 3")
    await kubectl("apply", "--server-side", "-f", "-", input=scaled)
    got = yaml.safe_load((await kubectl("get", "deploy", "gpu-deployment", "-o", "yaml")).stdout)
    assert got["spec"]["replicas"] == 3
    assert got["spec"]["template"]["spec"]["containers"][0]["name"] == "app"


async def test_get_pods_wide_yaml_and_describe(cluster, kubectl):
    pod = make_pod("gpu-pod").limits({"example.com/gpu": "1"}).node("worker-1").obj()
    await cluster.api.create(pod)
    status = json.dumps({"status": {"extendedResourceClaimStatus": EXTENDED_RESOURCE_CLAIM_STATUS}})
    patched = await kubectl(
        "patch", "pod", "gpu-pod", "--subresource=status", "--type=merge", "-p", status
    )
    assert patched.stdout.strip() == "pod/gpu-pod patched"

    wide = (await kubectl("get", "pods", "-o", "wide")).stdout.splitlines()
    assert wide[0].split() == [
        "NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE", "NOMINATED", "NODE",
    ]  # fmt: skip
    assert wide[1].split()[:4] == ["gpu-pod", "0/1", "Pending", "0"]
    assert wide[1].split()[6] == "worker-1"

    as_yaml = yaml.safe_load((await kubectl("get", "pod", "gpu-pod", "-o", "yaml")).stdout)
    assert as_yaml["status"]["extendedResourceClaimStatus"] == EXTENDED_RESOURCE_CLAIM_STATUS
    assert as_yaml["spec"]["containers"][0]["resources"]["limits"] == {"example.com/gpu": "1"}

    described = (await kubectl("describe", "pod", "gpu-pod")).stdout
    assert "Name:         gpu-pod" in described
    assert "Node:         worker-1" in described
    assert "example.com/gpu:  1" in described


async def test_get_resourceclaims(cluster, kubectl):
    await cluster.api.create(make_claim("gpu-pod-extended-resources-x7k2p"))
    lines = (await kubectl("get", "resourceclaims")).stdout.splitlines()
    assert lines[0].split() == ["NAME", "STATE", "AGE"]
    assert lines[1].split()[:2] == ["gpu-pod-extended-resources-x7k2p", "pending"]


async def test_get_pods_watch_streams_changes(cluster, kubectl):
    await cluster.api.create(make_pod("watched").obj())
    assert KUBECTL is not None
    process = await asyncio.create_subprocess_exec(
        KUBECTL, "--kubeconfig", str(cluster.kubeconfig), "--cache-dir", str(cluster.cache_dir),
        "get", "pods", "-w", "--output-watch-events",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=kubectl_env(),
    )  # fmt: skip
    assert process.stdout is not None
    try:

        async def line() -> list[str]:
            return (await asyncio.wait_for(process.stdout.readline(), 20)).decode().split()

        assert (await line())[:2] == ["EVENT", "NAME"]
        assert (await line())[:2] == ["ADDED", "watched"]
        await cluster.api.create(make_pod("newcomer").obj())
        assert (await line())[:2] == ["ADDED", "newcomer"]
        await cluster.api.delete(core_v1.Pod, "watched", namespace="default")
        assert (await line())[:2] == ["DELETED", "watched"]
    finally:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        await process.wait()


async def test_delete_removes_the_pod_and_its_claim(cluster, kubectl):
    pod = await cluster.api.create(make_pod("doomed").obj())
    await cluster.api.create(make_claim("doomed-extended-resources-x7k2p", owner=pod))
    deleted = await kubectl("delete", "pod", "doomed")
    assert deleted.stdout.strip() == 'pod "doomed" deleted'
    missing = await kubectl("get", "pod", "doomed", check=False)
    assert missing.returncode == 1
    assert missing.stderr.strip() == 'Error from server (NotFound): pods "doomed" not found'
    claims = await kubectl("get", "resourceclaims")
    assert claims.stderr.strip() == "No resources found in default namespace."


async def test_scale_deployment(cluster, kubectl):
    await kubectl("apply", "-f", "-", input=DEPLOYMENT)
    scaled = await kubectl("scale", "deployment", "gpu-deployment", "--replicas=5")
    assert scaled.stdout.strip() == "deployment.apps/gpu-deployment scaled"
    deployment = await cluster.api.get(apps_v1.Deployment, "gpu-deployment", namespace="default")
    assert deployment.spec.replicas == 5


async def test_explain_device_class_extended_resource_name(kubectl):
    explained = (await kubectl("explain", "deviceclass.spec.extendedResourceName")).stdout
    assert explained.splitlines()[:3] == [
        "GROUP:      resource.k8s.io",
        "KIND:       DeviceClass",
        "VERSION:    v1",
    ]
    assert "FIELD: extendedResourceName <string>" in explained
    assert "ExtendedResourceName is the extended resource name for the devices of this" in (
        explained
    )


async def test_invalid_manifest_names_the_field(kubectl):
    bad = DEVICE_CLASS.replace("example.com/gpu\n", "deviceclass.resource.kubernetes.io/gpu\n")
    failed = await kubectl("apply", "-f", "-", input=bad, check=False)
    assert failed.returncode == 1
    assert failed.stderr.strip() == (
        'The DeviceClass "gpu.example.com" is invalid: spec.extendedResourceName: Invalid '
        'value: "deviceclass.resource.kubernetes.io/gpu": must not have "kubernetes.io/" domain'
    )


async def test_unknown_fields_strict_by_default_warned_on_request(kubectl):
    unknown = DEVICE_CLASS.replace("  selectors:", "  fooBar: 1\n  selectors:")
    strict = await kubectl("apply", "-f", "-", input=unknown, check=False)
    assert strict.returncode == 1
    assert strict.stderr.strip() == (
        'Error from server (BadRequest): error when creating "STDIN": DeviceClass in version '
        '"v1" cannot be handled as a DeviceClass: strict decoding error: unknown field '
        '"spec.fooBar"'
    )
    warned = await kubectl("apply", "--validate=warn", "-f", "-", input=unknown)
    assert 'Warning: unknown field "spec.fooBar"' in warned.stderr
    assert warned.stdout.strip() == "deviceclass.resource.k8s.io/gpu.example.com created"


async def test_without_a_valid_token_kubectl_is_refused(kubectl):
    refused = await kubectl("--token", TOKEN + "-wrong", "get", "pods", check=False)
    assert refused.returncode == 1
    # Discovery is refused first, hence client-go's wording rather than the Status message.
    assert refused.stderr.splitlines()[-1] == (
        "error: You must be logged in to the server (the server has asked for the client to "
        "provide credentials)"
    )


async def test_version_says_1_37(kubectl):
    shown = json.loads((await kubectl("version", "-o", "json")).stdout)["serverVersion"]
    assert shown["gitVersion"] == "v1.37.0-drasim"
    assert (shown["major"], shown["minor"]) == ("1", "37")
    # (kubectl 1.32 predates /version's emulation fields; tests/http/test_health.py reads them.)
    assert "Server Version: v1.37.0-drasim" in (await kubectl("version")).stdout


async def test_readyz_for_kubectl_get_raw(kubectl):
    verbose = await kubectl("get", "--raw", "/readyz?verbose")
    assert verbose.stdout.splitlines() == [
        "[+]ping ok",
        "[+]postgres ok",
        "[+]nats ok",
        "[+]outbox ok",
        "readyz check passed",
    ]
    assert (await kubectl("get", "--raw", "/livez")).stdout == "ok"


async def test_typed_client_commands_send_protobuf_bodies(cluster, kubectl):
    """`kubectl create namespace`, `create deployment` and `create quota` send their objects
    only as protobuf (kubectl's typed clients have no JSON fallback)."""
    created = await kubectl("create", "namespace", "team-a")
    assert created.stdout.strip() == "namespace/team-a created"
    assert await cluster.api.get(core_v1.Namespace, "team-a")

    created = await kubectl(
        "create", "deployment", "web", "-n", "team-a", "--image=registry.k8s.io/pause:3.10",
        "--replicas=0", "--port=8080", "--", "sleep", "10",
    )  # fmt: skip
    assert created.stdout.strip() == "deployment.apps/web created"
    web = await cluster.api.get(apps_v1.Deployment, "web", namespace="team-a")
    assert web.spec.replicas == 0  # a pointer field: its zero is kept
    assert web.spec.selector.match_labels == {"app": "web"}
    assert web.spec.template.metadata.labels == {"app": "web"}
    [container] = web.spec.template.spec.containers
    assert (container.name, container.image, container.command) == (
        "pause", "registry.k8s.io/pause:3.10", ["sleep", "10"],
    )  # fmt: skip
    assert [p.container_port for p in container.ports] == [8080]

    created = await kubectl("create", "quota", "gpus", "-n", "team-a", "--hard=example.com/gpu=4")
    assert created.stdout.strip() == "resourcequota/gpus created"
    quota = await cluster.api.get(core_v1.ResourceQuota, "gpus", namespace="team-a")
    assert {k: str(v) for k, v in quota.spec.hard.items()} == {"example.com/gpu": "4"}


async def test_priority_classes_with_kubectl(cluster, kubectl):
    """`kubectl create priorityclass` (a protobuf body), `get pc`, and a pod that names the
    class getting its priority."""
    created = await kubectl(
        "create", "priorityclass", "high", "--value=1000", "--description=batch jobs first",
        "--preemption-policy=Never",
    )  # fmt: skip
    assert created.stdout.strip() == "priorityclass.scheduling.k8s.io/high created"
    listed = await kubectl("get", "pc")
    header, *rows = listed.stdout.splitlines()
    assert header.split() == ["NAME", "VALUE", "GLOBAL-DEFAULT", "AGE", "PREEMPTIONPOLICY"]
    cells = {row.split()[0]: row.split() for row in rows}
    assert cells["high"][1:3] == ["1000", "false"] and cells["high"][4] == "Never"
    assert cells["system-node-critical"][1] == "2000001000"
    pod = make_pod("urgent").obj()
    pod.spec.priority_class_name = "high"
    await cluster.api.create(pod)
    shown = await kubectl(
        "get", "pod", "urgent", "-o", "jsonpath={.spec.priority} {.spec.preemptionPolicy}"
    )
    assert shown.stdout == "1000 Never"


async def test_drain_deletes_with_protobuf_delete_options(cluster, kubectl):
    await cluster.api.create(make_node("n1"))
    await cluster.api.create(make_pod("resident").node("n1").obj())
    drained = await kubectl(
        "drain", "n1", "--force", "--grace-period=0", "--timeout=15s", "--ignore-daemonsets"
    )
    assert "node/n1 drained" in drained.stdout
    node = await cluster.api.get(core_v1.Node, "n1")
    assert node.spec.unschedulable
    pods, _ = await cluster.api.list(core_v1.Pod)
    assert pods == []  # gracePeriodSeconds 0 (a pointer field's zero) deleted it at once


async def test_logs_show_what_each_container_was_given(cluster, kubectl):
    """Emulated containers print nothing; their log is what the kubelet recorded on the pod:
    devices and health per resource, CDI ids and environment."""
    pod = make_pod("gpu-pod").container("a").container("b").init_container("setup")
    pod = pod.node("worker-1").obj()
    pod.metadata.annotations = {
        "drasim.io/container-devices": json.dumps(
            {"a": {"cdiDevices": ["gpu.example.com/gpu=uid-gpu-3"], "env": {"GPU": "gpu-3"}}}
        )
    }
    await cluster.api.create(pod)
    running = {"running": {"startedAt": "2026-11-30T00:00:00Z"}}
    status = {
        "phase": "Running",
        "containerStatuses": [
            {
                "name": "a",
                "state": running,
                "allocatedResourcesStatus": [
                    {
                        "name": "claim:gpu-pod-extended-resources-x7k2p/container-0-request-0",
                        "resources": [
                            {"resourceID": "gpu.example.com/w1/gpu-3", "health": "Healthy"}
                        ],
                    }
                ],
            },
            {"name": "b", "state": {"waiting": {"reason": "ContainerCreating"}}},
        ],
    }
    await kubectl(
        "patch", "pod", "gpu-pod", "--subresource=status", "--type=merge",
        "-p", json.dumps({"status": status}),
    )  # fmt: skip

    unnamed = await kubectl("logs", "gpu-pod")  # kubectl picks the first container itself
    assert unnamed.stderr.strip() == 'Defaulted container "a" out of: a, b, setup (init)'
    log = (await kubectl("logs", "gpu-pod", "-c", "a")).stdout.splitlines()
    assert unnamed.stdout.splitlines() == log
    assert log[0].startswith("drasim: emulated container a of pod default/gpu-pod on node worker-1")
    assert log[1:] == [
        "resource claim:gpu-pod-extended-resources-x7k2p/container-0-request-0: "
        "gpu.example.com/w1/gpu-3 (Healthy)",
        "CDI device gpu.example.com/gpu=uid-gpu-3",
        "env GPU=gpu-3",
    ]
    tail = await kubectl("logs", "gpu-pod", "-c", "a", "--tail=1")
    assert tail.stdout == "env GPU=gpu-3\n"
    waiting = await kubectl("logs", "gpu-pod", "-c", "b", check=False)
    assert waiting.stderr.strip() == (
        'Error from server (BadRequest): container "b" in pod "gpu-pod" is waiting to start: '
        "ContainerCreating"
    )


async def test_logs_follow_until_the_pod_goes(cluster, kubectl):
    """`kubectl logs -f` shows the lines, then stays, as for a container that prints
    nothing more, and ends when the pod is deleted."""
    await cluster.api.create(make_pod("p").node("worker-1").obj())
    running = {"running": {"startedAt": "2026-11-30T00:00:00Z"}}
    status = {"phase": "Running", "containerStatuses": [{"name": "con0", "state": running}]}
    await kubectl(
        "patch", "pod", "p", "--subresource=status", "--type=merge",
        "-p", json.dumps({"status": status}),
    )  # fmt: skip
    follow = await asyncio.create_subprocess_exec(
        KUBECTL, "--kubeconfig", str(cluster.kubeconfig), "--cache-dir", str(cluster.cache_dir),
        "logs", "-f", "p",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=kubectl_env(),
    )  # fmt: skip
    try:
        assert follow.stdout is not None
        first = await asyncio.wait_for(follow.stdout.readline(), 20)
        assert first.decode().startswith("drasim: emulated container con0 of pod default/p")
        # Still following: kubectl has not ended a second later (an event that must not come).
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(asyncio.shield(follow.wait()), 1.0)
        await cluster.api.delete(core_v1.Pod, "p", namespace="default", grace_period_seconds=0)
        assert await asyncio.wait_for(follow.wait(), 20) == 0
    finally:
        if follow.returncode is None:
            follow.kill()
            await follow.wait()


async def test_drain_evicts_within_the_disruption_budget(cluster, kubectl):
    """kubectl finds the policy group and pods/eviction in discovery, so it evicts (in
    protobuf) instead of deleting: one pod goes, the budget refuses the other with 429 and
    kubectl retries it until its timeout."""
    await cluster.api.create(make_node("n1"))
    for name in ("web-a", "web-b"):
        await cluster.api.create(make_pod(name).labels(app="web").node("n1").obj())
        await cluster.api.patch(
            core_v1.Pod, name,
            {"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}},
            namespace="default", subresource="status",
        )  # fmt: skip
    created = await kubectl(
        "create", "poddisruptionbudget", "web", "--selector=app=web", "--min-available=1"
    )  # protobuf too
    assert created.stdout.strip() == "poddisruptionbudget.policy/web created"
    pdb = await cluster.api.get(policy_v1.PodDisruptionBudget, "web", namespace="default")
    assert pdb.spec.min_available == 1
    pdb.status = policy_v1.PodDisruptionBudgetStatus(
        observed_generation=1, disruptions_allowed=1, current_healthy=2, desired_healthy=1,
        expected_pods=2,
    )  # what the disruption controller would report  # fmt: skip
    await cluster.api.update_status(pdb)

    drained = await kubectl(
        "drain", "n1", "--force", "--grace-period=0", "--timeout=2s", "--ignore-daemonsets",
        check=False,
    )  # fmt: skip
    assert drained.returncode != 0
    assert "evicting pod default/web-a" in drained.stdout
    assert "evicting pod default/web-b" in drained.stdout
    assert (
        "(will retry after 5s): Cannot evict pod as it would violate the pod's disruption "
        "budget." in drained.stderr
    )
    pods, _ = await cluster.api.list(core_v1.Pod)
    assert len(pods) == 1  # one evicted, one protected

    listed = (await kubectl("get", "pdb")).stdout.splitlines()
    assert listed[0].split() == ["NAME", "MIN", "AVAILABLE", "MAX", "UNAVAILABLE", "ALLOWED",
                                 "DISRUPTIONS", "AGE"]  # fmt: skip
    assert listed[1].split()[:4] == ["web", "1", "N/A", "0"]
