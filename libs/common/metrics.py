"""Prometheus metrics: one registry per service process, served on `/metrics`.

Each service defines its metrics next to the code that moves them, with upstream's names
where upstream has one (`scheduler_pending_pods`, `scheduler_schedule_attempts_total`, …),
and starts `serve(port)` when given `--metrics-port`.
"""

from __future__ import annotations

from aiohttp import web
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

__all__ = ["REGISTRY", "Counter", "Gauge", "Histogram", "serve", "render"]

# Buckets for request and plugin latencies: 100 µs … 10 s.
LATENCY_BUCKETS = (
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
    2.5, 5.0, 10.0,
)  # fmt: skip


def render(registry: CollectorRegistry = REGISTRY) -> bytes:
    return generate_latest(registry)


async def serve(
    port: int, *, host: str = "127.0.0.1", registry: CollectorRegistry = REGISTRY
) -> web.AppRunner:
    """Serve `/metrics` until the returned runner is cleaned up."""

    async def metrics(_: web.Request) -> web.Response:
        return web.Response(body=render(registry), headers={"Content-Type": CONTENT_TYPE_LATEST})

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    return runner
