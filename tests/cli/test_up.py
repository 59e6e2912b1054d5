"""`drasim up` as a user runs it: a foreground process that brings the cluster up, says
`ready`, and on SIGTERM or a crashed service takes everything down with it."""

from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import psutil
import pytest

from drasim.cli import cluster, supervisor
from drasim.cli.main import main
from drasim.cli.up import SERVICES
from drasim.common import profiles
from tests.http.whole_cluster import WITH_GPU_CLASS

if TYPE_CHECKING:
    from tests.conftest import Fresh

FAKE_SERVICE_DIR = Path(__file__).parent
DEADLINE = 60.0  # generous: a first `up` runs initdb


def alive(pids: list[int]) -> list[int]:
    """The pids still running (a zombie has exited; only its parent's reaping is left)."""
    running = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                running.append(pid)
        except psutil.NoSuchProcess:
            pass
    return running


class Up:
    """`drasim up --services fake_service` (or the `services` given; all if none) in a
    subprocess, its output read line by line by a thread so that waiting for a line can
    have a deadline."""

    def __init__(
        self,
        data_dir: Path,
        *flags: str,
        env: dict[str, str] | None = None,
        services: str = "fake_service",
        deadline: float = DEADLINE,
    ) -> None:
        drasim = Path(sys.executable).parent / "drasim"
        env = {k: v for k, v in os.environ.items() if not k.startswith("DRASIM_")} | (env or {})
        env["PYTHONPATH"] = os.pathsep.join([str(FAKE_SERVICE_DIR), env.get("PYTHONPATH", "")])
        self.deadline = deadline
        self.process = subprocess.Popen(
            [str(drasim) if drasim.exists() else str(shutil.which("drasim")), "up"]
            + ["--data-dir", str(data_dir)]
            + (["--services", services] if services else [])
            + list(flags),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
        )
        self.lines: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def wait_for(self, wanted: Callable[[str], bool]) -> str:
        deadline = time.monotonic() + self.deadline
        while True:
            line = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
            assert line is not None, f"drasim up ended early:\n{self.output}"
            self.lines.append(line)
            if wanted(line):
                return line

    def wait_for_ready(self) -> str:
        return self.wait_for(lambda line: line.startswith("ready"))

    def finish(self) -> int:
        """Exit code, once all output is read."""
        while (line := self._queue.get(timeout=DEADLINE)) is not None:
            self.lines.append(line)
        return self.process.wait(timeout=DEADLINE)

    def fake_service_line(self) -> dict[str, str]:
        """The fake service's newest `pid=... starts=... prefix=...` line, as a dict."""
        line = [line for line in self.lines if line.startswith("[fake_service] pid=")][-1]
        return dict(item.split("=", 1) for item in line.split()[1:])

    def process_tree(self) -> list[int]:
        children = psutil.Process(self.process.pid).children(recursive=True)
        return [self.process.pid, *(child.pid for child in children)]

    @property
    def output(self) -> str:
        return "\n".join(self.lines)


@pytest.fixture
def run_up(tmp_path: Path) -> Callable[..., Up]:
    started: list[Up] = []

    def run(*flags: str, env: dict[str, str] | None = None) -> Up:
        started.append(Up(tmp_path, *flags, env=env))
        return started[-1]

    yield run
    for up in started:  # a failed test must not leave a cluster running
        if up.process.poll() is None:
            up.process.send_signal(signal.SIGTERM)
            up.process.wait(timeout=DEADLINE)
    records = supervisor.ProcessRecords(tmp_path)
    records.stop_orphans()  # a test that killed `up` itself


def test_up_serves_until_sigterm_and_leaves_no_process(
    run_up: Callable[..., Up], tmp_path: Path
) -> None:
    up = run_up()
    ready = up.wait_for_ready()
    assert ready.startswith("ready: nats=nats://127.0.0.1:")
    # The embedded Postgres is reached through its unix socket, as the service role, whose
    # password is in a file of the data directory.
    assert " postgres=postgresql://drasim@/drasim?host=/" in ready
    assert f"&passfile={tmp_path.absolute()}/postgres.pgpass" in ready
    assert ready.endswith(" services=fake_service")
    assert up.fake_service_line()["starts"] == "1"
    found = cluster.load_cluster(tmp_path)
    assert found is not None and found.pid == up.process.pid
    assert f"nats={found.nats_url} postgres={found.database_url}" in ready
    tree = up.process_tree()
    names = {psutil.Process(pid).name() for pid in tree}
    assert {"nats-server", "postgres"} <= names

    up.process.send_signal(signal.SIGTERM)
    assert up.finish() == 0, up.output
    assert alive(tree) == []
    assert cluster.load_cluster(tmp_path) is None


