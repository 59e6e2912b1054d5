"""Kubelet scale benchmark: one process hosting 1,000 nodes, and `drasim up` with 2,000.

    python benchmarks/kubelet_scale.py [--nodes 1000] [--steady 30] [--phases hosting,watch,up]
                                       [--json FILE]

On embedded NATS and Postgres (or DRASIM_NATS_URL / DRASIM_DATABASE_URL), with the
apistore as its own process, it measures:

1. hosting: a kubelet process (this one) hosting `--nodes` nodes of the 8-GPU profile,
   each with its probe, DRA driver (ResourceSlices, prepare subject) and a Lease renewed
   every 10 s: time to ready, resident memory per node, CPU at steady state, and bus
   messages received per second;
2. isolation: the same figures while a second kubelet process hosts as many other nodes,
   and while pods come and go on those other nodes: what this process receives must not
   grow with nodes it does not host (and, for contrast, with pods on its own nodes);
3. watch: the kubelet's watch of N nodes (one consumer per node, 30 s heartbeats, what
   NATS' permissions can bound) against N watches of one node each (2 s heartbeats):
   set-up time, idle traffic (each consumer sends heartbeats), CPU, NATS' memory;
4. `drasim up --cluster <2,000 nodes> --kubelets 2`: seconds until `ready:`.

Targets (issue 4): < 200 KiB resident memory per hosted node; `drasim up` ready < 60 s.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import sys
import tempfile
import time
import uuid
from pathlib import Path

import psutil

from drasim.apistore.outbox import ensure_stream
from drasim.cli import cluster, launch
from drasim.common import cluster_file, codec, errors
from drasim.common.api import core_v1
from drasim.common.bus import messages, subjects
from drasim.common.bus.client import Bus
from drasim.common.client import ApiClient
from drasim.common.config import Config
from drasim.common.watch import watch_raw
from drasim.kubelet.run import KubeletProcess
from drasim.kubelet.watch import watch_nodes_raw

HEARTBEAT = 10.0
KIB = 1024


CLUSTER_HEAD = """apiVersion: drasim.io/v1alpha1
kind: Cluster
deviceClasses:
  - apiVersion: resource.k8s.io/v1
    kind: DeviceClass
    metadata: {name: gpu.example.com}
    spec:
      selectors: [{cel: {expression: "device.driver == 'gpu.example.com'"}}]
      extendedResourceName: example.com/gpu
"""


def cluster_yaml(nodes: int, *, mixed: bool = False) -> str:
    """`nodes` 8-GPU DRA nodes; with `mixed`, half of them 2-GPU device-plugin nodes."""
    if not mixed:
        return CLUSTER_HEAD + f"pools: [{{name: gpu, count: {nodes}, profile: gpu-8}}]\n"
    return (
        CLUSTER_HEAD
        + "pools:\n"
        + f"  - {{name: dra-gpu, count: {nodes - nodes // 2}, profile: gpu-8}}\n"
        + f"  - {{name: dp-gpu, count: {nodes // 2}, profile: gpu-2, devices: {{gpu: "
        + "{exposure: device-plugin, extendedResourceName: example.com/gpu}}}\n"
    )


def rss() -> int:
    gc.collect()
    return psutil.Process().memory_info().rss


async def measure(bus: Bus, seconds: float) -> dict[str, float]:
    """This process's CPU and the messages its connection received, over `seconds`."""
    process = psutil.Process()
    cpu0, msgs0, t0 = process.cpu_times(), bus.nc.stats["in_msgs"], time.monotonic()
    await asyncio.sleep(seconds)
    cpu1, msgs1, t1 = process.cpu_times(), bus.nc.stats["in_msgs"], time.monotonic()
    busy = (cpu1.user - cpu0.user) + (cpu1.system - cpu0.system)
    return {
        "cpu_percent": round(100 * busy / (t1 - t0), 2),
        "bus_msgs_received_per_s": round((msgs1 - msgs0) / (t1 - t0), 1),
    }


# --- helpers run as their own processes --------------------------------------------------


async def churn(nats_url: str, prefix: str, nodes: list[str], rate: float) -> None:
    """Pods bound to `nodes`, created and deleted at `rate` per second, until killed."""
    bus = await Bus.connect(nats_url, prefix=prefix, name="churn")
    api = ApiClient(bus, actor="churn")
    live: list[str] = []
    i = 0
    while True:
        name = f"churn-{uuid.uuid4().hex[:10]}"
        pod = codec.convert(
            {
                "metadata": {"name": name, "namespace": "default"},
                "spec": {
                    "nodeName": nodes[i % len(nodes)],
                    "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}],
                },
            },
            core_v1.Pod,
        )
        await api.create(pod)
        live.append(name)
        i += 1
        if len(live) > 20:
            with contextlib.suppress(errors.NotFound):
                await api.delete(core_v1.Pod, live.pop(0), namespace="default")
        await asyncio.sleep(1 / rate)


