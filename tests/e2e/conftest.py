"""End-to-end clusters: `drasim up` in a subprocess on the session's NATS and Postgres (a
database and prefix of its own), reached with kubectl as a user reaches it. One cluster per
cluster file and module: started on first use, stopped (with every process it started)
when the module ends."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from drasim.cli import launch, supervisor
from tests.cli.test_up import Up
from tests.conftest import Infra, _run

KUBECTL = shutil.which("kubectl")
READY_DEADLINE = 120.0  # seconds for `drasim up` to say ready on a loaded machine
KUBECTL_DEADLINE = 90.0


class UpCluster:
    """One `drasim up --cluster FILE`; `kubectl` runs against it."""

    def __init__(self, infra: Infra, cluster_text: str, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.prefix = f"e{uuid.uuid4().hex[:16]}"
        self.infra = infra
        self.database_url = _run(
            launch.create_database(infra.admin_url, owner_url=infra.database_url, name=self.prefix)
        )
        data_dir.mkdir(parents=True)
        cluster_file = data_dir / "cluster.yaml"
        cluster_file.write_text(cluster_text)
        self.up = Up(
            data_dir,
            *("--cluster", str(cluster_file), "--nats-url", infra.nats_url),
            *("--database-url", self.database_url, "--prefix", self.prefix),
            services="",
            deadline=READY_DEADLINE,
        )
        self.up.wait_for_ready()

    def kubectl(
        self, *args: str, check: bool = True, input: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        if KUBECTL is None:
            pytest.skip("kubectl is not installed on this machine")
        env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
        done = subprocess.run(
            [KUBECTL, "--kubeconfig", str(self.data_dir / "kubeconfig"), *args],
            input=input,
            capture_output=True,
            text=True,
            env=env,
            timeout=KUBECTL_DEADLINE,
        )
        if check and done.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed:\n{done.stderr}")
        return done

    def stop(self) -> None:
        process = self.up.process
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=READY_DEADLINE)
            except subprocess.TimeoutExpired:
                process.kill()
        supervisor.ProcessRecords(self.data_dir).stop_orphans()
        _run(launch.drop_database(self.infra.admin_url, self.database_url))
        _run(launch.delete_event_stream(self.infra.nats_url, self.prefix))


@pytest.fixture(scope="module")
def up_clusters(
    infra: Infra, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, UpCluster]]:
    """Cluster file text → its running cluster, for the module's tests to share."""
    running: dict[str, UpCluster] = {}

    class Clusters(dict[str, UpCluster]):
        def __missing__(self, text: str) -> UpCluster:
            cluster = UpCluster(infra, text, tmp_path_factory.mktemp("up") / "data")
            running[text] = self[text] = cluster
            return cluster

    try:
        yield Clusters()
    finally:
        for cluster in running.values():
            cluster.stop()
