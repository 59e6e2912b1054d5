"""The Events the controllers record, as upstream's do: `ScalingReplicaSet` on Deployments,
`SuccessfulCreate`/`SuccessfulDelete`/`FailedCreate` on ReplicaSets,
`FailedResourceClaimCreation` on pods; and the recorder never holding up a sync."""

from __future__ import annotations

import asyncio
import logging
import re

import pytest

from drasim.apistore.faults import FaultPlan, FaultRule
from drasim.apistore.server import ApiServer
from drasim.common import codec, errors
from drasim.common.api import apps_v1, core_v1, meta_v1, policy_v1
from drasim.common.client import ApiClient
from drasim.common.informer import Informer
from drasim.controllers import ControllerManager, events
from tests.builders import make_pod
from tests.controllers.conftest import TIMEOUT, Changes, FakeKubelet, about
from tests.controllers.test_deployment import (
    SUFFIX,
    kep_deployment,
    replica_sets_of,
    rolled_out,
    scale,
)
from tests.controllers.test_disruption import budget
from tests.controllers.test_resourceclaim import make_template


def replica_set(name: str, replicas: int) -> apps_v1.ReplicaSet:
    return codec.convert(
        {
            "metadata": {"name": name, "namespace": "default"},
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": {"app": name}},
                "template": {
                    "metadata": {"labels": {"app": name}},
                    "spec": {"containers": [{"name": "c", "image": "busybox"}]},
                },
            },
        },
        apps_v1.ReplicaSet,
    )


def pods_of(manager: ControllerManager, rs: str) -> set[str]:
    return {
        p.metadata.name
        for p in manager.pods.list()
        if (ref := p.metadata.controller_ref()) is not None and ref.name == rs
    }


async def test_scaling_a_deployment_records_scaling_replica_set_events(
    api: ApiClient,
    manager: ControllerManager,
    watch: Changes,
    seen: Informer[core_v1.Event],
    kubelet: FakeKubelet,
) -> None:
    deployment = kep_deployment()
    deployment.spec.replicas = 3
    deployment = await api.create(deployment)
    await watch.until(lambda: rolled_out(manager, "demo", 3))
    [rs] = replica_sets_of(manager, "demo")
    name = rs.metadata.name
    await scale(api, "demo", 1)
    await watch.until(lambda: rolled_out(manager, "demo", 1))

    found = await watch.until(
        lambda: (
            len(scaled := about(seen, "Deployment", "demo", "ScalingReplicaSet")) == 2 and scaled
        )
    )
    assert [e.message for e in found] == [
        f"Scaled up replica set {name} from 0 to 3",
        f"Scaled down replica set {name} from 3 to 1",
    ]
    for event in found:
        assert (event.type, event.count) == ("Normal", 1)
        assert event.source == core_v1.EventSource(component="deployment-controller")
        assert event.reporting_component == "deployment-controller"
        ref = event.involved_object
        assert (ref.api_version, ref.namespace, ref.uid) == (
            "apps/v1",
            "default",
            deployment.metadata.uid,
        )
        assert event.first_timestamp and event.last_timestamp
        assert event.event_time is None and event.action == ""  # a core/v1 Event


async def test_a_rollout_records_each_replica_set_it_scales(
    api: ApiClient,
    manager: ControllerManager,
    watch: Changes,
    seen: Informer[core_v1.Event],
    kubelet: FakeKubelet,
) -> None:
    deployment = kep_deployment()
    deployment.spec.replicas = 2
    deployment.spec.strategy.type = "Recreate"
    await api.create(deployment)
    await watch.until(lambda: rolled_out(manager, "demo", 2))
    [old] = replica_sets_of(manager, "demo")
    await api.patch(
        apps_v1.Deployment,
        "demo",
        {"spec": {"template": {"metadata": {"labels": {"app": "demo", "rev": "2"}}}}},
        namespace="default",
    )
    await watch.until(
        lambda: len(replica_sets_of(manager, "demo")) == 2 and rolled_out(manager, "demo", 2)
    )
    [new] = [rs for rs in replica_sets_of(manager, "demo") if rs.metadata.uid != old.metadata.uid]
    found = await watch.until(
        lambda: (
            len(scaled := about(seen, "Deployment", "demo", "ScalingReplicaSet")) == 3 and scaled
        )
    )
    assert [e.message for e in found] == [
        f"Scaled up replica set {old.metadata.name} from 0 to 2",
        f"Scaled down replica set {old.metadata.name} from 2 to 0",
        f"Scaled up replica set {new.metadata.name} from 0 to 2",
    ]


