"""What the reference registers for a cluster file, and where its binaries go: no Go."""

from __future__ import annotations

from drasim.common import cluster_file
from drasim.kubelet import node_status
from reference import nodes, paths


def test_nodes_are_the_ones_drasims_kubelet_registers() -> None:
    cluster = cluster_file.load()
    for config in cluster.nodes:
        node = nodes.node_object(config)
        assert node["metadata"]["name"] == config.name
        assert node["metadata"]["annotations"] == {nodes.KWOK_NODE_ANNOTATION: "fake"}
        assert node["metadata"]["labels"][node_status.POOL_LABEL] == config.pool.name
    dp = nodes.node_object(next(c for c in cluster.nodes if c.pool.name == "dp-gpu"))
    assert dp["status"]["allocatable"]["example.com/gpu"] == "2"
    dra = next(c for c in cluster.nodes if c.pool.name == "dra-gpu")
    assert "example.com/gpu" not in nodes.node_object(dra)["status"]["allocatable"]
    (published,) = nodes.slice_objects(dra, node_uid="uid-1")
    assert published["spec"]["pool"] == {
        "name": dra.name,
        "generation": 1,
        "resourceSliceCount": 1,
    }
    assert [d["name"] for d in published["spec"]["devices"]] == [f"gpu-{i}" for i in range(8)]
    assert published["metadata"]["ownerReferences"][0]["uid"] == "uid-1"


def test_bin_dir_is_outside_the_repository() -> None:
    assert paths.HERE not in paths.bin_dir().parents
    assert paths.bin_dir().name == "bin"
    assert paths.bin_dir().parent.name.startswith(paths.kubernetes_version() + "-")
