"""How `drasim up` keeps its processes alive, as a kubelet keeps a pod's containers.

- Services start in stages, each once the previous one is ready (`drasim.cli.launch`
  starts them; a service prints a line starting with `READY` once it serves, and every
  other line is forwarded as `[name] line`).
- A service that exits after the cluster was ready is started again, after a back-off
  that doubles from `BACKOFF_INITIAL` to `BACKOFF_MAX` and starts over once the service
  has run for `BACKOFF_RESET` (the kubelet's CrashLoopBackOff, with shorter times: an
  emulated cluster should converge within seconds). Each exit and each return is said on
  stderr. A service that exits before the cluster was first ready stops the cluster
  (exit code 1): that is a broken set-up, and restarting would only hide its message.
- Embedded NATS and Postgres are watched the same way and restarted on their port, so
  the services' clients reconnect to them.
- Only one `up` runs on a data directory (`up.lock`), and the pids of the services it
  runs are kept in `up.pids`: an `up` killed with SIGKILL leaves its services running
  (they have sessions of their own), and the next `up` stops them before it starts.
  While `up` lives, its services are also told to stop should it die (PR_SET_PDEATHSIG).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import signal
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Protocol

import msgspec
import psutil

from drasim.cli.launch import STOP_TIMEOUT, Launch, ServiceProcess, prefixed

BACKOFF_INITIAL = 1.0
BACKOFF_MAX = 30.0
BACKOFF_RESET = 60.0
SERVER_POLL = 0.5  # how often the embedded servers are checked for life
LOCK_FILE = "up.lock"
PIDS_FILE = "up.pids"


class SupervisorError(RuntimeError):
    """`up` cannot run on this data directory (the message says why)."""


def say(message: str) -> None:
    print(f"drasim: {message}", file=sys.stderr, flush=True)


class _Record(msgspec.Struct, frozen=True):
    """A process `up` started: its pid and start time (pids get reused; the pair does not)."""

    pid: int
    create_time: float


class ProcessRecords:
    """`<data-dir>/up.pids`: the services `up` runs, so a later `up` can stop orphans."""

    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / PIDS_FILE
        self._records: dict[str, _Record] = {}

    def add(self, name: str, pid: int) -> None:
        try:
            self._records[name] = _Record(pid, psutil.Process(pid).create_time())
        except psutil.Error:  # gone already; its exit is noticed elsewhere
            return
        self._save()

    def discard(self, name: str) -> None:
        if self._records.pop(name, None) is not None:
            self._save()

    def _save(self) -> None:
        temp = self.path.with_suffix(".tmp")
        temp.write_bytes(msgspec.json.encode(list(self._records.values())))
        temp.replace(self.path)

    def stop_orphans(self) -> list[int]:
        """Stop what an earlier `up` on this directory left running; returns their pids."""
        try:
            records = msgspec.json.decode(self.path.read_bytes(), type=list[_Record])
        except (OSError, msgspec.DecodeError):
            return []
        orphans = []
        for record in records:
            with contextlib.suppress(psutil.Error):
                process = psutil.Process(record.pid)
                if process.create_time() == record.create_time and process.is_running():
                    orphans.append(process)
        for process in orphans:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGTERM)
        _gone, alive = psutil.wait_procs(orphans, timeout=STOP_TIMEOUT)
        for process in alive:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
        psutil.wait_procs(alive, timeout=STOP_TIMEOUT)
        self.path.unlink(missing_ok=True)
        return [process.pid for process in orphans]


def lock_data_dir(data_dir: Path) -> IO[str]:
    """Hold `<data-dir>/up.lock` for as long as the returned file stays open."""
    lock = (data_dir / LOCK_FILE).open("a+")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.seek(0)
        holder = lock.read().strip() or "?"
        lock.close()
        raise SupervisorError(
            f"{data_dir} is in use: another drasim up runs on it (pid {holder})"
        ) from None
    lock.truncate(0)
    lock.write(f"{os.getpid()}\n")
    lock.flush()
    return lock


async def _stop(run: ServiceProcess) -> None:
    def killing() -> None:
        say(f"service {run.name} did not stop within {STOP_TIMEOUT:.0f}s; killing it")

    await run.stop(on_kill=killing)


class EmbeddedServer(Protocol):
    """What the watchdog needs of `drasim.common.embedded`'s servers."""

    name: str
    port: int

    def returncode(self) -> int | None: ...
    def restart(self) -> None: ...


@dataclass
class _Backoff:
    """CrashLoopBackOff: the next delay, doubled per exit, reset after a long run."""

    delay: float = BACKOFF_INITIAL
    restarts: int = 0

    def next(self, ran_for: float) -> float:
        if ran_for >= BACKOFF_RESET:
            self.delay = BACKOFF_INITIAL
        delay, self.delay = self.delay, min(self.delay * 2, BACKOFF_MAX)
        self.restarts += 1
        return delay


