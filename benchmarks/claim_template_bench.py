"""ResourceClaimTemplate benchmark: how fast the controllers make one claim per pod.

    python benchmarks/claim_template_bench.py [--pods 5000] [--clients 64] [--backlog]
                                              [--json FILE]

The scheduler benchmark SchedulingWithResourceClaimTemplate/5000pods_500nodes can bind a
pod only once its claim exists and is named in `pod.status.resourceClaimStatuses`, so this
is its ceiling. The apistore and the controller manager run as their own processes (as
`drasim up` runs them) on embedded NATS and Postgres (or DRASIM_NATS_URL /
DRASIM_DATABASE_URL). One ResourceClaimTemplate in namespace `test`; `--pods` pods each
name it once.

- default: pods are created by `--clients` concurrent writers while the controllers run,
  as scheduler_perf creates them; claims_per_s counts from the first pod create to the
  last pod status naming its claim;
- `--backlog`: every pod exists before the controller manager starts; claims_per_s counts
  from its start (informer sync included) to the last recorded claim.

Also reported: the latency from a pod's create to its claim being recorded (p50/p99), and
a check that there is exactly one claim per pod.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from drasim.cli import launch
from drasim.common import codec, watch
from drasim.common.api import core_v1, resource_v1
from drasim.common.bus import messages
from drasim.common.bus.client import Bus
from drasim.common.client import ApiClient
from drasim.common.config import Config

NAMESPACE = "test"
TEMPLATE = "test-claim-template"
PAGE_SIZE = 500


def make_template() -> resource_v1.ResourceClaimTemplate:
    return codec.convert(
        {
            "metadata": {"name": TEMPLATE, "namespace": NAMESPACE},
            "spec": {
                "spec": {
                    "devices": {
                        "requests": [
                            {"name": "req-0", "exactly": {"deviceClassName": "test-class"}}
                        ]
                    }
                }
            },
        },
        resource_v1.ResourceClaimTemplate,
    )


def make_pod(i: int) -> core_v1.Pod:
    """scheduler_perf's `pod-with-claim-template.yaml`: a pause container using the claim."""
    return codec.convert(
        {
            "metadata": {"name": f"test-dra-{i}", "namespace": NAMESPACE},
            "spec": {
                "containers": [
                    {
                        "name": "pause",
                        "image": "registry.k8s.io/pause:3.10",
                        "resources": {"claims": [{"name": "resource"}]},
                    }
                ],
                "resourceClaims": [{"name": "resource", "resourceClaimTemplateName": TEMPLATE}],
            },
        },
        core_v1.Pod,
    )


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


async def start_service(
    module: str, nats_url: str, database_url: str, prefix: str, *, timeout: float
) -> launch.ServiceProcess:
    """Run `python -m <module>` and return once it is ready."""
    spec = launch.Launch.service(
        module, nats_url=nats_url, database_url=database_url, prefix=prefix, log_level="WARNING"
    )
    return await launch.ServiceProcess.start(
        spec, on_line=launch.prefixed(spec, sys.stderr), timeout=timeout
    )


async def list_claims(api: ApiClient) -> list[resource_v1.ResourceClaim]:
    """Every claim of the namespace, a page at a time (one reply must fit a NATS message)."""
    claims: list[resource_v1.ResourceClaim] = []
    token = ""
    while True:
        page = messages.list_result_decoder.decode(
            await api.request(
                messages.List(
                    resource="resourceclaims",
                    namespace=NAMESPACE,
                    limit=PAGE_SIZE,
                    continue_token=token,
                )
            )
        )
        claims += [codec.decode(item, resource_v1.ResourceClaim) for item in page.items]
        token = page.continue_token
        if not token:
            return claims


async def create_pods(api: ApiClient, count: int, clients: int) -> dict[str, float]:
    """Create the pods from `clients` writers; the time each create was acknowledged."""
    created: dict[str, float] = {}
    names = iter(range(count))

    async def writer() -> None:
        for i in names:
            pod = await api.create(make_pod(i))
            created[pod.metadata.name] = time.perf_counter()

    await asyncio.gather(*(writer() for _ in range(clients)))
    return created


