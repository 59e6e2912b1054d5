"""`/healthz`, `/livez`, `/readyz` and `/version` as kube-apiserver answers them: open to
anonymous users, verbose on request, each check readable alone by `system:monitoring`,
and 500 with the failed check withheld once Postgres or NATS is away."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import asyncpg
import pytest

from drasim.apistore import health
from drasim.apistore.server import ApiServer
from drasim.cli import kubeconfig
from drasim.common.config import database_name
from drasim.common.embedded import EmbeddedNats
from tests.conftest import Fresh, Infra
from tests.http.conftest import TOKEN, start_with_users

MONITORING_TOKEN = "monitoring-token"
JANE_TOKEN = "jane-token"
ALL_PASS = "[+]ping ok\n[+]postgres ok\n[+]nats ok\n[+]outbox ok\nreadyz check passed\n"
DEADLINE = 30.0


@dataclasses.dataclass
class Health:
    server: ApiServer
    url: str
    ca_cert: Path

    def session(self, token: str | None = None) -> aiohttp.ClientSession:
        """A session as the user of `token`, or anonymous."""
        return aiohttp.ClientSession(
            base_url=self.url,
            headers={"Authorization": f"Bearer {token}"} if token else {},
            connector=aiohttp.TCPConnector(ssl=ssl.create_default_context(cafile=self.ca_cert)),
        )

    async def get(self, path: str, token: str | None = None) -> tuple[int, str]:
        async with self.session(token) as session, session.get(path) as response:
            return response.status, await response.text()

    async def until(self, path: str, status: int, token: str | None = TOKEN) -> str:
        """The body of `path` once it answers `status` (each answer runs the checks)."""
        async with asyncio.timeout(DEADLINE):
            while True:
                got, body = await self.get(path, token)
                if got == status:
                    return body
                await asyncio.sleep(0.1)


async def _serve(fresh: Fresh, certs: kubeconfig.ServingCerts, tmp_path: Path) -> Health:
    server, url = await start_with_users(
        fresh,
        certs,
        tmp_path,
        f'{MONITORING_TOKEN},prometheus,uid-prometheus,"system:monitoring"',
        f"{JANE_TOKEN},jane,uid-jane",
    )
    return Health(server, url, certs.ca_cert)


@pytest.fixture
async def apistore(fresh: Fresh, certs, tmp_path: Path) -> AsyncIterator[Health]:
    served = await _serve(fresh, certs, tmp_path)
    yield served
    await served.server.stop()


async def test_anyone_reads_the_endpoints_and_version(apistore: Health) -> None:
    for path in ("/healthz", "/livez", "/readyz"):
        assert await apistore.get(path) == (200, "ok")
    assert await apistore.get("/readyz?verbose") == (200, ALL_PASS)
    assert await apistore.get("/livez?verbose") == (
        200,
        "[+]ping ok\n[+]postgres ok\nlivez check passed\n",
    )
    assert await apistore.get("/healthz?verbose") == (
        200,
        "[+]ping ok\n[+]postgres ok\nhealthz check passed\n",
    )
    async with apistore.session() as anonymous, anonymous.get("/readyz") as response:
        assert response.headers["Content-Type"] == "text/plain; charset=utf-8"
        assert response.headers["X-Content-Type-Options"] == "nosniff"
    status, body = await apistore.get("/version")
    version = json.loads(body)
    assert status == 200
    assert (version["major"], version["minor"]) == ("1", "37")
    assert (version["emulationMajor"], version["emulationMinor"]) == ("1", "37")
    assert (version["minCompatibilityMajor"], version["minCompatibilityMinor"]) == ("1", "36")
    assert version["gitVersion"] == "v1.37.0-drasim"


async def test_exclude_skips_a_check_and_warns_of_unknown_names(apistore: Health) -> None:
    status, body = await apistore.get("/readyz?verbose&exclude=nats&exclude=etcd")
    assert status == 200
    assert body == (
        "[+]ping ok\n[+]postgres ok\n[+]nats excluded: ok\n[+]outbox ok\n"
        'warn: some health checks cannot be excluded: no matches for "etcd"\n'
        "readyz check passed\n"
    )


async def test_each_check_alone_is_for_monitoring(apistore: Health) -> None:
    for token in (None, JANE_TOKEN):
        status, body = await apistore.get("/readyz/postgres", token)
        user = "jane" if token else "system:anonymous"
        assert status == 403
        assert json.loads(body)["message"] == (
            f'forbidden: User "{user}" cannot get path "/readyz/postgres"'
        )
    for name in ("ping", "postgres", "nats", "outbox"):
        assert await apistore.get(f"/readyz/{name}", MONITORING_TOKEN) == (200, "ok")
    assert await apistore.get("/livez/postgres", MONITORING_TOKEN) == (200, "ok")
    assert await apistore.get("/livez/nats", MONITORING_TOKEN) == (404, "404 page not found\n")
    assert await apistore.get("/readyz/etcd", TOKEN) == (404, "404 page not found\n")


async def test_a_bad_token_is_still_refused(apistore: Health) -> None:
    status, body = await apistore.get("/readyz", "not-a-token")
    assert (status, json.loads(body)["reason"]) == (401, "Unauthorized")


async def test_postgres_away_fails_liveness_and_readiness(
    infra: Infra, fresh: Fresh, apistore: Health
) -> None:
    """New connections refused and the apistore's own ended, as when Postgres restarts."""
    database = database_name(fresh.database_url)
    conn = await asyncpg.connect(infra.admin_url)
    try:
        await conn.execute(f'ALTER DATABASE "{database}" ALLOW_CONNECTIONS false')
        await conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1",
            database,
        )
        body = await apistore.until("/readyz?verbose", 500, token=None)
        assert "[-]postgres failed: reason withheld\n" in body
        assert body.endswith("readyz check failed\n")
        status, body = await apistore.get("/livez")
        assert status == 500
        assert body == "[+]ping ok\n[-]postgres failed: reason withheld\nlivez check failed\n"
        status, body = await apistore.get("/livez/postgres", MONITORING_TOKEN)
        assert status == 500 and body.startswith("internal server error: Postgres: ")

        await conn.execute(f'ALTER DATABASE "{database}" ALLOW_CONNECTIONS true')
        assert await apistore.until("/readyz?verbose", 200) == ALL_PASS
    finally:
        await conn.execute(f'ALTER DATABASE "{database}" ALLOW_CONNECTIONS true')
        await conn.close()


