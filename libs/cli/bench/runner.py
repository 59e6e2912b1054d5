"""One run of a workload: its cluster, its ops, and the checks at the end.

`run_workload` gives the run a fresh database and subject prefix, starts the services
(`Services`), creates the workload's namespaces, starts the `ClusterTracker`, lets a
`Runner` run the ops, then checks the claims and bindings and builds the `Result`.
`Runner` has one method per upstream opcode (`createNodes`, `createResourceDriver`,
`createAny`, `allocResourceClaims`, `createPods`); the measured `createPods` is where
throughput is sampled, in upstream's steady state too (`steadyState`: a pod is deleted
once bound and another created, for `duration`).
"""

from __future__ import annotations

import asyncio
import contextlib
import fnmatch
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import psutil

from drasim.cli import launch
from drasim.cli.bench import allocate, objects, views
from drasim.cli.bench.collectors import ClusterTracker, ThroughputCollector, percentile
from drasim.cli.bench.report import Result
from drasim.cli.bench.templates import Template, resource_slice
from drasim.cli.bench.workloads import DEFAULT_NODE_TEMPLATE, Workload
from drasim.cli.launch import Launch, LaunchError, ServiceProcess
from drasim.common import errors, service
from drasim.common.api import core_v1
from drasim.common.bus.client import Bus
from drasim.common.client import ApiClient


@dataclass
class Services:
    """The service processes of one run, each logging to `<log_dir>/<name>.log`."""

    log_dir: Path
    running: dict[str, ServiceProcess] = field(default_factory=dict)

    async def start(self, spec: Launch) -> None:
        """Start the service and return once it is ready."""
        try:
            self.running[spec.name] = await ServiceProcess.start(spec, log=self._log(spec.name))
        except LaunchError as err:
            raise BenchError(str(err)) from None

    def cpu_seconds(self) -> dict[str, float]:
        """CPU time (user + system) each service process has used so far."""
        used = {}
        for name, run in self.running.items():
            with contextlib.suppress(psutil.Error):
                times = psutil.Process(run.pid).cpu_times()
                used[name] = times.user + times.system
        return used

    def rss_mb(self) -> dict[str, float]:
        """Resident memory of each service process now, in MiB."""
        rss = {}
        for name, run in self.running.items():
            with contextlib.suppress(psutil.Error):
                rss[name] = round(psutil.Process(run.pid).memory_info().rss / 2**20, 1)
        return rss

    def check_alive(self) -> None:
        for name, run in self.running.items():
            if run.returncode is not None:
                raise BenchError(
                    f"drasim.{name} exited with {run.returncode}; see {self._log(name)}"
                )

    async def stop(self) -> None:
        await asyncio.gather(*(run.stop() for run in reversed(self.running.values())))

    def _log(self, name: str) -> Path:
        return self.log_dir / f"{name}.log"


