"""The CLI against a real apistore: apply/get/describe/delete/events/replay as a user runs them."""

from __future__ import annotations

import asyncio
import json

import pytest

from drasim.cli.main import main
from drasim.common.api import core_v1, resource_v1
from tests.builders import KEP_DEVICE_CLASS_YAML, make_claim, make_pod

DEVICE_CLASS = KEP_DEVICE_CLASS_YAML

POD = """\
apiVersion: v1
kind: Pod
metadata:
  name: web
  labels: {app: web}
spec:
  containers:
  - name: main
    image: registry.k8s.io/pause:3.10
    resources:
      limits:
        example.com/gpu: 1
"""


async def drasim(fresh, capsys, *argv: str) -> tuple[int, str, str]:
    """Run `drasim ARGV` against the test's cluster (in a thread: the CLI runs its own loop)."""
    flags = ["--nats-url", fresh.nats_url, "--prefix", fresh.prefix]
    code = await asyncio.to_thread(main, [*flags, *argv])
    out, err = capsys.readouterr()
    return code, out, err


async def test_apply_get_describe_delete(fresh, api, tmp_path, capsys):
    manifest = tmp_path / "kep.yaml"
    manifest.write_text(DEVICE_CLASS + "---\n" + POD)
    code, out, _ = await drasim(fresh, capsys, "apply", "-f", str(manifest))
    assert code == 0
    gpu_class = "deviceclass.resource.k8s.io/gpu.example.com"
    assert out.splitlines() == [f"{gpu_class} created", "pod/web created"]
    code, out, _ = await drasim(fresh, capsys, "apply", "-f", str(manifest))
    assert out.splitlines() == [f"{gpu_class} unchanged", "pod/web unchanged"]

    code, out, _ = await drasim(fresh, capsys, "get", "pods", "-o", "wide")
    header, row = out.splitlines()
    assert header.split() == [
        "NAME",
        "READY",
        "STATUS",
        "RESTARTS",
        "AGE",
        "IP",
        "NODE",
        "NOMINATED",
        "NODE",
    ]
    assert row.split()[:4] == ["web", "0/1", "Pending", "0"]
    code, out, _ = await drasim(
        fresh, capsys, "get", "deviceclass", "gpu.example.com", "-o", "yaml"
    )
    assert "extendedResourceName: example.com/gpu" in out

    code, out, _ = await drasim(fresh, capsys, "describe", "pod", "web")
    assert "Name:           web" in out and "example.com/gpu: 1" in out

    code, out, _ = await drasim(fresh, capsys, "delete", "pod", "web")
    assert out.strip() == 'pod "web" deleted'
    code, out, err = await drasim(fresh, capsys, "get", "pods")
    assert out == "" and err.strip() == "No resources found in default namespace."
    # As kubectl: the note goes to stderr, and only beside a table.
    code, out, err = await drasim(fresh, capsys, "get", "pods", "-o", "name")
    assert (code, out, err) == (0, "", "")
    code, out, err = await drasim(fresh, capsys, "get", "deviceclasses", "-o", "name")
    assert out.split() == ["deviceclass.resource.k8s.io/gpu.example.com"]
    code, out, err = await drasim(fresh, capsys, "get", "resourceslices", "-l", "x=y")
    assert err.strip() == "No resources found"


