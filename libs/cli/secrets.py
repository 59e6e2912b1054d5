"""`drasim secrets`: a cluster's passwords for NATS and Postgres servers it does not run.

`drasim up` makes these in its data directory as it starts its embedded servers; under
docker compose (deploy/compose.yaml) the servers are containers of their own, so a one-shot
container runs this first, and each consumer mounts its own directory as a volume:

    <out>/nats/users.conf             `authorization {}` users: every identity of
                                      `nats_auth.cluster_users`, with its permissions
    <out>/nats/routes.conf            the cluster routes' own user, and the routes with it
    <out>/nats/nats-auth/<user>       each identity's `user:password` (the NATS servers
                                      know every password anyway)
    <out>/<user>/nats-credentials     that file again, for the service connecting as <user>
    <out>/postgres/password           the superuser's (the image's POSTGRES_PASSWORD_FILE)
    <out>/postgres-initdb/drasim.sql  makes the role `drasim`, owner of database `drasim`
    <out>/apistore/postgres.pgpass    the role's password, a libpq password file

Every file is mode 0600 but drasim.sql, which the image's entrypoint runs as its own
unprivileged account: it holds the role's SCRAM verifier, what Postgres itself stores,
never the password. Run again, it keeps every password and rewrites the files from them,
so users follow `--kubelets` and the cluster file; drasim.sql is made only with a new
password (Postgres runs it once, when it initialises its data directory).
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import hmac
import json
import os
import secrets
import sys
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from drasim.cli import cluster
from drasim.common import cluster_file, nats_auth
from drasim.common.config import Config
from drasim.common.embedded import EmbeddedPostgres

NATS_DIR = "nats"
USERS_FILE = "users.conf"
ROUTES_FILE = "routes.conf"
NATS_CREDENTIALS = "nats-credentials"
POSTGRES_DIR = "postgres"
POSTGRES_PASSWORD = "password"
POSTGRES_INITDB_DIR = "postgres-initdb"
ROLE_SQL = "drasim.sql"
PGPASS = "postgres.pgpass"
# Whom the NATS servers' routes authenticate as (`cluster { authorization {} }`).
ROUTE_USER = "route"
# The only service that connects to Postgres, and as whom.
DATABASE_CLIENT = "apistore"
ROLE = EmbeddedPostgres.service_role
DATABASE = EmbeddedPostgres.database
_SCRAM_ITERATIONS = 4096  # Postgres' default scram_iterations


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "secrets",
        help="make the NATS and Postgres passwords of a cluster in containers",
        description="Write NATS users, route and Postgres passwords into a directory per "
        "consumer (docker compose mounts each as a volume); existing passwords are kept.",
    )
    parser.add_argument("--out", type=Path, required=True, help="where the directories go")
    parser.add_argument(
        "--cluster", type=Path, help="cluster file (default: the KEP-5004 example cluster)"
    )
    parser.add_argument(
        "--kubelets", type=int, default=1, help="kubelet processes sharing the nodes"
    )
    parser.add_argument(
        "--nats-routes",
        type=lambda text: [url for url in text.split(",") if url],
        default=[],
        help="comma-separated nats://host:port of every NATS server's cluster port",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    config = Config.from_env(**cluster.cluster_flags(args))
    try:
        nodes_file = cluster_file.load(args.cluster)
        if args.kubelets < 0:
            raise ValueError(f"--kubelets {args.kubelets} is negative")
        # Kubelet process i of n hosts `shard(i, n)`, as `python -m drasim.kubelet --shard`.
        shards = [
            [node.name for node in nodes_file.shard(i, args.kubelets)] for i in range(args.kubelets)
        ]
        made = generate(
            args.out, prefix=config.prefix, kubelet_shards=shards, nats_routes=args.nats_routes
        )
    except ValueError as exc:  # ClusterFileError is one
        print(f"drasim: {exc}", file=sys.stderr)
        return 1
    print(f"secrets: {args.out}: {', '.join(made)}")
    return 0


def generate(
    out: Path,
    *,
    prefix: str,
    kubelet_shards: Sequence[Sequence[str]],
    nats_routes: Sequence[str] = (),
) -> list[str]:
    """Write every consumer's directory under `out`; returns their names."""
    users = nats_auth.cluster_users(prefix, kubelet_shards)
    nats_dir = _directory(out / NATS_DIR)
    route_password = nats_auth.ensure_password(nats_dir, ROUTE_USER)
    routes = {
        "authorization": {"user": ROUTE_USER, "password": route_password},
        "routes": [_with_user(url, ROUTE_USER, route_password) for url in nats_routes],
    }
    authorization = nats_auth.authorization(nats_dir, users, prefix)
    _write(nats_dir / USERS_FILE, json.dumps(authorization, indent=1) + "\n")
    _write(nats_dir / ROUTES_FILE, json.dumps(routes, indent=1) + "\n")
    for user in users:
        source = nats_auth.credentials_path(nats_dir, user.name)
        _write(_directory(out / user.name) / NATS_CREDENTIALS, source.read_text())

    postgres_dir = _directory(out / POSTGRES_DIR)
    superuser = postgres_dir / POSTGRES_PASSWORD
    if not _read(superuser):
        _write(superuser, secrets.token_hex(24) + "\n")
    pgpass = _directory(out / DATABASE_CLIENT) / PGPASS
    password = _read(pgpass).rpartition(":")[2]
    new_password = not password
    if new_password:
        password = secrets.token_hex(24)
        _write(pgpass, f"*:*:*:{ROLE}:{password}\n")
    # The image's entrypoint runs drasim.sql as its own account, which must list the
    # directory and read the file; neither holds a secret.
    initdb_dir = _directory(out / POSTGRES_INITDB_DIR, mode=0o755)
    role_sql = initdb_dir / ROLE_SQL
    if new_password or not role_sql.exists():
        _write(role_sql, role_sql_script(scram_verifier(password)), mode=0o644)
    return [NATS_DIR, POSTGRES_DIR, POSTGRES_INITDB_DIR, *(user.name for user in users)]


