"""Starting drasim's processes, in one place: NATS and Postgres, and the services.

`drasim up` (through `drasim.cli.supervisor`), `drasim bench`, the benchmarks and the test
fixtures all start what they run through here, so each of them:

- gives a service the same flags: where NATS and Postgres are, the subject prefix, the
  NATS identity it connects as, its log level and the cluster's feature gates
  (`Launch.service`);
- runs it as `python -m <module>` in a session of its own, so a Ctrl-C in the terminal
  reaches only the parent, which stops it in order, and tells it to stop should the
  parent die however it dies (PR_SET_PDEATHSIG, `die_with_parent`);
- takes it as ready at the line starting with `READY` that it prints once it serves
  (`drasim.common.service.announce_ready`; `drasim up`'s own is `ready:`), and hands each
  line of its output, stdout and stderr, to the caller (`ServiceProcess`);
- stops it with SIGTERM to its process group, then SIGKILL after `STOP_TIMEOUT`.

`infrastructure` gives NATS and Postgres: the servers given by URL, or embedded ones
(`drasim.common.embedded`) under a data directory. `create_database`, `drop_database` and
`delete_event_stream` give a run or a test its own share of servers others may share.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import ctypes
import os
import signal
import sys
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TextIO
from urllib.parse import urlsplit

from drasim.common import nats_auth
from drasim.common.bus import subjects
from drasim.common.bus.client import Bus
from drasim.common.config import database_name, with_database
from drasim.common.embedded import EmbeddedNats, EmbeddedPostgres
from drasim.common.featuregate import FeatureGate

READY_MARKER = "READY"
READY_TIMEOUT = 60.0
STOP_TIMEOUT = 10.0
OUTPUT_LINE_LIMIT = 2**20  # bytes per line; the default 64 KiB is short for a traceback
TAIL_LINES = 20  # of output, kept for the error of a service that did not start
_PR_SET_PDEATHSIG = 1


class LaunchError(RuntimeError):
    """A service did not become ready (the message says why, and where to look)."""


@dataclass(frozen=True)
class Launch:
    """A process to start: its name in output, its module, its command line, the line
    that says it is ready, and its environment (None: this process's)."""

    name: str
    module: str
    argv: list[str]
    ready_marker: str = READY_MARKER
    environment: Mapping[str, str] | None = None

    @classmethod
    def service(
        cls,
        module: str,
        *,
        nats_url: str,
        prefix: str,
        database_url: str | None = None,
        nats_credentials: Path | None = None,
        log_level: str | None = None,
        feature_gates: FeatureGate | None = None,
        args: Sequence[str] = (),
        name: str | None = None,
        environment: Mapping[str, str] | None = None,
    ) -> Launch:
        """A drasim service (`drasim.common.service.parse_args` reads these flags), named
        after the last part of its module unless `name` says otherwise. `feature_gates`
        becomes its `--feature-gates` and `--emulated-version`, so that every service of a
        cluster has the same gates."""
        argv = ["--nats-url", nats_url]
        if database_url is not None:
            argv += ["--database-url", database_url]
        argv += ["--prefix", prefix]
        if nats_credentials is not None:
            argv += ["--nats-credentials", str(nats_credentials)]
        if log_level is not None:
            argv += ["--log-level", log_level]
        if feature_gates is not None:
            argv += ["--emulated-version", str(feature_gates.version.emulation)]
            if feature_gates.explicit:
                argv += ["--feature-gates", feature_gates.flag()]
        return cls(
            name or module.rsplit(".", 1)[-1], module, [*argv, *args], environment=environment
        )

    @classmethod
    def up(cls, data_dir: Path, *flags: str) -> Launch:
        """`drasim up` on its own data directory, as a benchmark runs it: without the
        DRASIM_* settings of the environment, which would point it elsewhere."""
        return cls(
            "drasim up",
            "drasim.cli.main",
            ["--data-dir", str(data_dir), "up", *flags],
            ready_marker="ready:",
            environment={k: v for k, v in os.environ.items() if not k.startswith("DRASIM_")},
        )


def die_with_parent(signum: int = signal.SIGTERM) -> None:
    """In the child before exec (`preexec_fn`): `signum` when its parent (`up`, a bench, a
    benchmark or a test) dies, however it dies. SIGTERM lets it stop cleanly; a child whose
    clean stop waits on a sibling that dies with it (an API server on its etcd) needs
    SIGKILL (`functools.partial(die_with_parent, signal.SIGKILL)`)."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signum)


def prefixed(spec: Launch, file: TextIO | None = None) -> Callable[[str], None]:
    """An `on_line` printing each line but the ready one as `[name] line` to `file`
    (default: stdout), as `drasim up` shows its services' output."""

    def forward(line: str) -> None:
        if not line.startswith(spec.ready_marker):
            print(f"[{spec.name}] {line}", file=file or sys.stdout, flush=True)

    return forward


class ServiceProcess:
    """One run of a launched process. Its output is read from the start, line by line:
    the ready line sets `ready` (and `metrics_url`, from its `metrics=<url>`), and every
    line, the ready one too, goes to `on_line`."""

    def __init__(
        self,
        launch: Launch,
        process: asyncio.subprocess.Process,
        on_line: Callable[[str], None] | None,
        log: Path | None,
    ) -> None:
        self.name = launch.name
        self.process = process
        self.ready = asyncio.Event()
        self.metrics_url = ""
        self.log = log
        self._marker = launch.ready_marker
        self._tail: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)
        self._output = asyncio.create_task(self._read_output(on_line), name=f"{self.name} output")

    @classmethod
    async def spawn(
        cls,
        launch: Launch,
        *,
        on_line: Callable[[str], None] | None = None,
        log: Path | None = None,
    ) -> ServiceProcess:
        """Start `python -m <module> <argv>`. Its stderr goes to `log` when given (nothing
        of it then passes through this process), else with its stdout to `on_line`."""
        stderr: int | IO[bytes] = asyncio.subprocess.STDOUT
        if log is not None:
            stderr = log.open("wb")
        try:
            process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                launch.module,
                *launch.argv,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=stderr,
                start_new_session=True,
                preexec_fn=die_with_parent if sys.platform == "linux" else None,
                env={**(launch.environment or os.environ), "PYTHONUNBUFFERED": "1"},
                limit=OUTPUT_LINE_LIMIT,
            )
        finally:
            if log is not None:
                stderr.close()  # type: ignore[union-attr] - the child keeps its own descriptor
        return cls(launch, process, on_line, log)

    @classmethod
    async def start(
        cls,
        launch: Launch,
        *,
        on_line: Callable[[str], None] | None = None,
        log: Path | None = None,
        timeout: float | None = READY_TIMEOUT,
    ) -> ServiceProcess:
        """`spawn`, then `wait_ready`; a process that does not become ready is stopped."""
        run = await cls.spawn(launch, on_line=on_line, log=log)
        try:
            await run.wait_ready(timeout)
        except BaseException:
            await run.stop()
            raise
        return run

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def returncode(self) -> int | None:
        return self.process.returncode

    async def _read_output(self, on_line: Callable[[str], None] | None) -> None:
        assert self.process.stdout is not None
        async for raw in self.process.stdout:
            line = raw.decode(errors="replace").rstrip("\r\n")
            if line.startswith(self._marker) and not self.ready.is_set():
                for word in line.split():
                    if word.startswith("metrics="):
                        self.metrics_url = word.removeprefix("metrics=")
                self.ready.set()
            self._tail.append(line)
            if on_line is not None:
                on_line(line)

    async def wait_ready(self, timeout: float | None = READY_TIMEOUT) -> None:
        """Return once the process said it is ready; LaunchError if it closed its output
        (exited) first or said nothing within `timeout` seconds."""
        ready = asyncio.ensure_future(self.ready.wait())
        try:
            await asyncio.wait(
                {ready, self._output}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            ready.cancel()
        if self.ready.is_set():
            return
        if self._output.done():
            code = await self.process.wait()
            raise LaunchError(
                f"{self.name} exited with code {code} before it was ready" + self._where()
            )
        raise LaunchError(f"{self.name} was not ready within {timeout:.0f}s" + self._where())

    def _where(self) -> str:
        if self.log is not None:
            return f"; see {self.log}"
        return "".join(f"\n  {line}" for line in self._tail)

    async def wait(self) -> int:
        """Its exit code, once it has exited and its last output (a traceback) is read."""
        code = await self.process.wait()
        await self._output
        return code

    async def stop(
        self, timeout: float | None = STOP_TIMEOUT, *, on_kill: Callable[[], None] | None = None
    ) -> int:
        """SIGTERM, then SIGKILL after `timeout` seconds (None: no SIGKILL), to the
        process group, so helpers it started go too; its exit code."""
        if self.process.returncode is not None:
            return await self.wait()  # its pid may be another's by now
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGTERM)
        try:
            await asyncio.wait_for(self.process.wait(), timeout)
        except TimeoutError:
            if on_kill is not None:
                on_kill()
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
        return await self.wait()


