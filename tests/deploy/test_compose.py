"""deploy/compose.yaml is a valid Compose file whose services run real drasim entry points.

Validation uses `docker compose config` or `docker-compose config`, which check the file
against the Compose schema without a Docker engine (CI installs Debian's docker-compose).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import nats
import nats.errors
import pytest
import yaml

from drasim.cli import secrets as drasim_secrets
from drasim.cli.main import build_parser, main
from drasim.common import cluster_file, nats_auth
from drasim.common.bus import subjects
from drasim.common.bus.client import Bus, inbox_prefix, read_credentials
from drasim.common.embedded import free_port
from drasim.common.embedded.postgres import SERVER_SETTINGS
from drasim.kubelet import control

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
COMPOSE = DEPLOY / "compose.yaml"
NATS_CONF = DEPLOY / "nats.conf"


def compose_command() -> list[str] | None:
    docker = shutil.which("docker")
    if (
        docker
        and subprocess.run([docker, "compose", "version"], capture_output=True).returncode == 0
    ):
        return [docker, "compose"]
    legacy = shutil.which("docker-compose")
    return [legacy] if legacy else None


def test_compose_file_is_valid() -> None:
    command = compose_command()
    if command is None:
        pytest.skip(
            "neither `docker compose` nor `docker-compose` is installed (.ci/run installs it)"
        )
    result = subprocess.run(
        [*command, "-f", str(COMPOSE), "config", "-q"], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr


def test_every_service_runs_a_drasim_entry_point() -> None:
    services = yaml.safe_load(COMPOSE.read_text())["services"]
    expected = {
        "postgres",
        "nats-1",
        "nats-2",
        "nats-3",
        "jaeger",
        "apistore",
        "controllers",
        "scheduler",
        "kubelet-0",
        "kubelet-1",
        "demo",
    }
    assert expected <= services.keys()
    for name, service in services.items():
        entrypoint = service.get("entrypoint")
        if not entrypoint:
            continue
        if entrypoint[:2] == ["python", "-m"]:
            assert importlib.util.find_spec(f"{entrypoint[2]}.__main__") is not None, name
        else:
            assert entrypoint == ["drasim"], name
            parser = build_parser()
            parser.parse_args(service["command"])  # the subcommand exists with these flags


# Whom each service that connects to NATS is there (drasim.common.nats_auth.cluster_users).
NATS_USERS = {
    "apistore": "apistore",
    "controllers": "controllers",
    "scheduler": "scheduler",
    "kubelet-0": "kubelet-0",
    "kubelet-1": "kubelet-1",
    "demo": "admin",
}
# drasim commands that never connect to NATS.
_OFFLINE_COMMANDS = {"kubeconfig", "secrets"}


def _services() -> dict[str, dict[str, Any]]:
    return yaml.safe_load(COMPOSE.read_text())["services"]


def _mounts(service: dict[str, Any]) -> dict[str, str]:
    """Mount path → volume (or host path) of a service's `volumes`."""
    mounts = {}
    for volume in service.get("volumes", []):
        source, target = volume.split(":")[:2]
        mounts[target] = source
    return mounts


def _flag(command: list[str], flag: str) -> str | None:
    return command[command.index(flag) + 1] if flag in command else None


def _connects_to_nats(service: dict[str, Any]) -> bool:
    entrypoint = service.get("entrypoint") or []
    if entrypoint[:2] == ["python", "-m"]:
        return True
    if entrypoint != ["drasim"]:
        return False
    return build_parser().parse_args(service["command"]).command not in _OFFLINE_COMMANDS


def test_no_service_trusts_connections() -> None:
    services = _services()
    for name, service in services.items():
        env = service.get("environment", {})
        assert env.get("POSTGRES_HOST_AUTH_METHOD", "scram-sha-256") != "trust", name
        url = env.get("DRASIM_DATABASE_URL")
        if url is not None:  # the role drasim, its password from a file, never in the URL
            parts = urlsplit(url)
            assert (parts.username, parts.password) == ("drasim", None), name
            (passfile,) = parse_qs(parts.query)["passfile"]
            assert _mounts(service)[str(Path(passfile).parent)] == f"secrets-{name}", name
    postgres = services["postgres"]["environment"]
    assert postgres["POSTGRES_HOST_AUTH_METHOD"] == "scram-sha-256"
    assert "--auth-host=scram-sha-256" in postgres["POSTGRES_INITDB_ARGS"].split()
    assert "--auth-local=scram-sha-256" in postgres["POSTGRES_INITDB_ARGS"].split()
    assert "POSTGRES_PASSWORD" not in postgres
    mounts = _mounts(services["postgres"])
    password_dir = str(Path(postgres["POSTGRES_PASSWORD_FILE"]).parent)
    assert mounts[password_dir] == "secrets-postgres"
    assert mounts["/docker-entrypoint-initdb.d"] == "secrets-postgres-initdb"
    # Only the apistore uses the database.
    with_database = {
        n for n, s in services.items() if "DRASIM_DATABASE_URL" in s.get("environment", {})
    }
    assert with_database == {"apistore"}


