"""Scheduler memory benchmark: what the scheduler keeps per node and per pod it scheduled.

    python benchmarks/scheduler_memory.py [--nodes 1000,4000] [--pods 2000,8000]
        [--mode claims,extended-resources,device-plugin] [--frames 1] [--top 0]
        [--write-latency 0] [--prefill 0] [--json FILE]

Runs the real `Scheduler` (queue, cache, DraManager, default profile, binding cycle, event
recorder) in this process on an in-memory API (`MemoryApi`): the writes it makes are kept
and come back to its informers as watch events, as from the apistore, without NATS,
Postgres or kubelets. Each shape runs in a fresh child process. The cluster is
`drasim loadtest`'s: N nodes of 8 GPUs, published by a DRA driver as one ResourceSlice each
and served through the DeviceClass `gpu.example.com`, or (mode `device-plugin`)
advertised as node capacity `example.com/gpu: 8`. The P pods ask one GPU each:

- `claims`: the ResourceClaimTemplate `single-gpu-0`'s claim, made for each pod as the
  ResourceClaim controller makes it (the pod's status names it);
- `extended-resources`: `example.com/gpu: 1` in limits, the class mapping the name, so the
  scheduler makes each pod's special claim;
- `device-plugin`: `example.com/gpu: 1` against node capacity (no DRA).

With `--prefill F` (claims mode) the cluster starts with F of its GPUs held by running
pods and their allocated claims, spread over the nodes, as a loadtest's fill leaves it:
the scheduler's cost per pod near full, where most nodes it filters have one free GPU.

It measures the process' RSS and tracemalloc's bytes (`--frames 0`: RSS only, tracing
slows the cycle and its own tables inflate RSS) at three points: the nodes in the cache,
the first quarter of the pods bound (what is built once, as the DRA snapshot, is built by
then), and every pod bound with every binding task ended. It prints bytes per node, bytes
per pod over the last three quarters (what each pod leaves behind), and bytes per pod from
the nodes up to the end (as a loadtest sees the scheduler grow: what is built lazily per
node counts there), with pods/s and the scheduler's CPU ms per pod. RSS also counts what
tracemalloc cannot see, such as the native memory of C and Rust extensions. `--top K`
prints, per phase, the K allocations that grew most by traceback (`--frames` deep).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import itertools
import json
import os
import random
import subprocess
import sys
import time
import tracemalloc
import uuid
from typing import Any

import msgspec

from drasim.apistore.patches import merge_patch
from drasim.common import codec, errors, tables
from drasim.common.api import core_v1, resource_v1
from drasim.common.informer import Informer
from drasim.common.watch import WatchEvent
from drasim.controllers.resourceclaim import claim_from_template
from drasim.scheduler.server import Scheduler

DRIVER = "gpu.example.com"
DEVICE_CLASS = "gpu.example.com"
EXTENDED_RESOURCE = "example.com/gpu"
TEMPLATE = "single-gpu-0"
GPUS_PER_NODE = 8
MODES = ("claims", "extended-resources", "device-plugin")


# --- the in-memory API -------------------------------------------------------------------


class MemoryApi:
    """The ApiClient verbs the scheduler uses, over a dict. Each write of a kind the
    scheduler watches comes back to its informer as a watch event on a later turn of the
    loop. Events are answered and dropped (the scheduler never reads them back)."""

    actor = "system:kube-scheduler"
    bus = None

    def __init__(self, latency: float = 0.0) -> None:
        # Seconds each write the scheduler makes waits before it is applied, as for an
        # apistore that answers late: binding cycles then overlap, each holding its state.
        self.latency = latency
        self.objects: dict[tuple[type[Any], str, str], Any] = {}
        self.informers: dict[type[Any], Informer[Any]] = {}
        self._rv = itertools.count(1)
        self.bound = 0
        self.all_bound = asyncio.Event()
        self.expected_binds = 0

    def follow(self, sched: Scheduler) -> None:
        for informer in sched.informers:
            self.informers[informer.type] = informer

    def _write(self, kind: str, obj: Any, *, now: bool = False) -> Any:
        """Store `obj` with a new resourceVersion; tell its informer (`now`: at once)."""
        rv = next(self._rv)
        meta = msgspec.structs.replace(obj.metadata, resource_version=str(rv))
        obj = msgspec.structs.replace(obj, metadata=meta)
        key = (type(obj), meta.namespace or "", meta.name)
        if kind == "DELETED":
            self.objects.pop(key, None)
        elif type(obj) is not core_v1.Event:
            self.objects[key] = obj
        informer = self.informers.get(type(obj))
        if informer is not None:
            event = WatchEvent(kind, obj, rv)
            if now:
                informer._on_event(event)
            else:
                asyncio.get_running_loop().call_soon(informer._on_event, event)
        return obj

    def _get(self, type_: type[Any], name: str, namespace: str) -> Any:
        obj = self.objects.get((type_, namespace or "", name))
        if obj is None:
            raise errors.NotFound(f'{type_.__name__.lower()} "{name}" not found')
        return obj

    def add(self, obj: Any) -> Any:
        """Create as a client outside the scheduler does, delivered at once."""
        return self._write("ADDED", self._named(obj), now=True)

    @staticmethod
    def _named(obj: Any) -> Any:
        meta = obj.metadata
        changes: dict[str, Any] = {}
        if not meta.name and meta.generate_name:
            changes["name"] = meta.generate_name + uuid.uuid4().hex[:5]
        if not meta.uid:
            changes["uid"] = str(uuid.uuid4())
        if not meta.creation_timestamp:
            changes["creation_timestamp"] = tables.format_time()
        if changes:
            obj = msgspec.structs.replace(obj, metadata=msgspec.structs.replace(meta, **changes))
        return obj

    async def _answer_late(self) -> None:
        if self.latency:
            await asyncio.sleep(self.latency)

    async def create(self, obj: Any, *, namespace: str = "", dry_run: bool = False) -> Any:
        await self._answer_late()
        return self._write("ADDED", self._named(obj))

    async def get(self, type_: type[Any], name: str, *, namespace: str = "") -> Any:
        return self._get(type_, name, namespace)

    async def update(self, obj: Any, *, subresource: str = "") -> Any:
        await self._answer_late()
        current = self._get(type(obj), obj.metadata.name, obj.metadata.namespace)
        if obj.metadata.resource_version != current.metadata.resource_version:
            raise errors.Conflict("the object has been modified")
        return self._write("MODIFIED", obj)

    async def update_status(self, obj: Any) -> Any:
        return await self.update(obj, subresource="status")

    async def patch(
        self,
        type_: type[Any],
        name: str,
        patch: Any,
        *,
        namespace: str = "",
        subresource: str = "",
        patch_type: str = "merge",
        traceparent: str = "",
    ) -> Any:
        await self._answer_late()
        current = self._get(type_, name, namespace)
        merged = merge_patch(codec.to_builtins(current), patch)
        return self._write("MODIFIED", codec.convert(merged, type_))

    async def delete(self, type_: type[Any], name: str, *, namespace: str = "", **_: Any) -> Any:
        await self._answer_late()
        return self._write("DELETED", self._get(type_, name, namespace))

    async def bind(self, pod: Any, node_name: str, *, traceparent: str = "") -> Any:
        await self._answer_late()
        current = self._get(core_v1.Pod, pod.metadata.name, pod.metadata.namespace)
        if current.spec.node_name:
            raise errors.Conflict(f"pod {pod.metadata.name} is already assigned")
        bound = msgspec.structs.replace(
            current, spec=msgspec.structs.replace(current.spec, node_name=node_name)
        )
        written = self._write("MODIFIED", bound)
        self.bound += 1
        if self.bound >= self.expected_binds:
            self.all_bound.set()
        return written


# --- the cluster -------------------------------------------------------------------------


def device_class(mode: str) -> resource_v1.DeviceClass:
    spec: dict[str, Any] = {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}
    if mode == "extended-resources":
        spec["extendedResourceName"] = EXTENDED_RESOURCE
    return codec.convert(
        {"metadata": {"name": DEVICE_CLASS}, "spec": spec}, resource_v1.DeviceClass
    )


def node(i: int, mode: str) -> core_v1.Node:
    resources = {"cpu": "32", "memory": "256Gi", "pods": "110"}
    if mode == "device-plugin":
        resources[EXTENDED_RESOURCE] = str(GPUS_PER_NODE)
    return codec.convert(
        {
            "metadata": {
                "name": f"node-{i:05d}",
                "labels": {"kubernetes.io/hostname": f"node-{i:05d}"},
            },
            "status": {
                "capacity": resources,
                "allocatable": resources,
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        },
        core_v1.Node,
    )


def resource_slice(node_name: str) -> resource_v1.ResourceSlice:
    return codec.convert(
        {
            "metadata": {"name": f"{node_name}-{DRIVER}"},
            "spec": {
                "driver": DRIVER,
                "nodeName": node_name,
                "pool": {"name": node_name, "generation": 1, "resourceSliceCount": 1},
                "devices": [
                    {"name": f"gpu-{d}", "attributes": {"index": {"int": d}}}
                    for d in range(GPUS_PER_NODE)
                ],
            },
        },
        resource_v1.ResourceSlice,
    )


def template() -> resource_v1.ResourceClaimTemplate:
    return codec.convert(
        {
            "metadata": {"name": TEMPLATE, "namespace": "default"},
            "spec": {
                "spec": {
                    "devices": {
                        "requests": [{"name": "gpu", "exactly": {"deviceClassName": DEVICE_CLASS}}]
                    }
                }
            },
        },
        resource_v1.ResourceClaimTemplate,
    )


def pod(i: int, mode: str) -> core_v1.Pod:
    """Pod `i`, as a loadtest Job's: its hostname and container named after its Job."""
    resources: dict[str, Any] = {"requests": {"cpu": "10m", "memory": "10Mi"}}
    container = {"name": f"job-{i:05d}", "image": "registry.k8s.io/pause:3.10"}
    spec: dict[str, Any] = {
        "hostname": f"job-{i:05d}-0",
        "containers": [{**container, "resources": resources}],
    }
    if mode == "claims":
        resources["claims"] = [{"name": "gpu"}]
        spec["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": TEMPLATE}]
    else:
        resources["limits"] = {EXTENDED_RESOURCE: "1"}
    return codec.convert(
        {
            "metadata": {
                "name": f"pod-{i:05d}",
                "namespace": "default",
                "uid": f"pod-uid-{i:05d}",
                "labels": {"app": "gpu-job"},
            },
            "spec": spec,
        },
        core_v1.Pod,
    )