async def test_bad_manifests_name_file_document_and_field(fresh, api, tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text(POD + "---\n" + POD.replace("name: main", "name: [oops]").replace("web", "w2"))
    code, _, err = await drasim(fresh, capsys, "apply", "-f", str(bad))
    assert code == 1
    assert f"{bad}: document 2" in err and "spec.containers[0].name" in err
    invalid = tmp_path / "invalid.yaml"
    invalid.write_text(
        DEVICE_CLASS.replace("example.com/gpu", "deviceclass.resource.kubernetes.io/x")
    )
    code, _, err = await drasim(fresh, capsys, "apply", "-f", str(invalid))
    assert code == 1
    assert "spec.extendedResourceName" in err and 'must not have "kubernetes.io/" domain' in err
    # Neither file left anything behind: the first is refused before any write.
    assert (await api.list(core_v1.Pod))[0] == []
    assert (await api.list(resource_v1.DeviceClass))[0] == []


async def test_events_prints_the_log(fresh, api, capsys):
    pod = await api.create(make_pod("p").obj())
    await api.bind(pod, "n1")
    code, out, _ = await drasim(fresh, capsys, "events", "--kind", "pods")
    lines = out.splitlines()
    assert lines[0].split()[:4] == ["RV", "TIME", "TYPE", "RESOURCE"]
    assert [line.split()[2] for line in lines[1:]] == ["ADDED", "MODIFIED"]
    assert all("default/p" in line and "test" in line for line in lines[1:])


async def write_busy_history(api, pods: int) -> None:  # noqa: ANN001
    """A busy run: creates, updates, deletes, garbage collection."""
    for i in range(pods):
        pod = await api.create(make_pod(f"p{i}").labels(i=str(i)).obj())
        await api.create(make_claim(f"c{i}", owner=pod))
        if i % 3 == 0:
            await api.bind(pod, "n1")
        if i % 2 == 0:
            await api.delete(core_v1.Pod, f"p{i}", namespace="default", grace_period_seconds=0)


async def test_replay_shows_the_past_and_verifies_the_projection(fresh, api, capsys):
    first = await api.create(make_pod("early").obj())
    await write_busy_history(api, 30)
    code, out, _ = await drasim(fresh, capsys, "replay", "--verify")
    assert code == 0, out
    assert "equals the projection" in out
    code, out, _ = await drasim(
        fresh, capsys, "replay", "--to", first.metadata.resource_version, "get", "pods"
    )
    assert [line.split()[0] for line in out.splitlines()[1:]] == ["early"]
    code, out, _ = await drasim(fresh, capsys, "replay", "--to", first.metadata.resource_version)
    assert "pods" in out and f"resourceVersion {first.metadata.resource_version}" in out


async def test_events_and_replay_page_a_log_larger_than_the_bus_carries(fresh, api, capsys):
    """At 450 pods with their status the log outgrew NATS' payload in one page of events;
    here fewer, larger pods do it: more than the bus's max_payload in all."""
    count = api.bus.nc.max_payload // 100_000 + 5
    for i in range(count):
        pod = make_pod(f"p{i:03d}").obj()
        pod.metadata.annotations = {"example.com/blob": f"{i}" + "x" * 100_000}
        await api.create(pod)
    code, out, err = await drasim(fresh, capsys, "events", "--kind", "pods")
    assert code == 0, err
    lines = out.splitlines()[1:]
    assert [line.split()[4] for line in lines] == [f"default/p{i:03d}" for i in range(count)]
    code, out, err = await drasim(fresh, capsys, "events", "--kind", "pods", "-o", "json")
    blobs = [json.loads(line)["object"]["metadata"]["annotations"] for line in out.splitlines()]
    assert [b["example.com/blob"][:3] for b in blobs[:2]] == ["0xx", "1xx"]
    code, out, err = await drasim(fresh, capsys, "replay", "--verify")
    assert code == 0, err
    assert "equals the projection" in out


async def test_replay_verify_reports_a_difference(fresh, server, api, capsys):
    await api.create(make_pod("p").obj())
    # Damage the projection behind the log's back (what a bug would do).
    async with server.store._pool.acquire() as conn:
        await conn.execute("DELETE FROM objects WHERE resource = 'pods'")
    code, _, err = await drasim(fresh, capsys, "replay", "--verify")
    assert code == 1
    assert "pods default/p: in the log's fold but not in the projection" in err


@pytest.mark.parametrize("kind", ["po", "pods", "Pod", "resourceclaims.resource.k8s.io"])
async def test_kind_names_resolve_like_kubectl(fresh, api, capsys, kind):
    code, _, err = await drasim(fresh, capsys, "get", kind)
    assert code == 0 and err.startswith("No resources found")
