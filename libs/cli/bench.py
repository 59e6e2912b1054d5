"""`drasim bench`: upstream scheduler_perf workloads against the apistore and the scheduler.

drasim bench ExtendedResource/fast
drasim bench ExtendedResource_25Classes/5000pods_500nodes --json result.json
drasim bench --list

The workloads live in `benchmarks/scheduler_perf/performance-config.yaml` in upstream's
shape (ops with `countParam`s, object templates with `{{.Index}}`). A run starts embedded
NATS and Postgres (or uses `--nats-url` / `--database-url`, with a fresh database and
subject prefix), then the apistore and the scheduler as their own processes, as in a real
cluster, and the controller manager too when the workload creates ResourceClaimTemplates.
Nodes, ResourceSlices and DeviceClasses are created directly through the API (no kubelets,
no drivers). Then the init pods are created and all bound, then the measured pods.

What is reported, as scheduler_perf does it:
- SchedulingThroughput: a one-second ticker counts the measured pods seen bound (through a
  pod watch); the first sample only sets the baseline, an interval with no new binding is
  merged into the next one, and the last, partial interval is dropped. Average and the
  50/90/99th percentiles (`ceil(n*q/100)`-th smallest) of those samples. A workload that
  binds everything within the first second or two has no samples (upstream: "Failed to
  measure"); `throughput_overall` (measured pods over first create → last binding) is
  given for every workload.
- attempts: the scheduler records each attempt as an Event on the pod, `Scheduled` when it
  bound the pod and `FailedScheduling` when the attempt failed (kube-scheduler's
  `scheduler_schedule_attempts_total` counts the same outcomes). An attempt that repeats
  the last one's message raises the `count` of that Event (client-go's event aggregation)
  instead of adding one, so the bench watches Events and counts, per Event, how much its
  `count` grew: an Event first seen counts its whole `count`.

At the end it checks, over every ResourceClaim in the cluster, that no device is allocated
twice, and that every measured pod is bound; either failing makes the exit code 1.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import fnmatch
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import msgspec
import psutil
import yaml

from drasim.cli import cluster
from drasim.common import errors, service
from drasim.common.api import registry
from drasim.common.bus import messages, subjects
from drasim.common.bus.client import Bus
from drasim.common.client import ApiClient, watch_raw
from drasim.common.config import Config, database_name, with_database
from drasim.common.embedded import EmbeddedNats, EmbeddedPostgres

CONFIG = Path(__file__).resolve().parents[2] / "benchmarks" / "scheduler_perf"
CONFIG_FILE = "performance-config.yaml"
DEFAULT_NODE_TEMPLATE = "templates/node-default.yaml"

SAMPLE_INTERVAL = 1.0  # upstream `throughputSampleInterval`
CREATE_CONCURRENCY = 64  # creates in flight at once (the apistore pipelines them)
LIST_PAGE = 500  # one list reply must fit in a NATS message
READY_TIMEOUT = 60.0
GENERATE_NAME_TRIES = 8


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "bench",
        help="run an upstream scheduler_perf workload and report SchedulingThroughput",
        description=__doc__.split("\n\n")[0],
    )
    p.add_argument("workload", nargs="?", help="TEST/WORKLOAD, e.g. ExtendedResource/fast")
    p.add_argument("--list", action="store_true", help="list the workloads and exit")
    p.add_argument("--json", type=Path, metavar="FILE", help="also write the result as JSON")
    p.add_argument(
        "--keep",
        action="store_true",
        help="leave the cluster running after the run (until Ctrl-C) to inspect it",
    )
    p.add_argument(
        "--config",
        type=Path,
        default=CONFIG / CONFIG_FILE,
        help="workload configuration (default: the source tree's "
        "benchmarks/scheduler_perf/performance-config.yaml)",
    )
    p.add_argument(
        "--stall-timeout",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="give up waiting for pods to bind after this long without a new binding",
    )
    p.add_argument(
        "--timeout",
        type=float,
        metavar="SECONDS",
        help="stop waiting for the measured pods after this long and report what was bound",
    )
    p.set_defaults(func=run)


# --- workloads ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Workload:
    """One workload of a test, its ops' params filled in."""

    name: str  # "Test/workload"
    ops: list[dict[str, Any]]
    params: dict[str, int]
    threshold: float | None
    base: Path  # templates are relative to the config file

    def count(self, op: dict[str, Any], key: str = "count") -> int:
        """An op's count: literal, or a `$param`; 1 when it has neither."""
        param = op.get(f"{key}Param")
        if param is not None:
            return int(self.params[param.removeprefix("$")])
        return int(op.get(key, 1))

    @property
    def measured_namespace(self) -> str:
        measured = [op for op in self.ops if op.get("collectMetrics")]
        if len(measured) != 1:
            raise ValueError(f"{self.name}: exactly one op must have collectMetrics: true")
        return measured[0]["namespace"]

    @property
    def namespaces(self) -> list[str]:
        return list(dict.fromkeys(op["namespace"] for op in self.ops if op.get("namespace")))

    @property
    def needs_controllers(self) -> bool:
        """Pods using a ResourceClaimTemplate get their claims from the ResourceClaim
        controller, so the controller manager must run."""
        return any(
            _template_kind(self.base / op["templatePath"]) == "ResourceClaimTemplate"
            for op in self.ops
            if op["opcode"] == "createAny"
        )


