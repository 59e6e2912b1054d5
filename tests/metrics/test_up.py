"""`drasim up` gives every service a /metrics endpoint, says where each is and records them
in cluster.json."""

from __future__ import annotations

import signal
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from drasim.cli import cluster
from drasim.cli.up import SERVICES
from tests.cli.test_up import Up
from tests.metrics.scraping import Scrape

# One metric each service is sure to have.
EXPECTED = {
    "apistore": "drasim_apistore_event_log_last_sequence",
    "controllers": "dynamic_resource_allocation_resource_claims",
    "scheduler": "scheduler_pending_pods",
    "kubelet-0": "drasim_kubelet_nodes",
}


@pytest.fixture
def up(tmp_path: Path) -> Iterator[Up]:
    """The real services (not the fake one `Up` defaults to) with one kubelet."""
    started = Up(tmp_path, "--services", ",".join(SERVICES), "--kubelets", "1")
    yield started
    if started.process.poll() is None:  # a failed test must not leave a cluster running
        started.process.send_signal(signal.SIGTERM)
        started.process.wait(timeout=60)


def test_up_prints_and_records_each_services_metrics_endpoint(up: Up, tmp_path: Path) -> None:
    up.wait_for_ready()
    printed = dict(
        line.removeprefix("metrics: ").split(" ", 1)
        for line in up.lines
        if line.startswith("metrics: ")
    )
    assert printed.keys() == EXPECTED.keys(), up.output
    found = cluster.load_cluster(tmp_path)
    assert found is not None and found.metrics == printed
    for name, url in printed.items():
        assert url.startswith("http://127.0.0.1:") and url.endswith("/metrics")
        with urllib.request.urlopen(url, timeout=10) as response:
            got = Scrape(response.read().decode())
        assert EXPECTED[name] in got.families, f"{name}: no {EXPECTED[name]} in\n{got.text}"

    up.process.send_signal(signal.SIGTERM)
    assert up.finish() == 0, up.output


def test_a_restarted_service_serves_its_metrics_where_cluster_json_says(
    up: Up, tmp_path: Path
) -> None:
    """The endpoints are the cluster's, not one run's: a service killed and started again
    serves its /metrics on the URL `up` printed and recorded, as a restarted container
    keeps its pod's ports."""
    up.wait_for_ready()
    found = cluster.load_cluster(tmp_path)
    assert found is not None
    (scheduler,) = [
        p for p in psutil.Process(up.process.pid).children() if "drasim.scheduler" in p.cmdline()
    ]
    scheduler.kill()
    up.wait_for(lambda line: "drasim: service scheduler is ready again (restart 1)" in line)
    again = cluster.load_cluster(tmp_path)
    assert again is not None and again.metrics == found.metrics
    with urllib.request.urlopen(found.metrics["scheduler"], timeout=10) as response:
        got = Scrape(response.read().decode())
    assert EXPECTED["scheduler"] in got.families

    up.process.send_signal(signal.SIGTERM)
    assert up.finish() == 0, up.output
