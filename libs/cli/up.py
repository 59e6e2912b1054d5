"""`drasim up`: run a whole cluster in the foreground until Ctrl-C or SIGTERM.

It starts NATS and Postgres (embedded under the data directory unless URLs are given),
writes cluster.json for the other commands, then runs every service in `SERVICES` as its
own process and supervises them:

- a service prints a line starting with `READY` once it serves; every other line of its
  output is forwarded prefixed with `[name]`; when all are ready, `up` prints one line
  starting with `ready:`;
- Ctrl-C or SIGTERM stops the services (SIGTERM, then SIGKILL after `STOP_TIMEOUT`), then
  the embedded servers, and `up` exits 0;
- a service that exits on its own is reported, everything stops and `up` exits 1.

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
from dataclasses import dataclass, field
from urllib.parse import urlsplit, urlunsplit

from drasim.cli import cluster
from drasim.common.config import Config
from drasim.common.embedded import EmbeddedNats, EmbeddedPostgres

# Every service `up` runs, as the module `python -m` starts; the last dotted part names it.
SERVICES: tuple[str, ...] = ("drasim.apistore",)
STOP_TIMEOUT = 10.0
READY_MARKER = "READY"


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "up",
        help="run a local cluster in the foreground",
        description="Run a local cluster in the foreground until Ctrl-C or SIGTERM.",
    )
    parser.add_argument(
        "--demo", action="store_true", help="also load the demo workload once the cluster is up"
    )
    # Tests substitute fake services here; users have no reason to.
    parser.add_argument(
        "--services",
        type=lambda text: tuple(text.split(",")),
        default=SERVICES,
        help=argparse.SUPPRESS,
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Flags and environment only: cluster.json is what this command writes, not reads."""
    config = Config.from_env(**cluster.cluster_flags(args))
    return asyncio.run(_up(config, modules=args.services))


async def _up(config: Config, *, modules: Sequence[str]) -> int:
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stopping.set)
    config.data_dir.mkdir(parents=True, exist_ok=True)
    async with contextlib.AsyncExitStack() as stack:
        nats_url = config.nats_url or await _start(stack, EmbeddedNats(config.data_dir))
        database_url = config.database_url or await _start(stack, EmbeddedPostgres(config.data_dir))
        if stopping.is_set():
            return 0
        info = cluster.ClusterInfo(
            nats_url=nats_url, database_url=database_url, prefix=config.prefix, pid=os.getpid()
        )
        cluster.write_cluster(config.data_dir, info)
        stack.callback(cluster.remove_cluster, config.data_dir, info.pid)
        ready_line = (
            f"ready: nats={nats_url} postgres={_redact(database_url)} "
            f"services={','.join(_service_name(module) for module in modules)}"
        )
        argv = ["--nats-url", nats_url, "--database-url", database_url, "--prefix", config.prefix]
        return await _supervise(modules, argv, stopping, ready_line)


async def _start(stack: contextlib.AsyncExitStack, server: EmbeddedNats | EmbeddedPostgres) -> str:
    """Start in a thread, so that a signal meanwhile is noted rather than lost."""
    await asyncio.to_thread(server.start)
    stack.push_async_callback(asyncio.to_thread, server.stop)
    return server.url


@dataclass
class _Service:
    """One service process; its output arrives through a pipe so it can be prefixed."""

    name: str
    process: asyncio.subprocess.Process
    ready: asyncio.Event = field(default_factory=asyncio.Event)

    @classmethod
    async def spawn(cls, module: str, argv: list[str]) -> _Service:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            module,
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            limit=2**20,  # bytes per line; the default 64 KiB is short for a traceback
        )
        return cls(_service_name(module), process)

    async def forward_output(self) -> None:
        """Pass the service's lines on until it closes its output, noting READY."""
        assert self.process.stdout is not None
        async for raw in self.process.stdout:
            line = raw.decode(errors="replace").rstrip("\r\n")
            if line.startswith(READY_MARKER):
                self.ready.set()
            else:
                print(f"[{self.name}] {line}", flush=True)

    async def stop(self) -> None:
        """SIGTERM, then SIGKILL, to the service's process group (its own session), so
        helpers it started go too."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGTERM)
        try:
            await asyncio.wait_for(self.process.wait(), STOP_TIMEOUT)
        except TimeoutError:
            print(
                f"drasim: service {self.name} did not stop within {STOP_TIMEOUT:.0f}s; killing it",
                file=sys.stderr,
                flush=True,
            )
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            await self.process.wait()


def _service_name(module: str) -> str:
    return module.rsplit(".", 1)[-1]


async def _supervise(
    modules: Sequence[str], argv: list[str], stopping: asyncio.Event, ready_line: str
) -> int:
    """Run the services until a stop is asked for (0) or one of them exits (1)."""
    services: list[_Service] = []
    async with asyncio.TaskGroup() as tasks:
        try:
            outputs: dict[str, asyncio.Task[None]] = {}
            for module in modules:
                service = await _Service.spawn(module, argv)
                services.append(service)
                outputs[service.name] = tasks.create_task(service.forward_output())
            announce = tasks.create_task(_announce(services, ready_line))
            stop_asked = tasks.create_task(stopping.wait())
            exits = {tasks.create_task(s.process.wait()): s for s in services}
            done, _ = await asyncio.wait({stop_asked, *exits}, return_when=asyncio.FIRST_COMPLETED)
            crashed = [exits[task] for task in done if task in exits]
            for service in crashed:
                await outputs[service.name]  # its last words (a traceback) come first
                print(
                    f"drasim: service {service.name} exited with code "
                    f"{service.process.returncode}; stopping the cluster",
                    file=sys.stderr,
                    flush=True,
                )
            announce.cancel()
            stop_asked.cancel()
            return 1 if crashed else 0
        finally:
            # The output tasks end once their service has exited and its pipe is drained.
            await asyncio.gather(*(service.stop() for service in services))


async def _announce(services: list[_Service], ready_line: str) -> None:
    await asyncio.gather(*(s.ready.wait() for s in services))
    print(ready_line, flush=True)


def _redact(url: str) -> str:
    """The URL without its password, fit for a terminal."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))