def load_workloads(path: Path) -> dict[str, Workload]:
    """Every `Test/workload` of the configuration file, in file order."""
    tests = yaml.safe_load(path.read_text())
    workloads: dict[str, Workload] = {}
    for test in tests:
        for w in test["workloads"]:
            name = f"{test['name']}/{w['name']}"
            workloads[name] = Workload(
                name=name,
                ops=test["workloadTemplate"],
                params=w.get("params", {}),
                threshold=w.get("threshold"),
                base=path.parent,
            )
    return workloads


def _template_kind(path: Path) -> str:
    return yaml.safe_load(path.read_text())["kind"]


class Template:
    """An object template, parsed once; `render(i)` is the JSON of object number i.

    Placeholders are upstream's Go template forms that the workloads use: `{{.Index}}` and
    `{{Mod .Index N}}`. They sit inside YAML strings, so they are substituted in the JSON
    text, with no YAML parse per object.
    """

    _PLACEHOLDER = re.compile(r"\{\{\s*(?:\.Index|Mod\s+\.Index\s+(\d+))\s*\}\}")

    def __init__(self, path: Path) -> None:
        doc = yaml.safe_load(path.read_text())
        self.info = registry.by_api_version_kind(doc["apiVersion"], doc["kind"])
        metadata = doc.get("metadata", {})
        self.namespace = metadata.get("namespace", "")
        self.generated = "generateName" in metadata and "name" not in metadata
        self._json = msgspec.json.encode(doc).decode()
        self._static = self._PLACEHOLDER.search(self._json) is None

    def render(self, index: int) -> bytes:
        if self._static:
            return self._json.encode()

        def value(m: re.Match[str]) -> str:
            return str(index % int(m.group(1)) if m.group(1) else index)

        return self._PLACEHOLDER.sub(value, self._json).encode()


# --- watching what the scheduler does ------------------------------------------------------


class _Meta(msgspec.Struct):
    name: str = ""
    namespace: str = ""
    annotations: dict[str, str] = {}


class _PodSpec(msgspec.Struct, rename="camel"):
    node_name: str = ""


class _PodView(msgspec.Struct):
    """The little of a pod the bench reads (msgspec's "view struct" tip)."""

    metadata: _Meta = msgspec.field(default_factory=_Meta)
    spec: _PodSpec = msgspec.field(default_factory=_PodSpec)


class _InvolvedObject(msgspec.Struct):
    namespace: str = ""
    name: str = ""


class _EventView(msgspec.Struct, rename="camel"):
    metadata: _Meta = msgspec.field(default_factory=_Meta)
    reason: str = ""
    involved_object: _InvolvedObject = msgspec.field(default_factory=_InvolvedObject)
    count: int = 0


class _Device(msgspec.Struct):
    driver: str = ""
    pool: str = ""
    device: str = ""


class _DeviceResults(msgspec.Struct):
    results: list[_Device] = []


class _Allocation(msgspec.Struct):
    devices: _DeviceResults = msgspec.field(default_factory=_DeviceResults)


class _ClaimStatus(msgspec.Struct):
    allocation: _Allocation | None = None


class _ClaimView(msgspec.Struct):
    metadata: _Meta = msgspec.field(default_factory=_Meta)
    status: _ClaimStatus = msgspec.field(default_factory=_ClaimStatus)


_pod_decoder = msgspec.json.Decoder(_PodView)
_event_decoder = msgspec.json.Decoder(_EventView)
_claim_decoder = msgspec.json.Decoder(_ClaimView)
_name_decoder = msgspec.json.Decoder(_PodView)  # only metadata.name is read


