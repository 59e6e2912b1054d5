"""Cluster soak: `drasim up` with thousands of nodes, one Deployment that fills them.

    python benchmarks/cluster_soak.py [--nodes 2000] [--replicas N] [--kubelets 2]
                                      [--json FILE]

Starts `drasim up` (embedded NATS and Postgres, every service its own process) with
KEP-5004's example cluster scaled to `--nodes`: half 8-GPU nodes whose GPUs a DRA driver
publishes, half 2-GPU nodes whose device plugin advertises `example.com/gpu`. Then one
Deployment whose pods ask for `example.com/gpu: 1` the old way, `--replicas` of them (by
default every GPU in the cluster), and measures:

- `ready_s`: `drasim up` until its `ready` line;
- `scale_up_s`, `pods_per_s`: the Deployment created until `readyReplicas` is all of them;
- `cpu_ms_per_pod`: CPU each service (apistore, scheduler, controllers, kubelets, NATS,
  Postgres) spent during the scale-up, per pod;
- checks: every pod Running, every pod on a DRA node has its special ResourceClaim and
  `extendedResourceClaimStatus`, no device allocated twice, no special claim without a pod;
- `scale_down_s`: replicas set to 0 until no pod and no ResourceClaim is left;
- `log_problems`: lines of the cluster's log with WARNING, ERROR or Traceback.

Exits 1 if a check fails. Needs a quiet machine for comparable figures: on two cores the
services share the CPU, so the scale-up is bound by their CPU per pod.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import shutil
import signal
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import psutil

from drasim.cli import cluster
from drasim.common import codec
from drasim.common.api import apps_v1, core_v1, resource_v1
from drasim.common.bus.client import Bus
from drasim.common.client import ApiClient

CLUSTER = """apiVersion: drasim.io/v1alpha1
kind: Cluster
deviceClasses:
  - apiVersion: resource.k8s.io/v1
    kind: DeviceClass
    metadata: {{name: gpu.example.com}}
    spec:
      selectors: [{{cel: {{expression: "device.driver == 'gpu.example.com'"}}}}]
      extendedResourceName: example.com/gpu
pools:
  - {{name: dra-gpu, count: {dra}, profile: gpu-8, devices: {{gpu: {{exposure: dra,
      extendedResourceName: example.com/gpu}}}}}}
  - {{name: dp-gpu, count: {dp}, profile: gpu-2, devices: {{gpu: {{exposure: device-plugin,
      extendedResourceName: example.com/gpu}}}}}}
"""
GPUS_PER_DRA_NODE, GPUS_PER_DP_NODE = 8, 2
NAME = "soak"
_PROBLEM = re.compile(r"WARNING|ERROR|Traceback")


def deployment(replicas: int) -> apps_v1.Deployment:
    labels = {"app": NAME}
    return codec.convert(
        {
            "metadata": {"name": NAME, "namespace": "default"},
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "containers": [
                            {
                                "name": "main",
                                "image": "registry.k8s.io/pause:3.10",
                                "resources": {"limits": {"example.com/gpu": "1"}},
                            }
                        ]
                    },
                },
            },
        },
        apps_v1.Deployment,
    )


class Services:
    """CPU seconds of each process of one `drasim up`, by role."""

    def __init__(self, up: psutil.Process) -> None:
        self.roles: dict[str, list[psutil.Process]] = {}
        for child in up.children(recursive=True):
            with contextlib.suppress(psutil.Error):
                role = _role(child.cmdline())
                if role == "postgres" and _role(child.parent().cmdline()) == "postgres":
                    continue  # a backend: counted with its postmaster, as backends come and go
                self.roles.setdefault(role, []).append(child)

    def cpu(self) -> dict[str, float]:
        found = {}
        for role, procs in self.roles.items():
            total = 0.0
            for proc in procs:
                members = [proc]
                if role == "postgres":  # the postmaster and its backends
                    with contextlib.suppress(psutil.Error):
                        members += proc.children(recursive=True)
                for member in members:
                    with contextlib.suppress(psutil.Error):
                        times = member.cpu_times()
                        total += times.user + times.system
            found[role] = total
        return found


def _role(cmdline: list[str]) -> str:
    text = " ".join(cmdline)
    if "nats-server" in text:
        return "nats"
    if cmdline and ("postgres" in Path(cmdline[0]).name or cmdline[0].startswith("postgres:")):
        return "postgres"
    if match := re.search(r"-m drasim\.(\w+)", text):
        return match.group(1)
    return "other"


async def wait_ready_replicas(api: ApiClient, want: int, timeout: float) -> float:
    """Seconds until the Deployment reports `want` ready replicas (and, for 0, no pod)."""
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < timeout:
        dep = await api.get(apps_v1.Deployment, NAME, namespace="default")
        if dep.status.ready_replicas == want and dep.status.replicas == want:
            return time.perf_counter() - t0
        await asyncio.sleep(0.5)
    raise SystemExit(f"readyReplicas did not reach {want} within {timeout:.0f} s")


async def check_allocations(api: ApiClient, replicas: int) -> dict:
    """Every pod Running; special claims for the DRA pods only; no device twice."""
    pods, _ = await api.list(core_v1.Pod, namespace="default")
    claims, _ = await api.list(resource_v1.ResourceClaim, namespace="default")
    devices: Counter[tuple[str, str, str]] = Counter()
    for claim in claims:
        allocation = claim.status.allocation
        for result in allocation.devices.results if allocation is not None else ():
            devices[(result.driver, result.pool, result.device)] += 1
    claim_names = {c.metadata.name for c in claims}
    on_dra = [p for p in pods if p.spec.node_name.startswith("dra-")]
    with_status = [p for p in on_dra if p.status.extended_resource_claim_status is not None]
    claimed = {
        p.status.extended_resource_claim_status.resource_claim_name
        for p in with_status
        if p.status.extended_resource_claim_status is not None
    }
    return {
        "pods": len(pods),
        "pods_running": sum(p.status.phase == "Running" for p in pods),
        "pods_on_dra_nodes": len(on_dra),
        "pods_on_device_plugin_nodes": sum(p.spec.node_name.startswith("dp-") for p in pods),
        "special_claims": len(claims),
        "dra_pods_with_claim_status": len(with_status),
        "dra_pods_whose_claim_exists": len(claimed & claim_names),
        "claims_without_pod": len(claim_names - claimed),
        "devices_allocated": len(devices),
        "devices_allocated_twice": sum(n > 1 for n in devices.values()),
        "ok": (
            len(pods) == replicas
            and all(p.status.phase == "Running" for p in pods)
            and len(with_status) == len(on_dra) == len(claims) == len(claimed & claim_names)
            and all(n == 1 for n in devices.values())
        ),
    }


async def wait_empty(api: ApiClient, timeout: float) -> float:
    """Seconds until no pod and no ResourceClaim is left in the namespace."""
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < timeout:
        pods, _ = await api.list(core_v1.Pod, namespace="default")
        claims, _ = await api.list(resource_v1.ResourceClaim, namespace="default")
        if not pods and not claims:
            return time.perf_counter() - t0
        await asyncio.sleep(1.0)
    raise SystemExit(f"pods or claims left after {timeout:.0f} s")


async def keep_log(up: asyncio.subprocess.Process, path: Path, ready: asyncio.Event) -> None:
    """Copy `drasim up`'s output to `path` until it ends; set `ready` at its `ready` line."""
    assert up.stdout is not None
    with path.open("wb") as log:
        async for line in up.stdout:
            log.write(line)
            if line.startswith(b"ready:"):
                ready.set()