def role_sql_script(verifier: str) -> str:
    """SQL making the role the services connect as, owner of their database (made by the
    image from POSTGRES_DB): no superuser, who could run programs as the database's account
    (`COPY ... FROM PROGRAM`), as `EmbeddedPostgres` has it. Safe to run twice."""
    return f"""\
-- Written by `drasim secrets` (drasim.cli.secrets). The postgres image runs it once, as it
-- initialises its data directory.
DO $$
BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{ROLE}') THEN
    CREATE ROLE {ROLE} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE;
  END IF;
END
$$;
ALTER ROLE {ROLE} PASSWORD '{verifier}';
ALTER DATABASE {DATABASE} OWNER TO {ROLE};
"""


def scram_verifier(password: str, *, salt: bytes | None = None) -> str:
    """The SCRAM-SHA-256 verifier Postgres stores for `password` (RFC 5802, RFC 7677), in
    its `SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>` form, which
    `ALTER ROLE ... PASSWORD` takes as is. Our passwords are hex, so SASLprep keeps them."""
    salt = salt if salt is not None else secrets.token_bytes(16)
    salted = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, _SCRAM_ITERATIONS)
    client_key = hmac.digest(salted, b"Client Key", "sha256")
    server_key = hmac.digest(salted, b"Server Key", "sha256")
    stored_key = hashlib.sha256(client_key).digest()
    return f"SCRAM-SHA-256${_SCRAM_ITERATIONS}:{_b64(salt)}${_b64(stored_key)}:{_b64(server_key)}"


def _with_user(url: str, user: str, password: str) -> str:
    """A route URL that authenticates as `user` (nats-server takes a route's credentials
    from its URL only)."""
    parts = urlsplit(url)
    if parts.scheme not in ("nats", "nats-route") or not parts.hostname or parts.username:
        raise ValueError(f"--nats-routes: {url!r} is not nats://host:port")
    netloc = f"{user}:{password}@{parts.netloc}"
    return urlunsplit(parts._replace(netloc=netloc))


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        return ""


def _directory(path: Path, *, mode: int = 0o700) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    path.chmod(mode)  # a volume's root comes as Docker made it
    return path


def _write(path: Path, text: str, *, mode: int = 0o600) -> None:
    """Write `text` with `mode` from the file's creation on."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "w") as f:
        os.fchmod(f.fileno(), mode)
        f.write(text)