def test_a_second_up_on_the_same_data_dir_keeps_the_data(run_up: Callable[..., Up]) -> None:
    for starts in ("1", "2"):
        up = run_up()
        up.wait_for_ready()
        assert up.fake_service_line()["starts"] == starts
        up.process.send_signal(signal.SIGTERM)
        assert up.finish() == 0, up.output


def test_a_crashed_service_is_restarted_and_reported(run_up: Callable[..., Up]) -> None:
    up = run_up()
    up.wait_for_ready()
    first = up.fake_service_line()

    os.kill(int(first["pid"]), signal.SIGUSR1)  # the fake's "crash"
    up.wait_for(lambda line: "service fake_service is ready again (restart 1)" in line)
    assert "drasim: service fake_service exited with code 3; restarting it in 1s (restart 1)" in (
        up.output
    )
    again = up.fake_service_line()
    assert again["starts"] == "2" and again["pid"] != first["pid"]
    assert alive([int(first["pid"])]) == []
    tree = up.process_tree()

    up.process.send_signal(signal.SIGTERM)
    assert up.finish() == 0, up.output
    assert alive(tree) == []


def test_a_service_that_cannot_start_stops_the_cluster_with_exit_code_1(
    run_up: Callable[..., Up],
) -> None:
    up = run_up(env={"FAKE_SERVICE_FAIL_AT_START": "1"})
    assert up.finish() == 1, up.output
    assert "[fake_service] cannot start: FAKE_SERVICE_FAIL_AT_START is set" in up.output
    assert "drasim: service fake_service exited with code 3; stopping the cluster" in up.output
    assert not any(line.startswith("ready") for line in up.lines)


@pytest.mark.parametrize("server", ["nats-server", "postgres"])
def test_a_killed_embedded_server_is_restarted_on_its_url(
    run_up: Callable[..., Up], tmp_path: Path, server: str
) -> None:
    up = run_up()
    up.wait_for_ready()
    found = cluster.load_cluster(tmp_path)
    assert found is not None
    name = {"nats-server": "nats", "postgres": "postgres"}[server]
    (victim,) = [
        p
        for p in psutil.Process(up.process.pid).children()
        if p.name() == server and p.ppid() == up.process.pid
    ]
    victim.kill()
    up.wait_for(lambda line: f"drasim: embedded {name} is back on port" in line)
    assert f"drasim: embedded {name} exited with code -9; restarting it" in up.output
    # The same URL serves again, to the same credentials.
    if name == "nats":
        user, _, password = Path(found.nats_credentials).read_text().strip().partition(":")
        snippet = (
            "import asyncio, nats; "
            f"asyncio.run(nats.connect({found.nats_url!r}, user={user!r}, password={password!r}))"
        )
    else:
        snippet = f"import asyncio, asyncpg; asyncio.run(asyncpg.connect({found.database_url!r}))"
    assert subprocess.run([sys.executable, "-c", snippet], timeout=DEADLINE).returncode == 0
    up.process.send_signal(signal.SIGTERM)
    assert up.finish() == 0, up.output


def test_a_second_up_on_a_data_dir_in_use_is_refused(run_up: Callable[..., Up]) -> None:
    up = run_up()
    up.wait_for_ready()
    second = run_up()
    assert second.finish() == 1, second.output
    assert f"is in use: another drasim up runs on it (pid {up.process.pid})" in second.output
    up.process.send_signal(signal.SIGTERM)
    assert up.finish() == 0, up.output


def test_an_up_after_a_killed_up_stops_what_it_left_running(run_up: Callable[..., Up]) -> None:
    up = run_up()
    up.wait_for_ready()
    service = int(up.fake_service_line()["pid"])
    up.process.kill()
    up.finish()

    again = run_up()
    again.wait_for_ready()
    assert alive([service]) == []
    assert again.fake_service_line()["starts"] == "2"
    again.process.send_signal(signal.SIGTERM)
    assert again.finish() == 0, again.output


def test_given_urls_replace_the_embedded_servers(run_up: Callable[..., Up], fresh: Fresh) -> None:
    up = run_up(
        "--nats-url", fresh.nats_url, "--database-url", fresh.database_url,
        "--prefix", fresh.prefix,
    )  # fmt: skip
    ready = up.wait_for_ready()
    assert f"nats={fresh.nats_url} " in ready
    assert up.fake_service_line()["prefix"] == fresh.prefix
    children = psutil.Process(up.process.pid).children()
    assert [child.cmdline()[1:3] for child in children] == [["-m", "fake_service"]]

    up.process.send_signal(signal.SIGTERM)
    assert up.finish() == 0, up.output


