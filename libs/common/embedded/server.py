"""The life cycle every embedded server shares: start, wait until ready, restart on the
same port, stop with every process it started, and orphans of killed runs stopped.

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
import os
import pwd
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import IO, Any, ClassVar, NoReturn, Self

import psutil

HOST = "127.0.0.1"
START_TIMEOUT = 30.0
STOP_TIMEOUT = 10.0
_POLL = 0.02


class EmbeddedServerError(RuntimeError):
    """An embedded server could not start (the message carries its log's tail)."""


def free_port(host: str = HOST) -> int:
    """A TCP port nobody listens on right now (the kernel's pick for an ephemeral bind)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


class ChildServer(abc.ABC):
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
        self._log_offset = 0  # where this run's part of the (appended) log starts

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

    def _spawn(self, command: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
        """Run the server in a session of its own (a Ctrl-C meant for us passes it by,
        and `stop` can kill its whole group), its output appended to its log from
        `_log_offset` on."""
        with self._open_log() as log:
            self._log_offset = log.tell()
            return subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,
                **kwargs,
            )

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


# Servers run in their own session, so nothing stops them when we exit; a process that
# returns without calling `stop` (a failed fixture, an uncaught error) stops them here.
_RUNNING: set[ChildServer] = set()


@atexit.register
def _stop_servers_left_running() -> None:
    for server in list(_RUNNING):
        server.stop()


def write_private(path: Path, text: str, *, owner: pwd.struct_passwd | None = None) -> None:
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


def read_from(path: Path, offset: int) -> bytes:
    with path.open("rb") as f:
        f.seek(offset)
        return f.read()


def _tail(path: Path, lines: int = 20) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:])
