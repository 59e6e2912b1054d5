"""Cluster files and node profiles: the built-in ones load, bad ones are refused with the
file and the field named (issue item 1)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from drasim.cli import up
from drasim.cli.main import main
from drasim.common import cluster_file, profiles


def test_the_default_cluster_is_the_kep_example() -> None:
    cluster = cluster_file.load()
    assert [(n.name, n.profile.name, n.exposure("gpu").exposure) for n in cluster.nodes] == [
        ("dra-gpu-0", "gpu-8", "dra"),
        ("dp-gpu-0", "gpu-2", "device-plugin"),
    ]
    (device_class,) = cluster.spec.device_classes
    assert device_class.metadata.name == "gpu.example.com"
    assert device_class.spec.extended_resource_name == "example.com/gpu"
    assert profiles.builtin_profile_names() == ["cpu-only", "gpu-2", "gpu-8"]
    for name in profiles.builtin_profile_names():
        path = profiles.builtin_profile(name)
        assert path is not None
        cluster_file.load_profile(path)


def test_nodes_are_sharded_round_robin(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(
        "apiVersion: drasim.io/v1alpha1\nkind: Cluster\n"
        "pools: [{name: a, count: 3, profile: cpu-only}, {name: b, count: 2, profile: gpu-2,"
        " namePrefix: gpu-node-}]\n"
    )
    cluster = cluster_file.load(path)
    assert [n.name for n in cluster.nodes] == ["a-0", "a-1", "a-2", "gpu-node-0", "gpu-node-1"]
    assert [n.name for n in cluster.shard(0, 2)] == ["a-0", "a-2", "gpu-node-1"]
    assert [n.name for n in cluster.shard(1, 2)] == ["a-1", "gpu-node-0"]
    assert cluster_file.parse_shard("1/2") == (1, 2)
    with pytest.raises(ValueError, match="shard '2/2' is not i/n with 0 <= i < n"):
        cluster_file.parse_shard("2/2")


HEAD = "apiVersion: drasim.io/v1alpha1\nkind: Cluster\n"


@pytest.mark.parametrize(
    ("text", "error"),
    [
        (
            HEAD + "pools: []\nresourceSlices: [{metadata: {name: s}, spec: {driver: d.example.com,"
            " nodeName: n, pool: {name: p, generation: 1, resourceSliceCount: 1}}}]\n",
            "field resourceSlices[0].spec.nodeName: node-local slices come from nodes",
        ),
        (
            HEAD + "pools: []\nresourceSlices: [{metadata: {name: s}, spec: {driver: d.example.com,"
            " allNodes: true, pool: {name: p, generation: 1, resourceSliceCount: 1},"
            " devices: [{name: d, bindingConditions: [attached]}]}}]\n",
            "field resourceSlices[0].spec.devices[0].bindingFailureConditions: Invalid value: "
            "null: bindingFailureConditions are required to use bindingConditions",
        ),
        (
            HEAD + "pools: []\ndrivers: [{name: d.example.com, attachment: {outcome: Maybe}}]\n",
            "field drivers[0].attachment.outcome: Invalid enum value 'Maybe'",
        ),
        (
            HEAD + "pools: [{name: a, count: two, profile: gpu-8}]\n",
            "field pools[0].count: Expected `int`, got `str`",
        ),
        (
            HEAD + "pools: [{name: a, cnt: 1, profile: gpu-8}]\n",
            "field pools[0]: Object contains unknown field `cnt`",
        ),
        (HEAD + "pools: [{name: a}]\n", "field pools[0].profile: Required value"),
        (
            HEAD + "pools: [{name: a, profile: gpu-9}]\n",
            'field pools[0].profile: unknown profile "gpu-9" (known: cpu-only, '
            "dra-example-driver, gpu-2, gpu-8, nvidia-b200-8, nvidia-dgx-a100-40gb, "
            "nvidia-dgx-a100-80gb, nvidia-dgx-h100, nvidia-gh200-2, nvidia-h200-8, nvidia-l40s, "
            "nvidia-t4; or a .yaml path)",
        ),
        (
            HEAD
            + "pools: [{name: a, profile: gpu-2, devices: {gpu: {exposure: device-plugin}}}]\n",
            "field pools[0].devices[gpu].extendedResourceName: required for exposure device-plugin",
        ),
        (
            HEAD + "pools: [{name: a, profile: gpu-2, devices: {tpu: {exposure: dra}}}]\n",
            'field pools[0].devices[tpu]: profile gpu-2 has no device group "tpu"',
        ),
        (
            HEAD + "pools: [{name: a, profile: gpu-2, devices: {gpu: {exposure: pcie}}}]\n",
            "field pools[0].devices[...].exposure: Invalid enum value 'pcie'",
        ),
        (
            HEAD + "pools: [{name: a, count: 2, profile: gpu-2}, {name: b, profile: gpu-2,"
            " namePrefix: a-}]\n",
            "field pools[1].namePrefix: node a-0 is also in pool a",
        ),
        (
            HEAD + "pools: [{name: a, profile: gpu-2, taints: [{key: k, effect: Never}]}]\n",
            "field pools[0].taints[0].effect: must be NoSchedule, PreferNoSchedule or NoExecute",
        ),
        (
            HEAD + "deviceClasses: [{apiVersion: resource.k8s.io/v1, kind: DeviceClass,"
            " metadata: {name: c}, spec: {extendedResourceName: gpu}}]\npools: []\n",
            "field deviceClasses[0].spec.extendedResourceName: Invalid value",
        ),
        (
            "apiVersion: v1\nkind: Cluster\npools: []\n",
            "field apiVersion: must be drasim.io/v1alpha1",
        ),
        (
            HEAD + "pools: []\npodDefaults: [{runFor: '30'}]\n",
            'field podDefaults[0].runFor: time: missing unit in duration "30"',
        ),
        (
            HEAD + "pools: []\npodDefaults: [{runFor: 1s, exitCode: 300}]\n",
            "field podDefaults[0].exitCode: must be between 0 and 255, inclusive",
        ),
        (
            HEAD + "pools: []\npodDefaults: [{selector: {matchLabels: {'a b': c}}}]\n",
            'field podDefaults[0].selector.matchLabels: Invalid value: "a b"',
        ),
        (
            HEAD + "pools: []\napistore: {compactionInterval: 5x}\n",
            'field apistore.compactionInterval: time: unknown unit "x" in duration "5x"',
        ),
        (
            HEAD + "pools: []\napistore: {compactionInterval: -1m}\n",
            "field apistore.compactionInterval: must be greater than or equal to 0",
        ),
        (
            HEAD + "pools: []\napistore: {compactionInterval: 300}\n",
            "field apistore.compactionInterval: Expected `str`, got `int`",
        ),
        (
            HEAD + "pools: []\napistore: {etcdCompactionInterval: 5m}\n",
            "field apistore: Object contains unknown field `etcdCompactionInterval`",
        ),
    ],
    ids=[
        "slice-of-a-node",
        "bad-slice",
        "bad-attachment-outcome",
        "wrong-type",
        "unknown-field",
        "missing-field",
        "unknown-profile",
        "device-plugin-needs-a-name",
        "unknown-device-group",
        "unknown-exposure",
        "duplicate-node",
        "bad-taint",
        "bad-device-class",
        "wrong-api-version",
        "bad-run-for",
        "bad-exit-code",
        "bad-selector",
        "bad-compaction-interval",
        "negative-compaction-interval",
        "compaction-interval-without-unit",
        "unknown-apistore-field",
    ],
)
def test_a_bad_cluster_file_is_refused_naming_file_and_field(
    tmp_path: Path, text: str, error: str
) -> None:
    path = tmp_path / "cluster.yaml"
    path.write_text(text)
    with pytest.raises(cluster_file.ClusterFileError) as raised:
        cluster_file.load(path)
    assert str(raised.value).startswith(f"{path}: ")
    assert error in str(raised.value)


def test_a_bad_profile_file_is_named_itself(tmp_path: Path) -> None:
    (tmp_path / "big.yaml").write_text(
        "apiVersion: drasim.io/v1alpha1\nkind: NodeProfile\ncpu: 8\nmemory: 1Gi\n"
        "devices: [{name: gpu, driver: gpu.example.com, count: -1}]\n"
    )
    (tmp_path / "cluster.yaml").write_text(HEAD + "pools: [{name: a, profile: big.yaml}]\n")
    with pytest.raises(cluster_file.ClusterFileError) as raised:
        cluster_file.load(tmp_path / "cluster.yaml")
    assert str(raised.value) == (
        f"{tmp_path / 'big.yaml'}: field devices[0].count: must be greater than or equal to 0"
    )


def test_drasim_up_refuses_a_bad_cluster_file_before_starting_anything(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "cluster.yaml"
    bad.write_text(HEAD + "pools: [{name: a, count: two, profile: gpu-8}]\n")
    data_dir = tmp_path / "data"

    assert main(["up", "--data-dir", str(data_dir), "--cluster", str(bad)]) == 1

    assert capsys.readouterr().err == (
        f"drasim: {bad}: field pools[0].count: Expected `int`, got `str`\n"
    )
    assert not data_dir.exists()


@pytest.mark.parametrize(
    ("file", "flag", "passed"),
    [
        ("apistore: {compactionInterval: 90s}\n", None, ["--compaction-interval", "90s"]),
        ("apistore: {compactionInterval: 0s}\n", None, ["--compaction-interval", "0s"]),
        ("apistore: {compactionInterval: 90s}\n", 0.0, ["--compaction-interval", "0s"]),
        ("apistore: {}\n", 120.0, ["--compaction-interval", "2m0s"]),
        ("apistore: {}\n", None, []),
        ("", None, []),
    ],
    ids=["file", "file-never", "flag-wins", "flag", "empty-section", "neither"],
)
def test_drasim_up_passes_the_files_compaction_interval_on(
    tmp_path: Path, file: str, flag: float | None, passed: list[str]
) -> None:
    """`apistore.compactionInterval` reaches the apistore as its flag, unless `drasim up`'s
    own `--compaction-interval` is given; with neither the apistore keeps its default."""
    path = tmp_path / "cluster.yaml"
    path.write_text(HEAD + "pools: []\n" + file)
    cluster = cluster_file.load(path)
    if cluster.spec.apistore is not None and cluster.spec.apistore.compaction_interval:
        seconds = cluster.spec.apistore.compaction_interval_seconds()
        assert seconds == {"90s": 90.0, "0s": 0.0}[cluster.spec.apistore.compaction_interval]
    args = argparse.Namespace(compaction_interval=flag)
    assert up._apistore_args(args, cluster) == passed
