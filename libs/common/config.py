"""Process configuration, read once from `DRASIM_*` environment variables.

Every entry point (CLI, services, test fixtures) builds one `Config` at start-up and passes
it down, so no module reads the environment on its own and a bad value fails early with
the variable's name in the message.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import msgspec

# Field name → environment variable; public so the CLI can tell "set in the environment"
# apart from "left at the default" when it layers flags, environment and cluster.json.
ENV: dict[str, str] = {
    "nats_url": "DRASIM_NATS_URL",
    "nats_credentials": "DRASIM_NATS_CREDENTIALS",
    "database_url": "DRASIM_DATABASE_URL",
    "data_dir": "DRASIM_DATA_DIR",
    "prefix": "DRASIM_PREFIX",
    "log_level": "DRASIM_LOG_LEVEL",
}

_NATS_SCHEMES = ("nats://", "tls://", "ws://", "wss://")
_POSTGRES_SCHEMES = ("postgresql://", "postgres://")
# The prefix becomes one NATS subject token and part of JetStream stream names, which may
# not contain ".", "*", ">", whitespace or path separators.
_PREFIX = re.compile(r"[A-Za-z0-9_-]+")
_LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


class ConfigError(ValueError):
    """A configuration value is unusable; the message starts with the variable's name."""


class Config(msgspec.Struct, frozen=True, kw_only=True):
    """Where the cluster's infrastructure lives and how this process names things on it.

    `nats_url` / `database_url` are `None` when not given: the caller then starts
    embedded servers under `data_dir`.
    """

    nats_url: str | None = None
    # A file `user:password` to authenticate to NATS with (the embedded NATS wants one).
    nats_credentials: Path | None = None
    database_url: str | None = None
    data_dir: Path = Path(".drasim")
    prefix: str = "drasim"
    log_level: str = "INFO"

    @classmethod
    def from_env(cls, **overrides: Any) -> Config:
        """Read `DRASIM_*`; keyword overrides (e.g. command-line flags) win over them.

        An override of `None` means "not given" and an empty variable counts as unset, so
        callers can pass optional flags straight through. Errors name the variable, or for
        an override the flag that conventionally carries it (`prefix` → `--prefix`).
        """
        unknown = overrides.keys() - ENV.keys()
        if unknown:
            raise TypeError(f"Config.from_env() got unknown settings: {sorted(unknown)}")
        values: dict[str, Any] = {}
        for field, var in ENV.items():
            raw, source = overrides.get(field), "--" + field.replace("_", "-")
            if raw is None:
                raw, source = os.environ.get(var) or None, var
            if raw is not None:
                values[field] = _PARSERS[field](source, raw)
        return cls(**values)


def _url(schemes: tuple[str, ...]) -> Callable[[str, Any], str]:
    def parse(source: str, raw: Any) -> str:
        value = str(raw).strip()
        if not value.startswith(schemes):
            raise ConfigError(f"{source}: {value!r} is not a {' or '.join(schemes)} URL")
        return value

    return parse


def _file(source: str, raw: Any) -> Path:
    path = Path(raw).expanduser()
    if not path.is_file():
        raise ConfigError(f"{source}: {str(path)!r} is not a file")
    return path


def _data_dir(source: str, raw: Any) -> Path:
    path = Path(raw).expanduser()
    if path.exists() and not path.is_dir():
        raise ConfigError(f"{source}: {str(path)!r} exists and is not a directory")
    return path


def _prefix(source: str, raw: Any) -> str:
    value = str(raw)
    if not _PREFIX.fullmatch(value):
        raise ConfigError(
            f"{source}: {value!r} is not a valid prefix (letters, digits, '_' and '-' only)"
        )
    return value


def _log_level(source: str, raw: Any) -> str:
    value = str(raw).strip().upper()
    if value not in _LOG_LEVELS:
        raise ConfigError(f"{source}: {raw!r} is not one of {', '.join(_LOG_LEVELS)}")
    return value


_PARSERS: dict[str, Callable[[str, Any], Any]] = {
    "nats_url": _url(_NATS_SCHEMES),
    "nats_credentials": _file,
    "database_url": _url(_POSTGRES_SCHEMES),
    "data_dir": _data_dir,
    "prefix": _prefix,
    "log_level": _log_level,
}


def with_database(database_url: str, name: str) -> str:
    """The same server's URL for another database (its path), keeping the query, which
    may name a unix socket's directory (`?host=/tmp/...`)."""
    return urlunsplit(urlsplit(database_url)._replace(path=f"/{name}"))


def database_name(database_url: str) -> str:
    """The database a URL names."""
    return urlsplit(database_url).path.lstrip("/")