# --- 1 + 2: hosting and isolation ---------------------------------------------------------


async def bench_hosting(
    nats_url: str, database_url: str, nodes: int, steady: float, workdir: Path
) -> dict:
    prefix = f"bench{uuid.uuid4().hex[:6]}"
    apistore = await launch.ServiceProcess.start(
        launch.Launch.service(
            "drasim.apistore",
            nats_url=nats_url,
            database_url=database_url,
            prefix=prefix,
            log_level="WARNING",
        )
    )
    path = workdir / "hosting.yaml"
    path.write_text(cluster_yaml(2 * nodes))
    cluster = cluster_file.load(path)
    mine, theirs = cluster.shard(0, 2), cluster.shard(1, 2)
    bus = await Bus.connect(nats_url, prefix=prefix, name="kubelet-0")
    results: dict = {"hosted_nodes": len(mine)}
    before = rss()
    kubelet = KubeletProcess(
        api=ApiClient(bus, actor="kubelet"), nodes=mine, heartbeat_period=HEARTBEAT
    )
    t0 = time.perf_counter()
    await kubelet.start()
    results["ready_s"] = round(time.perf_counter() - t0, 2)
    after = rss()
    results["rss_mib"] = round(after / KIB / KIB, 1)
    results["rss_per_node_kib"] = round((after - before) / len(mine) / KIB, 1)
    other = churner = None
    try:
        await asyncio.sleep(HEARTBEAT)  # every node has started heartbeating
        results["alone"] = await measure(bus, steady)

        other = await launch.ServiceProcess.start(
            launch.Launch.service(
                "drasim.kubelet",
                nats_url=nats_url,
                prefix=prefix,
                log_level="WARNING",
                args=["--cluster", str(path), "--shard", "1/2"],
            )
        )
        await asyncio.sleep(HEARTBEAT)
        results["beside_another_process"] = await measure(bus, steady)

        for label, targets in (("pods_on_other_nodes", theirs), ("pods_on_own_nodes", mine)):
            churner = await asyncio.create_subprocess_exec(
                sys.executable, __file__, "--churn", nats_url, prefix,
                ",".join(n.name for n in targets[:200]),
            )  # fmt: skip
            await asyncio.sleep(3)
            results[f"while_{label}_churn_at_20_per_s"] = await measure(bus, steady)
            churner.kill()
            await churner.wait()
            churner = None
    finally:
        if churner is not None:
            churner.kill()
        if other is not None:
            await other.stop()
        await kubelet.stop()
        await bus.close()
        await apistore.stop()
    return results


# --- 3: watch strategies --------------------------------------------------------------------


async def bench_watch(nats_url: str, nodes: int, idle: float, nats_pid: int | None) -> dict:
    """The kubelet's watch of `nodes` nodes: one consumer per node (all NATS permissions
    can bound), against one watch per node with the 2 s heartbeats of other watches. Each
    on an event stream of its own (no apistore needed: the consumers only need it)."""
    names = [f"node-{i}" for i in range(nodes)]
    server = psutil.Process(nats_pid) if nats_pid else None
    results = {}
    for strategy in ("kubelet_watch_nodes_raw", "watch_raw_per_node"):
        bus = await Bus.connect(nats_url, prefix=f"bench{uuid.uuid4().hex[:6]}", name=strategy)
        await ensure_stream(bus)
        rss_before = server.memory_info().rss if server else 0

        async def drain(events: object) -> None:
            async for _ in events:  # type: ignore[attr-defined]
                pass

        t0 = time.perf_counter()
        if strategy == "kubelet_watch_nodes_raw":
            tasks = [
                asyncio.create_task(drain(watch_nodes_raw(bus, "pods", names, resource_version=0)))
            ]
        else:
            tasks = [
                asyncio.create_task(drain(watch_raw(bus, "pods", resource_version=0, node=n)))
                for n in names
            ]
        # The consumers exist on the server once the generators have made them; no
        # client-side event says so, hence the poll.
        stream = subjects.stream(bus.prefix)
        while (await bus.js.stream_info(stream)).state.consumer_count < nodes:  # noqa: ASYNC110
            await asyncio.sleep(0.05)
        setup = time.perf_counter() - t0
        await asyncio.sleep(2)
        figures = await measure(bus, idle)
        results[strategy] = {
            "consumers": nodes,
            "setup_s": round(setup, 2),
            "idle_bus_msgs_received_per_s": figures["bus_msgs_received_per_s"],
            "client_cpu_percent": figures["cpu_percent"],
        }
        if server is not None:
            grown = server.memory_info().rss - rss_before
            results[strategy]["nats_server_rss_growth_mib"] = round(grown / KIB / KIB, 1)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await bus.js.delete_stream(stream)
        await bus.close()
    return results