async def soak(args: argparse.Namespace, workdir: Path) -> dict:
    dra, dp = args.nodes - args.nodes // 2, args.nodes // 2
    replicas = args.replicas or dra * GPUS_PER_DRA_NODE + dp * GPUS_PER_DP_NODE
    path = workdir / "cluster.yaml"
    path.write_text(CLUSTER.format(dra=dra, dp=dp))
    data_dir, log_path = workdir / "data", workdir / "up.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("DRASIM_")}
    drasim = shutil.which("drasim") or str(Path(sys.executable).parent / "drasim")
    results: dict = {"nodes": args.nodes, "kubelet_processes": args.kubelets}
    results["replicas"] = replicas
    t0 = time.perf_counter()
    up = await asyncio.create_subprocess_exec(
        drasim, "up", "--data-dir", str(data_dir), "--cluster", str(path),
        "--kubelets", str(args.kubelets),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT, env=env,
    )  # fmt: skip
    ready = asyncio.Event()
    logging = asyncio.create_task(keep_log(up, log_path, ready))
    try:
        await asyncio.wait([asyncio.create_task(ready.wait()), logging], timeout=args.timeout,
                           return_when=asyncio.FIRST_COMPLETED)  # fmt: skip
        if not ready.is_set():
            raise SystemExit(f"drasim up was not ready; see {log_path}")
        results["ready_s"] = round(time.perf_counter() - t0, 1)
        info = cluster.load_cluster(data_dir)
        assert info is not None
        services = Services(psutil.Process(up.pid))
        bus = await Bus.connect(info.nats_url, prefix=info.prefix, name="soak")
        api = ApiClient(bus, actor="soak", timeout=30.0)
        try:
            cpu0 = services.cpu()
            await api.create(deployment(replicas))
            up_s = await wait_ready_replicas(api, replicas, args.timeout)
            cpu1 = services.cpu()
            results["scale_up_s"] = round(up_s, 1)
            results["pods_per_s"] = round(replicas / up_s, 1)
            results["cpu_ms_per_pod"] = {
                role: round((cpu1[role] - cpu0[role]) / replicas * 1000, 2) for role in cpu1
            }
            results["cpu_ms_per_pod_total"] = round(sum(results["cpu_ms_per_pod"].values()), 2)
            results["checks"] = await check_allocations(api, replicas)
            scale_to_zero = {"spec": {"replicas": 0}}
            await api.patch(apps_v1.Deployment, NAME, scale_to_zero, namespace="default")
            results["scale_down_s"] = round(await wait_empty(api, args.timeout), 1)
        finally:
            await bus.close()
    finally:
        with contextlib.suppress(ProcessLookupError):
            up.send_signal(signal.SIGTERM)
        await up.wait()
        await logging
    results["log_problems"] = sum(bool(_PROBLEM.search(line)) for line in log_path.open())
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=2000, help="nodes, half of them DRA")
    parser.add_argument(
        "--replicas", type=int, default=0, help="pods (default: one per GPU in the cluster)"
    )
    parser.add_argument("--kubelets", type=int, default=2, help="kubelet processes")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per phase")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="drasim-soak-") as tmp:
        results = asyncio.run(soak(args, Path(tmp)))
    text = json.dumps(results, indent=2)
    print(text)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(text + "\n")
    ok = results["checks"]["ok"] and results["log_problems"] == 0
    print("checks passed" if ok else "CHECKS FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
