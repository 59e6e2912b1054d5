"""An apistore with its HTTP API (HTTPS, bearer token) in this test's event loop, and the
ways tests talk to it: aiohttp, kubectl and the official Kubernetes Python client."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import pytest

from drasim.apistore.http import authn
from drasim.apistore.server import ApiServer
from drasim.cli import kubeconfig
from drasim.common.bus.client import Bus
from drasim.common.client import ApiClient
from drasim.controllers.server import ControllerManager
from tests.scheduler.e2e.conftest import ClusterWatch

TOKEN = "test-token"
JANE_TOKEN = "jane-token"  # of `users_cluster`'s jane, who is in no group
KUBECTL = shutil.which("kubectl")
# A kubectl command that does not finish by then has hung (a watch, a wait).
KUBECTL_TIMEOUT = 20.0


@dataclass
class Cluster:
    """One test's apistore, reachable over HTTPS at `url` with `kubeconfig`."""

    server: ApiServer
    url: str
    kubeconfig: Path
    ca_cert: Path
    cache_dir: Path
    api: ApiClient  # the NATS client, for writes a test makes behind the HTTP API's back

    def ssl_context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=self.ca_cert)


@pytest.fixture(scope="session")
def certs(tmp_path_factory: pytest.TempPathFactory) -> kubeconfig.ServingCerts:
    return kubeconfig.ensure_serving_certs(tmp_path_factory.mktemp("pki"))


async def start_https_apistore(fresh, certs, **auth: object) -> ApiServer:  # noqa: ANN001
    """An apistore serving HTTPS on a free port with `certs`; `auth` is `http_token=` or
    `http_tokens=`."""
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(certs.cert, certs.key)
    server = await ApiServer.start(
        nats_url=fresh.nats_url,
        database_url=fresh.database_url,
        prefix=fresh.prefix,
        http_port=0,
        http_tls=tls,
        **auth,
    )
    assert server.http is not None
    return server


def users_of(token_file: Path, *users: str) -> authn.Tokens:
    """A `--token-auth-file` with the admin (in system:masters) and `users` (its lines,
    `token,user,uid[,"groups"]`), read as the apistore reads it."""
    admin = f'{TOKEN},kubernetes-admin,uid-admin,"system:masters"'
    token_file.write_text("".join(f"{line}\n" for line in (admin, *users)))
    return authn.Tokens.from_file(token_file)


async def start_with_users(
    fresh,
    certs,
    tmp_path: Path,
    *users: str,  # noqa: ANN001
) -> tuple[ApiServer, str]:
    """`start_https_apistore` for the admin and `users` (`users_of`); and its URL."""
    tokens = users_of(tmp_path / "tokens.csv", *users)
    server = await start_https_apistore(fresh, certs, http_tokens=tokens)
    assert server.http is not None
    return server, f"https://127.0.0.1:{server.http.port}"


@pytest.fixture
async def cluster(fresh, certs, tmp_path) -> AsyncIterator[Cluster]:
    """An apistore with the HTTP API on a free port, and a kubeconfig for it."""
    async with open_cluster(fresh, certs, tmp_path) as opened:
        yield opened


@contextlib.asynccontextmanager
async def open_cluster(fresh, certs, tmp_path: Path, **options: object) -> AsyncIterator[Cluster]:  # noqa: ANN001
    """`cluster`, with `options` given to `ApiServer.start` (e.g. `runtime_config=`)."""
    server = await start_https_apistore(fresh, certs, http_token=TOKEN, **options)
    bus = await Bus.connect(fresh.nats_url, prefix=fresh.prefix, name="test")
    try:
        url = f"https://127.0.0.1:{server.http.port}"
        path = tmp_path / "kubeconfig"
        kubeconfig.write(path, url, TOKEN, certs.ca_cert, name="drasim-test")
        yield Cluster(
            server, url, path, certs.ca_cert, tmp_path / "kube-cache", ApiClient(bus, actor="test")
        )
    finally:
        await bus.close()
        await server.stop()


@pytest.fixture
async def controllers(cluster: Cluster) -> AsyncIterator[ControllerManager]:
    """The controller manager beside the cluster (claims from templates, released claims)."""
    manager = ControllerManager(cluster.api.bus)
    await manager.start()
    yield manager
    await manager.stop()


@pytest.fixture
async def watch(cluster: Cluster) -> AsyncIterator[ClusterWatch]:
    """Informers on the cluster's pods, events and claims, to await what they show."""
    w = ClusterWatch(cluster.api)
    await w.start()
    yield w
    await w.stop()


@pytest.fixture
async def users_cluster(fresh, certs, tmp_path) -> AsyncIterator[str]:
    """An apistore whose token file has the admin (in system:masters) and jane, who is in no
    group; its URL."""
    token_file = tmp_path / "tokens.csv"
    token_file.write_text(
        f'{TOKEN},kubernetes-admin,uid-admin,"system:masters"\n{JANE_TOKEN},jane,uid-jane\n'
    )
    server = await start_https_apistore(
        fresh, certs, http_tokens=authn.Tokens.from_file(token_file)
    )
    try:
        yield f"https://127.0.0.1:{server.http.port}"
    finally:
        await server.stop()


def session(url: str, certs, token: str, **headers: str) -> aiohttp.ClientSession:
    """An aiohttp session to `url` that authenticates with `token`."""
    return aiohttp.ClientSession(
        base_url=url,
        headers={"Authorization": f"Bearer {token}", **headers},
        connector=aiohttp.TCPConnector(ssl=ssl.create_default_context(cafile=certs.ca_cert)),
    )


@pytest.fixture
async def http(cluster: Cluster) -> AsyncIterator[aiohttp.ClientSession]:
    """An aiohttp session that authenticates as the cluster's user."""
    async with aiohttp.ClientSession(
        base_url=cluster.url,
        headers={"Authorization": f"Bearer {TOKEN}"},
        connector=aiohttp.TCPConnector(ssl=cluster.ssl_context()),
    ) as session:
        yield session


@dataclass
class Completed:
    returncode: int
    stdout: str
    stderr: str


@pytest.fixture
def kubectl(cluster: Cluster):
    """Run kubectl against the cluster without blocking its event loop."""
    return kubectl_for(cluster)


def kubectl_for(cluster: Cluster):  # noqa: ANN201
    """`kubectl`'s runner for a cluster the test opened itself (`open_cluster`)."""
    if KUBECTL is None:
        pytest.skip("kubectl is not installed on this machine")

    async def run(*args: str, input: str | None = None, check: bool = True) -> Completed:
        process = await asyncio.create_subprocess_exec(
            KUBECTL,
            "--kubeconfig",
            str(cluster.kubeconfig),
            "--cache-dir",
            str(cluster.cache_dir),
            *args,
            stdin=asyncio.subprocess.PIPE if input is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=kubectl_env(),
        )
        out, err = await asyncio.wait_for(
            process.communicate(input.encode() if input is not None else None), KUBECTL_TIMEOUT
        )
        done = Completed(process.returncode or 0, out.decode(), err.decode())
        if check and done.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed:\n{done.stderr}")
        return done

    return run


def kubectl_env() -> dict[str, str]:
    """The environment without a KUBECONFIG of the machine's own."""
    return {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
