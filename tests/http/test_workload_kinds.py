"""batch/v1 Jobs and CronJobs, apps/v1 DaemonSets and StatefulSets through kubectl, as a
user applies them: stored with upstream's defaults and generated selector, refused with
upstream's messages, shown with upstream's columns, explained, applied server-side and
diffed. (Their controllers are tested in tests/controllers.)"""

from __future__ import annotations

import json

import pytest
import yaml

from drasim.common.api import batch_v1, core_v1
from tests.controllers.conftest import Changes, running_controllers
from tests.controllers.test_daemonset import DAEMON_SET
from tests.controllers.test_job import JOB, finish

CRON_JOB = """\
apiVersion: batch/v1
kind: CronJob
metadata:
  name: nightly
spec:
  schedule: "@hourly"
  timeZone: Europe/Paris
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: OnFailure
          containers:
          - name: c
            image: registry.k8s.io/pause:3.10
"""
STATEFUL_SET = """\
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: db
spec:
  serviceName: db
  replicas: 2
  selector:
    matchLabels: {app: db}
  template:
    metadata:
      labels: {app: db}
    spec:
      containers:
      - name: db
        image: registry.k8s.io/pause:3.10
"""
ALL = "---\n".join((JOB, CRON_JOB, DAEMON_SET, STATEFUL_SET))


async def test_the_four_kinds_apply_and_show_upstreams_columns(kubectl):
    applied = await kubectl("apply", "-f", "-", input=ALL)
    assert applied.stdout.splitlines() == [
        "job.batch/bench created",
        "cronjob.batch/nightly created",
        "daemonset.apps/driver created",
        "statefulset.apps/db created",
    ]
    header = lambda resource: (  # noqa: E731
        kubectl("get", resource, "-o", "wide", "--no-headers=false")
    )
    jobs = (await header("jobs")).stdout.splitlines()
    assert jobs[0].split() == [
        "NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE", "CONTAINERS", "IMAGES", "SELECTOR",
    ]  # fmt: skip
    assert jobs[1].split()[:3] == ["bench", "Running", "0/10"]
    cron_jobs = (await header("cj")).stdout.splitlines()
    assert cron_jobs[0].split()[:7] == [
        "NAME", "SCHEDULE", "TIMEZONE", "SUSPEND", "ACTIVE", "LAST", "SCHEDULE",
    ]  # fmt: skip
    assert cron_jobs[1].split()[:6] == [
        "nightly",
        "@hourly",
        "Europe/Paris",
        "False",
        "0",
        "<none>",
    ]
    daemon_sets = (await header("ds")).stdout.splitlines()
    assert daemon_sets[0].split()[:8] == [
        "NAME", "DESIRED", "CURRENT", "READY", "UP-TO-DATE", "AVAILABLE", "NODE", "SELECTOR",
    ]  # fmt: skip
    assert daemon_sets[1].split()[:7] == ["driver", "0", "0", "0", "0", "0", "gpu=true"]
    stateful_sets = (await header("sts")).stdout.splitlines()
    assert stateful_sets[0].split() == ["NAME", "READY", "AGE", "CONTAINERS", "IMAGES"]
    assert stateful_sets[1].split()[:2] == ["db", "0/2"]
    listed = await kubectl("api-resources", "--api-group=batch", "-o", "name")
    assert listed.stdout.split() == ["cronjobs.batch", "jobs.batch"]
    everything = await kubectl("get", "all", "-o", "name")
    assert {"job.batch/bench", "cronjob.batch/nightly", "daemonset.apps/driver",
            "statefulset.apps/db"} <= set(everything.stdout.split())  # fmt: skip


