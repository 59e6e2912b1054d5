"""Scheduling-cycle benchmark: the scheduler's own CPU per pod, without NATS or Postgres.

    python benchmarks/scheduling_cycle_bench.py [--nodes 500] [--classes 25] [--pods 5000]
        [--device-plugin | --mixed] [--profile out.prof] [--json FILE]

Builds the shape of `ExtendedResource_25Classes/5000pods_500nodes` in memory (nodes with
cpu 4, memory 32Gi, pods 110, one ResourceSlice of 10 devices each, classes mapping
`example.com/gpu-<i>`; with `--device-plugin` the nodes advertise `foo.com/bar-<i>` capacity
instead, as `SchedulingWithExtendedResource`) and runs the default profile's scheduling
cycle for each pod: snapshot, PreFilter, Filter, Score, select, assume, Reserve. The
binding is taken as done at once (the assumed pod and its in-flight allocation stay), so
the figure is an upper bound for `drasim bench`, which adds the API writes and informers.
Prints pods/s for the first and second half (the second is `drasim bench`'s measured
phase: init pods already placed) and the time per extension point.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import random
import time
from collections import defaultdict

from drasim.common import codec
from drasim.common.api import core_v1, resource_v1
from drasim.scheduler import framework, schedule_one
from drasim.scheduler.cache import Cache, Snapshot
from drasim.scheduler.dra_manager import DraManager
from drasim.scheduler.framework import CycleState
from drasim.scheduler.server import new_default_framework

DRIVER = "test-driver.cdi.k8s.io"


def make_node(
    i: int, device_plugin: bool, classes: int, resource: str = "foo.com/bar-", count: int = 10
) -> core_v1.Node:
    resources = {"cpu": "4", "memory": "32Gi", "pods": "110"}
    if device_plugin:
        resources[f"{resource}{i % classes}"] = str(count)
    return codec.convert(
        {
            "metadata": {"name": f"scheduler-perf-dra-{i}", "uid": f"node-{i}"},
            "status": {
                "capacity": resources,
                "allocatable": resources,
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        },
        core_v1.Node,
    )


def make_slice(node: core_v1.Node, count: int = 10) -> resource_v1.ResourceSlice:
    name = node.metadata.name
    return codec.convert(
        {
            "metadata": {"name": f"{name}-slice", "resourceVersion": "1"},
            "spec": {
                "driver": DRIVER,
                "nodeName": name,
                "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
                "devices": [
                    {"name": f"instance-{d}", "attributes": {"index": {"int": d}}}
                    for d in range(count)
                ],
            },
        },
        resource_v1.ResourceSlice,
    )


def make_class(i: int) -> resource_v1.DeviceClass:
    return codec.convert(
        {
            "metadata": {"name": f"test-class-{i}", "resourceVersion": "1"},
            "spec": {
                "selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}],
                "extendedResourceName": f"example.com/gpu-{i}",
            },
        },
        resource_v1.DeviceClass,
    )


def make_pod(i: int, resource: str, job: bool = False) -> core_v1.Pod:
    """Pod `i` asking one `resource`; `job`: as `drasim loadtest`'s Job pods, whose specs
    differ pod to pod (container named after the Job, hostname `<job>-<index>`)."""
    container = f"job-{i}" if job else "pause"
    hostname = f"job-{i}-0" if job else ""
    return codec.convert(
        {
            "metadata": {
                "name": f"test-dra-{i}",
                "namespace": "default",
                "uid": f"pod-{i}",
                "resourceVersion": "1",
            },
            "spec": {
                "hostname": hostname,
                "containers": [
                    {
                        "name": container,
                        "image": "registry.k8s.io/pause:3.10",
                        "resources": {"requests": {resource: "1"}, "limits": {resource: "1"}},
                    }
                ],
            },
        },
        core_v1.Pod,
    )


async def run(args: argparse.Namespace) -> dict[str, float]:
    dra = DraManager()
    fwk = new_default_framework(object(), dra)  # type: ignore[arg-type]  # no API call here
    cache = Cache()
    snapshot = Snapshot()
    for i in range(args.classes):
        dra.on_class_add(make_class(i))
    for i in range(args.nodes):
        if args.mixed:  # even: 8 DRA GPUs; odd: 2 of a device plugin, the same name
            node = make_node(i, i % 2 == 1, 1, "example.com/gpu-", 2)
            if i % 2 == 0:
                dra.on_slice_add(make_slice(node, 8))
            cache.add_node(node)
            continue
        node = make_node(i, args.device_plugin, args.classes)
        cache.add_node(node)
        if not args.device_plugin:
            dra.on_slice_add(make_slice(node))
    prefix = "foo.com/bar-" if args.device_plugin else "example.com/gpu-"
    pods = [make_pod(i, f"{prefix}{i % args.classes}", args.job_pods) for i in range(args.pods)]
    rng = random.Random(1)
    points: dict[str, float] = defaultdict(float)
    halves: list[float] = []
    unschedulable = 0
    half = args.pods // 2
    profiler = cProfile.Profile() if args.profile else None
    started = time.perf_counter()
    for i, pod in enumerate(pods):
        if i == half:
            halves.append(time.perf_counter() - started)
            started = time.perf_counter()
            if profiler is not None:
                profiler.enable()
        state = CycleState()
        t0 = time.perf_counter()
        cache.update_snapshot(snapshot)
        t1 = time.perf_counter()
        try:
            result = schedule_one.schedule_pod(
                _Sched(cache, snapshot, fwk, rng),  # type: ignore[arg-type]
                state,
                pod,
            )
        except framework.FitError:
            unschedulable += 1
            continue
        t2 = time.perf_counter()
        assumed = codec.convert(codec.to_builtins(pod), core_v1.Pod)
        assumed.spec.node_name = result.suggested_host
        cache.assume_pod(assumed)
        status = await fwk.run_reserve_plugins_reserve(state, assumed, result.suggested_host)
        assert framework.is_success(status), status
        t3 = time.perf_counter()
        points["snapshot"] += t1 - t0
        points["schedule_pod"] += t2 - t1
        points["assume+reserve"] += t3 - t2
    halves.append(time.perf_counter() - started)
    if profiler is not None:
        profiler.disable()
        profiler.dump_stats(args.profile)
    second = args.pods - half
    figures = {
        "pods_per_s_first_half": half / halves[0],
        "pods_per_s_second_half": second / halves[1],
        "unschedulable": unschedulable,
        **{f"ms_per_pod_{k}": 1e3 * v / args.pods for k, v in points.items()},
    }
    return figures


class _Sched:
    """The parts of `Scheduler` that `schedule_pod` reads."""

    def __init__(
        self, cache: Cache, snapshot: Snapshot, fwk: framework.Framework, rng: random.Random
    ):
        self.cache, self.snapshot, self.framework, self.rng = cache, snapshot, fwk, rng


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--classes", type=int, default=25)
    parser.add_argument("--pods", type=int, default=5000)
    parser.add_argument("--device-plugin", action="store_true")
    parser.add_argument(
        "--mixed",
        action="store_true",
        help="cluster_soak.py's cluster: half the nodes with 8 DRA GPUs, half with 2 of a "
        "device plugin, all as example.com/gpu-0 (use with --classes 1)",
    )
    parser.add_argument(
        "--job-pods",
        action="store_true",
        help="every pod's spec its own, as Job pods' are (container and hostname per Job)",
    )
    parser.add_argument("--profile", help="write a cProfile of the second half here")
    parser.add_argument("--json", help="write the figures here as JSON")
    args = parser.parse_args()
    figures = asyncio.run(run(args))
    for key, value in figures.items():
        print(f"{key}: {value:.3f}" if isinstance(value, float) else f"{key}: {value}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), **figures}, f, indent=2)


if __name__ == "__main__":
    main()