class BenchError(Exception):
    """The run could not go on (a service died, pods stopped binding)."""


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
        self.steady = False  # the measured pods were created steadily (and deleted)
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
            self.node_names += await objects.create_many(
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
            await objects.create_many(self.api, "resourceslices", "", bodies)

    async def _createAny(self, op: dict[str, Any]) -> None:  # noqa: N802
        template = Template(self.workload.base / op["templatePath"])
        count = self.workload.count(op)
        namespace = op.get("namespace", template.namespace) if template.info.namespaced else ""
        with _phase(f"creating {count} {template.info.plural}"):
            await objects.create_many(
                self.api,
                template.info.plural,
                namespace,
                (template.render(i) for i in range(count)),
                generated=template.generated,
            )

    async def _allocResourceClaims(self, op: dict[str, Any]) -> None:  # noqa: N802
        namespace = op["namespace"]
        with _phase(f"allocating the ResourceClaims of namespace {namespace}"):
            try:
                await allocate.allocate_claims(self.api, namespace)
            except allocate.AllocationError as err:
                raise BenchError(f"{self.workload.name}: {err}") from None

    async def _createPods(self, op: dict[str, Any]) -> None:  # noqa: N802
        count = self.workload.count(op)
        namespace = op["namespace"]
        if count == 0:
            return
        template = Template(self.workload.base / op["podTemplatePath"])
        bodies = [template.render(i) for i in range(count)]
        if not op.get("collectMetrics"):
            with _phase(f"creating {count} init pods in {namespace} and waiting until bound"):
                await objects.create_many(
                    self.api, "pods", namespace, bodies, generated=template.generated
                )
                stopped = await self._wait_bound(namespace, count)
            if stopped:
                raise BenchError(f"init pods: {stopped}")
            self.init_pods += count
            return

        collector = ThroughputCollector(lambda: self.tracker.bound_in(namespace))
        sampling = asyncio.create_task(collector.run(), name="bench-throughput")
        steady = self.steady = self.workload.flag(op, "steadyState")
        duration = self.workload.duration(op)
        what = (
            f"keeping {count} pods pending in {namespace} for {duration:.0f}s"
            if steady
            else f"creating {count} measured pods in {namespace} and waiting until bound"
        )
        with _phase(what):
            self.measure_start = time.monotonic()
            cpu_before = self.services.cpu_seconds()
            try:
                if steady:
                    self.measured = await self._create_steadily(
                        namespace, template, count, duration
                    )
                    if not self.measured:
                        self.incomplete = "no pod at all got scheduled"
                else:
                    self.measured = await objects.create_many(
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

    async def _create_steadily(
        self, namespace: str, template: Template, count: int, duration: float
    ) -> list[str]:
        """Upstream's `createPodsSteadily`: `count` pods wait to be scheduled for
        `duration` seconds; each pod seen bound is deleted and another created. The pods
        seen bound, in order."""
        created = 0

        async def create(n: int) -> None:
            nonlocal created
            bodies = (template.render(created + i) for i in range(n))
            await objects.create_many(
                self.api, "pods", namespace, bodies, generated=template.generated
            )
            created += n

        await create(count)
        scheduled: list[str] = []
        deadline = time.monotonic() + duration
        while (left := deadline - time.monotonic()) > 0:
            self.services.check_alive()
            await self.tracker.changed(min(left, 1.0))
            bound = self.tracker.bound.get(namespace, {})
            fresh = list(bound)[len(scheduled) :]
            if not fresh:
                continue
            scheduled += fresh
            await asyncio.gather(
                *(
                    self.api.delete(core_v1.Pod, name, namespace=namespace, grace_period_seconds=0)
                    for name in fresh
                )
            )
            await create(len(fresh))
        return scheduled

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


@contextlib.contextmanager
def _phase(what: str) -> Any:
    print(f"bench: {what} ...", file=sys.stderr, flush=True)
    start = time.monotonic()
    yield
    print(f"bench:   done in {time.monotonic() - start:.1f}s", file=sys.stderr, flush=True)


async def check_claims(api: ApiClient) -> tuple[int, int, int, int]:
    """(claims, unallocated claims, devices allocated, devices allocated more than once)
    over every claim."""
    claims = [
        views.claim_decoder.decode(raw) for raw in await objects.list_raw(api, "resourceclaims")
    ]
    unallocated = [c for c in claims if c.status.allocation is None]
    for c in unallocated[:10]:
        print(
            f"bench: claim {c.metadata.namespace}/{c.metadata.name} is not allocated",
            file=sys.stderr,
        )
    # A device's shares (KEP-5075) are held apart; admin access holds nothing.
    holders: dict[tuple[str, str, str, str], list[str]] = {}
    for c in claims:
        for d in c.status.allocation.devices.results if c.status.allocation else ():
            if d.admin_access:
                continue
            name = f"{c.metadata.namespace}/{c.metadata.name}"
            holders.setdefault((d.driver, d.pool, d.device, d.share_id or ""), []).append(name)
    twice = [device for device, names in holders.items() if len(names) > 1]
    for device in twice[:10]:
        print(
            f"bench: DEVICE ALLOCATED TWICE: {'/'.join(device).rstrip('/')} in claims "
            + ", ".join(holders[device]),
            file=sys.stderr,
        )
    return len(claims), len(unallocated), len(holders), len(twice)


async def bound_measured(api: ApiClient, namespace: str) -> int:
    """Measured pods bound, as the apistore lists them (not the watch)."""
    pods = [views.pod_decoder.decode(raw) for raw in await objects.list_raw(api, "pods", namespace)]
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
    database_url = await launch.create_database(server_url)
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
            modules = ["drasim.apistore", "drasim.scheduler"]
            if workload.needs_controllers:
                modules.append("drasim.controllers")
            for module in modules:
                await services.start(Launch.service(module, **urls, log_level=log_level))
        print(
            "bench: pids "
            + ", ".join(f"{name} {run.pid}" for name, run in services.running.items()),
            file=sys.stderr,
        )
        bus = await Bus.connect(nats_url, prefix=prefix, name="bench")
        api = ApiClient(bus, actor="bench", timeout=60.0)
        for namespace in workload.namespaces:
            with contextlib.suppress(errors.AlreadyExists):
                await objects.create_raw(
                    api, "namespaces", "", msgspec.json.encode({"metadata": {"name": namespace}})
                )
        tracker = ClusterTracker(bus)
        await tracker.start(await objects.current_resource_version(api))
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
            # Pods created steadily were deleted once seen bound.
            bound = len(runner.measured) if runner.steady else await bound_measured(api, namespace)
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
            ok=twice == 0 and bound == measured and measured > 0,
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
            await launch.drop_database(server_url, database_url)
            await launch.delete_event_stream(nats_url, prefix)
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
