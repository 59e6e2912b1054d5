"""The apistore's health checks, behind `/healthz`, `/livez` and `/readyz`.

kube-apiserver checks what it depends on (`ping`, `etcd`, its post-start hooks); the
apistore depends on Postgres, where every write commits, and on NATS, where the outbox
publishes committed events for watchers. So:

- `ping`: the process answers at all;
- `postgres`: a query answers within `CHECK_TIMEOUT` (as upstream's `etcd` check reads);
- `nats`: the connection is up and the server answers a PING within `CHECK_TIMEOUT`;
- `outbox`: no committed event has waited longer than `OUTBOX_MAX_LAG` for JetStream to
  acknowledge it, i.e. watches are not falling behind writes.

Liveness (`/livez`, and `/healthz`, which upstream keeps as its older name) asks only what
a restart could mend: `ping` and `postgres`. Readiness (`/readyz`) asks all four: with NATS
away writes still commit, but watchers stop seeing them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from drasim.apistore.outbox import Outbox
from drasim.apistore.store import Store
from drasim.common.bus.client import Bus

__all__ = ["CHECK_TIMEOUT", "OUTBOX_MAX_LAG", "HealthCheck", "HealthChecks", "apistore_checks"]

CHECK_TIMEOUT = 2.0  # seconds; upstream's --etcd-healthcheck-timeout
OUTBOX_MAX_LAG = 10.0  # seconds the oldest unpublished event may wait


class CheckFailed(Exception):
    """A check's reason, for the log and for `/readyz/<name>` (never for `/readyz`)."""


@dataclass(frozen=True, slots=True)
class HealthCheck:
    """A named check: `check()` returns if healthy, else raises with the reason."""

    name: str
    check: Callable[[], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class HealthChecks:
    """The checks of each endpoint, in the order `?verbose` lists them."""

    livez: tuple[HealthCheck, ...]
    readyz: tuple[HealthCheck, ...]

    @property
    def healthz(self) -> tuple[HealthCheck, ...]:
        return self.livez


async def ping() -> None:
    """Answering is the check."""


def apistore_checks(store: Store, bus: Bus, outbox: Outbox) -> HealthChecks:
    """The apistore's checks over its store, its NATS connection and its outbox."""

    async def postgres() -> None:
        try:
            await asyncio.wait_for(store.max_seq(), CHECK_TIMEOUT)
        except TimeoutError:
            raise CheckFailed(f"no answer from Postgres within {CHECK_TIMEOUT:g}s") from None
        except Exception as exc:
            raise CheckFailed(f"Postgres: {exc}") from exc

    async def nats() -> None:
        nc = bus.nc
        if not nc.is_connected:
            raise CheckFailed("not connected to NATS")
        try:
            await nc.flush(timeout=CHECK_TIMEOUT)
        except Exception as exc:
            raise CheckFailed(f"no PONG from NATS within {CHECK_TIMEOUT:g}s: {exc!r}") from exc

    async def outbox_publishing() -> None:
        behind = outbox.committed - outbox.published
        if behind <= 0:
            return
        try:
            waited = await asyncio.wait_for(outbox.unpublished_age(), CHECK_TIMEOUT)
        except Exception as exc:
            raise CheckFailed(f"reading the oldest unpublished event: {exc!r}") from exc
        if waited > OUTBOX_MAX_LAG:
            raise CheckFailed(f"{behind} events unpublished, the oldest for {waited:.0f}s")

    live = (HealthCheck("ping", ping), HealthCheck("postgres", postgres))
    return HealthChecks(
        livez=live,
        readyz=(
            *live,
            HealthCheck("nats", nats),
            HealthCheck("outbox", outbox_publishing),
        ),
    )