def test_every_drasim_service_has_its_own_nats_credentials() -> None:
    services = _services()
    secrets_service = services["secrets"]
    out = _flag(secrets_service["command"], "--out")
    made_by_secrets = {v: k for k, v in _mounts(secrets_service).items()}
    assert {n for n, s in services.items() if _connects_to_nats(s)} == NATS_USERS.keys()
    for name, user in NATS_USERS.items():
        service = services[name]
        credentials = Path(service["environment"]["DRASIM_NATS_CREDENTIALS"])
        volume = _mounts(service)[str(credentials.parent)]
        # The consumer's own volume, which `drasim secrets` fills with that user's file.
        assert made_by_secrets[volume] == f"{out}/{user}", name
        assert credentials.name == drasim_secrets.NATS_CREDENTIALS, name
        assert "secrets" in service["depends_on"], name
    # Nobody mounts another's secrets.
    own = {name: {f"secrets-{user}"} for name, user in NATS_USERS.items()}
    own["postgres"] = {"secrets-postgres", "secrets-postgres-initdb"}
    own |= {f"nats-{i}": {"secrets-nats"} for i in (1, 2, 3)}
    for name, service in services.items():
        if name != "secrets":
            mounted = {v for v in _mounts(service).values() if v.startswith("secrets-")}
            assert mounted == own.get(name, set()), name


def test_kubelet_users_act_as_the_nodes_their_services_host(tmp_path: Path) -> None:
    """The secrets service makes kubelet-<i> the NATS user of exactly the nodes that the
    service kubelet-<i> (`--shard i/n`) hosts."""
    services = _services()
    command = list(services["secrets"]["command"])
    command[command.index("--out") + 1] = str(tmp_path)
    assert main(command) == 0
    users = json.loads((tmp_path / "nats" / "users.conf").read_text())["users"]
    allowed = {u["user"]: u.get("permissions", {}).get("publish", {}).get("allow") for u in users}
    kubelets = {name: s for name, s in services.items() if name.startswith("kubelet-")}
    count = int(_flag(command, "--kubelets") or 1)
    assert len(kubelets) == count
    nodes_file = cluster_file.load(_flag(command, "--cluster"))
    hosted = []
    for name, service in kubelets.items():
        assert _flag(service["command"], "--cluster") == _flag(command, "--cluster"), name
        index, shard_count = cluster_file.parse_shard(_flag(service["command"], "--shard") or "")
        assert (f"kubelet-{index}", shard_count) == (name, count)
        nodes = [node.name for node in nodes_file.shard(index, count)]
        prefix = services[name]["environment"]["DRASIM_PREFIX"]
        actors = {s for s in allowed[name] if s.startswith(f"{prefix}.api.")}
        assert actors == {subjects.api(prefix, nats_auth.node_identity(node)) for node in nodes}, (
            name
        )
        hosted += nodes
    assert sorted(hosted) == sorted(node.name for node in nodes_file.nodes)


def test_nats_routes_name_every_nats_server() -> None:
    services = _services()
    routes = _flag(services["secrets"]["command"], "--nats-routes") or ""
    hosts = {urlsplit(url).hostname for url in routes.split(",")}
    nats_servers = {n for n, s in services.items() if str(s.get("image", "")).startswith("nats:")}
    assert hosts == nats_servers
    assert {urlsplit(url).port for url in routes.split(",")} == {6222}
    assert "listen: 0.0.0.0:6222" in NATS_CONF.read_text()
    for name in nats_servers:
        command = services[name]["command"]
        # A --cluster flag would drop the routes' user from the configuration.
        assert not {"--cluster", "--routes", "--cluster_name"} & set(command), name
        assert _mounts(services[name])["/etc/nats/secrets"] == "secrets-nats"


@dataclass(frozen=True)
class _NatsCluster:
    secrets: Path  # what `drasim secrets` made
    urls: list[str]  # each server's client URL
    route_ports: list[int]