@dataclass(frozen=True)
class Infrastructure:
    """NATS and Postgres, given by URL or embedded.

    `nats_url` and `database_url` are what services connect to, `nats_url` with the
    credentials of each one's identity (`credentials`); the admin URLs are for whoever
    acts as anyone and makes databases: test sessions, benchmarks, scratch runs. Given
    servers serve as both."""

    nats_url: str
    database_url: str
    admin_nats_url: str
    admin_database_url: str
    nats: EmbeddedNats | None = None
    postgres: EmbeddedPostgres | None = None
    nats_credentials: Path | None = None  # of a given NATS, for every identity

    def credentials(self, user: str) -> Path | None:
        """The file the NATS identity `user` connects with (`drasim.common.nats_auth`)."""
        if self.nats is not None:
            return self.nats.credentials(user)
        return self.nats_credentials

    @property
    def embedded(self) -> list[EmbeddedNats | EmbeddedPostgres]:
        """The servers started here, to be watched and restarted should they die."""
        return [server for server in (self.nats, self.postgres) if server is not None]


@contextlib.contextmanager
def infrastructure(
    data_dir: Path,
    *,
    nats_url: str | None = None,
    database_url: str | None = None,
    nats_credentials: Path | None = None,
    nats_users: Sequence[nats_auth.NatsUser] = (),
    prefix: str = "*",
) -> Iterator[Infrastructure]:
    """The given servers, and embedded ones under `data_dir` for what is not given,
    stopped at the end. An embedded NATS takes `nats_users` (default: one admin) with
    their permissions for the cluster `prefix` (`*`: any)."""
    with contextlib.ExitStack() as stack:
        nats = postgres = None
        if nats_url is None:
            nats = stack.enter_context(EmbeddedNats(data_dir, users=nats_users, prefix=prefix))
        if database_url is None:
            postgres = stack.enter_context(EmbeddedPostgres(data_dir))
        yield Infrastructure(
            nats_url=nats.url if nats else nats_url,
            database_url=postgres.url if postgres else database_url,
            admin_nats_url=nats.admin_url if nats else nats_url,
            admin_database_url=postgres.admin_url if postgres else database_url,
            nats=nats,
            postgres=postgres,
            nats_credentials=None if nats else nats_credentials,
        )


