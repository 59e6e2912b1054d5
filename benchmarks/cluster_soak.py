"""Cluster soak: `drasim up` with thousands of nodes, one Deployment that fills them.

    python benchmarks/cluster_soak.py [--nodes 2000] [--replicas N] [--kubelets 2]
                                      [--json FILE]

Starts `drasim up` (embedded NATS and Postgres, every service its own process) with
KEP-5004's example cluster scaled to `--nodes`: half 8-GPU nodes whose GPUs a DRA driver
publishes, half 2-GPU nodes whose device plugin advertises `example.com/gpu`. Then one
Deployment whose pods ask for `example.com/gpu: 1` the old way, `--replicas` of them (by
default every GPU in the cluster), and measures:

- `ready_s`: `drasim up` until its `ready` line;
- `nodes_ready_s`: of that, the kubelets' part: from the cluster file's DeviceClasses
  (`up` starts the kubelets right after them) until every node, its slices and its Lease
  are registered (the `ready` line);
- `scale_up_s`, `pods_per_s`: the Deployment created until `readyReplicas` is all of them;
- `cpu_ms_per_pod`: CPU each service (apistore, scheduler, controllers, kubelets, NATS,
  Postgres) spent during the scale-up, per pod;
- checks (`allocation_checks`): every pod Running, each pod on a DRA node controls
  exactly one special ResourceClaim and its `extendedResourceClaimStatus` names it, none
  for pods on device-plugin nodes, no device allocated twice, no special claim without
  its pod, no status naming a missing claim;
- `scale_down_s`: replicas set to 0 until no pod and no ResourceClaim is left;
- `log_problems`: lines of the cluster's log with WARNING, ERROR or Traceback.

Exits 1 if a check fails. Needs a quiet machine for comparable figures: on two cores the
services share the CPU, so the scale-up is bound by their CPU per pod.

`benchmarks/chaos.py` runs the same cluster and checks (`running_up`, `allocation_checks`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import re
import sys
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

import psutil

from drasim.cli import cluster, launch
from drasim.common import codec
from drasim.common.api import apps_v1, core_v1, resource_v1
from drasim.common.bus import subjects
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
GPUS_PER_DRA_NODE = 8
DP_PROFILES = (2, 8)  # the built-in profiles a device-plugin node can take: gpu-2, gpu-8
NAME = "soak"
NAMESPACE = "default"
_PROBLEM = re.compile(r"WARNING|ERROR|Traceback")


def split_nodes(nodes: int) -> tuple[int, int]:
    """DRA nodes and device-plugin nodes of a cluster of `nodes`."""
    return nodes - nodes // 2, nodes // 2


def gpus(nodes: int, dp_gpus: int = 2) -> int:
    """GPUs in a cluster of `nodes`: the most pods asking for one that can run."""
    dra, dp = split_nodes(nodes)
    return dra * GPUS_PER_DRA_NODE + dp * dp_gpus


def deployment(replicas: int) -> apps_v1.Deployment:
    labels = {"app": NAME}
    return codec.convert(
        {
            "metadata": {"name": NAME, "namespace": NAMESPACE},
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


async def scale(api: ApiClient, replicas: int) -> None:
    await api.patch(apps_v1.Deployment, NAME, {"spec": {"replicas": replicas}}, namespace=NAMESPACE)


class Services:
    """CPU seconds of each process of one `drasim up`, by role."""

    def __init__(self, up: psutil.Process) -> None:
        self.roles: dict[str, list[psutil.Process]] = {}
        for child in up.children(recursive=True):
            with contextlib.suppress(psutil.Error):
                role = process_role(child.cmdline())
                if role == "postgres" and process_role(child.parent().cmdline()) == "postgres":
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

    def pss_mib(self) -> dict[str, float]:
        """Resident memory of each role in MiB (Postgres: the postmaster and its backends,
        which share buffers: their sum overstates, the shared buffers counted once each)."""
        found = {}
        for role, procs in self.roles.items():
            total = 0
            for proc in procs:
                members = [proc]
                if role == "postgres":
                    with contextlib.suppress(psutil.Error):
                        members += proc.children(recursive=True)
                for member in members:
                    with contextlib.suppress(psutil.Error):
                        total += member.memory_full_info().pss
            found[role] = round(total / 2**20, 1)
        return found


async def store_sizes(info: cluster.ClusterInfo) -> dict[str, float]:
    """How big the cluster's state has grown: the event log's and the projection's rows
    and MiB on disk (indexes included), and the JetStream event stream's."""
    import asyncpg  # only here: the benchmark's other parts need no database driver

    conn = await asyncpg.connect(info.database_url)
    try:
        found: dict[str, float] = {}
        for table in ("events", "objects"):
            found[f"{table}_rows"] = await conn.fetchval(f"SELECT count(*) FROM {table}")
            size = await conn.fetchval("SELECT pg_total_relation_size($1)", table)
            found[f"{table}_mib"] = round(size / 2**20, 1)
    finally:
        await conn.close()
    credentials = Path(info.nats_credentials) if info.nats_credentials else None
    bus = await Bus.connect(info.nats_url, prefix=info.prefix, name="soak", credentials=credentials)
    try:
        state = (await bus.js.stream_info(subjects.stream(info.prefix))).state
        found["stream_msgs"] = state.messages
        found["stream_mib"] = round(state.bytes / 2**20, 1)
    finally:
        await bus.close()
    return found


