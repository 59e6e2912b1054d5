"""What every service process shares: its command line, logging, the READY line, signals.

`drasim up` runs each service as `python -m drasim.<service> --nats-url ... --database-url ...`
and waits for the line starting with `READY` that `serve` prints once the service is serving.
SIGTERM and SIGINT stop the service gracefully.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import logging
import os
import signal
import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol

from prometheus_client import CollectorRegistry

from drasim.common import features, metrics, tracing, version
from drasim.common.bus.client import Bus
from drasim.common.config import Config, ConfigError
from drasim.common.featuregate import FeatureGate, FeatureGateError


def parse_args(
    name: str,
    argv: list[str] | None = None,
    add: Callable[[argparse.ArgumentParser], None] | None = None,
    *,
    required: Sequence[str] = ("--nats-url",),
) -> tuple[Config, argparse.Namespace]:
    """The command line every service shares (plus what `add` adds), with the environment
    filling what it leaves out; exits 2 naming the flags in `required` still missing.
    `args.feature_gates` is the `FeatureGate` its `--feature-gates` and
    `--emulated-version` make."""
    parser = argparse.ArgumentParser(prog=f"drasim-{name}")
    parser.add_argument("--nats-url")
    parser.add_argument("--nats-credentials", help="file 'user:password' for NATS")
    parser.add_argument("--database-url")
    parser.add_argument("--prefix")
    parser.add_argument("--log-level")
    parser.add_argument(
        "--metrics-port", type=int, help="serve Prometheus /metrics on this port (0: any free one)"
    )
    parser.add_argument("--metrics-host", default="127.0.0.1", help="address of /metrics")
    add_feature_gate_flags(parser)
    if add is not None:
        add(parser)
    args = parser.parse_args(argv)
    args.feature_gates = feature_gates(parser, args.feature_gates, args.emulated_version)
    try:
        config = Config.from_env(
            nats_url=args.nats_url,
            nats_credentials=args.nats_credentials,
            database_url=args.database_url,
            prefix=args.prefix,
            log_level=args.log_level,
        )
    except ConfigError as exc:
        parser.error(str(exc))
    missing = [flag for flag in required if not getattr(config, flag[2:].replace("-", "_"))]
    if missing:
        verb = "is" if len(missing) == 1 else "are"
        print(f"drasim-{name}: {' and '.join(missing)} {verb} required", file=sys.stderr)
        sys.exit(2)
    return config, args


def add_feature_gate_flags(
    parser: argparse.ArgumentParser, *, version_flag: str = "--emulated-version"
) -> None:
    """`--feature-gates` and the release to emulate (`--emulated-version`, as Kubernetes
    components take them; `version_flag` names it otherwise), read into
    `args.feature_gates` and `args.emulated_version`."""
    parser.add_argument(
        "--feature-gates",
        default="",
        metavar="KEY=VALUE,...",
        help="feature gates to set, e.g. DRAExtendedResource=false (see docs/feature-gates.md). "
        "Options are: " + ", ".join(features.DEFAULT.known_features()),
    )
    parser.add_argument(
        version_flag,
        dest="emulated_version",
        metavar="1.MINOR",
        help="the Kubernetes release to behave as: its feature gates' defaults and /version's "
        f"emulationMinor ({version.EMULATION_FLOOR}..{version.BINARY}, default {version.BINARY})",
    )


def feature_gates(
    parser: argparse.ArgumentParser,
    flag: str,
    emulated: str | None,
    *,
    version_flag: str = "--emulated-version",
    warn: bool = False,
) -> FeatureGate:
    """The gates `flag` sets at release `emulated`; exits 2 naming the flag that cannot be
    honoured (with upstream's reason). With `warn`, says which gates it sets that drasim
    registers without implementing (`drasim up` says it once for all its services)."""
    try:
        version.effective_version(emulated)
    except version.VersionError as exc:
        parser.error(f"{version_flag}: {exc}")
    try:
        gate = features.new_gate(flag, emulated=emulated)
    except FeatureGateError as exc:
        parser.error(f"--feature-gates: {exc}")
    for name in sorted(gate.explicit.keys() & features.NOT_IMPLEMENTED if warn else ()):
        print(
            f"{parser.prog}: warning: drasim registers feature gate {name} with Kubernetes' "
            "defaults but does not implement it beyond dropping its fields on write",
            file=sys.stderr,
        )
    return gate


def setup_logging(name: str, level: str) -> None:
    logging.basicConfig(
        level=level,
        format=f"%(asctime)s {name} %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )


def announce_ready(detail: str) -> None:
    """The line `drasim up` waits for; `metrics=<url>` in it says where /metrics is."""
    print(f"READY {detail}", flush=True)


async def wait_for_signal() -> None:
    """Return on SIGTERM or SIGINT."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)


async def serve_until_signal(
    args: argparse.Namespace,
    detail: str,
    *,
    registry: CollectorRegistry,
    refresh: metrics.Refresh | None = None,
) -> None:
    """What every service does once started: serve `/metrics` if `--metrics-port` asks,
    print the READY line (`detail`, then where the metrics are) and run until a signal."""
    async with metrics.serving(
        args.metrics_port, host=args.metrics_host, registry=registry, refresh=refresh
    ) as endpoint:
        announce_ready(detail + metrics.ready_detail(endpoint))
        await wait_for_signal()


class _Metrics(Protocol):
    @property
    def registry(self) -> CollectorRegistry: ...


class Component(Protocol):
    """A service's work on one NATS connection (the scheduler, the controller manager, a
    kubelet process), as `run_on_bus` runs it."""

    @property
    def metrics(self) -> _Metrics: ...

    async def start(self) -> None: ...

    async def stop(self) -> None: ...


def run_on_bus(
    name: str,
    config: Config,
    args: argparse.Namespace,
    build: Callable[[Bus], Component],
    detail: str,
    *,
    connection: str = "",
) -> int:
    """Connect to NATS, start what `build` makes of the connection, serve until a signal
    (`serve_until_signal`, READY line `detail`), then stop it and close the connection.

    These components hold the cluster in their informers' caches: once started, what they
    loaded is kept out of the collector's sight (`freeze_gc`), and so is what lives long
    enough afterwards (`freeze_survivors`)."""

    async def serve() -> None:
        bus = await Bus.connect(
            config.nats_url,
            prefix=config.prefix,
            name=connection or name,
            credentials=config.nats_credentials,
        )
        component = build(bus)
        try:
            await component.start()
            freeze_gc()
            freeze_survivors()
            await serve_until_signal(args, detail, registry=component.metrics.registry)
        finally:
            await component.stop()
            await bus.close()

    return run(name, serve, config.log_level)


def use_event_loop() -> str:
    """Run this process's asyncio on uvloop (its I/O and callbacks are in C: less CPU per
    NATS message and Postgres round trip) unless `DRASIM_LOOP=asyncio` asks for the
    standard loop or uvloop is not installed. Call before `asyncio.run`; answers the loop's
    name."""
    if os.environ.get("DRASIM_LOOP", "uvloop") != "asyncio":
        try:
            import uvloop
        except ImportError:
            pass
        else:
            asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    return event_loop_name()


def event_loop_name() -> str:
    """`uvloop` or `asyncio`: what `asyncio.run` will run on."""
    policy = type(asyncio.get_event_loop_policy())
    return "uvloop" if policy.__module__.startswith("uvloop") else "asyncio"


# Python collects its youngest generation every 700 new container objects by default; a
# service holding many thousands of cached objects then spends much of its time in the
# collector, which rarer collections of the younger generations spare it.
GC_THRESHOLDS = (10_000, 10, 10)


def freeze_gc() -> None:
    """Move everything alive now out of the collector's sight (`gc.freeze`): call once a
    service has loaded its caches, whose objects stay."""
    gc.collect()
    gc.freeze()


def freeze_survivors() -> None:
    """From now on, freeze what survives each collection of the middle or oldest
    generation, so that no collection walks the cache again.

    A collection walks every object of the generations it collects and holds the event
    loop until it is done. A process that caches the cluster (the scheduler, the
    controllers, a kubelet process, the load test's watches) tracks a few dozen objects
    per pod; what lives through two young collections there is almost always cache. Left
    to pile up in the oldest generation, it is walked whole by each full collection: with
    tens of thousands of pods a pause of seconds, which every pod start in flight waits
    out. Freezing only after full collections is not enough: the oldest generation is
    looked at once per million or so objects allocated, and walking those is still most
    of a second. Frozen, cache is freed by reference counting as before when its object
    is replaced or goes.

    The price is that a reference cycle through a frozen object is never collected.
    These processes make almost no cyclic garbage that old
    (`python_gc_objects_collected_total` at generation 2 stays in the tens); the
    apistore, which holds no cache but makes cyclic garbage per request, does not do
    this. Idempotent."""
    if _freeze_after_older_collection not in gc.callbacks:
        gc.callbacks.append(_freeze_after_older_collection)


def _freeze_after_older_collection(phase: str, info: dict[str, int]) -> None:
    if phase == "stop" and info["generation"] >= 1:
        gc.freeze()


def run(name: str, main: Callable[[], Awaitable[None]], level: str = "INFO") -> int:
    """Run a service's main coroutine until it returns; exit code 0 on a clean stop.

    Tracing is set up first (spans go to `OTEL_EXPORTER_OTLP_ENDPOINT` as service
    `drasim-<name>` if it is set) and flushed at the end.
    """
    setup_logging(name, level)
    tracing.setup(f"drasim-{name}")
    use_event_loop()
    gc.set_threshold(*GC_THRESHOLDS)
    try:
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(main())
    finally:
        tracing.shutdown()
    return 0
