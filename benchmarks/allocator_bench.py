"""DRA allocator benchmark: the per-node Filter cost at scheduler_perf scale (upstream
`test/integration/scheduler_perf/dra/extendedresource/performance-config.yaml`).

    python benchmarks/allocator_bench.py [--nodes 500] [--devices 10] [--classes 25]

Builds the `ExtendedResource_25Classes / 5000pods_500nodes` shape: every node has one
ResourceSlice of `test-driver.cdi.k8s.io` with `--devices` devices, and every class selects
`device.driver == "test-driver.cdi.k8s.io"`. Prints:
- snapshot_build: indexing all slices once;
- cel_first / cel_next / cel_quantity: CEL cost per device for the first selector a device
  sees, for a further selector, and for a quantity comparison (its functions run in
  Python); each converts the device's CEL input again, as no per-device CEL state is kept;
- allocate_cold: the first `allocate` for a node (indexes the node, evaluates the class
  selector on its devices);
- allocate_warm: one `allocate` for a pod's special claim with one 1-device request on one
  node, as the Filter makes it for each node, with half of the devices already allocated;
- allocate_full_node: the same on a node whose devices are all allocated (returns None);
- filter_all_nodes: one pod's Filter over every node (`--nodes` calls);
- node_capacity: `node_device_capacity` for one node and class (NodeResourcesFit scoring).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from drasim.common import codec
from drasim.common.api import core_v1, resource_v1
from drasim.scheduler.plugins.dynamic_resources import extended
from drasim.scheduler.plugins.dynamic_resources.allocator import (
    Allocator,
    DeviceID,
    Snapshot,
    node_device_capacity,
)

DRIVER = "test-driver.cdi.k8s.io"


def make_nodes(count: int) -> list[core_v1.Node]:
    return [
        codec.convert({"metadata": {"name": f"scheduler-perf-dra-{i}"}}, core_v1.Node)
        for i in range(count)
    ]


def make_slices(nodes: list[core_v1.Node], devices: int) -> list[resource_v1.ResourceSlice]:
    return [
        codec.convert(
            {
                "metadata": {"name": f"{node.metadata.name}-{DRIVER}"},
                "spec": {
                    "driver": DRIVER,
                    "nodeName": node.metadata.name,
                    "pool": {"name": node.metadata.name, "generation": 1, "resourceSliceCount": 1},
                    "devices": [
                        {
                            "name": f"gpu-{d}",
                            "attributes": {"index": {"int": d}, "model": {"string": "test"}},
                            "capacity": {"memory": {"value": "40Gi"}},
                        }
                        for d in range(devices)
                    ],
                },
            },
            resource_v1.ResourceSlice,
        )
        for node in nodes
    ]


def make_classes(count: int) -> dict[str, resource_v1.DeviceClass]:
    return {
        f"test-class-{i}": codec.convert(
            {
                "metadata": {"name": f"test-class-{i}"},
                "spec": {
                    "selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}],
                    "extendedResourceName": f"example.com/gpu-{i}",
                },
            },
            resource_v1.DeviceClass,
        )
        for i in range(count)
    }


def special_claim(
    index: int, classes: dict[str, resource_v1.DeviceClass]
) -> resource_v1.ResourceClaim:
    """The node-specific special claim of pod `index`, built as the plugin builds it."""
    pod = codec.convert(
        {
            "metadata": {"name": f"pod-{index}", "namespace": "default", "uid": f"uid-{index}"},
            "spec": {
                "containers": [
                    {
                        "name": "pause",
                        "resources": {"requests": {f"example.com/gpu-{index % len(classes)}": "1"}},
                    }
                ]
            },
        },
        core_v1.Pod,
    )
    by_name = {c.spec.extended_resource_name: c for c in classes.values()}
    claim = extended.new_special_claim(pod)
    claim.spec.devices.requests, _ = extended.device_requests_for_pod(pod, by_name.get)
    return claim


def per_call_us(calls: int, fn: Callable[[int], object]) -> tuple[float, float]:
    """Median and p99 of single-call times, in µs."""
    samples = []
    for i in range(calls):
        start = time.perf_counter()
        fn(i)
        samples.append((time.perf_counter() - start) * 1e6)
    samples.sort()
    return statistics.median(samples), samples[int(len(samples) * 0.99) - 1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--devices", type=int, default=10)
    parser.add_argument("--classes", type=int, default=25)
    parser.add_argument("--calls", type=int, default=20000)
    args = parser.parse_args()

    nodes = make_nodes(args.nodes)
    slices = make_slices(nodes, args.devices)
    classes = make_classes(args.classes)
    claims = [special_claim(i, classes) for i in range(args.classes)]

    start = time.perf_counter()
    snapshot = Snapshot(slices)
    build_ms = (time.perf_counter() - start) * 1e3
    print(f"snapshot_build: {build_ms:.1f} ms for {args.nodes} slices")

    # CEL cost per device, measured on a fresh snapshot so nothing is cached yet.
    fresh = Snapshot(slices)
    total_devices = args.nodes * args.devices
    first = _cel_pass(fresh, nodes, 'device.driver != ""')
    following = _cel_pass(fresh, nodes, f'device.attributes["{DRIVER}"].index >= 0')
    print(f"cel_first: {first / total_devices:.2f} µs/device (the first selector)")
    quantity = _cel_pass(
        fresh, nodes, f'device.capacity["{DRIVER}"].memory.compareTo(quantity("40Gi")) >= 0'
    )
    print(f"cel_next: {following / total_devices:.2f} µs/device (another selector)")
    print(f"cel_quantity: {quantity / total_devices:.2f} µs/device (compareTo(quantity(...)))")

    cold = Allocator(Snapshot(slices), classes, set())
    median, p99 = per_call_us(args.nodes, lambda i: cold.allocate(nodes[i], [claims[0]]))
    print(f"allocate_cold: median {median:.1f} µs, p99 {p99:.1f} µs (first call for a node)")

    # Half the devices of every node are taken; node 0 is full.
    allocated: set[DeviceID] = {
        (DRIVER, node.metadata.name, f"gpu-{d}")
        for n, node in enumerate(nodes)
        for d in range(args.devices if n == 0 else args.devices // 2)
    }
    alloc = Allocator(snapshot, classes, allocated)
    for node in nodes:  # warm the per-node views and CEL results, as earlier pods would
        for claim in claims:
            alloc.allocate(node, [claim])

    def warm(i: int) -> None:
        assert alloc.allocate(nodes[1 + i % (args.nodes - 1)], [claims[i % len(claims)]])

    def full(i: int) -> None:
        assert alloc.allocate(nodes[0], [claims[i % len(claims)]]) is None

    median, p99 = per_call_us(args.calls, warm)
    print(f"allocate_warm: median {median:.1f} µs, p99 {p99:.1f} µs per call")
    median, p99 = per_call_us(args.calls, full)
    print(f"allocate_full_node: median {median:.1f} µs, p99 {p99:.1f} µs per call")

    def filter_all(i: int) -> None:
        claim = claims[i % len(claims)]
        for node in nodes:
            alloc.allocate(node, [claim])

    median, _ = per_call_us(max(1, args.calls // args.nodes), filter_all)
    print(f"filter_all_nodes: median {median / 1e3:.2f} ms per pod over {args.nodes} nodes")

    cls = classes["test-class-0"]

    def capacity(i: int) -> None:
        node_device_capacity(nodes[i % args.nodes], snapshot, cls, allocated)

    median, p99 = per_call_us(args.calls, capacity)
    print(f"node_capacity: median {median:.1f} µs, p99 {p99:.1f} µs per call")


def _cel_pass(
    snapshot: Snapshot,
    nodes: list[core_v1.Node],
    expression: str,
) -> float:
    """µs to evaluate one new selector on every device (node views built beforehand)."""
    probe = codec.convert(
        {
            "metadata": {"name": "probe"},
            "spec": {"selectors": [{"cel": {"expression": expression}}]},
        },
        resource_v1.DeviceClass,
    )
    everything = resource_v1.DeviceClass()
    for node in nodes:  # index the nodes first: only CEL is timed below
        node_device_capacity(node, snapshot, everything, set())
    start = time.perf_counter()
    for node in nodes:
        node_device_capacity(node, snapshot, probe, set())
    return (time.perf_counter() - start) * 1e6


if __name__ == "__main__":
    main()