def process_role(cmdline: list[str]) -> str:
    """What a process of `drasim up` is: nats, postgres, or the service (`kubelet`...)."""
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
        dep = await api.get(apps_v1.Deployment, NAME, namespace=NAMESPACE)
        if dep.status.ready_replicas == want and dep.status.replicas == want:
            return time.perf_counter() - t0
        await asyncio.sleep(0.5)
    raise SystemExit(f"readyReplicas did not reach {want} within {timeout:.0f} s")


async def check_allocations(api: ApiClient, replicas: int) -> dict:
    """`allocation_checks` of the namespace's pods and ResourceClaims as listed now."""
    pods, _ = await api.list(core_v1.Pod, namespace=NAMESPACE)
    claims, _ = await api.list(resource_v1.ResourceClaim, namespace=NAMESPACE)
    return allocation_checks(pods, claims, replicas)


PROBLEMS = (
    "pods_not_running",
    "pods_missing_or_extra",
    "devices_allocated_twice",
    "dra_pods_without_one_claim_named_by_status",
    "device_plugin_pods_with_claim",
    "claims_without_pod",
    "statuses_naming_missing_claim",
)


def allocation_checks(
    pods: list[core_v1.Pod], claims: list[resource_v1.ResourceClaim], replicas: int
) -> dict:
    """Figures of the pods and claims, and how many of them break each invariant of
    `PROBLEMS` (all 0 and `ok` when the cluster is as it should be). A pod's special claim
    is one annotated as such that the pod controls (name and UID), as upstream finds it."""
    running = [
        p for p in pods if p.status.phase == "Running" and p.metadata.deletion_timestamp is None
    ]
    special = [
        c
        for c in claims
        if c.metadata.annotations.get(resource_v1.EXTENDED_RESOURCE_CLAIM_ANNOTATION) == "true"
    ]
    controlled: dict[str, list[resource_v1.ResourceClaim]] = {}  # pod UID → its claims
    for claim in special:
        for ref in claim.metadata.owner_references:
            if ref.controller and ref.kind == "Pod":
                controlled.setdefault(ref.uid, []).append(claim)
    pod_uids = {p.metadata.uid for p in pods}
    claim_names = {c.metadata.name for c in claims}
    devices: Counter[tuple[str, str, str]] = Counter()
    for claim in claims:
        allocation = claim.status.allocation
        for result in allocation.devices.results if allocation is not None else ():
            devices[(result.driver, result.pool, result.device)] += 1
    on_dra = [p for p in pods if p.spec.node_name.startswith("dra-")]
    on_dp = [p for p in pods if p.spec.node_name.startswith("dp-")]

    def names_its_claim(pod: core_v1.Pod) -> bool:
        mine = controlled.get(pod.metadata.uid, [])
        status = pod.status.extended_resource_claim_status
        return (
            len(mine) == 1
            and status is not None
            and status.resource_claim_name == mine[0].metadata.name
        )

    problems = {
        "pods_not_running": len(pods) - len(running),
        "pods_missing_or_extra": abs(len(pods) - replicas),
        "devices_allocated_twice": sum(n > 1 for n in devices.values()),
        "dra_pods_without_one_claim_named_by_status": sum(not names_its_claim(p) for p in on_dra),
        "device_plugin_pods_with_claim": sum(
            bool(controlled.get(p.metadata.uid))
            or p.status.extended_resource_claim_status is not None
            for p in on_dp
        ),
        "claims_without_pod": sum(
            not any(ref.controller and ref.uid in pod_uids for ref in c.metadata.owner_references)
            for c in special
        ),
        "statuses_naming_missing_claim": sum(
            p.status.extended_resource_claim_status is not None
            and p.status.extended_resource_claim_status.resource_claim_name not in claim_names
            for p in pods
        ),
    }
    assert problems.keys() == set(PROBLEMS)
    return {
        "pods": len(pods),
        "pods_running": len(running),
        "pods_on_dra_nodes": len(on_dra),
        "pods_on_device_plugin_nodes": len(on_dp),
        "special_claims": len(special),
        "devices_allocated": len(devices),
        **problems,
        "ok": not any(problems.values()),
    }


