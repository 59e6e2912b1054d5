"""One `drasim loadtest` run against a cluster that serves: the phases of clusterloader2's
DRA steady-state test, and what each measured.

1. **fill**: the fill Jobs created at `fill_qps` (the test's FastFill tuning set), then
   awaited until every fill pod runs (its WaitForControlledPodsRunning);
2. **churn**: short Jobs created at `churn_qps` (SteadyState) for `churn_seconds`, never
   more unfinished at once than the GPUs the fill left free (the test creates as many
   churn Jobs as there are free GPUs, each running its pods one after the other), then
   awaited until every one has finished (WaitForFinishedJobs);
3. **drain**: every Job deleted, awaited until no pod and no ResourceClaim is left.

Every wait is on the watches (`measure`): no polling. Each phase scrapes the services'
metrics at its start and end (`scrape`), so its metric SLIs cover that phase alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from drasim.cli.loadtest import measure, results, scrape, workload
from drasim.cli.loadtest.workload import CHURN, FILL
from drasim.common import errors
from drasim.common.api import batch_v1, core_v1, resource_v1
from drasim.common.client import ApiClient
from drasim.common.informer import Informer

__all__ = ["LoadTestRun", "Options", "run_load_test"]

DRAIN = "drain"
# Creations in flight at once: a slow answer must not slow the rate the test asks for.
MAX_IN_FLIGHT = 64


@dataclass(frozen=True)
class Options:
    """The knobs of the test (clusterloader2's CL2_* parameters)."""

    fill_qps: float = 10.0  # CL2_LOAD_TEST_THROUGHPUT
    churn_qps: float = 5.0  # CL2_STEADY_STATE_QPS
    churn_seconds: float = 60.0
    fill_run_for: str = "1h"  # CL2_LONG_JOB_RUNNING_TIME
    churn_run_for: str = "5s"  # CL2_JOB_RUNNING_TIME
    churn_completions: int = 1
    timeout: float = 900.0  # for each wait
    progress_every: float = 5.0


@dataclass
class _Present:
    """Keys of the objects of the test's namespaces that exist now, per kind."""

    namespaces: Iterable[str]
    progress: measure.Progress
    keys: set[str] = field(default_factory=set)

    def on_change(self, obj: Any, new: Any = None) -> None:
        obj = new or obj
        if obj.metadata.namespace in self.namespaces:
            self.keys.add(f"{obj.metadata.namespace}/{obj.metadata.name}")

    def on_delete(self, obj: Any) -> None:
        self.keys.discard(f"{obj.metadata.namespace}/{obj.metadata.name}")
        self.progress.changed()


class LoadTestRun:
    """One run's state: what it created, and what its watches saw."""

    def __init__(
        self,
        api: ApiClient,
        shape: workload.Shape,
        options: Options,
        metrics_urls: list[str],
        say: Callable[[str], None],
    ) -> None:
        self.api, self.shape, self.options = api, shape, options
        self.metrics_urls, self.say = metrics_urls, say
        namespaces = set(shape.namespaces)
        self.progress = measure.Progress()
        self.pods = measure.PodStartups(namespaces, self.progress)
        self.claims = measure.ClaimAllocations(namespaces, self.pods)
        self.devices = measure.DeviceHolders()
        self.plugin_devices = measure.PluginDeviceHolders()
        self.jobs = measure.Jobs(namespaces, self.progress)
        self.present_pods = _Present(namespaces, self.progress)
        self.present_claims = _Present(namespaces, self.progress)
        self.created: dict[str, list[tuple[str, str]]] = {FILL: [], CHURN: []}
        self.create_errors: list[str] = []
        self.phase, self.phase_started = "setup", time.monotonic()
        self.informers: list[Informer[Any]] = [
            Informer(api, core_v1.Pod),
            Informer(api, resource_v1.ResourceClaim),
            Informer(api, batch_v1.Job),
        ]
        pods, claims, jobs = self.informers
        pods.add_handlers(on_add=self.pods.on_pod, on_update=self.pods.on_pod)
        pods.add_handlers(on_delete=self.pods.on_delete)
        pods.add_handlers(
            on_add=self.plugin_devices.on_pod,
            on_update=self.plugin_devices.on_pod,
            on_delete=self.plugin_devices.on_delete,
        )
        for tracker in (self.present_pods,):
            pods.add_handlers(on_add=tracker.on_change, on_delete=tracker.on_delete)
        claims.add_handlers(on_add=self.claims.on_claim, on_update=self.claims.on_claim)
        claims.add_handlers(
            on_add=self.devices.on_claim,
            on_update=self.devices.on_claim,
            on_delete=self.devices.on_delete,
        )
        claims.add_handlers(
            on_add=self.present_claims.on_change, on_delete=self.present_claims.on_delete
        )
        jobs.add_handlers(on_add=self.jobs.on_job, on_update=self.jobs.on_job)
        jobs.add_handlers(on_delete=self.jobs.on_delete)

    # -- the phases -----------------------------------------------------------------

    async def setup(self) -> None:
        for ns in self.shape.namespaces:
            await _create_unless_exists(self.api.create(workload.namespace(ns)))
            if self.shape.mode == workload.CLAIMS:
                await _create_unless_exists(self.api.create(workload.resource_claim_template(ns)))

    async def fill(self) -> None:
        count = self.shape.fill_pods
        await self._create_paced(FILL, self.options.fill_qps, count=count)
        await self.progress.wait_for(
            lambda: self.pods.running_in(FILL) >= len(self.created[FILL]),
            timeout=self.options.timeout,
            what=f"{len(self.created[FILL])} fill pods running",
        )

    async def churn(self) -> None:
        free = self.shape.free_gpus
        if free <= 0:
            self.say("[churn] no GPU left free by the fill: no churn")
            return

        def room() -> bool:
            ended = self.jobs.count(CHURN, "finished") + self.jobs.count(CHURN, "deleted")
            return len(self.created[CHURN]) - ended < free

        until = time.monotonic() + self.options.churn_seconds
        await self._create_paced(CHURN, self.options.churn_qps, until=until, room=room)
        await self.progress.wait_for(
            lambda: self.jobs.count(CHURN, "finished") >= len(self.created[CHURN]),
            timeout=self.options.timeout,
            what=f"{len(self.created[CHURN])} churn Jobs finished",
        )

    async def drain(self) -> None:
        limit = asyncio.Semaphore(MAX_IN_FLIGHT)

        async def delete(ns: str, name: str) -> None:
            async with limit:
                with contextlib.suppress(errors.NotFound):
                    await self.api.delete(
                        batch_v1.Job, name, namespace=ns, propagation_policy="Background"
                    )

        await asyncio.gather(*(delete(ns, n) for jobs in self.created.values() for ns, n in jobs))
        await self.progress.wait_for(
            lambda: not self.present_pods.keys and not self.present_claims.keys,
            timeout=self.options.timeout,
            what="no pod and no ResourceClaim left",
        )

    async def _create_paced(
        self,
        phase: str,
        qps: float,
        *,
        count: int | None = None,
        until: float | None = None,
        room: Callable[[], bool] | None = None,
    ) -> None:
        """Create Jobs of `phase` at `qps` (`count` of them, or until `until`), waiting
        while `room()` says no more may be unfinished."""
        limit = asyncio.Semaphore(MAX_IN_FLIGHT)
        tasks: set[asyncio.Task[None]] = set()
        interval, next_at = 1.0 / qps, time.monotonic()
        prefix = "long-running" if phase == FILL else "small"
        index = 0
        while (count is None or index < count) and (until is None or time.monotonic() < until):
            if room is not None and not room():
                await self.progress.wait_for(room, timeout=self.options.timeout, what="room")
                next_at = max(next_at, time.monotonic())
                continue
            if (delay := next_at - time.monotonic()) > 0:
                await asyncio.sleep(delay)  # the pace the test asks for, not a wait
            ns = self.shape.namespaces[index % len(self.shape.namespaces)]
            name = f"{prefix}-{index}"
            self.created[phase].append((ns, name))
            await limit.acquire()
            task = asyncio.create_task(self._create_job(phase, ns, name))
            task.add_done_callback(lambda _: limit.release())
            tasks.add(task)
            task.add_done_callback(tasks.discard)
            index += 1
            next_at += interval
        await asyncio.gather(*tasks)

    async def _create_job(self, phase: str, ns: str, name: str) -> None:
        fill = phase == FILL
        job = workload.job(
            name,
            ns,
            phase=phase,
            mode=self.shape.mode,
            run_for=self.options.fill_run_for if fill else self.options.churn_run_for,
            completions=1 if fill else self.options.churn_completions,
        )
        try:
            await self.api.create(job)
        except errors.ApiError as exc:
            self.created[phase].remove((ns, name))
            self.create_errors.append(f"{ns}/{name}: {exc}")

    # -- measuring --------------------------------------------------------------------

    async def measured(self, phase: str, work: Awaitable[None]) -> dict[str, Any]:
        """Run one phase: its duration, and its metric SLIs from the scrapes around it."""
        self.phase, self.phase_started = phase, time.monotonic()
        self.say(f"[{phase}] started")
        before = await self._scrape()
        await work
        duration = time.monotonic() - self.phase_started
        after = await self._scrape()
        found: dict[str, Any] = {"duration_s": round(duration, 2)}
        if before is not None and after is not None:
            found["metrics"] = after.since(before)
        self.say(f"[{phase}] done in {duration:.1f} s")
        return found

    async def _scrape(self) -> scrape.Snapshot | None:
        if not self.metrics_urls:
            return None
        return await scrape.scrape_all(self.metrics_urls)

    def progress_line(self) -> str:
        phase = self.phase
        elapsed = time.monotonic() - self.phase_started
        running = self.pods.running_in(FILL) + self.pods.running_in(CHURN)
        line = f"[{phase} {elapsed:.0f}s] pods running {running}"
        if phase in (FILL, CHURN):
            jobs = len(self.created[phase])
            startup = self.pods.startup(phase)
            line += (
                f", jobs created {jobs} ({jobs / max(elapsed, 1e-9):.1f}/s)"
                f", pods started {startup.count}, start-up p99 {startup.p99:.2f}s"
            )
        elif phase == DRAIN:
            line += f", pods left {len(self.present_pods.keys)}"
            line += f", claims left {len(self.present_claims.keys)}"
        return line

    async def report_progress(self) -> None:
        while True:
            await asyncio.sleep(self.options.progress_every)
            self.say(self.progress_line())


async def run_load_test(
    api: ApiClient,
    shape: workload.Shape,
    options: Options,
    *,
    metrics_urls: list[str],
    say: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Run the phases, printing progress through `say`; the results (`results.summarize`)."""
    run = LoadTestRun(api, shape, options, metrics_urls, say)
    for informer in run.informers:
        informer.start()
    reporter = asyncio.create_task(run.report_progress())
    try:
        for informer in run.informers:
            await informer.wait_synced(options.timeout)
        await run.setup()
        phases = {
            FILL: await run.measured(FILL, run.fill()),
            CHURN: await run.measured(CHURN, run.churn()),
        }
        phases[DRAIN] = await run.measured(DRAIN, run.drain())
    finally:
        reporter.cancel()
        for informer in run.informers:
            await informer.stop()
    return results.summarize(run, phases)


async def _create_unless_exists(creation: Awaitable[Any]) -> None:
    with contextlib.suppress(errors.AlreadyExists):
        await creation