async def test_a_job_is_stored_with_upstreams_defaults_and_selector(kubectl):
    await kubectl("apply", "-f", "-", input=JOB)
    job = json.loads((await kubectl("get", "job", "bench", "-o", "json")).stdout)
    uid = job["metadata"]["uid"]
    generated = {
        "batch.kubernetes.io/controller-uid": uid,
        "batch.kubernetes.io/job-name": "bench",
        "controller-uid": uid,
        "job-name": "bench",
    }
    assert job["spec"]["selector"] == {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
    assert job["spec"]["template"]["metadata"]["labels"] == generated
    assert job["metadata"]["labels"] == generated
    spec = job["spec"]
    assert (spec["backoffLimit"], spec["completionMode"], spec["suspend"]) == (
        6,
        "NonIndexed",
        False,
    )
    assert (spec["manualSelector"], spec["podReplacementPolicy"]) == (False, "TerminatingOrFailed")
    assert job["metadata"]["generation"] == 1
    # Applying the manifest again changes nothing (kubectl patches the quantity it sent as
    # a number, as against any cluster), and diff sees nothing to change.
    await kubectl("apply", "-f", "-", input=JOB)
    again = json.loads((await kubectl("get", "job", "bench", "-o", "json")).stdout)
    assert again["metadata"]["generation"] == 1
    diff = await kubectl("diff", "-f", "-", input=JOB, check=False)
    assert (diff.returncode, diff.stdout) == (0, "")


async def test_kubectl_create_job_and_cronjob_send_protobuf(kubectl):
    created = await kubectl(
        "create", "job", "once", "--image=registry.k8s.io/pause:3.10", "--", "sleep", "1"
    )
    assert created.stdout.strip() == "job.batch/once created"
    cron = await kubectl(
        "create", "cronjob", "tick", "--image=registry.k8s.io/pause:3.10",
        "--schedule=*/5 * * * *",
    )  # fmt: skip
    assert cron.stdout.strip() == "cronjob.batch/tick created"
    job = yaml.safe_load((await kubectl("get", "job", "once", "-o", "yaml")).stdout)
    (container,) = job["spec"]["template"]["spec"]["containers"]
    assert (container["name"], container["command"]) == ("once", ["sleep", "1"])
    assert job["spec"]["template"]["spec"]["restartPolicy"] == "Never"
    cron_job = yaml.safe_load((await kubectl("get", "cronjob", "tick", "-o", "yaml")).stdout)
    assert cron_job["spec"]["schedule"] == "*/5 * * * *"
    assert cron_job["spec"]["concurrencyPolicy"] == "Allow"
    assert cron_job["spec"]["successfulJobsHistoryLimit"] == 3


@pytest.mark.parametrize(
    ("manifest", "message"),
    [
        (
            JOB.replace("restartPolicy: Never", "restartPolicy: Always"),
            'The Job "bench" is invalid: spec.template.spec.restartPolicy: Required value: '
            'valid values: "OnFailure", "Never"',
        ),
        (
            JOB.replace("parallelism: 3", "parallelism: -1"),
            'The Job "bench" is invalid: spec.parallelism: Invalid value: -1: must be greater '
            "than or equal to 0",
        ),
        (
            CRON_JOB.replace('"@hourly"', '"61 * * * *"'),
            'The CronJob "nightly" is invalid: spec.schedule: Invalid value: "61 * * * *": end of '
            "range (61) above maximum (59): 61",
        ),
        (
            CRON_JOB.replace("Europe/Paris", "Mars/Olympus"),
            'The CronJob "nightly" is invalid: spec.timeZone: Invalid value: "Mars/Olympus": '
            "unknown time zone Mars/Olympus",
        ),
        (
            DAEMON_SET.replace("labels: {app: driver}", "labels: {app: other}"),
            'The DaemonSet "driver" is invalid: spec.template.metadata.labels: Invalid value: '
            '{"app":"other"}: `selector` does not match template `labels`',
        ),
        (
            STATEFUL_SET.replace("serviceName: db", "serviceName: db\n  podManagementPolicy: Fast"),
            'The StatefulSet "db" is invalid: spec.podManagementPolicy: Invalid value: "Fast": '
            "must be 'OrderedReady' or 'Parallel'",
        ),
    ],
    ids=[
        "job-restart-always",
        "job-negative-parallelism",
        "cron-minute-61",
        "cron-unknown-zone",
        "daemonset-selector",
        "statefulset-policy",
    ],  # fmt: skip
)
async def test_bad_workloads_are_refused_with_upstreams_messages(kubectl, manifest, message):
    refused = await kubectl("apply", "-f", "-", input=manifest, check=False)
    assert refused.returncode == 1
    assert message in refused.stderr


async def test_server_side_apply_and_diff_on_each_kind(kubectl):
    for manifest in (JOB, CRON_JOB, DAEMON_SET, STATEFUL_SET):
        await kubectl("apply", "--server-side", "-f", "-", input=manifest)
    changed = STATEFUL_SET.replace("replicas: 2", "replicas: 3")
    diff = await kubectl("diff", "--server-side", "-f", "-", input=changed, check=False)
    assert diff.returncode == 1
    assert "-  replicas: 2" in diff.stdout and "+  replicas: 3" in diff.stdout
    await kubectl("apply", "--server-side", "-f", "-", input=changed)
    scaled = await kubectl("scale", "statefulset", "db", "--replicas=5")
    assert scaled.stdout.strip() == "statefulset.apps/db scaled"
    sts = json.loads((await kubectl("get", "sts", "db", "-o", "json")).stdout)
    assert (sts["spec"]["replicas"], sts["metadata"]["generation"]) == (5, 3)
    refused = await kubectl(
        "patch", "sts", "db", "--type=merge", "-p", '{"spec":{"serviceName":"other"}}', check=False
    )
    assert 'spec.serviceName: Invalid value: "other": field is immutable' in refused.stderr


async def test_explain_describes_the_new_kinds(kubectl):
    explained = await kubectl("explain", "cronjob.spec.concurrencyPolicy")
    assert "Specifies how to treat concurrent executions of a Job." in explained.stdout
    job = await kubectl("explain", "job.spec.parallelism")
    assert "maximum desired number of pods" in job.stdout
    sts = await kubectl("explain", "statefulset.spec.podManagementPolicy")
    assert "OrderedReady" in sts.stdout
    ds = await kubectl("explain", "daemonset")
    assert "DaemonSet represents the configuration of a daemon set." in ds.stdout


def test_job_labels_are_upstreams():
    """The names Jobs and their pods are found by, which scripts and charts select on."""
    assert batch_v1.CONTROLLER_UID_LABEL == "batch.kubernetes.io/controller-uid"
    assert batch_v1.JOB_TRACKING_FINALIZER == "batch.kubernetes.io/job-tracking"


async def test_kubectl_wait_sees_a_job_complete(kubectl, cluster, fresh):
    """The Job controller running; the pods end as a kubelet reports it (a status patch)."""
    async with running_controllers(fresh) as manager:
        changes = Changes(*manager.informers)
        await kubectl("create", "job", "once", "--image=registry.k8s.io/pause:3.10")
        (pod,) = await changes.until(
            lambda: [p for p in manager.pods.cache.values() if p.status.phase != "Succeeded"]
        )
        assert isinstance(pod, core_v1.Pod)
        await finish(cluster.api, pod, "Succeeded")
        waited = await kubectl("wait", "--for=condition=complete", "job/once", "--timeout=15s")
        assert waited.stdout.strip() == "job.batch/once condition met"
        table = await kubectl("get", "job", "once")
        assert table.stdout.splitlines()[1].split()[:3] == ["once", "Complete", "1/1"]