async def wait_empty(api: ApiClient, timeout: float) -> float:
    """Seconds until no pod and no ResourceClaim is left in the namespace."""
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < timeout:
        pods, _ = await api.list(core_v1.Pod, namespace=NAMESPACE)
        claims, _ = await api.list(resource_v1.ResourceClaim, namespace=NAMESPACE)
        if not pods and not claims:
            return time.perf_counter() - t0
        await asyncio.sleep(1.0)
    raise SystemExit(f"pods or claims left after {timeout:.0f} s")


class UpLog:
    """`drasim up`'s output: copied to a file, and kept with the time each line came
    (`time.monotonic()`), so that a caller can wait for a line."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lines: list[tuple[float, str]] = []
        self._file = path.open("w")  # noqa: SIM115 - closed by `close`
        self._grown = asyncio.Event()

    def add(self, line: str) -> None:
        """Each line of `drasim up`'s output, as the launcher reads it."""
        self._file.write(line + "\n")
        self._file.flush()
        self.lines.append((time.monotonic(), line))
        self._grown.set()
        self._grown = asyncio.Event()

    def close(self) -> None:
        self._file.close()

    def first_line(self, wanted: Callable[[str], bool]) -> tuple[float, str]:
        """The first line so far that is `wanted`, and when it came; LookupError if none."""
        for item in self.lines:
            if wanted(item[1]):
                return item
        raise LookupError("no such line in drasim up's output")

    async def wait_for(
        self, wanted: Callable[[str], bool], *, after: int, timeout: float
    ) -> tuple[float, str]:
        """The first line from index `after` on that is `wanted`, and when it came."""

        def found() -> tuple[float, str] | None:
            return next((item for item in self.lines[after:] if wanted(item[1])), None)

        async with asyncio.timeout(timeout):
            while (hit := found()) is None:
                await self._grown.wait()
        return hit


@dataclass
class RunningUp:
    """One `drasim up` ready to use: its process, cluster.json and output, and a client."""

    process: launch.ServiceProcess
    info: cluster.ClusterInfo
    log: UpLog
    api: ApiClient
    ready_s: float

    @property
    def nodes_ready_s(self) -> float:
        """Seconds from the DeviceClasses `up` creates just before it starts the kubelets
        to its ready line, which it prints once every kubelet registered its nodes."""
        classes, _ = self.log.first_line(lambda line: line.startswith("[up] "))
        ready, _ = self.log.first_line(lambda line: line.startswith("ready:"))
        return ready - classes