class Supervisor:
    """Runs the stages until a stop is asked for (exit code 0) or the cluster fails (1)."""

    def __init__(
        self,
        stages: Sequence[Sequence[Launch]],
        stopping: asyncio.Event,
        *,
        records: ProcessRecords | None = None,
        servers: Sequence[EmbeddedServer] = (),
    ) -> None:
        self._stages = stages
        self._stopping = stopping
        self._records = records
        self._servers = servers
        self._running: dict[str, ServiceProcess] = {}  # by name, the current run of each
        self._started: list[list[str]] = []  # names by stage, in start order
        self._cluster_ready = False
        self._failed = asyncio.Event()

    async def run(
        self,
        ready_line: str,
        *,
        after_first_stage: Callable[[], Awaitable[None]] | None = None,
        when_ready: Callable[[], Awaitable[None]] | None = None,
        on_ready: Callable[[dict[str, str]], None] | None = None,
    ) -> int:
        """`after_first_stage` runs once the first stage is ready, before the next starts
        (`up`: once the apistore serves, so that what it creates is there before anything
        reads it), `on_ready` just before the ready line with the services' metrics URLs by
        name, `when_ready` after it. A failure of either stops the cluster like a service
        that could not start."""
        async with asyncio.TaskGroup() as tasks:
            self._tasks = tasks
            for server in self._servers:
                tasks.create_task(self._watch_server(server), name=f"watch {server.name}")
            launcher = tasks.create_task(
                self._launch(ready_line, after_first_stage, when_ready, on_ready), name="launch"
            )
            stop_asked = tasks.create_task(self._stopping.wait())
            failure = tasks.create_task(self._failed.wait())
            try:
                await asyncio.wait({stop_asked, failure}, return_when=asyncio.FIRST_COMPLETED)
                code = 1 if self._failed.is_set() else 0
                self._stopping.set()  # exits from here on are ours
                for task in (launcher, stop_asked, failure):
                    task.cancel()
                return code
            finally:
                self._stopping.set()
                # Later stages first: kubelets before the apistore they write to. The
                # keepers and output tasks end once their service has exited.
                for names in reversed(self._started):
                    await asyncio.gather(
                        *(_stop(self._running[n]) for n in names if n in self._running)
                    )

    async def _launch(
        self,
        ready_line: str,
        after_first_stage: Callable[[], Awaitable[None]] | None,
        when_ready: Callable[[], Awaitable[None]] | None,
        on_ready: Callable[[dict[str, str]], None] | None,
    ) -> None:
        try:
            for i, stage in enumerate(self._stages):
                first_runs = [await self._start(launch) for launch in stage]
                self._started.append([launch.name for launch in stage])
                for launch, first_run in zip(stage, first_runs, strict=True):
                    self._tasks.create_task(self._keep(launch, first_run), name=launch.name)
                await asyncio.gather(*(run.ready.wait() for run in first_runs))
                if i == 0 and after_first_stage is not None:
                    await after_first_stage()
            self._cluster_ready = True
            if on_ready is not None:
                on_ready({n: s.metrics_url for n, s in self._running.items() if s.metrics_url})
            print(ready_line, flush=True)
            if when_ready is not None:
                await when_ready()
        except Exception as exc:  # the apistore refused a DeviceClass, NATS went away...
            say(f"{exc}; stopping the cluster")
            self._failed.set()

    async def _start(self, launch: Launch) -> ServiceProcess:
        run = await ServiceProcess.spawn(launch, on_line=prefixed(launch))
        self._running[launch.name] = run
        if self._records is not None:
            self._records.add(launch.name, run.process.pid)
        return run

    async def _keep(self, launch: Launch, run: ServiceProcess) -> None:
        """Keep one service running: wait for it to exit, then start it again."""
        backoff = _Backoff()
        while True:
            started = time.monotonic()
            readiness = self._tasks.create_task(self._note_ready_again(run, backoff))
            code = await run.wait()  # its last words (a traceback) come first
            readiness.cancel()
            if self._stopping.is_set():
                return
            if not self._cluster_ready:
                say(f"service {launch.name} exited with code {code}; stopping the cluster")
                self._failed.set()
                return
            delay = backoff.next(time.monotonic() - started)
            say(
                f"service {launch.name} exited with code {code}; restarting it in "
                f"{delay:g}s (restart {backoff.restarts})"
            )
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), delay)
            if self._stopping.is_set():
                return
            run = await self._start(launch)

    async def _note_ready_again(self, run: ServiceProcess, backoff: _Backoff) -> None:
        await run.ready.wait()
        if backoff.restarts:
            say(f"service {run.name} is ready again (restart {backoff.restarts})")

    async def _watch_server(self, server: EmbeddedServer) -> None:
        """Restart an embedded server that died, on its port, until `up` stops."""
        backoff = _Backoff()
        started = time.monotonic()
        while not self._stopping.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), SERVER_POLL)
            code = server.returncode()
            if code is None or self._stopping.is_set():
                continue
            say(f"embedded {server.name} exited with code {code}; restarting it")
            while not self._stopping.is_set():
                try:
                    await asyncio.to_thread(server.restart)
                except Exception as exc:  # e.g. its port was taken meanwhile
                    delay = backoff.next(time.monotonic() - started)
                    say(f"embedded {server.name} did not restart ({exc}); next try in {delay:g}s")
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._stopping.wait(), delay)
                    continue
                started = time.monotonic()
                say(f"embedded {server.name} is back on port {server.port}")
                break