async def test_nats_away_fails_readiness_not_liveness(
    fresh: Fresh, certs, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a NATS of its own, stopped under it: `nats` fails at once, `outbox` once a write
    waits unpublished longer than the bound (none here), and both pass again once NATS is
    back where it was and the outbox caught up."""
    monkeypatch.setattr(health, "OUTBOX_MAX_LAG", 0.0)
    with EmbeddedNats(tmp_path / "nats") as nats:
        apistore = await _serve(
            dataclasses.replace(fresh, nats_url=nats.admin_url), certs, tmp_path
        )
        try:
            assert await apistore.get("/readyz?verbose") == (200, ALL_PASS)
            port = int(nats.url.rsplit(":", 1)[1])
            await asyncio.to_thread(nats.stop)
            body = await apistore.until("/readyz?verbose", 500, token=None)
            assert "[-]nats failed: reason withheld\n" in body
            assert await apistore.get("/livez") == (200, "ok")

            # A write commits without NATS; its event waits for the outbox.
            async with apistore.session(TOKEN) as admin:
                namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}}
                async with admin.post("/api/v1/namespaces", json=namespace) as response:
                    assert response.status == 201
            status, body = await apistore.get("/readyz?verbose")
            assert status == 500
            assert "[-]nats failed: reason withheld\n[-]outbox failed: reason withheld\n" in body
            status, body = await apistore.get("/readyz/outbox", MONITORING_TOKEN)
            assert status == 500
            assert body.startswith("internal server error: 1 events unpublished, the oldest for")

            await asyncio.to_thread(nats.start, port=port)
            assert await apistore.until("/readyz?verbose", 200) == ALL_PASS
        finally:
            await apistore.server.stop()
