"""`drasim up`: run a whole cluster in the foreground until Ctrl-C or SIGTERM.

It starts NATS and Postgres (embedded under the data directory unless URLs are given),
writes cluster.json for the other commands, then runs every service in `SERVICES` as its
own process and supervises them (`drasim.cli.supervisor`):

- a service prints a line starting with `READY` once it serves; every other line of its
  output is forwarded prefixed with `[name]`; when all are ready, `up` prints one line
  starting with `ready:`;
- a service, NATS or Postgres that dies afterwards is restarted (with back-off) and
  reported; one that cannot start makes `up` stop everything and exit 1;
- Ctrl-C or SIGTERM stops the services (SIGTERM, then SIGKILL after `STOP_TIMEOUT`), then
  the embedded servers, and `up` exits 0.

The cluster is Kubernetes 1.37, or the release `--kubernetes-version` names (its feature
gates' defaults), with `--feature-gates` set on top; both reach every service, refused
before anything starts if they cannot be honoured (`drasim.common.features`).

The cluster's nodes come from a cluster file (`--cluster`, default: KEP-5004's example,
`drasim.common.profiles.DEFAULT_CLUSTER`), refused before anything starts if it is bad.
Once the apistore is ready, `up` creates the file's DeviceClasses (with or without
kubelets of its own), then starts the other services and `--kubelets` kubelet processes
(`python -m drasim.kubelet --shard i/n`), each hosting every n-th node, with checkpoints
under `<data-dir>/nodes`; `ready:` follows once they are ready too. `--demo` then applies
KEP-5004's example Deployment and reports where each of its pods runs and which devices
each container got (`drasim.cli.demo`).

Children run in their own sessions, so a Ctrl-C in the terminal reaches only `up`, which
stops them in order: services before the servers they use.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import msgspec

from drasim.cli import apply, cluster, demo, kubeconfig, launch, supervisor
from drasim.cli.launch import Launch
from drasim.common import cluster_file, duration, features, nats_auth, runtime_config, service
from drasim.common.api import registry
from drasim.common.bus.client import Bus
from drasim.common.client import ApiClient
from drasim.common.config import Config
from drasim.common.embedded import free_port
from drasim.common.featuregate import FeatureGate
from drasim.common.runtime_config import DEFAULT as DEFAULT_RUNTIME_CONFIG
from drasim.common.runtime_config import RuntimeConfig
from drasim.controllers import dradriver

# Every service `up` runs, as the module `python -m` starts; the last dotted part names it.
APISTORE = "drasim.apistore"
SERVICES: tuple[str, ...] = (APISTORE, "drasim.controllers", "drasim.scheduler")
KUBELET = "drasim.kubelet"
# Whom each service connects to the embedded NATS as; other modules (tests' stand-ins)
# and `up` itself as the admin.
ADMIN = "admin"
_NATS_USERS = {
    APISTORE: "apistore",
    "drasim.controllers": "controllers",
    "drasim.scheduler": "scheduler",
}


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "up",
        help="run a local cluster in the foreground",
        description="Run a local cluster in the foreground until Ctrl-C or SIGTERM.",
    )
    parser.add_argument(
        "--demo", action="store_true", help="also load the demo workload once the cluster is up"
    )
    parser.add_argument(
        "--http-port", type=int, default=0, help="port of the Kubernetes API (default: a free one)"
    )
    parser.add_argument(
        "--cluster", type=Path, help="cluster file (default: the KEP-5004 example cluster)"
    )
    parser.add_argument(
        "--kubelets",
        type=int,
        help="kubelet processes sharing the nodes (default: 1; 0 with --services)",
    )
    service.add_feature_gate_flags(parser, version_flag="--kubernetes-version")
    runtime_config.add_flag(parser)
    parser.add_argument(
        "--compaction-interval",
        type=duration.non_negative_duration,
        metavar="DURATION",
        help="compact the event log and stream this often, keeping at least this much "
        "history (default: the cluster file's apistore.compactionInterval, else 5m or env "
        "DRASIM_COMPACTION_INTERVAL; 0: never; docs/apistore.md)",
    )
    # Tests substitute fake services here; users have no reason to.
    parser.add_argument(
        "--services",
        type=lambda text: tuple(text.split(",")),
        default=SERVICES,
        help=argparse.SUPPRESS,
    )
    parser.set_defaults(func=run, parser=parser)


def run(args: argparse.Namespace) -> int:
    """Flags and environment only: cluster.json is what this command writes, not reads."""
    gates = service.feature_gates(
        args.parser,
        args.feature_gates,
        args.emulated_version,
        version_flag="--kubernetes-version",
        warn=True,
    )
    config = Config.from_env(**cluster.cluster_flags(args))
    try:
        nodes_file = cluster_file.load(args.cluster)
    except cluster_file.ClusterFileError as exc:
        print(f"drasim: {exc}", file=sys.stderr)
        return 1
    # The cluster file's runtimeConfig, then the flag's keys over it.
    flag = ",".join(f for f in (nodes_file.runtime_config_flag(), args.runtime_config) if f)
    try:
        served = runtime_config.parse(flag)
    except runtime_config.RuntimeConfigError as exc:
        args.parser.error(f"--runtime-config: {exc}")
    # Substituted services (tests) come without nodes unless asked for.
    kubelets = args.kubelets if args.kubelets is not None else int(args.services == SERVICES)
    return asyncio.run(
        _up(
            config,
            modules=args.services,
            http_port=args.http_port,
            nodes_file=nodes_file,
            kubelets=min(max(kubelets, 0), len(nodes_file.nodes)),
            with_demo=args.demo,
            feature_gates=gates,
            runtime=served,
            apistore_args=_apistore_args(args, nodes_file),
        )
    )


def _apistore_args(args: argparse.Namespace, nodes_file: cluster_file.Cluster) -> list[str]:
    """The apistore's flags from `up`'s own, else from the cluster file's `apistore:` (which
    `cluster_file.load` checked); neither leaves the apistore's default (its environment's
    DRASIM_COMPACTION_INTERVAL, or 5m)."""
    interval = ""
    if args.compaction_interval is not None:
        interval = duration.format_go_duration(args.compaction_interval)
    elif nodes_file.spec.apistore is not None:
        interval = nodes_file.spec.apistore.compaction_interval
    return ["--compaction-interval", interval] if interval else []


async def _up(
    config: Config,
    *,
    modules: Sequence[str],
    nodes_file: cluster_file.Cluster,
    kubelets: int,
    with_demo: bool,
    http_port: int = 0,
    feature_gates: FeatureGate = features.DEFAULT,
    runtime: RuntimeConfig = DEFAULT_RUNTIME_CONFIG,
    apistore_args: Sequence[str] = (),
) -> int:
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stopping.set)
    config.data_dir.mkdir(parents=True, exist_ok=True)
    # Others may pass through (Postgres' account must reach its data) but not look in:
    # the data directory holds the cluster's credentials and state.
    config.data_dir.chmod(0o711)
    try:
        lock = supervisor.lock_data_dir(config.data_dir)
    except supervisor.SupervisorError as exc:
        supervisor.say(str(exc))
        return 1
    records = supervisor.ProcessRecords(config.data_dir)
    async with contextlib.AsyncExitStack() as stack:
        stack.callback(lock.close)
        orphans = await asyncio.to_thread(records.stop_orphans)
        if orphans:
            supervisor.say(f"stopped {len(orphans)} services an earlier up left running")
        shards = [[n.name for n in nodes_file.shard(i, kubelets)] for i in range(kubelets)]
        # Started in a thread, so that a signal meanwhile is noted rather than lost.
        infra = await asyncio.to_thread(
            stack.enter_context,
            launch.infrastructure(
                config.data_dir,
                nats_url=config.nats_url,
                database_url=config.database_url,
                nats_credentials=config.nats_credentials,
                nats_users=nats_auth.cluster_users(config.prefix, shards),
                prefix=config.prefix,
            ),
        )
        if stopping.is_set():
            return 0
        admin_credentials = infra.credentials(ADMIN)
        info = cluster.ClusterInfo(
            nats_url=infra.nats_url,
            nats_credentials=str(admin_credentials) if admin_credentials else None,
            database_url=infra.database_url,
            prefix=config.prefix,
            pid=os.getpid(),
        )
        cluster.write_cluster(config.data_dir, info)
        stack.callback(cluster.remove_cluster, config.data_dir, info.pid)
        own_args = {
            APISTORE: _write_kubeconfig(config, http_port or free_port()),
            # The emulated DRA drivers' controller reads the file's `drivers:`; the root
            # CA publisher gives every namespace the CA that signed the API's certificate.
            "drasim.controllers": [
                "--cluster", str(nodes_file.source.resolve()),
                "--root-ca-file", str(kubeconfig.ensure_serving_certs(config.data_dir).ca_cert),
            ],
        }  # fmt: skip
        if runtime.flag:
            own_args[APISTORE] += ["--runtime-config", runtime.flag]
        own_args[APISTORE] += apistore_args

        def service(module: str, user: str, args: list[str], name: str | None = None) -> Launch:
            """Where the service connects, as whom (`drasim.common.nats_auth`), and its
            own flags."""
            return Launch.service(
                module,
                nats_url=infra.nats_url,
                database_url=infra.database_url,
                prefix=config.prefix,
                nats_credentials=infra.credentials(user),
                feature_gates=feature_gates if module.startswith("drasim.") else None,
                args=[*args, *_metrics_argv(module)],
                name=name,
            )

        services = [
            service(module, _NATS_USERS.get(module, ADMIN), own_args.get(module, []))
            for module in modules
        ]
        nodes = [
            service(
                KUBELET,
                f"kubelet-{i}",
                [
                    "--cluster",
                    str(nodes_file.source.resolve()),
                    "--shard",
                    f"{i}/{kubelets}",
                    "--state-dir",
                    str((config.data_dir / "nodes").resolve()),
                ],
                name=f"kubelet-{i}",
            )
            for i in range(kubelets)
        ]
        ready_line = (
            f"ready: nats={infra.nats_url} postgres={_redact(infra.database_url)} "
            f"kubeconfig={kubeconfig.kubeconfig_path(config.data_dir)} "
            f"services={','.join(s.name for s in [*services, *nodes])}"
        )
        if nodes:
            ready_line += f" nodes={len(nodes_file.nodes)}"
        # The cluster file's objects go wherever the cluster's apistore is: this `up`'s,
        # or, with kubelets but no apistore of its own, the one the kubelets use.
        creates_objects = bool(nodes) or APISTORE in modules
        api: ApiClient | None = None
        if creates_objects or with_demo:
            bus = await Bus.connect(
                infra.nats_url,
                prefix=config.prefix,
                name="drasim-up",
                credentials=admin_credentials,
            )
            stack.push_async_callback(bus.close)
            api = ApiClient(bus, actor="drasim-up")

        async def create_objects() -> None:
            assert api is not None
            await _create_device_classes(api, nodes_file)

        async def when_ready() -> None:
            assert api is not None
            await _run_demo(api)

        def record_metrics(endpoints: dict[str, str]) -> None:
            """Say where each service's /metrics is, and keep it in cluster.json."""
            for name, url in endpoints.items():
                print(f"metrics: {name} {url}", flush=True)
            if endpoints:
                cluster.write_cluster(
                    config.data_dir, msgspec.structs.replace(info, metrics=endpoints)
                )

        # The apistore first: the other services' informers would only retry (and say so)
        # until it serves.
        stages = [
            [s for s in services if s.module == APISTORE],
            [s for s in services if s.module != APISTORE],
            nodes,
        ]
        return await supervisor.Supervisor(
            [stage for stage in stages if stage],
            stopping,
            records=records,
            servers=infra.embedded,
        ).run(
            ready_line,
            after_first_stage=create_objects if creates_objects else None,
            when_ready=when_ready if with_demo else None,
            on_ready=record_metrics,
        )


