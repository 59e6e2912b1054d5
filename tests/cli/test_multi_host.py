"""One cluster spread over several machines (docs/multi-host.md): the control plane on one
host, the scheduler on another, and two kubelet hosts each running `--shard i/2` of the
same cluster file, all against a shared NATS and Postgres given by URL and one `--prefix`.

Each process here is its own session and process group, as if on a host of its own: they
share nothing but the servers' URLs, the prefix and the cluster file."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from drasim.cli.launch import Launch, ServiceProcess
from tests.builders import KEP_DEVICE_CLASS_YAML
from tests.conftest import Fresh

KUBECTL = shutil.which("kubectl")
TIMEOUT = 90.0
# Two DRA nodes and two device-plugin nodes of 2 GPUs each; `--shard i/2` gives each
# kubelet host every other node: dra-gpu-i and dp-gpu-i.
CLUSTER = """\
apiVersion: drasim.io/v1alpha1
kind: Cluster
pools:
  - {name: dra-gpu, count: 2, profile: gpu-2,
     devices: {gpu: {exposure: dra, extendedResourceName: example.com/gpu}}}
  - {name: dp-gpu, count: 2, profile: gpu-2,
     devices: {gpu: {exposure: device-plugin, extendedResourceName: example.com/gpu}}}
"""
REPLICAS = 8  # every GPU of the four nodes: pods must land on both kubelet hosts
DEPLOYMENT = f"""\
apiVersion: apps/v1
kind: Deployment
metadata: {{name: spread}}
spec:
  replicas: {REPLICAS}
  selector: {{matchLabels: {{app: spread}}}}
  template:
    metadata: {{labels: {{app: spread}}}}
    spec:
      containers:
      - name: main
        image: registry.k8s.io/pause:3.10
        resources: {{limits: {{example.com/gpu: 1}}}}
"""


@contextlib.asynccontextmanager
async def host(spec: Launch, log: Path) -> AsyncIterator[ServiceProcess]:
    """One "host": a process in a session of its own, stopped (with whatever it started)
    when the block ends."""
    process = await ServiceProcess.start(spec, log=log, timeout=TIMEOUT)
    try:
        yield process
    finally:
        await process.stop()


async def kubectl(kubeconfig: Path, *args: str, input: str | None = None) -> str:
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    process = await asyncio.create_subprocess_exec(
        str(KUBECTL), "--kubeconfig", str(kubeconfig), *args,
        stdin=asyncio.subprocess.PIPE if input is not None else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env,
    )  # fmt: skip
    out, err = await asyncio.wait_for(
        process.communicate(input.encode() if input is not None else None), TIMEOUT
    )
    assert process.returncode == 0, f"kubectl {' '.join(args)}: {err.decode()}"
    return out.decode()


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed on this machine")
async def test_kubelets_on_two_hosts_serve_one_cluster(fresh: Fresh, tmp_path: Path) -> None:
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(CLUSTER)
    servers = {"nats_url": fresh.nats_url, "prefix": fresh.prefix}
    # Host A: the apistore and the controllers, on the given servers (`drasim up` without
    # kubelets; it writes the kubeconfig). Host B: the scheduler. Hosts C and D: a kubelet
    # each, hosting its shard of the same cluster file.
    control = Launch.up(
        tmp_path / "host-a",
        "--nats-url", fresh.nats_url, "--database-url", fresh.database_url,
        "--prefix", fresh.prefix, "--kubelets", "0",
        "--services", "drasim.apistore,drasim.controllers",
    )  # fmt: skip
    scheduler = Launch.service("drasim.scheduler", **servers)
    kubelets = [
        Launch.service(
            "drasim.kubelet",
            **servers,
            args=[
                "--cluster",
                str(cluster),
                "--shard",
                f"{i}/2",
                "--state-dir",
                str(tmp_path / f"host-{'cd'[i]}"),
            ],
            name=f"kubelet-{i}",
        )  # fmt: skip
        for i in range(2)
    ]
    async with contextlib.AsyncExitStack() as stack:
        up = await stack.enter_async_context(host(control, tmp_path / "host-a.log"))
        others = [
            await stack.enter_async_context(host(spec, tmp_path / f"{spec.name}.log"))
            for spec in (scheduler, *kubelets)
        ]
        groups = {os.getpgid(p.pid) for p in (up, *others)}
        assert len(groups) == 4  # four process groups, none this test's own
        assert os.getpgrp() not in groups

        kubeconfig = tmp_path / "host-a" / "kubeconfig"
        nodes = json.loads(await kubectl(kubeconfig, "get", "nodes", "-o", "json"))["items"]
        ready = {
            n["metadata"]["name"]
            for n in nodes
            if any(
                c["type"] == "Ready" and c["status"] == "True" for c in n["status"]["conditions"]
            )
        }
        assert ready == {"dra-gpu-0", "dra-gpu-1", "dp-gpu-0", "dp-gpu-1"}

        await kubectl(kubeconfig, "apply", "-f", "-", input=KEP_DEVICE_CLASS_YAML)
        await kubectl(kubeconfig, "apply", "-f", "-", input=DEPLOYMENT)
        await kubectl(
            kubeconfig, "wait", "--for=jsonpath={.status.readyReplicas}=8", "deployment/spread",
            f"--timeout={TIMEOUT:.0f}s",
        )  # fmt: skip
        pods = json.loads(await kubectl(kubeconfig, "get", "pods", "-o", "json"))["items"]
        assert [p["status"]["phase"] for p in pods] == ["Running"] * REPLICAS
        # Every node of both kubelet hosts runs two of them.
        placed = sorted(p["spec"]["nodeName"] for p in pods)
        assert placed == sorted(2 * ["dra-gpu-0", "dra-gpu-1", "dp-gpu-0", "dp-gpu-1"])
        # On the DRA nodes through the special claim, which each host's driver prepared.
        on_dra = [p for p in pods if p["spec"]["nodeName"].startswith("dra-")]
        assert all(p["status"]["extendedResourceClaimStatus"] for p in on_dra)
