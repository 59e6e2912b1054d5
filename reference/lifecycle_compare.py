"""`reference/lifecycle_compare`: KWOK's lifecycle benchmark on upstream and on drasim.

    reference/lifecycle_compare [--nodes 200,1000] [--json FILE]

kwok's own benchmark (kubernetes-sigs/kwok, test/kwokctl/kwokctl_benchmark_test.sh) times
three phases of a fresh cluster: fake nodes created until all are Ready, pods until all
are Running, and their deletion until all are gone. This runs that shape with the nodes
and the workload of drasim's soak (`benchmarks/cluster_soak.py`: half the nodes with 8
GPUs a DRA driver publishes, half with 2 a device plugin advertises, one Deployment with a
pod per GPU asking `example.com/gpu: 1`), first on upstream's control plane with kwok
playing the nodes, then as drasim's soak, one after the other on the same machine:

- `nodes_ready_s`: upstream: the DeviceClass, then each Node and its ResourceSlices
  created (a few at a time, `reference.cluster`) until kwok holds every node's Lease;
  drasim: its kubelets started until they registered every node, its slices and its Lease.
- `scale_up_s`: the Deployment created until all its pods run: the ReplicaSet's pods
  made, each scheduled (with its special claim on a DRA node) and run by kwok or by
  drasim's kubelet. Upstream: until every pod is Running, as kwok's benchmark counts;
  drasim: until `readyReplicas` is all of them, as the soak counts, which comes after
  (upstream's ReplicaSet controller can report it long after its pods run on a loaded
  machine; benchmarks/README.md).
- `scale_down_s`: scaled to 0 until no pod and no ResourceClaim is left.

kwok plays the pods with kwokctl's default stages, as its benchmark does: Running and
deleted at once (`reference/build` writes them beside the slower ones `reference/up`
uses). Upstream's scheduler and controller manager run without client-side rate limits
(5,000 requests/s, as scheduler_perf configures its clients): drasim's services have none,
and with upstream's defaults the controller manager's 20 requests/s would be all this
measures.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import psutil

from drasim.common import cluster_file, codec
from drasim.common.api import core_v1, resource_v1
from reference import paths
from reference.cluster import FAST_STAGES, ReferenceCluster
from reference.kube import KubeClient, resource_for

__all__ = ["main", "ratios", "run_drasim", "run_upstream"]

SIZES = (200, 1000)
CLIENT_QPS = 5000
KUBELETS = 2  # the soak's default
TIMEOUT = 900.0  # seconds per phase, as the soak's
POLL = 0.5  # seconds, as the soak polls
NAMESPACE = "default"


def load_soak() -> ModuleType:
    """benchmarks/cluster_soak.py, whose cluster, workload, checks and run this shares."""
    path = paths.HERE.parent / "benchmarks" / "cluster_soak.py"
    spec = importlib.util.spec_from_file_location("cluster_soak", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def _wait(what: str, done: Callable[[], bool], timeout: float = TIMEOUT) -> float:
    """Seconds until `done()`, polled as the soak polls."""
    t0 = time.perf_counter()
    while not done():
        if time.perf_counter() - t0 > timeout:
            raise TimeoutError(f"{what}: not within {timeout:.0f} s")
        time.sleep(POLL)
    return time.perf_counter() - t0


def _cpu_seconds() -> dict[str, float]:
    """CPU time of each of this process's children (etcd, kube-apiserver, ...), by name."""
    found: dict[str, float] = {}
    for child in psutil.Process().children(recursive=True):
        try:
            times = child.cpu_times()
            found[child.name()] = found.get(child.name(), 0.0) + times.user + times.system
        except psutil.Error:
            continue
    return found


def run_upstream(
    soak: ModuleType, nodes: int, work: Path, bin_dir: Path, say: Callable[[str], None]
) -> dict[str, Any]:
    """The three phases on upstream's control plane with `nodes` kwok nodes."""
    dra, dp = soak.split_nodes(nodes)
    cluster_path = work / f"cluster-{nodes}.yaml"
    cluster_path.write_text(soak.CLUSTER.format(dra=dra, dp=dp))
    replicas = soak.gpus(nodes)
    ref = ReferenceCluster(
        work / f"upstream-{nodes}",
        cluster_file.load(cluster_path),
        bin_dir,
        say=say,
        client_qps=CLIENT_QPS,
        kwok_stages=FAST_STAGES,
    )
    results: dict[str, Any] = {"nodes": nodes, "replicas": replicas}
    try:
        t0 = time.perf_counter()
        ref.start_control_plane()
        results["control_plane_s"] = round(time.perf_counter() - t0, 1)
        t0 = time.perf_counter()
        ref.register_nodes()
        results["nodes_ready_s"] = round(time.perf_counter() - t0, 1)
        client = ref.client
        cpu0 = _cpu_seconds()
        answer = client.create(codec.to_builtins(soak.deployment(replicas)))
        if not answer.ok:
            raise RuntimeError(f"creating the Deployment: {answer.status} {answer.body}")

        def all_running() -> bool:
            return _count(client, "v1", "Pod") == replicas and not _first(
                client, "v1", "Pod", {"fieldSelector": "status.phase!=Running"}
            )

        up_s = _wait("pods Running", all_running)
        cpu1 = _cpu_seconds()
        results["scale_up_s"] = round(up_s, 1)
        results["pods_per_s"] = round(replicas / up_s, 1)
        results["cpu_ms_per_pod"] = {
            name: round((cpu1[name] - cpu0.get(name, 0.0)) / replicas * 1000, 2) for name in cpu1
        }
        results["cpu_ms_per_pod_total"] = round(sum(results["cpu_ms_per_pod"].values()), 2)
        results["checks"] = _checks(soak, client, replicas)
        client.patch(
            "apps/v1", "Deployment", soak.NAME, {"spec": {"replicas": 0}}, namespace=NAMESPACE
        )

        def all_gone() -> bool:
            return not _first(client, "v1", "Pod") and not _first(
                client, "resource.k8s.io/v1", "ResourceClaim"
            )

        results["scale_down_s"] = round(_wait("pods and claims gone", all_gone), 1)
    finally:
        ref.stop()
    return results


