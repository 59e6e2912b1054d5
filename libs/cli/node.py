"""`drasim node fault|migrate`: device faults and KEP-5004's gradual transition.

    drasim node fault dra-gpu-0 gpu-3 --unhealthy
    drasim node migrate dp-gpu --to dra

`fault` flips a device's health in the node's probe: a DRA driver republishes its slice
without the device, a device plugin lowers the node's allocatable. `migrate` switches a
pool's device group between a device plugin and a DRA driver one node at a time, as the
KEP's rollout describes: cordon, let the pods using the group go (evicting them unless
`--no-evict`), switch, uncordon. Pods on other nodes keep running throughout.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable, Coroutine
from typing import Any

from drasim.cli import session
from drasim.common import errors, watch
from drasim.common.api import core_v1
from drasim.common.client import ApiClient
from drasim.common.cluster_file import Exposure
from drasim.kubelet import control
from drasim.kubelet.node_status import EXPOSURE_LABEL_PREFIX, POOL_LABEL

__all__ = ["add_parser", "fault", "migrate"]

DEFAULT_TIMEOUT = 300.0


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("node", help="fault devices, migrate node pools")
    commands = parser.add_subparsers(dest="node_command", required=True, metavar="COMMAND")

    p = commands.add_parser("fault", help="make a device of a node unhealthy or healthy again")
    p.add_argument("node")
    p.add_argument("device", help="device name (gpu-3), or driver/name (gpu.example.com/gpu-3)")
    health = p.add_mutually_exclusive_group(required=True)
    health.add_argument("--unhealthy", dest="healthy", action="store_false")
    health.add_argument("--healthy", dest="healthy", action="store_true")
    p.set_defaults(func=_run_fault)

    p = commands.add_parser(
        "migrate", help="switch a node pool's devices between a device plugin and DRA"
    )
    p.add_argument("pool")
    p.add_argument("--to", required=True, choices=["dra", "device-plugin"])
    p.add_argument("--group", default="", help="device group (needed if the pool has several)")
    p.add_argument(
        "--extended-resource-name",
        default="",
        help="name a device plugin advertises (default: the one in the cluster file)",
    )
    p.add_argument(
        "--no-evict",
        dest="evict",
        action="store_false",
        help="wait for the pods using the devices to go instead of deleting them",
    )
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, help="seconds per node")
    p.set_defaults(func=_run_migrate)


class NodeCommandError(Exception):
    """The command cannot go on; the message says why."""


async def fault(api: ApiClient, node: str, device: str, *, healthy: bool) -> str:
    reply = await control.send(
        api.bus, node, control.SetDeviceHealth(device=device, healthy=healthy)
    )
    if not reply.ok:
        raise NodeCommandError(reply.message)
    return reply.message


async def migrate(
    api: ApiClient,
    pool: str,
    *,
    to: Exposure,
    group: str = "",
    extended_resource_name: str = "",
    evict: bool = True,
    timeout: float = DEFAULT_TIMEOUT,
    out: Callable[[str], None] = print,
) -> None:
    """Switch every node of `pool` to `to`, one node after the other."""
    nodes, _ = await api.list(core_v1.Node, label_selector=f"{POOL_LABEL}={pool}")
    if not nodes:
        raise NodeCommandError(f"no nodes in pool {pool}")
    group = group or _only_group(pool, nodes)
    for node in sorted(nodes, key=lambda n: n.metadata.name):
        name = node.metadata.name
        if node.metadata.labels.get(EXPOSURE_LABEL_PREFIX + group) == to:
            out(f"node/{name}: {group} already exposed through {to}")
            continue
        cordoned_before = node.spec.unschedulable
        if not cordoned_before:
            await _cordon(api, name, True)
            out(f"node/{name} cordoned")
        async with asyncio.timeout(timeout):
            command = control.SetExposure(
                group=group, exposure=to, extended_resource_name=extended_resource_name
            )
            while not (reply := await control.send(api.bus, name, command)).ok:
                if not reply.pods:
                    raise NodeCommandError(reply.message)
                await _let_pods_go(api, name, reply.pods, evict=evict, out=out)
        out(reply.message)
        if not cordoned_before:
            await _cordon(api, name, False)
            out(f"node/{name} uncordoned")


def _only_group(pool: str, nodes: list[core_v1.Node]) -> str:
    groups = sorted(
        {
            label.removeprefix(EXPOSURE_LABEL_PREFIX)
            for node in nodes
            for label in node.metadata.labels
            if label.startswith(EXPOSURE_LABEL_PREFIX)
        }
    )
    if len(groups) != 1:
        raise NodeCommandError(
            f"pool {pool} has device groups {', '.join(groups) or 'none'}: name one with --group"
        )
    return groups[0]


async def _cordon(api: ApiClient, node: str, unschedulable: bool) -> None:
    await api.patch(core_v1.Node, node, {"spec": {"unschedulable": unschedulable or None}})


async def _let_pods_go(
    api: ApiClient, node: str, pods: list[str], *, evict: bool, out: Callable[[str], None]
) -> None:
    """Delete (or wait for) `pods` until none runs on `node` any more."""
    waiting = set(pods)
    listed, resource_version = await api.list(core_v1.Pod, field_selector=f"spec.nodeName={node}")
    present = {f"{p.metadata.namespace}/{p.metadata.name}": p for p in listed}
    for key in sorted(waiting):
        pod = present.get(key)
        if pod is None or pod.status.phase in ("Succeeded", "Failed"):
            waiting.discard(key)
        elif evict:
            out(f"node/{node}: evicting pod {key}")
            namespace, name = key.split("/", 1)
            try:
                await api.delete(core_v1.Pod, name, namespace=namespace)
            except errors.NotFound:
                waiting.discard(key)
        else:
            out(f"node/{node}: waiting for pod {key}")
    if not waiting:
        return
    async for event in watch.watch_resource(
        api.bus, core_v1.Pod, resource_version=resource_version, node=node
    ):
        pod = event.object
        key = f"{pod.metadata.namespace}/{pod.metadata.name}"
        if event.type == "DELETED" or pod.status.phase in ("Succeeded", "Failed"):
            waiting.discard(key)
            if not waiting:
                return


def _run_fault(args: argparse.Namespace) -> int:
    async def go() -> str:
        async with session.connect(args) as api:
            return await fault(api, args.node, args.device, healthy=args.healthy)

    return _report(go)


def _run_migrate(args: argparse.Namespace) -> int:
    async def go() -> None:
        async with session.connect(args) as api:
            await migrate(
                api,
                args.pool,
                to=args.to,
                group=args.group,
                extended_resource_name=args.extended_resource_name,
                evict=args.evict,
                timeout=args.timeout,
            )

    return _report(go)


def _report(go: Callable[[], Coroutine[Any, Any, str | None]]) -> int:
    try:
        result = asyncio.run(go())
    except NodeCommandError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except TimeoutError:
        print("error: timed out waiting for the node's pods to go", file=sys.stderr)
        return 1
    if result:
        print(result)
    return 0