async def test_a_replica_set_records_each_pod_it_creates_and_deletes(
    api: ApiClient, manager: ControllerManager, watch: Changes, seen: Informer[core_v1.Event]
) -> None:
    rs = await api.create(replica_set("web", 3))
    created = await watch.until(
        lambda: len(made := about(seen, "ReplicaSet", "web", "SuccessfulCreate")) == 3 and made
    )
    # One Event per pod: their messages differ, so none is counted up on another.
    assert {e.message for e in created} == {f"Created pod: {p}" for p in pods_of(manager, "web")}
    for event in created:
        assert re.fullmatch(f"Created pod: web-{SUFFIX}", event.message)
        assert (event.type, event.count) == ("Normal", 1)
        assert event.source == core_v1.EventSource(component="replicaset-controller")
        ref = event.involved_object
        assert (ref.kind, ref.api_version, ref.uid) == ("ReplicaSet", "apps/v1", rs.metadata.uid)

    before = pods_of(manager, "web")
    await api.patch(apps_v1.ReplicaSet, "web", {"spec": {"replicas": 1}}, namespace="default")
    deleted = await watch.until(
        lambda: len(gone := about(seen, "ReplicaSet", "web", "SuccessfulDelete")) == 2 and gone
    )
    await watch.until(lambda: len(pods_of(manager, "web")) == 1)
    assert {e.message for e in deleted} == {
        f"Deleted pod: {p}" for p in before - pods_of(manager, "web")
    }
    assert all(e.type == "Normal" for e in deleted)


async def test_a_refused_pod_create_is_a_failed_create_warning(
    api: ApiClient,
    server: ApiServer,
    manager: ControllerManager,
    watch: Changes,
    seen: Informer[core_v1.Event],
) -> None:
    """The apistore refuses the first pod (as a quota would); the retry makes both."""
    rule = FaultRule(
        resource="pods", verb="create", code=403, message="pods is forbidden: exceeded quota"
    )
    server.core.fault_plan = FaultPlan(rules=[rule])
    await api.create(replica_set("web", 2))
    [failed] = await watch.until(lambda: about(seen, "ReplicaSet", "web", "FailedCreate"))
    assert failed.type == "Warning"
    assert failed.message == "Error creating: pods is forbidden: exceeded quota (create pods #1)"
    assert failed.source.component == "replicaset-controller"
    await watch.until(lambda: len(about(seen, "ReplicaSet", "web", "SuccessfulCreate")) == 2)
    assert len(pods_of(manager, "web")) == 2


async def test_a_refused_replica_set_create_is_a_warning_on_the_deployment(
    api: ApiClient,
    server: ApiServer,
    manager: ControllerManager,
    watch: Changes,
    seen: Informer[core_v1.Event],
) -> None:
    rule = FaultRule(resource="replicasets", verb="create", code=500, message="disk full")
    server.core.fault_plan = FaultPlan(rules=[rule])
    await api.create(kep_deployment())
    [failed] = await watch.until(lambda: about(seen, "Deployment", "demo", "ReplicaSetCreateError"))
    await watch.until(lambda: replica_sets_of(manager, "demo"))
    [rs] = replica_sets_of(manager, "demo")
    assert failed.type == "Warning"
    assert failed.message == (
        f'Failed to create new replica set "{rs.metadata.name}": disk full (create replicasets #1)'
    )
    [scaled] = await watch.until(lambda: about(seen, "Deployment", "demo", "ScalingReplicaSet"))
    assert scaled.message == f"Scaled up replica set {rs.metadata.name} from 0 to 1"


async def test_a_missing_claim_template_is_a_warning_on_the_pod(
    api: ApiClient, manager: ControllerManager, watch: Changes, seen: Informer[core_v1.Event]
) -> None:
    pod = await api.create(make_pod("my-pod").claim("gpu", template="gpu-template").obj())
    [warning] = await watch.until(
        lambda: about(seen, "Pod", "my-pod", "FailedResourceClaimCreation")
    )
    assert warning.type == "Warning"
    assert warning.message == (
        'PodResourceClaim gpu: resource claim template "gpu-template": '
        'resourceclaimtemplate.resource.k8s.io "gpu-template" not found'
    )
    assert warning.source == core_v1.EventSource(component="resource_claim")
    assert warning.involved_object.uid == pod.metadata.uid
    # Once the template exists, the claim is made and nothing more is recorded.
    await api.create(make_template())
    await watch.until(
        lambda: (p := manager.pods.get("my-pod", "default")) and p.status.resource_claim_statuses
    )


