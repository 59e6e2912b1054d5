"""The aiohttp application of the apistore's Kubernetes-compatible HTTP API.

It is a second front door next to the NATS API: handlers call the same `ApiCore` and watches
read the same event stream, so kubectl and the official clients see exactly what the
services see. The apistore owns the core and the bus; this module only borrows them.
"""

from __future__ import annotations

import logging
import ssl
from typing import TYPE_CHECKING

from aiohttp import web

from drasim.apistore import health, limits
from drasim.apistore.core import ApiCore
from drasim.apistore.http import authn, healthz, keys, middlewares, routes
from drasim.common.bus.client import Bus
from drasim.common.runtime_config import DEFAULT as DEFAULT_RUNTIME_CONFIG
from drasim.common.runtime_config import RuntimeConfig
from drasim.common.version import EffectiveVersion

if TYPE_CHECKING:
    from drasim.apistore.metrics import RequestMetrics

log = logging.getLogger(__name__)

DEFAULT_BOOKMARK_INTERVAL = 60.0
# Seconds a shutdown waits for requests in flight; watches are cancelled before that.
SHUTDOWN_TIMEOUT = 5.0


def build_app(
    core: ApiCore,
    bus: Bus,
    *,
    token: str = "",
    tokens: authn.Tokens | None = None,
    bookmark_interval: float = DEFAULT_BOOKMARK_INTERVAL,
    request_metrics: RequestMetrics | None = None,
    health_checks: health.HealthChecks | None = None,
    version: EffectiveVersion | None = None,
    runtime_config: RuntimeConfig = DEFAULT_RUNTIME_CONFIG,
) -> web.Application:
    """The application; a request with `Authorization: Bearer <token>` is the user of one
    of `tokens` (or of `token`, the cluster admin's), one without is anonymous. With
    `request_metrics`, every request is counted and timed (outermost, so with its final
    status). `/readyz` and the others run `health_checks` (none: `ping` alone); `/version`
    says `version` (default: the binary's own release). `runtime_config`: the versions served
    besides the stored ones."""
    if tokens is None:
        if not token:
            raise ValueError("the HTTP API needs a bearer token")
        tokens = authn.Tokens.single(token)
    measure = [request_metrics.http_middleware] if request_metrics is not None else []
    app = web.Application(
        middlewares=[
            *measure,
            middlewares.trace,
            middlewares.errors_to_status,
            middlewares.authenticate,
        ],
        client_max_size=limits.MAX_REQUEST_BODY_BYTES,  # a body over it: 413 (middlewares)
    )
    app[keys.CORE] = core
    app[keys.BUS] = bus
    app[keys.TOKENS] = tokens
    app[keys.BOOKMARK_INTERVAL] = bookmark_interval
    app[keys.WATCHES] = set()
    app[keys.VERSION] = version or EffectiveVersion()
    app[keys.RUNTIME_CONFIG] = runtime_config.emulating(app[keys.VERSION].emulation)
    only_ping = (health.HealthCheck("ping", health.ping),)
    app[healthz.HEALTH] = health_checks or health.HealthChecks(livez=only_ping, readyz=only_ping)
    app.on_shutdown.append(_cancel_watches)
    routes.setup_routes(app)
    return app


async def _cancel_watches(app: web.Application) -> None:
    for task in list(app[keys.WATCHES]):
        task.cancel()


class HttpApi:
    """The HTTP front door, started and stopped like `NatsApi`."""

    def __init__(self, app: web.Application) -> None:
        # Handlers are cancelled when their client goes away, which ends abandoned watches.
        self._runner = web.AppRunner(
            app, handler_cancellation=True, shutdown_timeout=SHUTDOWN_TIMEOUT, access_log=None
        )
        self.port = 0

    async def start(self, host: str, port: int, ssl_context: ssl.SSLContext | None = None) -> None:
        """Listen on `host:port` (HTTPS with `ssl_context`: clients send tokens over TLS
        only); port 0 picks a free one, found in `self.port` afterwards."""
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, port, ssl_context=ssl_context)
        await site.start()
        self.port = self._runner.addresses[0][1]
        scheme = "https" if ssl_context else "http"
        log.info("HTTP API on %s://%s:%d", scheme, host, self.port)

    async def stop(self) -> None:
        await self._runner.cleanup()
