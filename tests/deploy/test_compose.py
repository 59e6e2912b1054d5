"""deploy/compose.yaml is a valid Compose file whose services run real drasim entry points.

Validation uses `docker compose config` or `docker-compose config`, which check the file
against the Compose schema without a Docker engine (CI installs Debian's docker-compose).
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from drasim.cli.main import build_parser

COMPOSE = Path(__file__).resolve().parents[2] / "deploy" / "compose.yaml"


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