class ClusterTracker:
    """Pods seen bound and scheduling attempts, per namespace, from two watches.

    As upstream's collector, a pod counts as scheduled the first time it is seen with a
    `spec.nodeName`. Attempts are counted from the scheduler's Events: repeated attempts
    share one Event whose `count` grows, so each ADDED or MODIFIED Event adds what its
    `count` grew since it was last seen (all of it when first seen).
    """

    def __init__(self, bus: Bus) -> None:
        self.bus = bus
        self.bound: dict[str, dict[str, float]] = {}  # namespace -> pod -> when seen bound
        self.events: dict[str, Counter[str]] = {}  # namespace -> reason -> attempts
        self._event_counts: dict[tuple[str, str], int] = {}  # (namespace, name) -> count
        self._changed = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self, resource_version: int) -> None:
        self._tasks = [
            asyncio.create_task(self._watch_pods(resource_version), name="bench-watch-pods"),
            asyncio.create_task(self._watch_events(resource_version), name="bench-watch-events"),
        ]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def bound_in(self, namespace: str) -> int:
        return len(self.bound.get(namespace, ()))

    def attempts_in(self, namespace: str) -> Counter[str]:
        return self.events.get(namespace, Counter())

    async def changed(self, timeout: float) -> None:
        """Return on the next change seen, or after `timeout`."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._changed.wait(), timeout)

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def _watch_pods(self, resource_version: int) -> None:
        async for _, event in watch_raw(self.bus, "pods", resource_version=resource_version):
            pod = _pod_decoder.decode(event.object)
            if event.type == "DELETED" or not pod.spec.node_name:
                continue
            bound = self.bound.setdefault(pod.metadata.namespace, {})
            if pod.metadata.name not in bound:
                bound[pod.metadata.name] = time.monotonic()
                self._notify()

    async def _watch_events(self, resource_version: int) -> None:
        async for _, event in watch_raw(self.bus, "events", resource_version=resource_version):
            self.observe_event(event.type, _event_decoder.decode(event.object))

    def observe_event(self, event_type: str, ev: _EventView) -> None:
        """Count the attempts one watch event of an Event adds."""
        if ev.reason not in ("Scheduled", "FailedScheduling"):
            return
        key = (ev.metadata.namespace, ev.metadata.name)
        if event_type == "DELETED":
            self._event_counts.pop(key, None)
            return
        count = max(ev.count, 1)  # an Event without a count is one occurrence
        grown = count - self._event_counts.get(key, 0)
        if grown <= 0:
            return
        self._event_counts[key] = count
        self.events.setdefault(ev.involved_object.namespace, Counter())[ev.reason] += grown
        self._notify()


class ThroughputCollector:
    """Upstream's `throughputCollector`: one sample of pods bound per second."""

    def __init__(
        self, count: Callable[[], int], *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.count = count
        self.clock = clock
        self.samples: list[float] = []

    async def run(self) -> None:
        """Sample until cancelled (when every measured pod is bound)."""
        started = False
        last_count, last_time, skipped = 0, self.clock(), 0
        while True:
            await asyncio.sleep(SAMPLE_INTERVAL)
            now, scheduled = self.clock(), self.count()
            if scheduled == 0:
                continue
            if not started:
                # The first sample is an outlier: sampling and pod creation start apart.
                started, last_count, last_time = True, scheduled, now
                continue
            new = scheduled - last_count
            if new == 0:
                # No binding in this interval: rather than a 0 pods/s sample, wait for the
                # next one and count the whole span, once per interval it covers.
                skipped += 1
                continue
            self.samples += [new / (now - last_time)] * (skipped + 1)
            last_count, last_time, skipped = scheduled, now, 0


def percentile(ordered: list[float], q: int) -> float:
    """The ceil(n*q/100)-th smallest sample, as upstream's `collect`."""
    return ordered[math.ceil(len(ordered) * q / 100) - 1]


# --- talking to the apistore ---------------------------------------------------------------


async def create_raw(
    api: ApiClient, resource: str, namespace: str, body: bytes, *, generated: bool = False
) -> str:
    """Create one object from its JSON; its name (generated ones included).

    A `generated` name (metadata.generateName) that collides with an existing one is
    generated again, as kube-apiserver does (RetryGenerateName, up to 8 tries): 5 random
    characters collide often among thousands of objects.
    """
    request = messages.Create(resource=resource, namespace=namespace, object=msgspec.Raw(body))
    for attempt in range(GENERATE_NAME_TRIES):
        try:
            data = await api.request(request)
        except errors.AlreadyExists:
            if not generated or attempt == GENERATE_NAME_TRIES - 1:
                raise
            continue
        return _name_decoder.decode(data).metadata.name
    raise AssertionError("unreachable")


async def create_many(
    api: ApiClient,
    resource: str,
    namespace: str,
    bodies: Iterable[bytes],
    *,
    generated: bool = False,
) -> list[str]:
    """Create objects from `CREATE_CONCURRENCY` writers; their names, in creation order."""
    items = list(enumerate(bodies))
    names = [""] * len(items)
    pending = iter(items)

    async def writer() -> None:
        for i, body in pending:
            names[i] = await create_raw(api, resource, namespace, body, generated=generated)

    await asyncio.gather(*(writer() for _ in range(min(CREATE_CONCURRENCY, len(items)))))
    return names


async def list_raw(api: ApiClient, resource: str, namespace: str = "") -> list[msgspec.Raw]:
    """Every object of a resource, a page at a time."""
    items: list[msgspec.Raw] = []
    token = ""
    while True:
        page = messages.list_result_decoder.decode(
            await api.request(
                messages.List(
                    resource=resource, namespace=namespace, limit=LIST_PAGE, continue_token=token
                )
            )
        )
        items += page.items
        token = page.continue_token
        if not token:
            return items


async def current_resource_version(api: ApiClient) -> int:
    page = messages.list_result_decoder.decode(
        await api.request(messages.List(resource="namespaces", limit=1))
    )
    return page.resource_version


# --- the cluster under test ----------------------------------------------------------------


@dataclass
class Services:
    """The service processes of one run and where they log."""

    log_dir: Path
    procs: dict[str, asyncio.subprocess.Process] = field(default_factory=dict)

    async def start(
        self, name: str, *, nats_url: str, database_url: str, prefix: str, log_level: str
    ) -> None:
        """Run `python -m drasim.<name>` and return once it printed its READY line."""
        log = _open_log(self.log_dir / f"{name}.log")
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            f"drasim.{name}",
            *("--nats-url", nats_url, "--database-url", database_url, "--prefix", prefix),
            *("--log-level", log_level),
            stdout=subprocess.PIPE,
            stderr=log,
        )
        log.close()
        self.procs[name] = proc
        assert proc.stdout is not None
        try:
            line = await asyncio.wait_for(proc.stdout.readline(), READY_TIMEOUT)
        except TimeoutError:
            line = b""
        if not line.startswith(b"READY"):
            raise BenchError(f"drasim.{name} did not start; see {self.log_dir / f'{name}.log'}")

    def cpu_seconds(self) -> dict[str, float]:
        """CPU time (user + system) each service process has used so far."""
        used = {}
        for name, proc in self.procs.items():
            with contextlib.suppress(psutil.Error):
                times = psutil.Process(proc.pid).cpu_times()
                used[name] = times.user + times.system
        return used

    def rss_mb(self) -> dict[str, float]:
        """Resident memory of each service process now, in MiB."""
        rss = {}
        for name, proc in self.procs.items():
            with contextlib.suppress(psutil.Error):
                rss[name] = round(psutil.Process(proc.pid).memory_info().rss / 2**20, 1)
        return rss

    def check_alive(self) -> None:
        for name, proc in self.procs.items():
            if proc.returncode is not None:
                raise BenchError(
                    f"drasim.{name} exited with {proc.returncode}; "
                    f"see {self.log_dir / f'{name}.log'}"
                )

    async def stop(self) -> None:
        for proc in reversed(self.procs.values()):
            if proc.returncode is None:
                proc.terminate()
        for proc in self.procs.values():
            try:
                await asyncio.wait_for(proc.wait(), 10)
            except TimeoutError:
                proc.kill()
                await proc.wait()


