"""The machine's round-trip ceiling: NATS request/reply round trips to a trivial responder
in its own process, the most any request through the bus can do on this machine now.

`benchmarks/apistore_bench.py` holds its writes against it, and `drasim loadtest` measures
it in the same run as its load, so that figures from runs on differently loaded or sized
machines compare: a shared machine's speed moves both alike. `CpuMeter` counts the CPU
the processes involved (and the whole machine) spend meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil

from drasim.common.bus import headers
from drasim.common.bus.client import Bus

__all__ = ["CpuMeter", "RoundTrips", "ceiling"]


class CpuMeter:
    """CPU seconds of the benchmark's processes by role, and of the whole machine.

    Each role is one process, Postgres' with its backends. What the machine spent beyond
    them is other work sharing the cores."""

    def __init__(self, roles: dict[str, int | None]) -> None:
        self._roles = {role: psutil.Process(pid) for role, pid in roles.items() if pid}

    def sample(self) -> dict[str, float]:
        found = {}
        for role, proc in self._roles.items():
            procs = [proc]
            if role == "postgres":
                with contextlib.suppress(psutil.Error):
                    procs += proc.children(recursive=True)
            total = 0.0
            for p in procs:
                with contextlib.suppress(psutil.Error):
                    t = p.cpu_times()
                    total += t.user + t.system
            found[role] = total
        machine = psutil.cpu_times()
        found["machine"] = machine.user + machine.nice + machine.system + machine.irq
        found["machine"] += machine.softirq + getattr(machine, "steal", 0.0)
        return found


RESPONDER = """
import asyncio, sys
from pathlib import Path
from drasim.common import service
from drasim.common.bus.client import Bus
async def main():
    credentials = Path(sys.argv[3]) if len(sys.argv) > 3 else None
    bus = await Bus.connect(sys.argv[1], prefix="", name="echo", credentials=credentials)
    nc = bus.nc
    async def cb(msg):
        await msg.respond(msg.data)
    await nc.subscribe(sys.argv[2], queue="bench", cb=cb)
    await nc.flush()  # (twice: nats-py's PING may overtake the buffered SUB)
    await nc.flush()  # the subscription is in place before the first request
    print("READY", flush=True)
    await asyncio.Event().wait()
service.use_event_loop()
asyncio.run(main())
"""


class RoundTrips:
    """Round trips to a trivial responder in its own process (on the services' event loop),
    sent as a load's clients send theirs: `connections` connections, `clients` in flight,
    `body` as each request's bytes and the actor header."""

    def __init__(
        self,
        nats_url: str,
        prefix: str,
        clients: int,
        connections: int,
        nats_pid: int | None,
        *,
        body: bytes,
        credentials: Path | None = None,
    ) -> None:
        self.nats_url, self.subject = nats_url, f"{prefix}.echo"
        self.prefix, self.clients, self.connections = prefix, clients, connections
        self.nats_pid, self.body, self.credentials = nats_pid, body, credentials
        self._proc: asyncio.subprocess.Process | None = None
        self._buses: list[Bus] = []

    async def start(self) -> None:
        argv = [self.nats_url, self.subject]
        argv += [str(self.credentials)] if self.credentials else []
        self._proc = await asyncio.create_subprocess_exec(
            sys.executable, "-c", RESPONDER, *argv, stdout=subprocess.PIPE
        )
        assert self._proc.stdout is not None
        assert (await self._proc.stdout.readline()).startswith(b"READY")
        self._buses = [
            await Bus.connect(
                self.nats_url,
                prefix=self.prefix,
                name=f"bench-rr-{i}",
                credentials=self.credentials,
            )
            for i in range(self.connections)
        ]

    async def stop(self) -> None:
        for bus in self._buses:
            await bus.close()
        if self._proc is not None:
            self._proc.terminate()
            await self._proc.wait()

    async def window(self, seconds: float, *, plain: bool) -> tuple[int, float, float]:
        """Round trips for `seconds` through `Bus.request`, or with `plain` through nats-py's
        own `nc.request`: (round trips, seconds, CPU seconds of clients, responder, NATS)."""
        hdrs = {headers.ACTOR: "bench"}
        done = 0
        stop_at = time.perf_counter() + seconds

        async def requester(i: int) -> None:
            nonlocal done
            bus = self._buses[i % self.connections]
            request = bus.nc.request if plain else bus.request
            while time.perf_counter() < stop_at:
                await request(self.subject, self.body, timeout=5, headers=hdrs)
                done += 1

        assert self._proc is not None
        meter = CpuMeter(
            {"clients": os.getpid(), "responder": self._proc.pid, "nats": self.nats_pid}
        )
        cpu0 = meter.sample()
        t0 = time.perf_counter()
        await asyncio.gather(*(requester(i) for i in range(self.clients)))
        elapsed = time.perf_counter() - t0
        cpu1 = meter.sample()
        cpu = sum(cpu1[role] - cpu0[role] for role in cpu1 if role != "machine")
        return done, elapsed, cpu


async def ceiling(
    nats_url: str,
    prefix: str,
    *,
    body: bytes,
    seconds: float,
    credentials: Path | None = None,
    clients: int = 64,
    connections: int = 4,
) -> float:
    """Raw round trips per second (nats-py's `nc.request`, as the apistore benchmark's
    `ceiling_reqreply_per_s`) over `seconds`."""
    trips = RoundTrips(
        nats_url, prefix, clients, connections, None, body=body, credentials=credentials
    )
    await trips.start()
    try:
        done, elapsed, _ = await trips.window(seconds, plain=True)
    finally:
        await trips.stop()
    return done / elapsed