# --- 4: drasim up -------------------------------------------------------------------------


async def bench_up(nodes: int, kubelets: int, workdir: Path) -> dict:
    path = workdir / "up.yaml"
    path.write_text(cluster_yaml(nodes, mixed=True))
    data_dir = workdir / "up"
    results: dict = {"nodes": nodes, "kubelet_processes": kubelets}

    def note(line: str) -> None:
        if line.startswith("[up] deviceclass") and "services_ready_s" not in results:
            results["services_ready_s"] = round(time.perf_counter() - t0, 2)

    spec = launch.Launch.up(data_dir, "--cluster", str(path), "--kubelets", str(kubelets))
    t0 = time.perf_counter()
    up = await launch.ServiceProcess.spawn(spec, on_line=note)
    try:
        await up.wait_ready(timeout=None)
        results["ready_s"] = round(time.perf_counter() - t0, 2)
        results["kubelets_ready_s"] = round(
            results["ready_s"] - results.get("services_ready_s", 0.0), 2
        )
        info = cluster.load_cluster(data_dir)
        assert info is not None
        credentials = Path(info.nats_credentials) if info.nats_credentials else None
        bus = await Bus.connect(
            info.nats_url, prefix=info.prefix, name="bench", credentials=credentials
        )
        results["nodes_registered"] = await count_nodes(ApiClient(bus, actor="bench"))
        await bus.close()
    finally:
        await up.stop(timeout=None)
    return results


async def count_nodes(api: ApiClient) -> int:
    """Nodes, listed 200 at a time: 2,000 Nodes in one answer exceed NATS' 1 MB payload."""
    token, total = "", 0
    while True:
        data = await api.request(messages.List(resource="nodes", limit=200, continue_token=token))
        page = messages.list_result_decoder.decode(data)
        total += len(page.items)
        token = page.continue_token
        if not token:
            return total


# --- main ---------------------------------------------------------------------------------


async def run(
    args: argparse.Namespace,
    nats_url: str,
    database_url: str,
    workdir: Path,
    nats_pid: int | None = None,
) -> dict:
    results: dict = {}
    if "hosting" in args.phases:
        database = await launch.create_database(database_url)
        results["hosting"] = await bench_hosting(
            nats_url, database, args.nodes, args.steady, workdir
        )
        print(json.dumps({"hosting": results["hosting"]}), file=sys.stderr, flush=True)
    if "watch" in args.phases:
        results["watch_strategies"] = await bench_watch(
            nats_url, args.nodes, idle=10, nats_pid=nats_pid
        )
        print(json.dumps(results["watch_strategies"]), file=sys.stderr, flush=True)
    if "up" in args.phases:
        results["drasim_up"] = await bench_up(2 * args.nodes, 2, workdir)
    return results


def main() -> None:
    if sys.argv[1:2] == ["--churn"]:
        nats_url, prefix, nodes = sys.argv[2:5]
        asyncio.run(churn(nats_url, prefix, nodes.split(","), rate=20.0))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=1000, help="nodes one process hosts")
    parser.add_argument("--steady", type=float, default=30.0, help="seconds per measurement")
    parser.add_argument(
        "--phases",
        type=lambda text: set(text.split(",")),
        default={"hosting", "watch", "up"},
        help="which of hosting,watch,up to run (default: all)",
    )
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    config = Config.from_env()
    with (
        tempfile.TemporaryDirectory(prefix="drasim-kubelet-bench-") as tmp,
        launch.infrastructure(
            Path(tmp) / "infra", nats_url=config.nats_url, database_url=config.database_url
        ) as infra,
    ):
        nats_pid = infra.nats.pid if infra.nats else None
        results = asyncio.run(
            run(args, infra.admin_nats_url, infra.admin_database_url, Path(tmp), nats_pid)
        )
    text = json.dumps(results, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")


if __name__ == "__main__":
    main()