def test_a_bad_setting_is_one_line_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DRASIM_PREFIX", "not.a.token")
    assert main(["up"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("drasim: DRASIM_PREFIX: ")


def drasim_cli(data_dir: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DRASIM_")}
    return subprocess.run(
        [sys.executable, "-m", "drasim.cli.main", "--data-dir", str(data_dir), *argv],
        capture_output=True, text=True, env=env, timeout=DEADLINE,
    )  # fmt: skip


def test_the_cluster_state_survives_a_second_up(run_up: Callable[..., Up], tmp_path: Path) -> None:
    manifest = tmp_path / "pod.yaml"
    manifest.write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: kept}\n"
        "spec: {containers: [{name: c, image: registry.k8s.io/pause:3.10}]}\n"
    )
    up = run_up("--services", "drasim.apistore")
    up.wait_for_ready()
    applied = drasim_cli(tmp_path, "apply", "-f", str(manifest))
    assert applied.stdout.strip() == "pod/kept created", applied.stderr
    up.process.send_signal(signal.SIGTERM)
    assert up.finish() == 0, up.output

    again = run_up("--services", "drasim.apistore")
    again.wait_for_ready()
    listed = drasim_cli(tmp_path, "get", "pods", "-o", "name")
    assert listed.stdout.split() == ["pod/kept"], listed.stderr
    again.process.send_signal(signal.SIGTERM)
    assert again.finish() == 0, again.output


CLUSTER_WITH_CLASSES = (
    WITH_GPU_CLASS
    + """\
  - apiVersion: resource.k8s.io/v1
    kind: DeviceClass
    metadata: {name: nic.example.com}
    spec:
      selectors: [{cel: {expression: "device.driver == 'nic.example.com'"}}]
pools:
  - {name: dra-gpu, count: 2, profile: gpu-8,
     devices: {gpu: {exposure: dra, extendedResourceName: example.com/gpu}}}
"""
)


@pytest.mark.parametrize(
    "services", ["drasim.apistore", ",".join(SERVICES)], ids=["apistore-only", "every-service"]
)
def test_up_without_kubelets_creates_the_cluster_files_device_classes(
    run_up: Callable[..., Up], tmp_path: Path, services: str
) -> None:
    """The control-plane host of a multi-host cluster (docs/multi-host.md) runs `up
    --kubelets 0`; the file's DeviceClasses must be there before any kubelet host starts."""
    path = tmp_path / "cluster.yaml"
    path.write_text(CLUSTER_WITH_CLASSES)
    up = run_up("--services", services, "--kubelets", "0", "--cluster", str(path))
    up.wait_for_ready()
    classes = drasim_cli(tmp_path, "get", "deviceclasses", "-o", "name")
    assert classes.stdout.split() == [
        "deviceclass.resource.k8s.io/gpu.example.com",
        "deviceclass.resource.k8s.io/nic.example.com",
    ], classes.stderr
    shown = drasim_cli(tmp_path, "get", "deviceclass", "gpu.example.com", "-o", "json")
    assert json.loads(shown.stdout)["spec"]["extendedResourceName"] == "example.com/gpu"
    assert "node/" not in drasim_cli(tmp_path, "get", "nodes", "-o", "name").stdout
    up.process.send_signal(signal.SIGTERM)
    assert up.finish() == 0, up.output


@pytest.mark.parametrize(
    ("value", "problem"),
    [("5x", 'time: unknown unit "x" in duration "5x"'), ("-1m", "must not be negative: '-1m'")],
)
def test_a_bad_compaction_interval_is_refused_with_gos_message(
    capsys: pytest.CaptureFixture[str], value: str, problem: str
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["up", f"--compaction-interval={value}"])
    assert exited.value.code == 2
    assert capsys.readouterr().err.endswith(f"argument --compaction-interval: {problem}\n")


def test_the_cluster_files_compaction_interval_reaches_the_apistore(
    run_up: Callable[..., Up], tmp_path: Path
) -> None:
    """`apistore: {compactionInterval: 1s}` in the cluster file: the apistore `up` starts
    compacts every second (its second round compacts what the first saw), where its
    default would wait five minutes."""
    path = tmp_path / "cluster.yaml"
    path.write_text(profiles.DEFAULT_CLUSTER.read_text() + "apistore: {compactionInterval: 1s}\n")
    up = run_up("--services", "drasim.apistore", "--kubelets", "0", "--cluster", str(path))
    up.wait_for_ready()
    line = up.wait_for(lambda line: "compacted the event log up to resourceVersion" in line)
    assert line.startswith("[apistore]"), line
    up.process.send_signal(signal.SIGTERM)
    assert up.finish() == 0, up.output
