"""A killed kubelet process comes back to its nodes' pods without preparing anything twice."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from drasim.cli.launch import Launch, ServiceProcess
from drasim.common.api import core_v1
from drasim.common.client import ApiClient
from drasim.drivers.checkpoint import Checkpoint
from drasim.drivers.dra_driver import DriverCheckpoint
from tests.builders import make_pod
from tests.conftest import Fresh
from tests.kubelet.conftest import DP_NODE, DRA_NODE, StartKubelet
from tests.kubelet.scheduling import schedule_with_dra
from tests.kubelet.test_pods import resource_status, running
from tests.kubelet.waiting import wait_for

GPU = {"example.com/gpu": "1"}
MAPPING = [("con0", "example.com/gpu", "container-0-request-0")]


async def test_a_restarted_kubelet_recovers_its_pods_without_preparing_again(
    api: ApiClient, start_kubelet: StartKubelet
) -> None:
    first = await start_kubelet()
    await schedule_with_dra(
        api, make_pod("dra").limits(GPU).obj(), DRA_NODE,
        mappings=MAPPING, results=[("container-0-request-0", "gpu-1")],
    )  # fmt: skip
    await api.create(make_pod("dp").limits(GPU).node(DP_NODE).obj())
    dra = await wait_for(api, core_v1.Pod, "dra", running, namespace="default")
    dp = await wait_for(api, core_v1.Pod, "dp", running, namespace="default")
    assert dra is not None and dp is not None
    assert first.agents[DRA_NODE].drivers["gpu.example.com"].prepare_count == 1
    await first.stop()  # nothing is unprepared or released: as if the process died

    second = await start_kubelet()
    # The device-plugin device the running pod holds is not handed out again.
    await api.create(make_pod("dp-2").limits(GPU).node(DP_NODE).obj())
    dp2 = await wait_for(api, core_v1.Pod, "dp-2", running, namespace="default")
    assert dp2 is not None
    assert resource_status(dp2)["con0"] != resource_status(dp)["con0"]
    # The running pods were recovered as they were: not prepared again, not rewritten.
    driver = second.agents[DRA_NODE].drivers["gpu.example.com"]
    assert driver.prepare_count == 0
    for pod in (dra, dp):
        now = await api.get(core_v1.Pod, pod.metadata.name, namespace="default")
        assert now.metadata.resource_version == pod.metadata.resource_version

    await api.delete(core_v1.Pod, "dra", namespace="default")
    await wait_for(api, core_v1.Pod, "dra", lambda p: p is None, namespace="default")
    assert driver.prepared_devices() == {}
    assert driver.prepare_count == 0


async def test_a_kubelet_process_killed_with_sigkill_takes_over_again(
    api: ApiClient, fresh: Fresh, tmp_path: Path, cluster_path: Path
) -> None:
    """The real thing: `python -m drasim.kubelet` killed with SIGKILL, then started again."""
    state_dir = tmp_path / "nodes"

    async def spawn() -> ServiceProcess:
        spec = Launch.service(
            "drasim.kubelet",
            nats_url=fresh.nats_url,
            prefix=fresh.prefix,
            args=["--cluster", str(cluster_path), "--state-dir", str(state_dir)],
        )
        return await ServiceProcess.start(spec, timeout=30)

    checkpoint = Checkpoint(
        state_dir / DRA_NODE / "plugins" / "gpu.example.com.json",
        DriverCheckpoint,
        DriverCheckpoint,
    )
    process = await spawn()
    try:
        await schedule_with_dra(
            api, make_pod("dra").limits(GPU).obj(), DRA_NODE,
            mappings=MAPPING, results=[("container-0-request-0", "gpu-3")],
        )  # fmt: skip
        dra = await wait_for(api, core_v1.Pod, "dra", running, namespace="default")
        assert dra is not None
        prepared = checkpoint.load().prepared
        assert [c.name for c in prepared.values()] == [
            dra.status.extended_resource_claim_status.resource_claim_name
        ]
        os.kill(process.pid, signal.SIGKILL)
        await process.wait()

        process = await spawn()
        await api.create(make_pod("after").node(DRA_NODE).obj())
        assert await wait_for(api, core_v1.Pod, "after", running, namespace="default")
        assert checkpoint.load().prepared == prepared
        now = await api.get(core_v1.Pod, "dra", namespace="default")
        assert now.metadata.resource_version == dra.metadata.resource_version

        await api.delete(core_v1.Pod, "dra", namespace="default")
        await wait_for(api, core_v1.Pod, "dra", lambda p: p is None, namespace="default")
        assert checkpoint.load().prepared == {}
    finally:
        await process.stop()


async def test_a_pod_that_finished_as_it_was_deleted_is_removed(
    api: ApiClient, start_kubelet: StartKubelet
) -> None:
    """A pod whose deletion (with a grace period) and finish cross: the kubelet sees it
    Succeeded and marked for deletion at once, and must still remove it (it stayed
    Terminating for ever at 10,000 nodes). The crossing is made by stopping the kubelet."""
    first = await start_kubelet()
    await api.create(make_pod("crossing").node(DP_NODE).obj())
    pod = await wait_for(api, core_v1.Pod, "crossing", running, namespace="default")
    assert pod is not None
    await first.stop()
    await api.delete(core_v1.Pod, "crossing", namespace="default", grace_period_seconds=30)
    pod = await api.get(core_v1.Pod, "crossing", namespace="default")
    assert pod.metadata.deletion_timestamp
    pod.status.phase = "Succeeded"
    await api.update_status(pod)

    await start_kubelet()
    await wait_for(api, core_v1.Pod, "crossing", lambda p: p is None, namespace="default")
