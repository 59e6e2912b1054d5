"""`drasim demo` (and `drasim up --demo`): apply KEP-5004's example DeviceClass and
Deployment, then show, for each of its pods once Running, its node, whether its device
came from DRA (with the special claim's name) or from a device plugin, and each
container's devices:

    pod default/demo-x2vqp on node dra-gpu-0: devices from DRA (special claim <name>)
      container demo: gpu.example.com/dra-gpu-0/gpu-0
    pod default/demo-k8tzs on node dp-gpu-0: devices from a device plugin
      container demo: example.com/gpu=gpu-1

Devices are read from `allocatedResourcesStatus` (named as upstream's kubelet names them,
`UpdateAllocatedResourcesStatus` in `pkg/kubelet/cm/dra/manager.go`): a claim's devices are
`<driver>/<pool>/<device>`, a device plugin's `<resource>=<device id>`. `drasim demo`
returns once every replica was shown; `up --demo` keeps showing new pods until it stops.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable

from drasim.cli import apply, session
from drasim.common import profiles, watch
from drasim.common.api import apps_v1, core_v1
from drasim.common.client import ApiClient

__all__ = ["DEMO_SELECTOR", "add_parser", "apply_demo", "describe_devices", "follow"]

DEMO_SELECTOR = "app=demo"
DEMO_DEPLOYMENT = "demo"
CLAIM_PREFIX = "claim:"


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "demo",
        help="apply the KEP-5004 example and show where its pods' devices come from",
    )
    parser.add_argument(
        "--timeout", type=float, default=120.0, help="seconds to wait for every replica"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    async def go() -> None:
        async with session.connect(args) as api:
            for line in await apply_demo(api):
                print(line, flush=True)
            deployment = await api.get(apps_v1.Deployment, DEMO_DEPLOYMENT, namespace="default")
            async with asyncio.timeout(args.timeout):
                await follow(api, out=print, until=deployment.spec.replicas or 1)

    try:
        asyncio.run(go())
    except TimeoutError:
        print(f"error: not every demo pod was running after {args.timeout:.0f}s", file=sys.stderr)
        return 1
    return 0


async def apply_demo(api: ApiClient) -> list[str]:
    """Apply the demo manifests; kubectl-style lines (`deployment.apps/demo created`)."""
    documents = apply.read_documents([str(profiles.DEMO_MANIFESTS)])
    return await apply.apply_documents(api, documents, "default")


def describe_devices(pod: core_v1.Pod) -> list[str]:
    """Where the pod runs, where its devices come from, and each container's devices."""
    statuses = [*pod.status.init_container_statuses, *pod.status.container_statuses]
    plugin_names = {
        r.name
        for s in statuses
        for r in s.allocated_resources_status
        if not r.name.startswith(CLAIM_PREFIX)
    }
    sources = []
    extended = pod.status.extended_resource_claim_status
    if extended is not None:
        sources.append(f"DRA (special claim {extended.resource_claim_name})")
    if plugin_names:
        sources.append("a device plugin")
    where = f"pod {pod.metadata.namespace}/{pod.metadata.name} on node {pod.spec.node_name}"
    lines = [f"{where}: devices from {' and '.join(sources) or 'nowhere (none requested)'}"]
    for status in statuses:
        devices = [
            h.resource_id if r.name.startswith(CLAIM_PREFIX) else f"{r.name}={h.resource_id}"
            for r in status.allocated_resources_status
            for h in r.resources
        ]
        lines.append(f"  container {status.name}: {', '.join(devices) or '<none>'}")
    return lines


async def follow(
    api: ApiClient,
    *,
    out: Callable[[str], None],
    namespace: str = "default",
    selector: str = DEMO_SELECTOR,
    until: int | None = None,
) -> None:
    """Report every pod matching `selector` once, when it is Running: until `until` pods
    were reported, or (None) until cancelled."""
    key, _, value = selector.partition("=")
    reported: set[str] = set()

    def report(pod: core_v1.Pod) -> None:
        if (
            pod.metadata.labels.get(key) == value
            and pod.status.phase == "Running"
            and pod.metadata.uid not in reported
        ):
            reported.add(pod.metadata.uid)
            for line in describe_devices(pod):
                out(line)

    pods, resource_version = await api.list(
        core_v1.Pod, namespace=namespace, label_selector=selector
    )
    for pod in sorted(pods, key=lambda p: p.metadata.name):
        report(pod)
    if until is not None and len(reported) >= until:
        return
    async for event in watch.watch_resource(
        api.bus, core_v1.Pod, resource_version=resource_version
    ):
        if event.type != "DELETED" and event.object.metadata.namespace == namespace:
            report(event.object)
            if until is not None and len(reported) >= until:
                return
