"""`/healthz`, `/livez`, `/readyz` and each check's own `/<endpoint>/<check>`, answered as
kube-apiserver answers them (`apiserver/pkg/server/healthz/healthz.go`).

- The endpoint runs its checks (`drasim.apistore.health`) but those `?exclude=<name>`
  names; all pass: 200 `ok`, or with `?verbose` one line per check (`[+]ping ok`,
  `[+]nats excluded: ok`) and `readyz check passed`. One fails: 500 listing every check,
  the failed ones as `[-]<name> failed: reason withheld` (the endpoint is public), and
  `readyz check failed`; the reasons go to the log.
- `/<endpoint>/<check>` runs that one check: 200 `ok`, or 500 `internal server error:
  <reason>`; upstream's RBAC lets only `system:monitoring` (and admins) read it.
- Any HTTP method is answered alike, as upstream's mux does; who may call is RBAC's
  (`system:public-info-viewer` grants the three endpoints to everyone, anonymous users too).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from aiohttp import web

from drasim.apistore.health import HealthCheck, HealthChecks

__all__ = ["HEALTH", "setup_routes"]

log = logging.getLogger(__name__)

HEALTH = web.AppKey("health", HealthChecks)
ENDPOINTS = ("healthz", "livez", "readyz")
Handler = Callable[[web.Request], Awaitable[web.Response]]
_HEADERS = {"X-Content-Type-Options": "nosniff"}


def setup_routes(router: web.UrlDispatcher) -> None:
    for endpoint in ENDPOINTS:
        router.add_route("*", f"/{endpoint}", _endpoint_handler(endpoint))
        router.add_route("*", f"/{endpoint}/{{check:.+}}", _check_handler(endpoint))


def _checks(request: web.Request, endpoint: str) -> tuple[HealthCheck, ...]:
    return getattr(request.app[HEALTH], endpoint)


def _text(body: str, status: int = 200) -> web.Response:
    return web.Response(
        text=body, status=status, content_type="text/plain", charset="utf-8", headers=_HEADERS
    )


async def _run(check: HealthCheck) -> Exception | None:
    try:
        await check.check()
    except Exception as exc:
        return exc
    return None


def _endpoint_handler(endpoint: str) -> Handler:
    async def handle(request: web.Request) -> web.Response:
        excluded = set(request.query.getall("exclude", ()))
        unknown = set(excluded)
        lines: list[str] = []
        failed: list[tuple[str, Exception]] = []
        checks = _checks(request, endpoint)
        outcomes = await asyncio.gather(*(_run(c) for c in checks if c.name not in excluded))
        results = iter(outcomes)
        for check in checks:
            if check.name in excluded:
                unknown.discard(check.name)
                lines.append(f"[+]{check.name} excluded: ok\n")
                continue
            error = next(results)
            if error is None:
                lines.append(f"[+]{check.name} ok\n")
            else:
                failed.append((check.name, error))
                lines.append(f"[-]{check.name} failed: reason withheld\n")
        if unknown:
            names = ",".join(f'"{name}"' for name in sorted(unknown))
            lines.append(f"warn: some health checks cannot be excluded: no matches for {names}\n")
        if failed:
            log.info(
                "%s check failed: %s\n%s",
                ",".join(name for name, _ in failed),
                endpoint,
                "".join(f"[-]{name} failed: {error}\n" for name, error in failed),
            )
            # Always verbose on failure; Go's http.Error ends the body with a newline.
            return _text(f"{''.join(lines)}{endpoint} check failed\n", 500)
        if "verbose" not in request.query:
            return _text("ok")
        return _text(f"{''.join(lines)}{endpoint} check passed\n")

    return handle


def _check_handler(endpoint: str) -> Handler:
    async def handle(request: web.Request) -> web.Response:
        name = request.match_info["check"]
        check = next((c for c in _checks(request, endpoint) if c.name == name), None)
        if check is None:
            return _text("404 page not found\n", 404)
        error = await _run(check)
        if error is not None:
            return _text(f"internal server error: {error}\n", 500)
        return _text("ok")

    return handle
