"""`drasim secrets`: a compose cluster's passwords, made once, private, and usable: the
NATS side is checked against real nats-servers in tests/deploy/test_compose.py."""

from __future__ import annotations

import json
import stat
import tempfile
from pathlib import Path

import asyncpg
import pytest

from drasim.apistore.store import Store
from drasim.cli.main import main
from drasim.common.embedded import HOST, EmbeddedPostgres


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def _generate(out: Path, *extra: str) -> None:
    assert main(["secrets", "--out", str(out), "--kubelets", "2", *extra]) == 0


def test_every_secret_is_private_and_made_once(tmp_path: Path) -> None:
    out = tmp_path / "secrets"
    _generate(out, "--nats-routes", "nats://nats-1:6222,nats://nats-2:6222")
    first = _files(out)
    for name in first:
        mode = stat.S_IMODE((out / name).stat().st_mode)
        if name == "postgres-initdb/drasim.sql":
            assert mode == 0o644  # the postgres image's own account runs it
        else:
            assert mode == 0o600, name
    for consumer in ("nats", "postgres", "admin", "apistore", "kubelet-0", "kubelet-1"):
        assert stat.S_IMODE((out / consumer).stat().st_mode) == 0o700, consumer
    role_password = (out / "apistore/postgres.pgpass").read_text().strip().split(":")[-1]
    assert role_password not in first["postgres-initdb/drasim.sql"].decode()
    assert (out / "kubelet-1/nats-credentials").read_text().startswith("kubelet-1:")

    _generate(out, "--nats-routes", "nats://nats-1:6222,nats://nats-2:6222")
    assert _files(out) == first

    # A third kubelet: a new user, everyone else keeps their password.
    assert main(["secrets", "--out", str(out), "--kubelets", "3"]) == 0
    again = _files(out)
    assert "kubelet-2/nats-credentials" in again
    kept = {k: v for k, v in first.items() if k not in ("nats/users.conf", "nats/routes.conf")}
    assert {name: again[name] for name in kept} == kept
    users = json.loads(again["nats/users.conf"])["users"]
    assert [u["user"] for u in users][-3:] == ["kubelet-0", "kubelet-1", "kubelet-2"]


@pytest.mark.parametrize(
    "routes", ["http://nats-1:6222", "nats-1:6222", "nats://a:b@nats-1:6222"], ids=str
)
def test_a_route_must_be_a_nats_url_without_a_user(
    tmp_path: Path, routes: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["secrets", "--out", str(tmp_path), "--nats-routes", routes]) == 1
    assert f"--nats-routes: {routes!r} is not nats://host:port" in capsys.readouterr().err


async def test_the_role_logs_in_with_its_passfile_and_owns_the_database(tmp_path: Path) -> None:
    """drasim.sql on a cluster as the postgres image leaves it (database drasim owned by the
    superuser, no role drasim); the apistore then migrates as that role."""
    out = tmp_path / "secrets"
    _generate(out)
    # Not under pytest's temporary root, which another pytest session run as root makes
    # private again, out of reach of the account Postgres runs as (tests/conftest.py).
    with (
        tempfile.TemporaryDirectory(prefix="drasim-tests-") as data_dir,
        EmbeddedPostgres(data_dir) as db,
    ):
        admin = await asyncpg.connect(db.admin_url)
        try:
            await admin.execute("ALTER DATABASE drasim OWNER TO postgres; DROP ROLE drasim")
            await admin.execute((out / "postgres-initdb/drasim.sql").read_text())
        finally:
            await admin.close()
        passfile = out / "apistore/postgres.pgpass"
        url = f"postgresql://drasim@{HOST}:{db.port}/drasim?passfile={passfile}"
        store = await Store.connect(url, min_size=1, max_size=1)
        try:
            assert await store.migrate()
        finally:
            await store.close()
        conn = await asyncpg.connect(url)
        try:
            role = await conn.fetchrow(
                "SELECT rolsuper, rolcreatedb, rolcreaterole FROM pg_roles"
                " WHERE rolname = current_user"
            )
            assert tuple(role) == (False, False, False)
            owner = await conn.fetchval(
                "SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = 'drasim'"
            )
            assert owner == "drasim"
        finally:
            await conn.close()
        with pytest.raises(asyncpg.InvalidPasswordError):
            await asyncpg.connect(f"postgresql://drasim:wrong@{HOST}:{db.port}/drasim")