# --- one shape ---------------------------------------------------------------------------


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def settle() -> tuple[int, int]:
    """(tracemalloc's current bytes, RSS) after a full collection."""
    gc.collect()
    traced = tracemalloc.get_traced_memory()[0] if tracemalloc.is_tracing() else 0
    return traced, rss_bytes()


def _prefill(
    api: MemoryApi, tmpl: resource_v1.ResourceClaimTemplate, nodes: int, count: int
) -> None:
    """`count` pods already running (claims mode), spread as LeastAllocated spreads them:
    pod i on node i % nodes, holding its GPU i // nodes through its allocated claim, as a
    loadtest's fill leaves the cluster for its churn."""
    for i in range(count):
        node_name, device = f"node-{i % nodes:05d}", f"gpu-{i // nodes}"
        p = pod(1_000_000 + i, "claims")
        pod_claim = p.spec.resource_claims[0]
        claim = claim_from_template(p, pod_claim, tmpl)
        claim.status = codec.convert(
            {
                "allocation": {
                    "devices": {
                        "results": [
                            {
                                "request": "gpu",
                                "driver": DRIVER,
                                "pool": node_name,
                                "device": device,
                            }
                        ]
                    },
                    "nodeSelector": {
                        "nodeSelectorTerms": [
                            {
                                "matchFields": [
                                    {
                                        "key": "metadata.name",
                                        "operator": "In",
                                        "values": [node_name],
                                    }
                                ]
                            }
                        ]
                    },
                },
                "reservedFor": [
                    {"resource": "pods", "name": p.metadata.name, "uid": p.metadata.uid}
                ],
            },
            resource_v1.ResourceClaimStatus,
        )
        claim = api.add(claim)
        status = core_v1.PodResourceClaimStatus(
            name=pod_claim.name, resource_claim_name=claim.metadata.name
        )
        p.spec.node_name = node_name
        p.status = msgspec.structs.replace(
            p.status, phase="Running", resource_claim_statuses=[status]
        )
        api.add(p)


