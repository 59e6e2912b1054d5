"""The apistore service: Postgres store, core, outbox, the NATS API and (given a port) the
Kubernetes-compatible HTTP API, started together."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import ssl
from dataclasses import dataclass
from pathlib import Path

from nats.aio.msg import Msg

from drasim.apistore import faults, health, limits
from drasim.apistore.compaction import DEFAULT_COMPACTION_INTERVAL, Compactor
from drasim.apistore.core import ApiCore
from drasim.apistore.event_ttl import DEFAULT_EVENT_TTL, EventTtl
from drasim.apistore.http import HttpApi, build_app
from drasim.apistore.http.authn import Tokens
from drasim.apistore.metrics import ApiStoreMetrics
from drasim.apistore.nats_api import NatsApi
from drasim.apistore.outbox import DEFAULT_MAX_MSGS, Outbox
from drasim.apistore.store import Store
from drasim.common import errors
from drasim.common import features as gates
from drasim.common.bus import subjects
from drasim.common.bus.client import Bus
from drasim.common.featuregate import FeatureGate
from drasim.common.runtime_config import DEFAULT as DEFAULT_RUNTIME_CONFIG
from drasim.common.runtime_config import RuntimeConfig

log = logging.getLogger(__name__)


@dataclass
class ApiServer:
    """A running apistore; `stop()` shuts it down in reverse order."""

    store: Store
    bus: Bus
    core: ApiCore
    outbox: Outbox
    api: NatsApi
    outbox_task: asyncio.Task[None]
    _control_sub: object = None
    http: HttpApi | None = None
    metrics: ApiStoreMetrics | None = None
    event_ttl_task: asyncio.Task[None] | None = None
    compactor: Compactor | None = None
    compaction_task: asyncio.Task[None] | None = None

    @classmethod
    async def start(
        cls,
        *,
        nats_url: str,
        database_url: str,
        prefix: str,
        nats_credentials: Path | None = None,
        fault_plan: faults.FaultPlan | None = None,
        fault_injection: bool = False,
        max_stream_msgs: int = DEFAULT_MAX_MSGS,
        http_port: int | None = None,
        http_host: str = "127.0.0.1",
        http_token: str = "",
        http_tokens: Tokens | None = None,
        http_tls: ssl.SSLContext | None = None,
        event_ttl: float = DEFAULT_EVENT_TTL,
        compaction_interval: float = DEFAULT_COMPACTION_INTERVAL,
        features: FeatureGate = gates.DEFAULT,
        runtime_config: RuntimeConfig = DEFAULT_RUNTIME_CONFIG,
    ) -> ApiServer:
        """With `http_port` (0 picks a free one) the HTTP API serves too, for `http_token`.
        Events expire `event_ttl` seconds after their last write (0: never). The event log
        and stream are compacted every `compaction_interval` seconds (0: never). Fault plans
        can be installed at run time (`drasim.apistore.faults`, over the control subject)
        only with `fault_injection`, and NATS lets only admins publish there. `features`
        are the feature gates and the release they are of: writes drop what a disabled gate
        guards, `/version` says the release emulated. `runtime_config` says which versions
        the HTTP API serves besides the stored ones (`--runtime-config`)."""
        store = await Store.connect(database_url)
        await store.migrate()
        bus = await Bus.connect(
            nats_url, prefix=prefix, name="apistore", credentials=nats_credentials
        )
        try:
            # Every object travels whole on the bus: accept no larger one than it carries.
            url = bus.nc.connected_url
            max_object_bytes = limits.max_object_bytes(
                bus.nc.max_payload, server=f"{url.hostname}:{url.port}" if url else ""
            )
        except Exception:
            await bus.close()
            await store.close()
            raise
        if fault_plan is None and os.environ.get("DRASIM_FAULT_PLAN"):
            fault_plan = faults.parse(os.environ["DRASIM_FAULT_PLAN"])
        outbox = Outbox(store, bus, max_msgs=max_stream_msgs)
        core = ApiCore(
            store,
            fault_plan=fault_plan,
            on_commit=outbox.add,
            max_object_bytes=max_object_bytes,
            features=features,
        )
        outbox_task = asyncio.create_task(outbox.run(), name="apistore-outbox")
        await core.start()
        server_metrics = ApiStoreMetrics(store=store, outbox=outbox, core=core)
        api = NatsApi(core, bus, request_metrics=server_metrics.requests)
        await api.start()
        server = cls(store, bus, core, outbox, api, outbox_task, metrics=server_metrics)
        if http_port is not None:
            app = build_app(
                core,
                bus,
                token=http_token,
                tokens=http_tokens,
                request_metrics=server_metrics.requests,
                health_checks=health.apistore_checks(store, bus, outbox),
                version=features.version,
                runtime_config=runtime_config,
            )
            server.http = HttpApi(app)
            await server.http.start(http_host, http_port, http_tls)
        if event_ttl > 0:
            server.event_ttl_task = asyncio.create_task(
                EventTtl(core, event_ttl).run(), name="apistore-event-ttl"
            )
        if compaction_interval > 0:
            server.compactor = Compactor(store, bus, compaction_interval)
            server.compaction_task = asyncio.create_task(
                server.compactor.run(), name="apistore-compaction"
            )
        if fault_injection:
            server._control_sub = await bus.nc.subscribe(
                subjects.control(prefix, "apistore", "faults"), cb=server._on_fault_plan
            )
        return server

    async def _on_fault_plan(self, msg: Msg) -> None:
        """Replace the fault plan at run time (every replica listens, no queue group)."""
        try:
            plan = faults.parse(msg.data.decode() or '{"rules": []}')
        except errors.ApiError as exc:
            await msg.respond(str(exc).encode())
            return
        self.core.fault_plan = plan if plan.rules else None
        await msg.respond(b"ok")

    async def stop(self) -> None:
        if self.http is not None:
            await self.http.stop()
        for task in (self.event_ttl_task, self.compaction_task):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        await self.api.stop()
        await self.core.stop()
        self.outbox_task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.outbox_task
        await self.outbox.stop()
        await self.bus.close()
        await self.store.close()