def _first(
    client: KubeClient, api_version: str, kind: str, query: dict[str, str] | None = None
) -> list[dict[str, Any]]:
    """The first object of a kind in the namespace (a page of one): cheap to ask every
    half second of an API server holding thousands."""
    return _page(client, api_version, kind, query)["items"] or []


def _count(client: KubeClient, api_version: str, kind: str) -> int:
    """How many objects of a kind the namespace holds, from a page of one."""
    page = _page(client, api_version, kind)
    return len(page["items"] or []) + int(page["metadata"].get("remainingItemCount") or 0)


def _page(
    client: KubeClient, api_version: str, kind: str, query: dict[str, str] | None = None
) -> dict[str, Any]:
    path = resource_for(api_version, kind).path(NAMESPACE)
    answer = client.request("GET", path, query={**(query or {}), "limit": "1"})
    if not answer.ok:
        raise RuntimeError(f"list {kind}: {answer.status} {answer.body}")
    page: dict[str, Any] = answer.body
    return page


def _checks(soak: ModuleType, client: KubeClient, replicas: int) -> dict[str, Any]:
    """The soak's allocation checks over upstream's pods and claims: the same invariants
    hold there, so a failure of one says the two runs did not do the same work."""
    pods = [codec.convert(p, core_v1.Pod) for p in client.list("v1", "Pod", namespace=NAMESPACE)]
    claims = [
        codec.convert(c, resource_v1.ResourceClaim)
        for c in client.list("resource.k8s.io/v1", "ResourceClaim", namespace=NAMESPACE)
    ]
    found: dict[str, Any] = soak.allocation_checks(pods, claims, replicas)
    return found


def run_drasim(soak: ModuleType, nodes: int, work: Path) -> dict[str, Any]:
    """The soak at `nodes` nodes (`drasim up`, every service its own process)."""
    args = argparse.Namespace(nodes=nodes, replicas=0, kubelets=KUBELETS, timeout=TIMEOUT)
    soak_dir = work / f"drasim-{nodes}"
    soak_dir.mkdir()
    found: dict[str, Any] = asyncio.run(soak.soak(args, soak_dir))
    return found


def ratios(upstream: dict[str, Any], drasim: dict[str, Any]) -> dict[str, float]:
    """drasim/upstream of each phase's rate (nodes or pods per second): above 1, drasim
    was faster."""
    return {
        phase: round(upstream[phase] / drasim[phase], 2)
        for phase in ("nodes_ready_s", "scale_up_s", "scale_down_s")
        if upstream.get(phase) and drasim.get(phase)
    }


def main(argv: list[str] | None = None) -> int:
    """Run each size on both; 2 if upstream is not built, 1 if a check failed."""
    parser = argparse.ArgumentParser(
        prog="reference/lifecycle_compare", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--nodes",
        default=",".join(map(str, SIZES)),
        help=f"cluster sizes, comma-separated (default: {','.join(map(str, SIZES))})",
    )
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)
    bin_dir = paths.built_bin_dir()
    if bin_dir is None:
        print(f"reference/lifecycle_compare: {paths.missing_reason()}", file=sys.stderr)
        return 2

    def say(message: str) -> None:
        print(f"[lifecycle] {message}", file=sys.stderr, flush=True)

    soak = load_soak()
    context = paths.run_context()
    runs = []
    with tempfile.TemporaryDirectory(prefix="drasim-lifecycle-") as tmp:
        for nodes in (int(n) for n in args.nodes.split(",")):
            say(f"{nodes} nodes: upstream")
            upstream = run_upstream(soak, nodes, Path(tmp), bin_dir, lambda m: say(f"  {m}"))
            say(f"{nodes} nodes: drasim")
            drasim = run_drasim(soak, nodes, Path(tmp))
            runs.append(
                {
                    "nodes": nodes,
                    "upstream": upstream,
                    "drasim": drasim,
                    "drasim/upstream": ratios(upstream, drasim),
                }
            )
            print(json.dumps(runs[-1], indent=2), flush=True)
    print("\nnodes  phase          upstream s  drasim s  drasim/upstream")
    for run in runs:
        for phase, ratio in run["drasim/upstream"].items():
            print(
                f"{run['nodes']:<6} {phase:<14} {run['upstream'][phase]:>10} "
                f"{run['drasim'][phase]:>9}  {ratio:>15}"
            )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({**context, "runs": runs}, indent=2) + "\n")
    ok = all(r[side]["checks"]["ok"] for r in runs for side in ("upstream", "drasim"))
    print("checks passed" if ok else "CHECKS FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
