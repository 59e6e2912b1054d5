"""End to end: a Job of 10 completions, 3 at a time, each pod asking `example.com/gpu: 1`,
on the KEP's example cluster (a DRA node of 8 GPUs, a device-plugin node of 2) with the
scheduler, controllers and kubelet emulators in-process. Pods end as a kubelet reports a
container that exited 0: a status patch to Succeeded."""

from __future__ import annotations

from drasim.common import codec
from drasim.common.api import batch_v1, core_v1, resource_v1
from drasim.common.client import ApiClient
from drasim.kubelet.run import KubeletProcess
from tests.builders import KEP_DEVICE_CLASS_YAML
from tests.controllers.test_job import JOB, finish
from tests.kubelet.test_kep_example import kep_cluster  # noqa: F401 (fixture)
from tests.kubelet.waiting import wait_for, wait_for_all


def running_job_pods(pods: list[core_v1.Pod]) -> list[core_v1.Pod]:
    return [
        p
        for p in pods
        if p.metadata.labels.get(batch_v1.JOB_NAME_LABEL) == "bench" and p.status.phase == "Running"
    ]


async def test_a_gpu_job_of_ten_runs_three_at_a_time_and_completes(
    api: ApiClient,
    kep_cluster: KubeletProcess,  # noqa: F811
) -> None:
    [device_class] = codec.load_yaml_documents(KEP_DEVICE_CLASS_YAML)
    await api.create(codec.convert(device_class, resource_v1.DeviceClass))
    [document] = codec.load_yaml_documents(JOB)
    await api.create(codec.convert(document, batch_v1.Job))
    finished: set[str] = set()
    most = 0
    while len(finished) < 10:
        running = await wait_for_all(
            api,
            core_v1.Pod,
            lambda pods: bool(
                [p for p in running_job_pods(pods) if p.metadata.name not in finished]
            ),
            namespace="default",
        )
        batch = [p for p in running_job_pods(running) if p.metadata.name not in finished]
        most = max(most, len(batch))
        for pod in batch:
            # Each ran with one GPU, from a device plugin or through its special claim.
            (status,) = pod.status.container_statuses
            assert [h for r in status.allocated_resources_status for h in r.resources]
            await finish(api, pod, "Succeeded")
            finished.add(pod.metadata.name)
    assert most <= 3
    job = await wait_for(
        api,
        batch_v1.Job,
        "bench",
        lambda j: (
            j is not None
            and any(c.type == "Complete" and c.status == "True" for c in j.status.conditions)
        ),
        namespace="default",
    )
    assert (job.status.succeeded, job.status.failed) == (10, 0)


async def test_pods_that_run_for_a_second_complete_the_job_and_free_their_gpus(
    api: ApiClient,
    kep_cluster: KubeletProcess,  # noqa: F811
) -> None:
    """The issue's test: the emulated containers exit 0 after `drasim.io/run-for`; the
    Job completes, and every special claim its pods had is given back."""
    [device_class] = codec.load_yaml_documents(KEP_DEVICE_CLASS_YAML)
    await api.create(codec.convert(device_class, resource_v1.DeviceClass))
    [document] = codec.load_yaml_documents(JOB)
    document["spec"]["template"]["metadata"] = {
        "annotations": {"drasim.io/run-for": "1s", "drasim.io/exit-code": "0"}
    }
    await api.create(codec.convert(document, batch_v1.Job))
    job = await wait_for(
        api,
        batch_v1.Job,
        "bench",
        lambda j: (
            j is not None
            and any(c.type == "Complete" and c.status == "True" for c in j.status.conditions)
        ),
        namespace="default",
        timeout=60,
    )
    assert (job.status.succeeded, job.status.failed) == (10, 0)
    pods, _ = await api.list(core_v1.Pod, namespace="default")
    ran = [p for p in pods if p.metadata.labels.get(batch_v1.JOB_NAME_LABEL) == "bench"]
    assert len(ran) == 10 and all(p.status.phase == "Succeeded" for p in ran)
    special = {
        p.status.extended_resource_claim_status.resource_claim_name
        for p in ran
        if p.status.extended_resource_claim_status is not None
    }
    assert special  # some ran on the DRA node

    def released(claims: list[resource_v1.ResourceClaim]) -> bool:
        mine = [c for c in claims if c.metadata.name in special]
        return all(c.status.allocation is None and not c.status.reserved_for for c in mine)

    await wait_for_all(api, resource_v1.ResourceClaim, released, namespace="default")