async def create_database(
    admin_url: str, *, owner_url: str | None = None, name: str | None = None
) -> str:
    """A new, empty database (named `name`, or a fresh one), so that runs and tests never
    share state; made through `admin_url` (which may create databases). Owned by, and
    returned as the URL of, `owner_url`'s role when given (the embedded Postgres' service
    role)."""
    name = name or f"bench_{uuid.uuid4().hex[:8]}"
    owner = f' OWNER "{urlsplit(owner_url).username}"' if owner_url else ""
    await _execute(admin_url, f'CREATE DATABASE "{name}"{owner}')
    return with_database(owner_url or admin_url, name)


async def drop_database(admin_url: str, database_url: str) -> None:
    """FORCE: connections a run or test leaked must not keep the database."""
    name = database_name(database_url)
    await _execute(admin_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


async def _execute(database_url: str, statement: str) -> None:
    # Scratch databases for runs and tests: the one place outside the apistore's store
    # that talks to Postgres directly.
    import asyncpg

    conn = await asyncpg.connect(database_url)
    try:
        await conn.execute(statement)
    finally:
        await conn.close()


async def delete_event_stream(nats_url: str, prefix: str) -> None:
    """Drop the event stream of `prefix` from a NATS that outlives the run or test."""
    bus = await Bus.connect(nats_url, prefix=prefix, name="drasim-cleanup")
    try:
        with contextlib.suppress(Exception):
            await bus.js.delete_stream(subjects.stream(prefix))
    finally:
        await bus.close()