@contextlib.contextmanager
def _nats_cluster(tmp_path: Path, size: int = 3) -> Iterator[_NatsCluster]:
    """`size` nats-servers as compose runs them: deploy/nats.conf beside the secrets
    volume, on local ports instead of the containers' 4222 and 6222."""
    ports = [(free_port(), free_port()) for _ in range(size)]
    out = tmp_path / "secrets"
    routes = ",".join(f"nats://127.0.0.1:{route}" for _, route in ports)
    assert main(["secrets", "--kubelets", "2", "--out", str(out), "--nats-routes", routes]) == 0
    conf = NATS_CONF.read_text()
    assert "listen: 0.0.0.0:6222" in conf
    binary = Path(sys.executable).parent / "nats-server"
    processes = []
    try:
        for i, (client, route) in enumerate(ports):
            server_dir = tmp_path / f"nats-{i}"
            server_dir.mkdir()
            (server_dir / "secrets").symlink_to(out / "nats")
            (server_dir / "drasim.conf").write_text(
                conf.replace("listen: 0.0.0.0:6222", f"listen: 127.0.0.1:{route}")
            )
            log = server_dir / "log"
            command = [
                str(binary if binary.exists() else shutil.which("nats-server")),
                "-c", str(server_dir / "drasim.conf"),
                "-a", "127.0.0.1", "-p", str(client),
                "--server_name", f"nats-{i}",
            ]  # fmt: skip
            with log.open("wb") as f:
                processes.append(subprocess.Popen(command, stdout=f, stderr=f))
        for i, process in enumerate(processes):
            _wait_for_log(process, tmp_path / f"nats-{i}" / "log", b"Server is ready")
        yield _NatsCluster(
            secrets=out,
            urls=[f"nats://127.0.0.1:{client}" for client, _ in ports],
            route_ports=[route for _, route in ports],
        )
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            process.wait(10)


def _wait_for_log(process: subprocess.Popen[bytes], log: Path, line: bytes) -> None:
    deadline = time.monotonic() + 10
    while line not in log.read_bytes():
        assert process.poll() is None, log.read_text()
        assert time.monotonic() < deadline, log.read_text()
        time.sleep(0.02)


def _route_without_credentials(port: int) -> bytes:
    """What a server says to a route that offers no user (until it hangs up)."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        received = sock.recv(4096)  # INFO
        sock.sendall(b'CONNECT {"cluster": "drasim"}\r\nPING\r\n')
        while chunk := sock.recv(4096):
            received += chunk
    return received


async def test_nats_takes_the_generated_users_and_no_one_else(tmp_path: Path) -> None:
    with _nats_cluster(tmp_path) as cluster:
        for url in cluster.urls:
            with pytest.raises(nats.errors.Error, match="Authorization Violation"):
                await nats.connect(url, allow_reconnect=False, max_reconnect_attempts=0)
        for port in cluster.route_ports:
            assert b"-ERR 'Authorization Violation'" in _route_without_credentials(port)

        # Each service connects with its own file, and the routes carry its messages from
        # one server to another.
        def credentials(user: str) -> Path:
            return cluster.secrets / user / drasim_secrets.NATS_CREDENTIALS

        first = await Bus.connect(
            cluster.urls[0], prefix="drasim", credentials=credentials("admin")
        )
        last = await Bus.connect(
            cluster.urls[-1], prefix="drasim", credentials=credentials("apistore")
        )
        try:
            sub = await first.nc.subscribe("drasim.routed")
            async with asyncio.timeout(10):
                while True:  # until the subscription's interest has reached the last server
                    await last.nc.publish("drasim.routed", b"hello")
                    with contextlib.suppress(nats.errors.TimeoutError):
                        assert (await sub.next_msg(timeout=0.2)).data == b"hello"
                        break
        finally:
            await first.close()
            await last.close()

        # ...each held to its own subjects: kubelet-1 listens for its own nodes only.
        node_of_kubelet_0 = cluster_file.load().shard(0, 2)[0].name
        user, password = read_credentials(credentials("kubelet-1"))
        violation = asyncio.get_running_loop().create_future()

        async def on_error(exc: Exception) -> None:
            if not violation.done():
                violation.set_result(str(exc))

        nc = await nats.connect(
            cluster.urls[1],
            user=user,
            password=password,
            inbox_prefix=inbox_prefix(user),
            error_cb=on_error,
            allow_reconnect=False,
        )
        try:
            await nc.subscribe(control.node_subject("drasim", node_of_kubelet_0))
            message = await asyncio.wait_for(violation, 10)
        finally:
            await nc.close()
        assert "permissions violation for subscription" in message.lower()


def test_postgres_runs_with_the_embedded_servers_settings() -> None:
    command = _services()["postgres"]["command"]
    pairs = zip(command, command[1:], strict=False)
    given = dict(arg.split("=", 1) for flag, arg in pairs if flag == "-c")
    assert given == SERVER_SETTINGS