async def run_shape(
    nodes: int, pods: int, mode: str, top: int, latency: float = 0.0, prefill: float = 0.0
) -> dict[str, Any]:
    api = MemoryApi(latency)
    sched = Scheduler(api, rng=random.Random(1))  # type: ignore[arg-type]  # the verbs it uses
    api.follow(sched)
    sched.binding_tasks = in_flight = _PeakSet()
    if mode != "device-plugin":
        api.add(device_class(mode))
    for i in range(nodes):
        n = api.add(node(i, mode))
        if mode != "device-plugin":
            api.add(resource_slice(n.metadata.name))
    tmpl = template()
    if prefill:
        if mode != "claims":
            raise SystemExit("--prefill: claims mode only")
        _prefill(api, tmpl, nodes, int(prefill * nodes * GPUS_PER_NODE))
    sched.cache.update_snapshot(sched.snapshot)
    nodes_up, rss_nodes_up = settle()
    snap_nodes_up = tracemalloc.take_snapshot() if top else None

    tasks = [
        asyncio.create_task(sched.queue.run(), name="queue-timers"),
        asyncio.create_task(sched.run(), name="schedule-one"),
    ]
    # The first quarter warms up what is built once (the DRA snapshot, each device's CEL
    # variables, the verdict cache's lists); the growth over the rest is per pod.
    warm = max(1, pods // 4)
    started, cpu_started = time.perf_counter(), time.process_time()
    try:
        await _schedule(api, sched, tmpl, range(warm), mode)
        before, rss_before = settle()
        snap_before = tracemalloc.take_snapshot() if top else None
        await _schedule(api, sched, tmpl, range(warm, pods), mode)
    finally:
        seconds = time.perf_counter() - started
        cpu_seconds = time.process_time() - cpu_started
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    for _ in range(3):  # informer deliveries still queued on the loop
        await asyncio.sleep(0)
    after, rss_after = settle()
    figures: dict[str, Any] = {
        "nodes": nodes,
        "pods": pods,
        "mode": mode,
        "bound": api.bound,
        "devices_allocated_twice": _allocated_twice(api),
        "binding_cycles_in_flight_max": in_flight.peak,
        "pods_per_s": pods / seconds,
        "cpu_ms_per_pod": 1e3 * cpu_seconds / pods,
        "traced_mib_nodes_up": nodes_up / 2**20,
        "traced_mib_warm": before / 2**20,
        "traced_mib_pods_bound": after / 2**20,
        "traced_bytes_per_node": nodes_up / nodes,
        "traced_bytes_per_pod": (after - before) / (pods - warm),
        "rss_mib_nodes_up": rss_nodes_up / 2**20,
        "rss_mib_warm": rss_before / 2**20,
        "rss_mib_pods_bound": rss_after / 2**20,
        "rss_bytes_per_pod": (rss_after - rss_before) / (pods - warm),
        "rss_bytes_per_pod_from_nodes_up": (rss_after - rss_nodes_up) / pods,
    }
    if snap_nodes_up is not None and snap_before is not None:
        figures["top"] = [
            *_top(f"warm-up ({warm} pods)", snap_before, snap_nodes_up, top),
            *_top(f"the other {pods - warm} pods", tracemalloc.take_snapshot(), snap_before, top),
        ]
    return figures


class _PeakSet(set):  # type: ignore[type-arg]
    """The scheduler's binding tasks, counting the most at once."""

    peak = 0

    def add(self, item: Any) -> None:
        super().add(item)
        self.peak = max(self.peak, len(self))


def _allocated_twice(api: MemoryApi) -> int:
    """Devices that more than one claim's allocation holds: a check that the scheduler
    measured is one that works."""
    devices = [
        (r.driver, r.pool, r.device)
        for (kind, _, _), claim in api.objects.items()
        if kind is resource_v1.ResourceClaim and claim.status.allocation is not None
        for r in claim.status.allocation.devices.results
    ]
    return len(devices) - len(set(devices))


def _top(
    phase: str, snapshot: tracemalloc.Snapshot, since: tracemalloc.Snapshot, k: int
) -> list[str]:
    """The k allocations (by traceback) that grew most from `since` to `snapshot`."""
    lines = [f"-- grew most during {phase}:"]
    for stat in snapshot.compare_to(since, "traceback")[:k]:
        lines.append(f"{stat.size_diff / 2**20:+.1f} MiB in {stat.count_diff:+d} blocks")
        lines.extend(f"    {line}" for line in stat.traceback.format()[-2 * 6 :])
    return lines


async def _schedule(
    api: MemoryApi,
    sched: Scheduler,
    tmpl: resource_v1.ResourceClaimTemplate,
    indices: range,
    mode: str,
) -> None:
    """Create these pods (claims mode: with their template claims) and wait until all are
    bound and their binding tasks have ended."""
    api.expected_binds = indices.stop
    api.all_bound.clear()
    for i in indices:
        p = pod(i, mode)
        if mode == "claims":  # as the ResourceClaim controller would, before the pod is seen
            pod_claim = p.spec.resource_claims[0]
            claim = api.add(claim_from_template(p, pod_claim, tmpl))
            status = core_v1.PodResourceClaimStatus(
                name=pod_claim.name, resource_claim_name=claim.metadata.name
            )
            p = msgspec.structs.replace(
                p, status=msgspec.structs.replace(p.status, resource_claim_statuses=[status])
            )
        api.add(p)
        if i % 200 == 199:
            await asyncio.sleep(0)  # let the scheduler start as the pods arrive
    async with asyncio.timeout(max(600.0, len(indices) * 0.5)):
        await api.all_bound.wait()
        while sched.binding_tasks:
            await asyncio.gather(*list(sched.binding_tasks), return_exceptions=True)


def child(args: argparse.Namespace) -> None:
    if args.frames:
        tracemalloc.start(args.frames)
    figures = asyncio.run(
        run_shape(
            args.nodes_one,
            args.pods_one,
            args.mode_one,
            args.top,
            args.write_latency,
            args.prefill,
        )
    )
    print(json.dumps(figures))


# --- the driver --------------------------------------------------------------------------


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=_ints, default=[1000, 4000])
    parser.add_argument("--pods", type=_ints, default=[2000, 8000])
    parser.add_argument("--mode", default="claims,extended-resources")
    parser.add_argument(
        "--frames", type=int, default=1, help="tracemalloc frames (0: RSS only, no tracing)"
    )
    parser.add_argument(
        "--write-latency",
        type=float,
        default=0.0,
        help="seconds each of the scheduler's writes waits (bindings then overlap)",
    )
    parser.add_argument(
        "--prefill",
        type=float,
        default=0.0,
        help="claims mode: this fraction of the GPUs already held by running pods",
    )
    parser.add_argument("--top", type=int, default=0, help="print the top K allocations")
    parser.add_argument("--json", help="write the figures here as JSON")
    parser.add_argument("--nodes-one", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--pods-one", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--mode-one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.nodes_one:
        child(args)
        return
    results = []
    modes = args.mode.split(",")
    for mode in modes:
        if mode not in MODES:
            parser.error(f"unknown mode {mode!r}: one of {', '.join(MODES)}")
    print(
        f"{'mode':<19} {'nodes':>6} {'pods':>6} {'pods/s':>7} {'cpu ms':>6} {'B/node':>8} "
        f"{'traced B/pod':>13} {'RSS B/pod':>10} {'from up':>8} {'RSS MiB':>8}"
    )
    for mode, nodes, pods in itertools.product(modes, args.nodes, args.pods):
        cmd = [
            sys.executable,
            __file__,
            f"--nodes-one={nodes}",
            f"--pods-one={pods}",
            f"--mode-one={mode}",
            f"--frames={args.frames}",
            f"--top={args.top}",
            f"--write-latency={args.write_latency}",
            f"--prefill={args.prefill}",
        ]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        figures = json.loads(out.strip().splitlines()[-1])
        results.append(figures)
        print(
            f"{mode:<19} {nodes:>6} {pods:>6} {figures['pods_per_s']:>7.0f} "
            f"{figures['cpu_ms_per_pod']:>6.2f} "
            f"{figures['traced_bytes_per_node']:>8.0f} {figures['traced_bytes_per_pod']:>13.0f} "
            f"{figures['rss_bytes_per_pod']:>10.0f} "
            f"{figures['rss_bytes_per_pod_from_nodes_up']:>8.0f} "
            f"{figures['rss_mib_pods_bound']:>8.0f}"
            + ("" if figures["bound"] == pods else f"  (only {figures['bound']} bound)")
            + (
                f"  ({figures['devices_allocated_twice']} devices allocated twice!)"
                if figures["devices_allocated_twice"]
                else ""
            ),
            flush=True,
        )
        for line in figures.pop("top", []):
            print(line)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {
                    "args": {k: v for k, v in vars(args).items() if not k.endswith("_one")},
                    "results": results,
                },
                f,
                indent=2,
            )


if __name__ == "__main__":
    main()