# -- the recorder itself ---------------------------------------------------------------------


class StuckApi:
    """An API whose writes never answer, or are refused."""

    def __init__(self, *, refuse: bool = False) -> None:
        self.refuse = refuse
        self.calls: asyncio.Queue[str] = asyncio.Queue()
        self.cancelled = 0

    async def create(self, obj: core_v1.Event) -> core_v1.Event:
        self.calls.put_nowait(obj.message)
        if self.refuse:
            raise errors.Forbidden("events is forbidden")
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        raise AssertionError("unreachable")


async def test_recording_returns_at_once_and_stop_cancels_what_is_left() -> None:
    api = StuckApi()
    recorder = events.EventRecorder(api, component="replicaset-controller")  # type: ignore[arg-type]
    rs = replica_set("web", 1)
    for i in range(3):
        recorder.event(rs, events.NORMAL, "SuccessfulCreate", f"Created pod: web-{i}")
    # event() returned while no write has even started; they run side by side, and hang.
    async with asyncio.timeout(TIMEOUT):
        started = {await api.calls.get() for _ in range(3)}
    assert started == {"Created pod: web-0", "Created pod: web-1", "Created pod: web-2"}
    await recorder.stop(grace=0.01)
    assert api.cancelled == 3


async def test_a_refused_event_is_logged_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    recorder = events.EventRecorder(StuckApi(refuse=True), component="deployment-controller")  # type: ignore[arg-type]
    with caplog.at_level(logging.WARNING, logger="drasim.controllers.events"):
        recorder.event(kep_deployment(), events.NORMAL, "ScalingReplicaSet", "Scaled up")
        await recorder.flush()
    [record] = caplog.records
    assert record.levelno == logging.WARNING
    assert "ScalingReplicaSet" in record.getMessage()
    assert "events is forbidden" in record.getMessage()


async def test_the_disruption_controller_records_no_pods_missing_and_no_controllers(
    api: ApiClient, manager: ControllerManager, seen: Informer[core_v1.Event], watch: Changes
) -> None:
    await api.create(budget(minAvailable=1))
    [no_pods] = await watch.until(
        lambda: about(seen, "PodDisruptionBudget", "web", "NoPods") or None
    )
    assert (no_pods.type, no_pods.message) == ("Normal", "No matching pods found")
    assert no_pods.source.component == "controllermanager"

    # A percentage needs the pods' controllers' scale; this pod's controller is of a kind
    # drasim does not serve (so the garbage collector leaves the pod alone).
    orphan = make_pod("web-x").labels(app="web").obj()
    orphan.metadata.owner_references = [
        meta_v1.OwnerReference(
            api_version="v1", kind="ReplicationController", name="db", uid="u-db", controller=True
        )
    ]
    await api.create(orphan)
    await api.patch(
        policy_v1.PodDisruptionBudget, "web", {"spec": {"minAvailable": "50%"}}, namespace="default"
    )
    [failed] = await watch.until(
        lambda: about(seen, "PodDisruptionBudget", "web", "CalculateExpectedPodCountFailed") or None
    )
    assert failed.type == "Warning"
    assert failed.message == (
        "Failed to calculate the number of expected pods: found no controllers for pod 'web-x'"
    )

    # A pod with no controller at all is left out of a percentage's expectedPods: a Warning.
    await api.delete(core_v1.Pod, "web-x", namespace="default", grace_period_seconds=0)
    await api.create(make_pod("web-y").labels(app="web").obj())
    [unmanaged] = await watch.until(
        lambda: about(seen, "PodDisruptionBudget", "web", "UnmanagedPods") or None
    )
    assert unmanaged.type == "Warning"
    assert unmanaged.message.startswith(
        'Pods selected by this PodDisruptionBudget (selector: {"matchLabels":{"app":"web"}}) '
        "were found to be unmanaged."
    )