def _open_log(path: Path) -> Any:
    """A service's stderr file; the child keeps its own descriptor once started."""
    return open(path, "wb")  # noqa: SIM115


class BenchError(Exception):
    """The run could not go on (a service died, pods stopped binding)."""


async def fresh_database(server_url: str, *, owner_url: str | None = None) -> str:
    """A new, empty database on the given server, so that runs never share state. Made
    through `server_url` (which may create databases); owned by, and returned as the URL
    of, `owner_url`'s role when given (the embedded Postgres' service role)."""
    name = f"bench_{uuid.uuid4().hex[:8]}"
    owner = f' OWNER "{urlsplit(owner_url).username}"' if owner_url else ""
    await _execute(server_url, f'CREATE DATABASE "{name}"{owner}')
    return with_database(owner_url or server_url, name)


async def drop_database(server_url: str, database_url: str) -> None:
    name = database_name(database_url)
    await _execute(server_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


async def _execute(database_url: str, statement: str) -> None:
    # The bench sets up scratch databases as the test fixtures do: the one place outside
    # the apistore's store that talks to Postgres directly.
    import asyncpg

    conn = await asyncpg.connect(database_url)
    try:
        await conn.execute(statement)
    finally:
        await conn.close()


async def delete_stream(nats_url: str, prefix: str) -> None:
    """Drop the run's event stream from a NATS that outlives the run."""
    bus = await Bus.connect(nats_url, prefix=prefix, name="bench-cleanup")
    try:
        with contextlib.suppress(Exception):
            await bus.js.delete_stream(subjects.stream(prefix))
    finally:
        await bus.close()


# --- one run -------------------------------------------------------------------------------


class Result(msgspec.Struct, kw_only=True):
    """What `--json` writes."""

    workload: str
    measured_pods: int
    bound_pods: int
    throughput_avg: float | None
    throughput_p50: float | None
    throughput_p90: float | None
    throughput_p99: float | None
    throughput_samples: list[float]
    throughput_overall: float | None
    attempts: int
    attempts_scheduled: int
    attempts_failed: int
    attempts_source: str
    devices_allocated_twice: int
    claims: int
    claims_unallocated: int
    allocated_devices: int
    threshold: float | None
    meets_threshold: bool | None
    nodes: int
    init_pods: int
    measure_seconds: float
    setup_seconds: float
    # Each service's CPU time in the measured phase per measured pod, in ms: what a
    # binding costs on this machine, less dependent on other load than pods/s.
    cpu_ms_per_pod: dict[str, float]
    rss_mb: dict[str, float]  # each service's resident memory when the measured pods bound
    incomplete: str  # why the bench stopped waiting for the measured pods; "" if it did not
    ok: bool


class Runner:
    """Runs a workload's ops against the cluster."""

    def __init__(
        self,
        workload: Workload,
        api: ApiClient,
        tracker: ClusterTracker,
        services: Services,
        stall_timeout: float,
        timeout: float | None,
    ) -> None:
        self.workload = workload
        self.api = api
        self.tracker = tracker
        self.services = services
        self.stall_timeout = stall_timeout
        self.timeout = timeout
        self.incomplete = ""
        self.node_names: list[str] = []
        self.init_pods = 0
        self.measured: list[str] = []
        self.samples: list[float] = []
        self.measure_start = 0.0
        self.measure_seconds = 0.0
        self.measure_cpu: dict[str, float] = {}  # service -> CPU seconds in the measured phase
        self.measure_rss: dict[str, float] = {}  # service -> MiB resident at its end

    async def run(self) -> None:
        for op in self.workload.ops:
            handler = getattr(self, "_" + op["opcode"], None)
            if handler is None:
                raise BenchError(f"{self.workload.name}: unknown opcode {op['opcode']!r}")
            await handler(op)

    async def _createNodes(self, op: dict[str, Any]) -> None:  # noqa: N802 - upstream's opcode
        count = self.workload.count(op)
        if count == 0:
            return
        template = Template(self.workload.base / op.get("nodeTemplatePath", DEFAULT_NODE_TEMPLATE))
        # The index runs on across createNodes ops, as upstream's `nextNodeIndex`.
        start = len(self.node_names)
        with _phase(f"creating {count} nodes"):
            self.node_names += await create_many(
                self.api,
                "nodes",
                "",
                (template.render(start + i) for i in range(count)),
                generated=template.generated,
            )

    async def _createResourceDriver(self, op: dict[str, Any]) -> None:  # noqa: N802
        """One ResourceSlice per matching node, as upstream's op: a pool named after the
        node with `maxClaimsPerNode` devices `instance-<i>`."""
        driver = op["driverName"]
        devices = self.workload.count(op, "maxClaimsPerNode")
        nodes = [n for n in self.node_names if fnmatch.fnmatchcase(n, op["nodes"])]
        bodies = (msgspec.json.encode(resource_slice(driver, node, devices)) for node in nodes)
        with _phase(f"creating {len(nodes)} ResourceSlices of {devices} devices"):
            await create_many(self.api, "resourceslices", "", bodies)

    async def _createAny(self, op: dict[str, Any]) -> None:  # noqa: N802
        template = Template(self.workload.base / op["templatePath"])
        count = self.workload.count(op)
        namespace = op.get("namespace", template.namespace) if template.info.namespaced else ""
        with _phase(f"creating {count} {template.info.plural}"):
            await create_many(
                self.api,
                template.info.plural,
                namespace,
                (template.render(i) for i in range(count)),
                generated=template.generated,
            )

    async def _createPods(self, op: dict[str, Any]) -> None:  # noqa: N802
        count = self.workload.count(op)
        namespace = op["namespace"]
        if count == 0:
            return
        template = Template(self.workload.base / op["podTemplatePath"])
        bodies = [template.render(i) for i in range(count)]
        if not op.get("collectMetrics"):
            with _phase(f"creating {count} init pods in {namespace} and waiting until bound"):
                await create_many(self.api, "pods", namespace, bodies, generated=template.generated)
                stopped = await self._wait_bound(namespace, count)
            if stopped:
                raise BenchError(f"init pods: {stopped}")
            self.init_pods += count
            return

        collector = ThroughputCollector(lambda: self.tracker.bound_in(namespace))
        sampling = asyncio.create_task(collector.run(), name="bench-throughput")
        with _phase(f"creating {count} measured pods in {namespace} and waiting until bound"):
            self.measure_start = time.monotonic()
            cpu_before = self.services.cpu_seconds()
            try:
                self.measured = await create_many(
                    self.api, "pods", namespace, bodies, generated=template.generated
                )
                deadline = None if self.timeout is None else self.measure_start + self.timeout
                # A run that stops early still reports what it measured, and fails.
                self.incomplete = await self._wait_bound(namespace, count, deadline=deadline)
            finally:
                sampling.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await sampling
                self.measure_seconds = time.monotonic() - self.measure_start
                cpu_after = self.services.cpu_seconds()
                self.measure_rss = self.services.rss_mb()
                self.measure_cpu = {
                    name: cpu_after[name] - cpu_before[name]
                    for name in cpu_after
                    if name in cpu_before
                }
        self.samples = collector.samples

    async def _wait_bound(
        self, namespace: str, count: int, *, deadline: float | None = None
    ) -> str:
        """Wait until `count` pods of the namespace are bound; "" then, else why it
        stopped waiting: `stall_timeout` seconds without a new binding, or the deadline."""
        last, last_change = -1, time.monotonic()
        while (bound := self.tracker.bound_in(namespace)) < count:
            self.services.check_alive()
            now = time.monotonic()
            if bound != last:
                last, last_change = bound, now
            elif now - last_change > self.stall_timeout:
                return (
                    f"{bound}/{count} pods of namespace {namespace} bound, none for "
                    f"{self.stall_timeout:.0f}s"
                )
            if deadline is not None and now > deadline:
                return f"{bound}/{count} pods of namespace {namespace} bound at --timeout"
            await self.tracker.changed(1.0)
        return ""


def resource_slice(driver: str, node: str, devices: int) -> dict[str, Any]:
    """The slice upstream's test driver publishes for a node (`resourceSlice` in
    scheduler_perf's dra.go), in resource.k8s.io/v1 form."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": node},
        "spec": {
            "driver": driver,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": [
                {
                    "name": f"instance-{i}",
                    "attributes": {
                        "model": {"string": "A100"},
                        "family": {"string": "GPU"},
                        "driverVersion": {"version": "1.2.3"},
                        "dra.example.com/numa": {"int": i},
                    },
                    "capacity": {"memory": {"value": "1Gi"}},
                }
                for i in range(devices)
            ],
        },
    }


@contextlib.contextmanager
def _phase(what: str) -> Any:
    print(f"bench: {what} ...", file=sys.stderr, flush=True)
    start = time.monotonic()
    yield
    print(f"bench:   done in {time.monotonic() - start:.1f}s", file=sys.stderr, flush=True)


async def check_claims(api: ApiClient) -> tuple[int, int, int, int]:
    """(claims, unallocated claims, devices allocated, devices allocated more than once)
    over every claim."""
    claims = [_claim_decoder.decode(raw) for raw in await list_raw(api, "resourceclaims")]
    unallocated = [c for c in claims if c.status.allocation is None]
    for c in unallocated[:10]:
        print(
            f"bench: claim {c.metadata.namespace}/{c.metadata.name} is not allocated",
            file=sys.stderr,
        )
    holders: dict[tuple[str, str, str], list[str]] = {}
    for c in claims:
        for d in c.status.allocation.devices.results if c.status.allocation else ():
            name = f"{c.metadata.namespace}/{c.metadata.name}"
            holders.setdefault((d.driver, d.pool, d.device), []).append(name)
    twice = [device for device, names in holders.items() if len(names) > 1]
    for device in twice[:10]:
        print(
            f"bench: DEVICE ALLOCATED TWICE: {'/'.join(device)} in claims "
            + ", ".join(holders[device]),
            file=sys.stderr,
        )
    return len(claims), len(unallocated), len(holders), len(twice)


async def bound_measured(api: ApiClient, namespace: str) -> int:
    """Measured pods bound, as the apistore lists them (not the watch)."""
    pods = [_pod_decoder.decode(raw) for raw in await list_raw(api, "pods", namespace)]
    return sum(1 for p in pods if p.spec.node_name)


async def run_workload(
    workload: Workload,
    *,
    nats_url: str,
    database_url: str,
    log_level: str,
    stall_timeout: float,
    timeout: float | None,
    work_dir: Path,
    keep: bool,
    report: Callable[[Result], None],
) -> Result:
    """Run the workload on a fresh database and subject prefix, both removed after a
    successful run (unless `keep`): given servers may outlive the run and serve others."""
    server_url, prefix = database_url, f"bench{uuid.uuid4().hex[:8]}"
    database_url = await fresh_database(server_url)
    services = Services(work_dir)
    urls = {"nats_url": nats_url, "database_url": database_url, "prefix": prefix}
    bus = None
    tracker: ClusterTracker | None = None
    succeeded = False
    try:
        t0 = time.monotonic()
        with _phase(
            "starting apistore and scheduler"
            + (" and controllers" if workload.needs_controllers else "")
        ):
            await services.start("apistore", **urls, log_level=log_level)
            await services.start("scheduler", **urls, log_level=log_level)
            if workload.needs_controllers:
                await services.start("controllers", **urls, log_level=log_level)
        print(
            "bench: pids "
            + ", ".join(f"{name} {proc.pid}" for name, proc in services.procs.items()),
            file=sys.stderr,
        )
        bus = await Bus.connect(nats_url, prefix=prefix, name="bench")
        api = ApiClient(bus, actor="bench", timeout=60.0)
        for namespace in workload.namespaces:
            with contextlib.suppress(errors.AlreadyExists):
                await create_raw(
                    api, "namespaces", "", msgspec.json.encode({"metadata": {"name": namespace}})
                )
        tracker = ClusterTracker(bus)
        await tracker.start(await current_resource_version(api))
        runner = Runner(workload, api, tracker, services, stall_timeout, timeout)
        await runner.run()
        setup_seconds = time.monotonic() - t0 - runner.measure_seconds

        namespace = workload.measured_namespace
        measured = len(runner.measured)
        # Events of the last bindings may trail the bindings themselves.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(5):
                while tracker.attempts_in(namespace)["Scheduled"] < measured:
                    await tracker.changed(0.5)
        attempts = tracker.attempts_in(namespace)
        with _phase("checking claims and bindings"):
            claims, unallocated, devices, twice = await check_claims(api)
            bound = await bound_measured(api, namespace)
        times = sorted(tracker.bound.get(namespace, {}).values())
        overall = (
            len(times) / (times[-1] - runner.measure_start)
            if times and times[-1] > runner.measure_start
            else None
        )
        samples = sorted(runner.samples)
        stats = (
            (sum(samples) / len(samples), *(percentile(samples, q) for q in (50, 90, 99)))
            if samples
            else (None, None, None, None)
        )
        threshold = workload.threshold
        result = Result(
            workload=workload.name,
            measured_pods=measured,
            bound_pods=bound,
            throughput_avg=stats[0],
            throughput_p50=stats[1],
            throughput_p90=stats[2],
            throughput_p99=stats[3],
            throughput_samples=runner.samples,
            throughput_overall=overall,
            attempts=attempts["Scheduled"] + attempts["FailedScheduling"],
            attempts_scheduled=attempts["Scheduled"],
            attempts_failed=attempts["FailedScheduling"],
            attempts_source="scheduler Events of the measured pods: Scheduled + FailedScheduling",
            devices_allocated_twice=twice,
            claims=claims,
            claims_unallocated=unallocated,
            allocated_devices=devices,
            threshold=threshold,
            meets_threshold=(
                None if threshold is None or stats[0] is None else stats[0] >= threshold
            ),
            nodes=len(runner.node_names),
            init_pods=runner.init_pods,
            measure_seconds=runner.measure_seconds,
            setup_seconds=setup_seconds,
            rss_mb=runner.measure_rss,
            cpu_ms_per_pod={
                name: round(1000 * seconds / max(measured, 1), 2)
                for name, seconds in runner.measure_cpu.items()
            },
            incomplete=runner.incomplete,
            ok=twice == 0 and bound == measured,
        )
        succeeded = result.ok
        report(result)
        if keep:
            await _keep_running(urls)
        return result
    finally:
        if tracker is not None:
            await tracker.stop()
        if bus is not None:
            await bus.close()
        await services.stop()
        # A failed run keeps its database and stream (the event log shows what happened).
        if succeeded and not keep:
            await drop_database(server_url, database_url)
            await delete_stream(nats_url, prefix)
        elif not succeeded:
            print(f"bench: kept database {database_url}, prefix {prefix}", file=sys.stderr)


async def _keep_running(urls: dict[str, str]) -> None:
    print(
        "bench: --keep: the cluster stays up until Ctrl-C (or SIGTERM); reach it with\n"
        f"  DRASIM_NATS_URL={urls['nats_url']} DRASIM_DATABASE_URL={urls['database_url']} "
        f"DRASIM_PREFIX={urls['prefix']} drasim get pods -A",
        file=sys.stderr,
        flush=True,
    )
    await service.wait_for_signal()


# --- output --------------------------------------------------------------------------------


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f}"


def summary_line(r: Result) -> str:
    verdict = "OK" if r.ok else "FAILED"
    threshold = "" if r.threshold is None else f" (upstream threshold {r.threshold:g})"
    return (
        f"{verdict} {r.workload}: {r.bound_pods}/{r.measured_pods} measured pods bound, "
        f"SchedulingThroughput avg {_num(r.throughput_avg)} pods/s{threshold}, "
        f"{r.attempts} attempts, {r.devices_allocated_twice} devices allocated twice"
        + (f" [stopped waiting: {r.incomplete}]" if r.incomplete else "")
    )


def table(r: Result) -> str:
    rows = [
        ("measured pods bound", f"{r.bound_pods}/{r.measured_pods}"),
        ("init pods", str(r.init_pods)),
        ("nodes", str(r.nodes)),
        ("throughput avg (pods/s)", _num(r.throughput_avg)),
        ("throughput p50", _num(r.throughput_p50)),
        ("throughput p90", _num(r.throughput_p90)),
        ("throughput p99", _num(r.throughput_p99)),
        ("one-second samples", str(len(r.throughput_samples))),
        ("overall (pods/s)", _num(r.throughput_overall)),
        ("upstream threshold", "-" if r.threshold is None else f"{r.threshold:g}"),
        (
            "attempts",
            f"{r.attempts} ({r.attempts_scheduled} scheduled, {r.attempts_failed} failed)",
        ),
        (
            "claims (unallocated) / devices",
            f"{r.claims} ({r.claims_unallocated}) / {r.allocated_devices}",
        ),
        ("devices allocated twice", str(r.devices_allocated_twice)),
        ("measure / setup (s)", f"{r.measure_seconds:.1f} / {r.setup_seconds:.1f}"),
        (
            "resident memory (MiB)",
            ", ".join(f"{name} {mb:.0f}" for name, mb in r.rss_mb.items()) or "-",
        ),
        (
            "CPU per measured pod (ms)",
            ", ".join(f"{name} {ms:.2f}" for name, ms in r.cpu_ms_per_pod.items()) or "-",
        ),
    ]
    width = max(len(name) for name, _ in rows)
    return "\n".join(f"  {name:<{width}}  {value}" for name, value in rows)


# --- entry point ---------------------------------------------------------------------------


@contextlib.contextmanager
def _infrastructure(config: Config, work_dir: Path) -> Any:
    """(nats_url, database_url): the given servers, or embedded ones (a scratch Postgres
    in the work directory, whose superuser makes and owns the run's database)."""
    nats_server = pg = None
    try:
        if config.nats_url is None:
            nats_server = EmbeddedNats(work_dir).start()
        if config.database_url is None:
            pg = EmbeddedPostgres(work_dir).start()
        yield config.nats_url or nats_server.admin_url, config.database_url or pg.admin_url
    finally:
        if pg is not None:
            pg.stop()
        if nats_server is not None:
            nats_server.stop()


def run(args: argparse.Namespace) -> int:
    try:
        workloads = load_workloads(args.config)
    except FileNotFoundError:
        print(
            f"drasim bench: no workload configuration at {args.config} (--config)", file=sys.stderr
        )
        return 2
    if args.list or not args.workload:
        for name, w in workloads.items():
            threshold = "" if w.threshold is None else f"  (upstream threshold {w.threshold:g})"
            print(f"{name}{threshold}")
        return 0 if args.list else 2
    workload = workloads.get(args.workload)
    if workload is None:
        print(f"drasim bench: unknown workload {args.workload!r}; see --list", file=sys.stderr)
        return 2

    # Given servers come from flags or DRASIM_*; a running `drasim up` is not borrowed.
    config = Config.from_env(**cluster.cluster_flags(args))
    work_dir = Path(tempfile.mkdtemp(prefix="drasim-bench-"))
    try:
        with (
            _terminate_as_interrupt(),
            _infrastructure(config, work_dir) as (nats_url, database_url),
        ):
            result = asyncio.run(
                run_workload(
                    workload,
                    nats_url=nats_url,
                    database_url=database_url,
                    log_level=os.environ.get("DRASIM_BENCH_LOG_LEVEL", "WARNING"),
                    stall_timeout=args.stall_timeout,
                    timeout=args.timeout,
                    work_dir=work_dir,
                    keep=args.keep,
                    report=lambda result: _report(result, args.json),
                )
            )
    except (BenchError, errors.ApiError) as err:
        print(f"drasim bench: FAILED {workload.name}: {err}", file=sys.stderr)
        print(f"drasim bench: logs kept in {work_dir}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"drasim bench: interrupted; logs kept in {work_dir}", file=sys.stderr)
        return 130
    if result.ok:
        shutil.rmtree(work_dir, ignore_errors=True)
    else:
        print(f"drasim bench: logs and data kept in {work_dir}", file=sys.stderr)
    return 0 if result.ok else 1


@contextlib.contextmanager
def _terminate_as_interrupt() -> Any:
    """SIGTERM ends the run as Ctrl-C does, so the service processes and embedded servers
    are stopped on the way out (a signal's default action would leave them running)."""
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread may set handlers (tests run the CLI in a thread)
        return

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _report(result: Result, json_path: Path | None) -> None:
    """The summary line, the table, the JSON file, and why the run failed, if it did."""
    print(summary_line(result))
    print(table(result), flush=True)
    if json_path:
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_bytes(msgspec.json.format(msgspec.json.encode(result)) + b"\n")
    if result.devices_allocated_twice:
        print(
            f"drasim bench: FAILED: {result.devices_allocated_twice} devices are allocated "
            "to more than one ResourceClaim",
            file=sys.stderr,
        )
    if result.bound_pods != result.measured_pods:
        print(
            f"drasim bench: FAILED: only {result.bound_pods} of {result.measured_pods} "
            "measured pods are bound",
            file=sys.stderr,
        )


__all__ = ["Result", "Template", "ThroughputCollector", "Workload", "load_workloads", "run"]
