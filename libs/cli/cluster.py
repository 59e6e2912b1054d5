"""How CLI commands find the cluster they talk to.

`drasim up` writes `<data-dir>/cluster.json` with the URLs of the servers it runs (embedded
ones get new ports on every start), so `drasim get`, `drasim events` and the others reach
the running cluster with no flags. Settings resolve as flags → environment → cluster.json.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import msgspec
import psutil

from drasim.common import config as config_module
from drasim.common.config import Config

CLUSTER_FILE = "cluster.json"
# The global options, by the `Config` field each one sets (`--data-dir` sets data_dir).
_OPTIONS = {
    "data_dir": "where `drasim up` keeps its data and cluster.json (default ./.drasim)",
    "nats_url": "use this NATS instead of an embedded one",
    "nats_credentials": "file 'user:password' to authenticate to NATS with",
    "database_url": "use this Postgres instead of an embedded one",
    "prefix": "prefix of NATS subjects and stream names, so clusters can share a NATS",
}


class ClusterInfo(msgspec.Struct, frozen=True, kw_only=True):
    """What `drasim up` tells other commands about the cluster it runs."""

    nats_url: str
    database_url: str
    prefix: str
    pid: int  # of `drasim up`; a file whose process is gone is stale
    # The admin's NATS credentials file, for the CLI (the file itself is owner-only).
    nats_credentials: str | None = None
    metrics: dict[str, str] = {}  # service name → its Prometheus /metrics URL


def add_cluster_options(parser: argparse.ArgumentParser, *, suppress: bool = False) -> None:
    """Add the global options. With `suppress`, an option left out adds no attribute, so
    a subcommand's copy does not overwrite the value given before the subcommand."""
    default = argparse.SUPPRESS if suppress else None
    for field, help_text in _OPTIONS.items():
        parser.add_argument("--" + field.replace("_", "-"), default=default, help=help_text)


def cluster_flags(args: argparse.Namespace) -> dict[str, str | None]:
    """The global options as `Config.from_env` overrides (`None` = not given)."""
    return {field: getattr(args, field, None) for field in _OPTIONS}


def resolve_config(args: argparse.Namespace) -> Config:
    """The configuration a command uses: flags, then DRASIM_* variables, then what the
    running `drasim up` wrote in the data directory."""
    flags = cluster_flags(args)
    config = Config.from_env(**flags)
    cluster = load_cluster(config.data_dir)
    if cluster is None:
        return config
    unset = {
        field: getattr(cluster, field)
        for field in ("nats_url", "nats_credentials", "database_url", "prefix")
        if flags[field] is None and not os.environ.get(config_module.ENV[field])
    }
    return Config.from_env(**{**flags, **unset})


def cluster_path(data_dir: Path) -> Path:
    return data_dir / CLUSTER_FILE


def write_cluster(data_dir: Path, info: ClusterInfo) -> None:
    """Replace the file atomically, so a reader never sees half of it; owner-only, as a
    given database URL may hold a password."""
    path = cluster_path(data_dir)
    staging = path.with_suffix(".tmp")
    staging.unlink(missing_ok=True)
    with open(staging, "wb", opener=lambda name, flags: os.open(name, flags, 0o600)) as f:
        f.write(msgspec.json.format(msgspec.json.encode(info)) + b"\n")
    staging.replace(path)


def remove_cluster(data_dir: Path, pid: int) -> None:
    """Remove the file if it still describes the cluster `drasim up` process `pid` runs."""
    info = load_cluster(data_dir)
    if info is not None and info.pid == pid:
        cluster_path(data_dir).unlink(missing_ok=True)


def load_cluster(data_dir: Path) -> ClusterInfo | None:
    """The running cluster, or `None` when there is none (no file, or a stale one)."""
    try:
        info = msgspec.json.decode(cluster_path(data_dir).read_bytes(), type=ClusterInfo)
    except (FileNotFoundError, msgspec.DecodeError):
        return None
    return info if psutil.pid_exists(info.pid) else None