async def _create_device_classes(api: ApiClient, nodes_file: cluster_file.Cluster) -> None:
    """The cluster file's DeviceClasses and network-attached ResourceSlices, created (or
    updated) before any node registers, and with `drivers:` the RBAC of the drivers'
    service account, as a driver's manifests would bring it."""
    spec = nodes_file.spec
    objects: list[Any] = [*nodes_file.device_classes(), *spec.resource_slices]
    if nodes_file.drivers():
        objects += dradriver.rbac([driver.name for driver in nodes_file.drivers()])
    for obj in objects:
        info = registry.by_type(type(obj))
        print(f"[up] {await apply.apply_one(api, info, obj, '')}", flush=True)


async def _run_demo(api: ApiClient) -> None:
    """Apply the KEP example Deployment, then report its pods as they start (until stop)."""
    for line in await demo.apply_demo(api):
        print(f"[demo] {line}", flush=True)
    await demo.follow(api, out=lambda line: print(f"[demo] {line}", flush=True))


def _metrics_argv(module: str) -> list[str]:
    """drasim's own services serve /metrics on a free port, which their READY line names;
    substituted ones (tests) are not asked to. The port is chosen here, once, so a
    restarted service serves where the `metrics:` lines and cluster.json say (a container
    restarted by the kubelet keeps its pod's ports too)."""
    return ["--metrics-port", str(free_port())] if module.startswith("drasim.") else []


def _write_kubeconfig(config: Config, http_port: int) -> list[str]:
    """Write `<data-dir>/kubeconfig` for the apistore's HTTP API on `http_port`; returns the
    apistore's flags that serve it with the same token and certificate."""
    token = kubeconfig.load_or_create_token(config.data_dir)
    certs = kubeconfig.ensure_serving_certs(config.data_dir)
    kubeconfig.write(
        kubeconfig.kubeconfig_path(config.data_dir),
        f"https://127.0.0.1:{http_port}",
        token,
        certs.ca_cert,
        name=config.prefix,
    )
    return [
        "--http-port", str(http_port),
        "--http-token-file", str(kubeconfig.token_path(config.data_dir)),
        "--tls-cert-file", str(certs.cert),
        "--tls-private-key-file", str(certs.key),
    ]  # fmt: skip


def _redact(url: str) -> str:
    """The URL without its password, fit for a terminal."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))
