"""reference.lifecycle_compare's pure parts: the soak it shares, and the ratios."""

from __future__ import annotations

from pathlib import Path

from drasim.common import cluster_file
from reference import lifecycle_compare


def test_upstream_gets_the_soaks_cluster_and_workload(tmp_path: Path) -> None:
    soak = lifecycle_compare.load_soak()
    dra, dp = soak.split_nodes(200)
    path = tmp_path / "cluster.yaml"
    path.write_text(soak.CLUSTER.format(dra=dra, dp=dp))
    cluster = cluster_file.load(path)
    assert len(cluster.nodes) == 200
    assert [c.metadata.name for c in cluster.spec.device_classes] == ["gpu.example.com"]
    assert soak.gpus(200) == 100 * 8 + 100 * 2
    deployment = soak.deployment(soak.gpus(200))
    assert deployment.spec.replicas == 1000
    container = deployment.spec.template.spec.containers[0]
    assert {k: str(v) for k, v in container.resources.limits.items()} == {"example.com/gpu": "1"}


def test_ratios_are_rates_drasim_over_upstream() -> None:
    upstream = {"nodes_ready_s": 2.0, "scale_up_s": 60.0, "scale_down_s": 30.0}
    drasim = {"nodes_ready_s": 4.0, "scale_up_s": 6.0, "scale_down_s": 0.0}
    assert lifecycle_compare.ratios(upstream, drasim) == {
        "nodes_ready_s": 0.5,
        "scale_up_s": 10.0,
    }
