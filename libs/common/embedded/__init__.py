"""NATS and Postgres as child processes, so drasim runs on a bare machine.

`drasim up` and the test fixtures start these when no URL is configured (design notes,
"Infrastructure defaults"; `drasim.cli.launch.infrastructure` decides). Each server keeps
its state under one data directory, so a restart on the same directory keeps JetStream
streams and database rows.

- `server`: the life cycle they share (locks, readiness, restart, stop, orphans);
- `nats_server`: `EmbeddedNats`, nats-server with JetStream and the cluster's users;
- `postgres`: `EmbeddedPostgres`, with passwords and the services' own role.
"""

from drasim.common.embedded.nats_server import EmbeddedNats
from drasim.common.embedded.postgres import EmbeddedPostgres
from drasim.common.embedded.server import HOST, EmbeddedServerError, free_port

__all__ = ["HOST", "EmbeddedNats", "EmbeddedPostgres", "EmbeddedServerError", "free_port"]