async def watch_recorded(api: ApiClient, resource_version: int, count: int) -> dict[str, float]:
    """When each pod's status first names its claim, until `count` pods do."""
    recorded: dict[str, float] = {}
    async for event in watch.watch_resource(
        api.bus, core_v1.Pod, resource_version=resource_version
    ):
        pod = event.object
        if pod.status.resource_claim_statuses and pod.metadata.name not in recorded:
            recorded[pod.metadata.name] = time.perf_counter()
            if len(recorded) == count:
                break
    return recorded


async def run(args: argparse.Namespace, nats_url: str, database_url: str) -> dict[str, Any]:
    prefix = f"bench{uuid.uuid4().hex[:6]}"
    db = await launch.create_database(database_url)
    apistore = await start_service("drasim.apistore", nats_url, db, prefix, timeout=args.timeout)
    controllers = None
    bus = await Bus.connect(nats_url, prefix=prefix, name="bench")
    try:
        api = ApiClient(bus, actor="bench")
        await api.create(codec.convert({"metadata": {"name": NAMESPACE}}, core_v1.Namespace))
        await api.create(make_template())
        _, rv = await api.list(core_v1.Pod)
        watcher = asyncio.create_task(watch_recorded(api, rv, args.pods))
        if args.backlog:
            t_create = time.perf_counter()
            created = await create_pods(api, args.pods, args.clients)
            t_created = time.perf_counter()
            t0 = time.perf_counter()
            controllers = await start_service(
                "drasim.controllers", nats_url, db, prefix, timeout=args.timeout
            )
            ready_s = time.perf_counter() - t0
        else:
            controllers = await start_service(
                "drasim.controllers", nats_url, db, prefix, timeout=args.timeout
            )
            ready_s = 0.0
            t_create = t0 = time.perf_counter()
            created = await create_pods(api, args.pods, args.clients)
            t_created = time.perf_counter()
        recorded = await asyncio.wait_for(watcher, args.timeout)
        elapsed = max(recorded.values()) - t0
        claims = await list_claims(api)
        owners = {c.metadata.owner_references[0].uid for c in claims}
        latencies = [(recorded[name] - t) * 1000 for name, t in created.items() if name in recorded]
    finally:
        if controllers is not None:
            await controllers.stop()
        await apistore.stop()
        await bus.close()
    return {
        "pods": args.pods,
        "mode": "backlog" if args.backlog else "concurrent",
        "pods_created_per_s": args.pods / (t_created - t_create),
        "claims": len(claims),
        "claims_per_s": len(recorded) / elapsed,
        "elapsed_s": elapsed,
        "controllers_ready_s": ready_s,
        "create_to_recorded_p50_ms": percentile(latencies, 0.50),
        "create_to_recorded_p99_ms": percentile(latencies, 0.99),
        "one_claim_per_pod": len(claims) == len(owners) == args.pods,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=5000)
    parser.add_argument("--clients", type=int, default=64, help="concurrent pod writers")
    parser.add_argument("--backlog", action="store_true", help="create all pods first")
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--json", type=Path, help="also write the figures as JSON here")
    args = parser.parse_args()
    config = Config.from_env()
    with (
        tempfile.TemporaryDirectory() as tmp,
        launch.infrastructure(
            Path(tmp), nats_url=config.nats_url, database_url=config.database_url
        ) as infra,
    ):
        results = asyncio.run(run(args, infra.admin_nats_url, infra.admin_database_url))
    width = max(len(k) for k in results)
    for key, value in results.items():
        shown = f"{value:,.1f}" if isinstance(value, float) else str(value)
        print(f"{key:<{width}}  {shown}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    if not results["one_claim_per_pod"]:
        print(f"FAILED: {results['claims']} claims for {args.pods} pods")
        return 1
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