@contextlib.asynccontextmanager
async def running_up(
    workdir: Path,
    *,
    nodes: int,
    kubelets: int,
    timeout: float,
    api_timeout: float = 30.0,
    dp_gpus: int = 2,
) -> AsyncIterator[RunningUp]:
    """`drasim up` (embedded NATS and Postgres) with `nodes` of `CLUSTER`, connected to as
    its admin; SIGTERM once the block ends."""
    path = workdir / "cluster.yaml"
    dra, dp = split_nodes(nodes)
    # `CLUSTER` as others use it (reference/lifecycle_compare.py), its device-plugin nodes'
    # profile swapped for `dp_gpus`.
    text = CLUSTER.format(dra=dra, dp=dp).replace("profile: gpu-2,", f"profile: gpu-{dp_gpus},")
    path.write_text(text)
    data_dir = workdir / "data"
    spec = launch.Launch.up(data_dir, "--cluster", str(path), "--kubelets", str(kubelets))
    log = UpLog(workdir / "up.log")
    t0 = time.perf_counter()
    # The launcher also makes it die with the benchmark: a benchmark stopped by a signal
    # must not leave a cluster running.
    up = await launch.ServiceProcess.spawn(spec, on_line=log.add)
    try:
        try:
            await up.wait_ready(timeout)
        except launch.LaunchError:
            raise SystemExit(f"drasim up was not ready; see {log.path}") from None
        ready_s = time.perf_counter() - t0
        info = cluster.load_cluster(data_dir)
        assert info is not None
        credentials = Path(info.nats_credentials) if info.nats_credentials else None
        bus = await Bus.connect(
            info.nats_url, prefix=info.prefix, name="soak", credentials=credentials
        )
        try:
            yield RunningUp(
                up, info, log, ApiClient(bus, actor="soak", timeout=api_timeout), ready_s
            )
        finally:
            await bus.close()
    finally:
        await up.stop(timeout=None)
        log.close()


async def soak(args: argparse.Namespace, workdir: Path) -> dict:
    replicas = args.replicas or gpus(args.nodes, args.dp_gpus)
    results: dict = {"nodes": args.nodes, "kubelet_processes": args.kubelets}
    results["replicas"] = replicas
    async with running_up(
        workdir,
        nodes=args.nodes,
        kubelets=args.kubelets,
        timeout=args.timeout,
        dp_gpus=args.dp_gpus,
    ) as up:
        results["ready_s"] = round(up.ready_s, 1)
        results["nodes_ready_s"] = round(up.nodes_ready_s, 1)
        api = up.api
        services = Services(psutil.Process(up.process.pid))
        results["pss_mib_nodes_up"] = services.pss_mib()
        results["store_nodes_up"] = await store_sizes(up.info)
        print(json.dumps({"nodes_up": results}), flush=True)
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
        results["pss_mib_pods_up"] = services.pss_mib()
        results["store_pods_up"] = await store_sizes(up.info)
        print(json.dumps({"pods_up": results}), flush=True)
        results["checks"] = await check_allocations(api, replicas)
        await scale(api, 0)
        results["scale_down_s"] = round(await wait_empty(api, args.timeout), 1)
        results["store_scaled_down"] = await store_sizes(up.info)
    results["log_problems"] = sum(bool(_PROBLEM.search(line)) for _, line in up.log.lines)
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=2000, help="nodes, half of them DRA")
    parser.add_argument(
        "--replicas", type=int, default=0, help="pods (default: one per GPU in the cluster)"
    )
    parser.add_argument("--kubelets", type=int, default=2, help="kubelet processes")
    parser.add_argument(
        "--dp-gpus", type=int, choices=DP_PROFILES, default=2, help="GPUs per device-plugin node"
    )
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per phase")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument(
        "--workdir", type=Path, help="keep the cluster's data and up.log here (default: a temp dir)"
    )
    args = parser.parse_args()
    with contextlib.ExitStack() as stack:
        workdir = args.workdir or Path(
            stack.enter_context(tempfile.TemporaryDirectory(prefix="drasim-soak-"))
        )
        workdir.mkdir(parents=True, exist_ok=True)
        results = asyncio.run(soak(args, workdir))
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
